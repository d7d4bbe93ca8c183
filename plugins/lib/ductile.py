"""Ductile plugin SDK for Python 3 (standard library only).

A plugin's entrypoint hands its handler to ``ductile.main``; the handler gets
a ``Context`` and answers with ``ctx.respond(...)`` or ``ctx.error(...)``::

    #!/usr/bin/env python3
    import ductile

    def handle(ctx):
        for i in range(10):
            ctx.run.check_cancelled()            # raises RunCancelled once asked to stop
            ctx.run.progress(i / 10, message=f"step {i}", stage="counting")
            ctx.run.sleep(1)
        ctx.run.export_text("all done", description="summary")
        return ctx.respond(result="counted to 10", state_updates={"last": 10})

    if __name__ == "__main__":
        ductile.main(handle)

``main`` reads the request (protocol v2) from stdin and writes exactly one
response to stdout. What the run reports while it works (progress, export
items) goes on the control channel, file descriptor 3 (``DUCTILE_CONTROL_FD``),
one JSON object per line; run by hand, without that variable, the reports go
nowhere and the plugin works the same. On SIGTERM (a cancel, or the timeout)
``ctx.run.cancelled`` becomes true and ``check_cancelled()`` raises
``RunCancelled``: ``main`` then answers ``{"status": "error", "error":
"canceled", "retry": false}``, and Ductile records the run canceled (or timed
out), never failed. Code that never checks is killed after the grace period.

See docs/plugin-development.md ("Progress, export items and cancellation").
"""

import base64
import json
import math
import os
import signal
import sys
import threading
import time
import traceback

__all__ = [
    "Context", "Run", "RunCancelled", "main", "PROTOCOL",
    "MAX_TEXT", "MAX_BINARY", "MAX_METADATA", "MAX_URL", "MAX_MESSAGE", "MAX_STAGE",
]

PROTOCOL = 2
EX_CONFIG = 78  # exit status of a configuration problem: never retried

# The daemon's caps (docs/plugin-development.md); the SDK refuses an item
# over them at once, with a ValueError, rather than have it dropped later.
MAX_TEXT = 256 << 10       # bytes of a text item (UTF-8)
MAX_BINARY = 64 << 10      # bytes of an inline binary item
MAX_METADATA = 16 << 10    # bytes of an item's metadata, as JSON
MAX_URL = 8 << 10          # bytes of a url or binary_url
MAX_DESCRIPTION = 8 << 10  # bytes of an item's description
MAX_MIME = 255             # bytes of an item's MIME type
MAX_MESSAGE = 4 << 10      # bytes of a progress message
MAX_STAGE = 256            # bytes of a progress stage


class RunCancelled(Exception):
    """Raised by check_cancelled() (and sleep()) once the run is asked to stop."""


class _Channel:
    """The write end of the control channel, or nothing when there is none."""

    def __init__(self, environ):
        self._fd = None
        self._lock = threading.Lock()
        raw = environ.get("DUCTILE_CONTROL_FD", "")
        if raw.isdigit():
            fd = int(raw)
            try:
                os.fstat(fd)
                self._fd = fd
            except OSError:
                pass  # closed: reports go nowhere

    @property
    def open(self):
        return self._fd is not None

    def send(self, obj):
        """Writes obj as one line; a closed channel drops it."""
        if self._fd is None:
            return
        line = (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        with self._lock:
            try:
                view = memoryview(line)
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
            except OSError:
                self._fd = None  # the daemon stopped reading: nothing more to say


def _utf8_len(s):
    return len(s.encode("utf-8"))


def _check(name, value, cap):
    if value is not None and _utf8_len(value) > cap:
        raise ValueError(f"{name} is {_utf8_len(value)} bytes, over its cap of {cap}")


class Run:
    """The run a plugin works for: ctx.run."""

    def __init__(self, run_id, trace_id, channel):
        self.id = run_id
        self.trace_id = trace_id
        self._channel = channel
        self._cancelled = threading.Event()

    @property
    def reporting(self):
        """True when reports reach Ductile (the control channel is open)."""
        return self._channel.open

    @property
    def cancelled(self):
        """True once the run has been asked to stop (SIGTERM)."""
        return self._cancelled.is_set()

    def cancel(self):
        """Marks the run as asked to stop (what the SIGTERM handler does)."""
        self._cancelled.set()

    def check_cancelled(self):
        """Raises RunCancelled if the run has been asked to stop."""
        if self._cancelled.is_set():
            raise RunCancelled("canceled")

    def sleep(self, seconds):
        """Sleeps, waking at once with RunCancelled if the run is asked to stop."""
        deadline = time.monotonic() + seconds
        while True:
            self.check_cancelled()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def progress(self, p=None, message=None, stage=None):
        """Reports progress p in [0, 1] (None: unchanged), a message, a stage."""
        if p is not None:
            if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isnan(p) or not 0 <= p <= 1:
                raise ValueError(f"progress must be a number from 0 to 1, not {p!r}")
        if p is None and message is None and stage is None:
            raise ValueError("progress needs p, a message or a stage")
        _check("message", message, MAX_MESSAGE)
        _check("stage", stage, MAX_STAGE)
        line = {}
        if p is not None:
            line["progress"] = float(p)
        if message is not None:
            line["message"] = str(message)
        if stage is not None:
            line["stage"] = str(stage)
        self._channel.send(line)

    def status(self, stage, message=None):
        """Reports a stage (and a message) without changing the progress."""
        self.progress(None, message=message, stage=stage)

    def export_text(self, text, description=None, mime=None, metadata=None):
        """Exports a text item (at most MAX_TEXT bytes)."""
        _check("text", text, MAX_TEXT)
        self._export("text", "text", str(text), description, mime, metadata)

    def export_url(self, url, description=None, mime=None, metadata=None):
        """Exports a link to an output (at most MAX_URL bytes)."""
        _check("url", url, MAX_URL)
        self._export("url", "url", str(url), description, mime, metadata)

    def export_binary_url(self, url, description=None, mime=None, metadata=None):
        """Exports a link to binary content (at most MAX_URL bytes)."""
        _check("binary_url", url, MAX_URL)
        self._export("binary_url", "binary_url", str(url), description, mime, metadata)

    def export_binary(self, data, description=None, mime=None, metadata=None):
        """Exports small bytes inline (at most MAX_BINARY; else export a binary_url)."""
        data = bytes(data)
        if len(data) > MAX_BINARY:
            raise ValueError(f"binary is {len(data)} bytes, over its cap of {MAX_BINARY}: export a binary_url instead")
        self._export("binary", "binary", base64.b64encode(data).decode("ascii"), description, mime, metadata)

    def _export(self, kind, field, value, description, mime, metadata):
        item = {"type": kind, field: value}
        if description is not None:
            _check("description", description, MAX_DESCRIPTION)
            item["description"] = str(description)
        if mime is not None:
            _check("mime", mime, MAX_MIME)
            item["mime"] = str(mime)
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise ValueError("metadata must be a dict (a JSON object)")
            encoded = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            _check("metadata", encoded, MAX_METADATA)
            item["metadata"] = metadata
        self._channel.send({"export": item})


class Context:
    """One request and what the handler answers: the handler's ctx."""

    def __init__(self, request, run, stdout=None):
        self.request = request
        self.protocol = request.get("protocol")
        self.job_id = request.get("job_id", "")
        self.command = request.get("command", "")
        self.config = request.get("config") or {}
        self.state = request.get("state") or {}
        self.context = request.get("context") or {}
        self.event = request.get("event")  # None when the job has none
        self.deadline_at = request.get("deadline_at")  # RFC 3339 text, or None
        self.run = run
        self.logs = []
        self.responded = False
        self._stdout = stdout or sys.stdout

    def log(self, message, level="info"):
        """Adds a log line to the response (level info, warn or error)."""
        self.logs.append({"level": level, "message": str(message)})

    def respond(self, result=None, events=None, state_updates=None, logs=None):
        """Answers status ok (once)."""
        response = {"status": "ok"}
        if result is not None:
            response["result"] = result
        if events:
            response["events"] = [dict(e) for e in events]
        if state_updates is not None:
            if not isinstance(state_updates, dict):
                raise ValueError("state_updates must be a dict (a JSON object)")
            response["state_updates"] = state_updates
        self._write(response, logs)

    def error(self, message, retry=True, logs=None):
        """Answers status error (once); retry=False marks it permanent."""
        response = {"status": "error", "error": str(message)}
        if not retry:
            response["retry"] = False
        self._write(response, logs)

    def _write(self, response, logs):
        if self.responded:
            raise RuntimeError("the plugin has already responded")
        all_logs = self.logs + list(logs or [])
        if all_logs:
            response["logs"] = all_logs
        self._stdout.write(json.dumps(response, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._stdout.flush()
        self.responded = True


def main(handler, stdin=None, stdout=None, environ=None):
    """Runs handler(ctx) for the request on stdin, and exits.

    SIGTERM makes ctx.run.cancelled true; RunCancelled (from
    check_cancelled) answers "canceled". Any other exception is printed to
    stderr and answered as an error (retried). A handler that returns
    without responding answers ok, with its return value as the result if it
    is a string. A request of another protocol exits 78 (EX_CONFIG).
    """
    environ = os.environ if environ is None else environ
    stdin = stdin or sys.stdin
    try:
        request = json.loads(stdin.readline() or "null")
    except ValueError as e:
        print(f"ductile: the request is not JSON: {e}", file=sys.stderr)
        sys.exit(EX_CONFIG)
    if not isinstance(request, dict) or request.get("protocol") != PROTOCOL:
        got = request.get("protocol") if isinstance(request, dict) else None
        print(f"ductile: unsupported protocol {got!r} (this SDK speaks protocol {PROTOCOL})", file=sys.stderr)
        sys.exit(EX_CONFIG)

    run = Run(environ.get("DUCTILE_RUN_ID") or request.get("job_id", ""), environ.get("DUCTILE_TRACE_ID") or None, _Channel(environ))
    signal.signal(signal.SIGTERM, lambda signum, frame: run.cancel())
    ctx = Context(request, run, stdout)
    try:
        answer = handler(ctx)
        if not ctx.responded:
            ctx.respond(result=answer if isinstance(answer, str) else None)
    except RunCancelled:
        if not ctx.responded:
            ctx.error("canceled", retry=False)
    except Exception as e:  # noqa: BLE001 — every failure is answered
        traceback.print_exc(file=sys.stderr)
        if not ctx.responded:
            ctx.error(f"{type(e).__name__}: {e}")
    sys.exit(0)
