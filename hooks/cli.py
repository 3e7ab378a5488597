"""The ``hpcbridge`` command (also ``python -m hooks``): ``serve`` runs the hook server as
``make run`` and the image do, ``logs`` is the log Pods' program (``hooks.pods.logs``), ``movers``
the mover Pods' (``hooks.pods.movers``). The Pods run them as ``python -m``: the image holds the
package's modules, not its console script.

``serve`` replaces the process with gunicorn, so that signals from the container runtime or the
terminal reach gunicorn's master directly.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from hooks import __version__
from hooks.pods import logs
from hooks.pods.movers import program

GUNICORN = ("-m", "gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "logs":
        return logs.main(rest, prog="hpcbridge logs")
    if args.command == "movers":
        return program.main(rest, prog="hpcbridge movers")
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    serve(args.host, args.port)


def serve(host: str | None, port: int | None) -> NoReturn:
    """Run gunicorn with the product's settings (``hooks.gunicorn_conf``) in this process.
    glibc's per-thread malloc arenas let a threaded server's RSS creep up: two are plenty, unless
    the environment says otherwise."""
    env = {"MALLOC_ARENA_MAX": "2", **os.environ}
    if host is not None:
        env["HOST"] = host
    if port is not None:
        env["PORT"] = str(port)
    os.execve(sys.executable, [sys.executable, *GUNICORN], env)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpcbridge",
        description="Metacontroller hooks that run Kubernetes BatchJobs on SLURM and HTCondor "
        "over SSH. The hook server's settings are environment variables (README, Settings).",
    )
    parser.add_argument("--version", action="version", version=f"hpcbridge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve", help="serve the hooks with gunicorn (HOST, PORT; default 127.0.0.1:8080)",
        description="Serve the hooks with gunicorn and hooks.gunicorn_conf, as `make run` and "
        "the image do.",
    )
    serve.add_argument("--host", help="address to listen on (default: $HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port of the hooks (default: $PORT or 8080)")
    commands.add_parser(
        "logs", add_help=False,
        help="print or follow a job's output, the log Pods' program (hpcbridge logs --help)",
    )
    commands.add_parser(
        "movers", add_help=False,
        help="copy a BatchJob's inputs or outputs, the mover Pods' program (hpcbridge movers "
        "--help)",
    )
    return parser
