"""{{.Name}}: runs run.py through the real protocol (a request on stdin, the
response on stdout, reports on the control channel) and checks what it
answers. Run: python3 test_plugin.py (or python3 -m unittest)."""

import json
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run.py")


def call(command, payload):
    """Runs the plugin as Ductile does; returns its response and reports."""
    request = {"protocol": 2, "job_id": "test", "command": command, "config": {},
               "state": {}, "context": {}, "event": {"type": "test", "payload": payload}}
    with tempfile.TemporaryFile() as control:
        fd = control.fileno()
        done = subprocess.run([RUN], input=json.dumps(request) + "\n", capture_output=True,
                              text=True, timeout=60, pass_fds=(fd,),
                              env=dict(os.environ, DUCTILE_CONTROL_FD=str(fd)))
        control.seek(0)
        reports = [json.loads(line) for line in control.read().decode().splitlines() if line]
    if done.returncode != 0:
        raise AssertionError(f"run.py exited {done.returncode}: {done.stderr}")
    return json.loads(done.stdout), reports


class PluginTest(unittest.TestCase):
    def test_handle_greets_the_payloads_name(self):
        response, reports = call("handle", {"name": "Ada"})
        self.assertEqual(response["status"], "ok")
        self.assertEqual(response["result"], "hello, Ada")
        self.assertIn(0.5, [r.get("progress") for r in reports])

    def test_handle_without_a_name(self):
        response, _ = call("handle", {})
        self.assertEqual(response["result"], "hello, world")

    def test_an_unknown_command_is_a_permanent_error(self):
        response, _ = call("nosuch", {})
        self.assertEqual(response["status"], "error")
        self.assertIs(response["retry"], False)


if __name__ == "__main__":
    unittest.main()
