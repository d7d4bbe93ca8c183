#!/usr/bin/env python3
"""{{.Name}}: the entrypoint (protocol 2).

Ductile starts it once per job, writes one JSON request on stdin and reads one
JSON response from stdout. ductile.py, beside it, is the Python SDK (a copy of
Ductile's plugins/lib; standard library only).
"""

import ductile


def handle(ctx):
    payload = (ctx.event or {}).get("payload") or {}
    name = payload.get("name") or "world"
    ctx.run.progress(0.5, message=f"greeting {name}", stage="handle")
    return ctx.respond(result=f"hello, {name}")


HANDLERS = {"handle": handle}


def main(ctx):
    handler = HANDLERS.get(ctx.command)
    if handler is None:
        # A command the manifest does not declare: permanent, never retried.
        return ctx.error(f"unknown command {ctx.command!r}", retry=False)
    return handler(ctx)


if __name__ == "__main__":
    ductile.main(main)
