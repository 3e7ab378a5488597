"""The mover program (``python -m hooks.pods.movers``, the mover Pods' command, or
``hpcbridge movers``): log in to the cluster as the log Pod does (the SSH Secret mounted at
``--secret-dir``, jump hosts from ``--jump``), open the object store with the S3 Secret mounted
at ``--s3-secret-dir`` (at a public address only, unless ``--endpoint-allowed``:
``hooks.pods.movers.peer``), copy what ``--plan`` says, and write the report
(``hooks.core.wire.mover_pods.Report``) to ``--report``, the Pod's termination message.

Exit 0: done, or (outputs) failed for good (the report says which); exit 1: the run failed
and the kubelet runs it again. SIGTERM (the Pod is deleted, with its BatchJob) ends it at once:
nothing partial is left under a final name.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from hooks.core.sites.openssh import SecretError
from hooks.core.status.transfers import Stage
from hooks.core.wire.mover_pods import Report
from hooks.pods import login
from hooks.pods.movers import inputs, outputs
from hooks.pods.movers.errors import MoveError
from hooks.pods.movers.store import client
from hooks.ssh import errors
from hooks.ssh.files import RemoteFiles

PROG = "python -m hooks.pods.movers"
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1024 * 1024


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    args = _parser(prog).parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    _fixed_mmap_threshold()
    try:
        report = Report(Stage.DONE, *_run(args))
    except MoveError as err:
        report = Report(Stage.FAILED, reason=err.reason, message=err.message)
        code = 0 if err.final else 1
    except (OSError, SecretError, errors.SSHError) as err:
        report = Report(Stage.FAILED, message=f"{args.direction}: {login.why(err)}")
        code = 1
    else:
        code = 0
    text = report.to_json()
    print(text, file=sys.stderr if code else sys.stdout)
    try:
        Path(args.report).write_text(text)
    except OSError as err:
        print(f"hpcbridge: cannot write the report to {args.report}: {err}", file=sys.stderr)
    return code


def _run(args: argparse.Namespace) -> tuple[int, int]:
    plan = json.loads(args.plan)
    s3 = (client(args.endpoint, args.region, Path(args.s3_secret_dir),
                 allowed=args.endpoint_allowed) if args.endpoint else None)
    conn = login.log_in(args)
    try:
        files = RemoteFiles(conn)
        try:
            if args.direction == "inputs":
                return inputs.stage(conn, files, s3, plan, staging=args.staging_dir,
                                    remote_dir=args.remote_dir)
            return outputs.collect(conn, files, s3, plan, remote_dir=args.remote_dir,
                                   owner=args.owner)
        finally:
            files.close()
    finally:
        conn.close()


def _fixed_mmap_threshold() -> None:
    """Have every block of ``MMAP_THRESHOLD`` bytes or more mapped apart and returned to the
    system when freed. By default glibc raises the threshold to the largest block freed (up to
    32 MiB): after the first upload part, parts come from the heap, which fragments, and the
    RSS grows with the number of parts. Elsewhere than glibc, nothing changes."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        libc = None
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(143)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("direction", choices=["inputs", "outputs"])
    login.add_arguments(parser)
    parser.add_argument("--remote-dir", required=True, help="the attempt's directory")
    parser.add_argument("--staging-dir", default="", help="inputs: where they are staged")
    parser.add_argument("--owner", required=True, help="the BatchJob's uid")
    parser.add_argument("--plan", required=True, help="what to copy (JSON)")
    parser.add_argument("--report", required=True, help="the termination message's file")
    parser.add_argument("--endpoint", default="")
    parser.add_argument("--endpoint-allowed", action="store_true",
                        help="the endpoint is on an allow-list: reach it at any address (else "
                             "only at a public one)")
    parser.add_argument("--region", default="")
    parser.add_argument("--s3-secret-dir", default="")
    return parser
