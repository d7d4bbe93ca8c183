#!/usr/bin/env python3
"""countdown: an example of the Ductile Python SDK (see manifest.yaml)."""

import os
import sys

# The SDK: a copy beside this file wins (sys.path[0] is this file's
# directory), else the bundled plugins/lib.
sys.path.append(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "lib"))
import ductile  # noqa: E402


def setting(ctx, name, default, kind):
    payload = (ctx.event or {}).get("payload") or {}
    value = payload.get(name, ctx.config.get(name, default))
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, not {value!r}")


def count(ctx):
    ticks = setting(ctx, "from", 10, int)
    interval = setting(ctx, "interval", 1.0, float)
    if ticks < 1 or interval < 0:
        return ctx.error("from must be at least 1 and interval at least 0", retry=False)

    run = ctx.run
    run.progress(0, message=f"counting down from {ticks}", stage="starting")
    run.export_text(f"counting down from {ticks}", description="what this run does", metadata={"from": ticks})
    try:
        for tick in range(1, ticks + 1):
            run.sleep(interval)  # raises RunCancelled at once when asked to stop
            run.progress(tick / ticks, message=f"{ticks - tick} to go", stage="counting")
            if tick == 1:
                run.export_url(f"https://example.com/countdown/{run.id}", description="where a countdown would be shown", mime="text/html")
            elif tick == 2:
                run.export_binary_url(f"https://example.com/countdown/{run.id}.bin", description="its record", mime="application/octet-stream")
    except ductile.RunCancelled:
        run.status("canceled", message=f"stopped with {ticks - tick + 1} to go")
        raise  # ductile.main answers "canceled"
    ctx.log(f"counted down from {ticks}")
    return ctx.respond(
        result=f"counted down from {ticks}",
        events=[{"type": "countdown.done", "payload": {"from": ticks, "run_id": run.id}}],
        state_updates={"last_from": ticks},
    )


def main(ctx):
    if ctx.command == "count":
        return count(ctx)
    return ctx.error(f"unknown command {ctx.command!r}", retry=False)


if __name__ == "__main__":
    ductile.main(main)
