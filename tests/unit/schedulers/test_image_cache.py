"""The image cache's remote program, run by the real ``sh`` on this machine with a stand-in
runtime: a pull starts in the background and answers ``pulling``, then ``ready`` with the
image's path and config; the cache's record answers a lookup; a failed pull answers its last
word and starts again on a retry; the login's files are gone once the pull ends; two attempts
asking for one image pull it once."""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hooks.core.runtimes import RUNTIMES
from hooks.core.values.image import ImageConfig, ImagePull, Prepared, PreparedImage
from hooks.core.values.sdk import SchedulerError
from hooks.schedulers import image_cache

DIGEST = "sha256:" + "cd" * 32
CONFIG = b'{"config":{"Entrypoint":["/bin/echo"],"Cmd":["hi"],"Env":["A=1"],"WorkingDir":""}}'
STAND_IN = ('printf "%s\\n" "$(cat "$auth/password" 2>/dev/null)" > /dev/null; sleep 0.3; '
            '[ "$src" != "docker://fail" ] || { echo "manifest unknown" >&2; exit 1; }; '
            'mkdir "$tmp" && echo image > "$tmp/rootfs"')
"""A runtime's pull: a directory image after a short while, or the registry's refusal."""


def pull(tmp: Path, **changes: object) -> ImagePull:
    base = ImagePull(cache=str(tmp / "cache"), runtime="charliecloud", suffix="",
                     key="docker://registry.example.org/lab/sim:1", digest=DIGEST,
                     source=f"docker://registry.example.org/lab/sim@{DIGEST}",
                     pinned=f"registry.example.org/lab/sim@{DIGEST}",
                     pull_dir=str(tmp / "job" / "image-1"), config=CONFIG,
                     credentials=("user", "s3cret"))
    return replace(base, **changes)


def ask(request: ImagePull) -> PreparedImage:
    argv, stdin = image_cache.command(request)
    argv[argv.index(RUNTIMES[request.runtime].pull_script())] = STAND_IN
    done = subprocess.run(argv, input=stdin, capture_output=True, timeout=30, check=True)
    return image_cache.parse(done.stdout.decode())


def settled(request: ImagePull) -> PreparedImage:
    for _ in range(100):
        answer = ask(replace(request, config=b"", credentials=None))
        if answer.state is not Prepared.PULLING:
            return answer
        time.sleep(0.1)
    raise AssertionError("the pull did not end")


def test_a_pull_runs_in_the_background_then_the_image_is_ready(tmp_path: Path) -> None:
    request = pull(tmp_path)
    assert ask(request).state is Prepared.PULLING
    ready = settled(request)
    assert ready.state is Prepared.READY and ready.digest == DIGEST
    assert ready.path.endswith(f"/cache/{_user()}/charliecloud/sha256-{'cd' * 32}")
    assert ready.config == ImageConfig(("/bin/echo",), ("hi",), (("A", "1"),))
    assert not (tmp_path / "job/image-1/auth").exists(), "the login outlived the pull"
    assert (tmp_path / "cache" / _user()).stat().st_mode & 0o777 == 0o700
    lookup = ask(replace(request, digest="", config=b"", credentials=None))
    assert (lookup.state, lookup.digest) == (Prepared.READY, DIGEST)


def test_a_lookup_without_a_record_is_missing(tmp_path: Path) -> None:
    assert ask(pull(tmp_path, digest="")).state is Prepared.MISSING


def test_a_failed_pull_answers_its_last_word_and_starts_again_on_a_retry(tmp_path: Path) -> None:
    request = pull(tmp_path, source="docker://fail")
    assert ask(request).state is Prepared.PULLING
    failed = settled(request)
    assert (failed.state, failed.message) == (Prepared.FAILED, "manifest unknown")
    assert ask(request).state is Prepared.FAILED  # kept until a retry
    assert not list((tmp_path / "cache").rglob("*.tmp-*")), "a half image was left"
    assert ask(replace(request, retry=True)).state is Prepared.PULLING


def test_two_attempts_asking_for_one_image_pull_it_once(tmp_path: Path) -> None:
    first, second = pull(tmp_path), pull(tmp_path, pull_dir=str(tmp_path / "other/image-1"))
    assert ask(first).state is Prepared.PULLING and ask(second).state is Prepared.PULLING
    assert settled(first).state is settled(second).state is Prepared.READY
    logs = [(tmp_path / d / "pull.log").read_text() for d in ("job/image-1", "other/image-1")]
    assert sum(log.count("hpcbridge: pulling") for log in logs) == 1, logs


def test_the_login_travels_on_stdin_never_in_the_arguments(tmp_path: Path) -> None:
    argv, stdin = image_cache.command(pull(tmp_path))
    assert not any("s3cret" in word for word in argv)
    assert b"s3cret" in stdin and stdin.endswith(b"\n")


def _user() -> str:
    return subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()


def test_an_answer_that_is_not_a_digest_and_a_path_is_no_answer() -> None:
    for line in ("ready sha256:../../x /cache/x", f"ready {DIGEST} relative/path", "maybe"):
        with pytest.raises(SchedulerError):
            image_cache.parse(line + "\n{}\n")
