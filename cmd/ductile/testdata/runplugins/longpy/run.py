#!/usr/bin/env python3
"""longpy: e2e fixture of the Python SDK (see manifest.yaml)."""
import os
import subprocess
import time

import ductile  # plugins/lib/ductile.py, on PYTHONPATH


def wait_for(path, seconds):
    """Waits until path exists; False after seconds."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def work(ctx):
    d = ctx.config["dir"]
    linger = ((ctx.event or {}).get("payload") or {}).get("linger", True)
    child = subprocess.Popen(["sleep", "600"])  # in this process group
    tmp = os.path.join(d, "pids.tmp")
    with open(tmp, "w") as f:
        f.write("%d %d\n" % (os.getpgrp(), child.pid))
    os.rename(tmp, os.path.join(d, "pids"))

    ctx.run.progress(0.1, message="starting", stage="setup")
    ctx.run.export_text("first result", description="the first result")
    ctx.run.export_url("https://example.com/report", description="the report")
    ctx.run.export_binary_url("https://example.com/blob.bin", description="the blob")
    ctx.run.progress(0.5, message="waiting for the gate", stage="waiting")

    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(d, "release")):
        try:
            ctx.run.check_cancelled()
        except ductile.RunCancelled:
            open(os.path.join(d, "saw-cancel"), "w").close()
            if linger:
                wait_for(os.path.join(d, "let-go"), 30)
            raise
        if time.monotonic() > deadline:
            return ctx.error("longpy: never released", retry=False)
        time.sleep(0.05)
    ctx.run.progress(1.0, message="released", stage="done")
    return ctx.respond(result="longpy: released")


if __name__ == "__main__":
    ductile.main(work)
