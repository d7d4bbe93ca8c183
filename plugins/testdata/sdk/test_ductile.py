"""Unit tests of plugins/lib/ductile.py (run by plugins/sdk_test.go with the
unpacked lib first on PYTHONPATH)."""

import io
import json
import os
import signal
import unittest

import ductile


def pipe_env():
    r, w = os.pipe()
    return r, w, {"DUCTILE_CONTROL_FD": str(w)}


def read_lines(r, w):
    os.close(w)
    with os.fdopen(r, "rb") as f:
        return [json.loads(line) for line in f.read().decode("utf-8").splitlines()]


def request(**fields):
    req = {"protocol": 2, "job_id": "job-1", "command": "count", "config": {}, "state": {}, "context": {}}
    req.update(fields)
    return io.StringIO(json.dumps(req) + "\n")


class RunTest(unittest.TestCase):
    def run_with_channel(self):
        r, w, env = pipe_env()
        return ductile.Run("run-1", None, ductile._Channel(env)), r, w

    def test_reports_are_one_json_object_per_line(self):
        run, r, w = self.run_with_channel()
        self.assertTrue(run.reporting)
        run.progress(0.5, message='a "quoted"\nline \\ é ✓', stage="s")
        run.progress(1)
        run.status("done")
        run.export_text("text\twith\x01control", description="d", mime="text/plain", metadata={"k": [1, 2]})
        run.export_url("https://example.com/?a=1&b=2")
        run.export_binary_url("https://example.com/x.bin", mime="application/octet-stream")
        run.export_binary(b"\x00\x01\x02")
        self.assertEqual(read_lines(r, w), [
            {"progress": 0.5, "message": 'a "quoted"\nline \\ é ✓', "stage": "s"},
            {"progress": 1.0},
            {"stage": "done"},
            {"export": {"type": "text", "text": "text\twith\x01control", "description": "d", "mime": "text/plain", "metadata": {"k": [1, 2]}}},
            {"export": {"type": "url", "url": "https://example.com/?a=1&b=2"}},
            {"export": {"type": "binary_url", "binary_url": "https://example.com/x.bin", "mime": "application/octet-stream"}},
            {"export": {"type": "binary", "binary": "AAEC"}},
        ])

    def test_bad_reports_raise_at_once(self):
        run, r, w = self.run_with_channel()
        for p in (1.5, -0.1, float("nan"), True, "0.5"):
            with self.assertRaises(ValueError, msg=repr(p)):
                run.progress(p)
        with self.assertRaises(ValueError):
            run.progress()
        with self.assertRaises(ValueError):
            run.export_text("x" * (ductile.MAX_TEXT + 1))
        with self.assertRaises(ValueError):
            run.export_text("é" * (ductile.MAX_TEXT // 2 + 1))  # counted in UTF-8 bytes
        with self.assertRaises(ValueError):
            run.export_binary(b"\0" * (ductile.MAX_BINARY + 1))
        with self.assertRaises(ValueError):
            run.export_url("https://x/" + "a" * ductile.MAX_URL)
        with self.assertRaises(ValueError):
            run.export_text("x", metadata=["not", "an", "object"])
        with self.assertRaises(ValueError):
            run.progress(0.1, message="m" * (ductile.MAX_MESSAGE + 1))
        self.assertEqual(read_lines(r, w), [], "nothing refused was written")

    def test_without_a_channel_reports_go_nowhere(self):
        for env in ({}, {"DUCTILE_CONTROL_FD": "notanumber"}, {"DUCTILE_CONTROL_FD": "987"}):
            run = ductile.Run("r", None, ductile._Channel(env))
            self.assertFalse(run.reporting, env)
            run.progress(0.5)  # no error
            run.export_text("t")

    def test_cancellation(self):
        run = ductile.Run("r", None, ductile._Channel({}))
        run.check_cancelled()
        run.sleep(0.01)
        run.cancel()
        self.assertTrue(run.cancelled)
        with self.assertRaises(ductile.RunCancelled):
            run.check_cancelled()
        with self.assertRaises(ductile.RunCancelled):
            run.sleep(60)  # at once


class MainTest(unittest.TestCase):
    def main(self, handler, stdin=None, env=None):
        out = io.StringIO()
        with self.assertRaises(SystemExit) as exited:
            ductile.main(handler, stdin=stdin or request(), stdout=out, environ=env or {})
        lines = out.getvalue().splitlines()
        return exited.exception.code, [json.loads(line) for line in lines]

    def tearDown(self):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def test_respond(self):
        def handler(ctx):
            self.assertEqual(ctx.command, "count")
            self.assertEqual(ctx.run.id, "job-1", "the job id when DUCTILE_RUN_ID is not set")
            self.assertIsNone(ctx.run.trace_id)
            ctx.log("hello")
            return ctx.respond(result="done", events=[{"type": "t.x", "payload": {"n": 1}}], state_updates={"n": 1})
        code, out = self.main(handler)
        self.assertEqual(code, 0)
        self.assertEqual(out, [{"status": "ok", "result": "done", "events": [{"type": "t.x", "payload": {"n": 1}}],
                                "state_updates": {"n": 1}, "logs": [{"level": "info", "message": "hello"}]}])

    def test_run_and_trace_ids_come_from_the_environment(self):
        seen = {}

        def handler(ctx):
            seen.update(id=ctx.run.id, trace=ctx.run.trace_id)
            return "ok"
        code, out = self.main(handler, env={"DUCTILE_RUN_ID": "run-9", "DUCTILE_TRACE_ID": "trace-3"})
        self.assertEqual(seen, {"id": "run-9", "trace": "trace-3"})
        self.assertEqual(out, [{"status": "ok", "result": "ok"}], "a returned string is the result")

    def test_sigterm_makes_check_cancelled_raise_and_the_answer_canceled(self):
        def handler(ctx):
            os.kill(os.getpid(), signal.SIGTERM)
            ctx.run.sleep(60)
        code, out = self.main(handler)
        self.assertEqual(code, 0)
        self.assertEqual(out, [{"status": "error", "error": "canceled", "retry": False}])

    def test_an_exception_is_an_error_worth_a_retry(self):
        def handler(ctx):
            raise KeyError("city")
        code, out = self.main(handler)
        self.assertEqual(code, 0)
        self.assertEqual(out, [{"status": "error", "error": "KeyError: 'city'"}])

    def test_error(self):
        code, out = self.main(lambda ctx: ctx.error("bad config", retry=False))
        self.assertEqual(out, [{"status": "error", "error": "bad config", "retry": False}])

    def test_another_protocol_exits_78(self):
        code, out = self.main(lambda ctx: None, stdin=request(protocol=1))
        self.assertEqual(code, ductile.EX_CONFIG)
        self.assertEqual(out, [])


if __name__ == "__main__":
    unittest.main()
