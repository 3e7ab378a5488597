"""The log Pod's program: print an attempt's output, task by task, then exit.

``python -m hooks.logs`` runs in the product's image as the ``<name>-logs`` Pod. It logs in
with the Secret mounted at ``--secret-dir``, prints every task's stdout and stderr from the
attempt's remote directory under a header per file, and exits 0; with ``--follow`` it keeps
printing what the tasks write until the scheduler reports the attempt finished. Connection
trouble exits 1, and the Pod's ``restartPolicy: OnFailure`` retries.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hooks.core.aggregate import task_order
from hooks.core.model import JobRef
from hooks.core.secret import Credentials
from hooks.deadline import Deadline
from hooks.schedulers import REGISTRY
from hooks.ssh import errors
from hooks.ssh.client import Connection, Target, connect

STREAMS = {"out": "stdout", "err": "stderr"}
LIST = r"""cd -- "$HOME/$1" 2>/dev/null || exit 3
for f in [0-9]*.out [0-9]*.err; do
  [ -f "$f" ] && printf '%s %s\n' "$(wc -c < "$f")" "$f"
done; exit 0"""
FOLLOW_INTERVAL = 3.0
TIMEOUT = 60.0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        credentials = read_secret(Path(args.secret_dir))
        target = Target(args.host, args.port, args.insecure_skip_host_key_check)
        conn = connect(target, credentials, deadline=Deadline.after(30))
    except (OSError, errors.SSHError) as err:
        print(f"hpcbridge: cannot log in to {args.host}: {_why(err)}", file=sys.stderr)
        return 1
    try:
        printer = Printer(conn, args.remote_dir)
        if not args.follow:
            return 0 if printer.print_new() else 1
        return follow(conn, printer, args)
    except errors.SSHError as err:
        print(f"hpcbridge: {err.message}", file=sys.stderr)
        return 1
    finally:
        conn.close()


def follow(conn: Connection, printer: Printer, args: argparse.Namespace) -> int:
    """Print output as it grows until the scheduler reports every task finished."""
    scheduler = REGISTRY[args.backend]
    ref = JobRef(args.key, scheduler.job_id(args.job_id[0]) if args.job_id else None,
                 tuple(args.job_id))
    while True:
        found = scheduler.query(conn, [ref], deadline=Deadline.after(TIMEOUT))
        tasks = found.get(args.key, ())
        done = bool(tasks) and not any(task.outcome.is_active for task in tasks)
        if not printer.print_new() and done:
            return 1
        if done:
            return 0
        time.sleep(FOLLOW_INTERVAL)


class Printer:
    """Prints the attempt's output files, remembering how much of each it printed."""

    def __init__(self, conn: Connection, remote_dir: str) -> None:
        self.conn = conn
        self.remote_dir = remote_dir
        self.printed: dict[str, int] = {}
        self.current = ""

    def print_new(self) -> bool:
        """Print what is new in every file; False when the directory does not exist."""
        listing = self.conn.run(["sh", "-c", LIST, "hpcbridge-logs", self.remote_dir],
                                deadline=Deadline.after(TIMEOUT))
        if listing.exit_status == 3:
            print(f"hpcbridge: no output directory ~/{self.remote_dir} on the cluster",
                  file=sys.stderr)
            return False
        sizes: dict[str, int] = {}
        for line in listing.out.splitlines():
            length, _, name = line.partition(" ")
            sizes[name] = int(length)
        for name in sorted(sizes, key=_file_order):
            offset = self.printed.get(name, 0)
            if sizes[name] > offset:
                self._print(name, offset)
                self.printed[name] = sizes[name]
        sys.stdout.flush()
        return True

    def _print(self, name: str, offset: int) -> None:
        if name != self.current:
            task, _, kind = name.rpartition(".")
            print(f"==> task {task} {STREAMS[kind]} <==", flush=True)
            self.current = name
        path = f"{self.remote_dir}/{name}"
        self.conn.stream(
            ["sh", "-c", 'exec tail -c "+$2" -- "$HOME/$1"', "hpcbridge-logs", path,
             str(offset + 1)],
            _write,
            deadline=Deadline.after(TIMEOUT),
        )
        sys.stdout.buffer.flush()


def _write(chunk: bytes) -> None:
    sys.stdout.buffer.write(chunk)


def read_secret(directory: Path) -> Credentials:
    """Credentials from a mounted Secret: one file per key."""

    def value(key: str) -> str | None:
        path = directory / key
        return path.read_text() if path.is_file() else None

    return Credentials(
        username=(value("username") or "").strip(),
        private_key=value("ssh-privatekey"),
        passphrase=value("ssh-passphrase"),
        password=value("password"),
        known_hosts=value("known_hosts"),
    )


def _file_order(name: str) -> tuple[tuple[tuple[int, int, str], ...], int]:
    task, _, kind = name.rpartition(".")
    return task_order(task), 0 if kind == "out" else 1


def _why(err: Exception) -> str:
    return err.message if isinstance(err, errors.SSHError) else str(err)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hooks.logs", description=__doc__)
    parser.add_argument("--backend", required=True, choices=sorted(REGISTRY))
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, default=22)
    parser.add_argument("--remote-dir", required=True, help="attempt directory below ~")
    parser.add_argument("--key", required=True, help="the attempt's key, <uid>-<attempt>")
    parser.add_argument("--secret-dir", required=True)
    parser.add_argument("--job-id", action="append", default=[])
    parser.add_argument("--follow", action="store_true")
    parser.add_argument("--insecure-skip-host-key-check", action="store_true")
    return parser


if __name__ == "__main__":
    sys.exit(main())
