"""The log Pod's program: print an attempt's output, task by task.

``python -m hooks.pods.logs`` runs in the product's image as the ``<name>-logs`` Pod. It logs in
with the Secret mounted at ``--secret-dir`` (through the jump hosts given by ``--jump``, each
with its own Secret mounted, in order) and prints every task's stdout and stderr from the
attempt's remote directory under a header per file, then exits 0. One remote command reads
what is new in every file (``READ``), so a poll costs one SSH channel whatever the number of
tasks. With ``--follow`` it polls every ``FOLLOW_INTERVAL`` seconds until the attempt's
``ended`` file appears: the hook server writes it when its batched status query sees the
attempt end, so following costs the scheduler nothing. Only when that file stays missing and
the output stays quiet for ``QUIET_SECONDS`` (the hooks could not see the end: the hook server
was down, say) does the program ask the scheduler itself, at most once per ``QUIET_SECONDS``.
Connection trouble exits 1, and the Pod's ``restartPolicy: OnFailure`` retries; SIGTERM (the
Pod is deleted) ends it at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

from hooks.core.sites.openssh import SecretError
from hooks.core.spec.layout import RESOLVE
from hooks.core.values.job import JobRef
from hooks.deadline import Deadline
from hooks.pods import login
from hooks.schedulers.registry import REGISTRY
from hooks.ssh import errors
from hooks.ssh.client import Remote

STREAMS = {"out": "stdout", "err": "stderr"}
READ = r"""t=$(mktemp) || { cat > /dev/null; exit 4; }
trap 'rm -f "$t"' EXIT
cat > "$t"
""" + RESOLVE + r"""
cd -- "$d" 2>/dev/null || exit 3
if [ -f ended ]; then printf 'ended %s\n' "$(head -n 1 ended)"; else echo running; fi
stat -c '%n %s' -- [0-9]*.out [0-9]*.err 2>/dev/null |
  awk 'NR == FNR { done[$1] = $2; next }
       { n = split($1, p, "."); kind = p[n]; task = substr($1, 1, length($1) - length(kind) - 1)
         off = ($1 in done) ? done[$1] : 0
         if ($2 > off) print task, kind, off, $2 - off }' "$t" - |
  sort -k1,1V -k2,2r |
  while read -r task kind off len; do
    printf 'file %s.%s %s\n' "$task" "$kind" "$len"
    tail -c "+$((off + 1))" -- "$task.$kind" | head -c "$len"
  done
exit 0"""
"""Takes the attempt's directory (absolute, or relative to the home directory:
``hooks.core.spec.layout.RESOLVE``) as ``$1`` and
the offsets already printed (``NAME OFFSET`` lines) on stdin, then answers
``ended PHASE`` or ``running`` and, for each task file with new bytes in task order (stdout
before stderr), ``file NAME LENGTH`` and those bytes."""
PROG = "python -m hooks.pods.logs"
"""The log Pods' command; also ``hpcbridge logs`` (``hooks.cli``)."""
FOLLOW_INTERVAL = 3.0
QUIET_SECONDS = 300.0
TIMEOUT = 60.0


class Stopped(Exception):
    """SIGTERM: the Pod is being deleted."""


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    args = _parser(prog).parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    try:
        return _run(args)
    except Stopped:
        return 0


def _run(args: argparse.Namespace) -> int:
    try:
        conn = login.log_in(args)
    except (OSError, SecretError, errors.SSHError) as err:
        print(f"hpcbridge: cannot log in to {args.host}: {login.why(err)}", file=sys.stderr)
        return 1
    try:
        printer = Printer(conn, args.remote_dir)
        if not args.follow:
            return 0 if printer.poll() is not None else 1
        return follow(conn, printer, args)
    except errors.SSHError as err:
        print(f"hpcbridge: {err.message}", file=sys.stderr)
        return 1
    finally:
        conn.close()


def follow(
    conn: Remote, printer: Printer, args: argparse.Namespace, *,
    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print output as it grows until the attempt has ended."""
    asked = quiet_since = clock()
    while True:
        state = printer.poll()
        if state is not None and state.startswith("ended"):
            return 0
        now = clock()
        if printer.grew:
            quiet_since = now
        elif now - max(quiet_since, asked) >= QUIET_SECONDS:
            asked = now
            if ended_on_scheduler(conn, args):
                return 0 if printer.poll() is not None else 1
        sleep(FOLLOW_INTERVAL)


def ended_on_scheduler(conn: Remote, args: argparse.Namespace) -> bool:
    """Whether the scheduler shows every task of the attempt finished (the fallback)."""
    scheduler = REGISTRY[args.backend]
    ref = JobRef(args.key, scheduler.job_id(args.job_id[0]) if args.job_id else None,
                 tuple(args.job_id))
    tasks = scheduler.query(conn, [ref], deadline=Deadline.after(TIMEOUT)).get(args.key, ())
    return bool(tasks) and not any(task.outcome.is_active for task in tasks)


class Printer:
    """Prints the attempt's output files, remembering how much of each it printed."""

    def __init__(self, conn: Remote, remote_dir: str) -> None:
        self.conn = conn
        self.remote_dir = remote_dir
        self.printed: dict[str, int] = {}
        self.current = ""
        self.grew = False
        self._pending = b""
        self._state: str | None = None
        self._file = ""
        self._left = 0

    def poll(self) -> str | None:
        """Print what is new in every file: the attempt's state (``running``,
        ``ended PHASE``), or None when its directory does not exist."""
        done = "".join(f"{name} {size}\n" for name, size in self.printed.items()) or "\n"
        self.grew, self._pending, self._state, self._left = False, b"", None, 0
        status, _ = self.conn.stream(["sh", "-c", READ, "hpcbridge-logs", self.remote_dir],
                                     self.feed, stdin=done.encode(),
                                     deadline=Deadline.after(TIMEOUT))
        sys.stdout.flush()
        if status == 3:
            where = (self.remote_dir if self.remote_dir.startswith("/")
                     else f"~/{self.remote_dir}")
            print(f"hpcbridge: no output directory {where} on the cluster", file=sys.stderr)
            return None
        return self._state

    def feed(self, chunk: bytes) -> None:
        """Take the program's output as it arrives: header lines, then a file's bytes."""
        data = self._pending + chunk
        while data:
            if self._left:
                part, data = data[:self._left], data[self._left:]
                self._write(part)
                continue
            line, newline, rest = data.partition(b"\n")
            if not newline:
                break
            data = rest
            self._header(line.decode(errors="replace"))
        self._pending = data

    def _header(self, line: str) -> None:
        if self._state is None:
            self._state = line
            return
        _, name, length = line.split(" ")
        self._file, self._left = name, int(length)
        if name != self.current:
            task, _, kind = name.rpartition(".")
            sys.stdout.buffer.flush()
            print(f"==> task {task} {STREAMS[kind]} <==", flush=True)
            self.current = name

    def _write(self, part: bytes) -> None:
        sys.stdout.buffer.write(part)
        self._left -= len(part)
        self.printed[self._file] = self.printed.get(self._file, 0) + len(part)
        self.grew = True


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--backend", required=True, choices=sorted(REGISTRY))
    login.add_arguments(parser)
    parser.add_argument("--remote-dir", required=True,
                        help="the attempt's directory: absolute, or relative to ~")
    parser.add_argument("--key", required=True, help="the attempt's key, <uid>-<attempt>")
    parser.add_argument("--job-id", action="append", default=[])
    parser.add_argument("--follow", action="store_true")
    return parser


if __name__ == "__main__":
    sys.exit(main())
