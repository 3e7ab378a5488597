"""The runtimes' words read by the real ``/bin/sh``: hostile text (spaces, quotes, ``;``,
``$(...)``, a leading ``-``, a newline) in every field a BatchJob or a site writes reaches the
runtime as exactly that text, the attempt's directory ``$d`` expands whatever it holds, and no
value of ``spec.env`` is ever a word: a runtime gets it from the environment."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from hooks.core.runtimes import RUNTIMES
from hooks.core.values.image import Container, ImageConfig, Mount, parse_reference

HOSTILE = ("a b", "it's", '"q"', "; touch pwned", "$(touch pwned)", "`touch pwned`", "-x",
           "--help", "$HOME", "*", "", "two\nlines", "back\\slash", "tab\there")
ATTEMPT = "/tmp/at tempt 'x' $(touch pwned)"
SECRET = "s3cr3t value; $(touch pwned) 'quoted'"
IMAGE = "/cache/user/images/it's here"
MODES = {
    "entrypoint": (None, False),
    "command": (("/bin/run", *HOSTILE[:3]), False),
    "script": (None, True),
    "command-script": (("bash", "-x"), True),
}


def container(runtime: str, command: tuple[str, ...] | None) -> Container:
    mounts = (Mount("/scratch/a b'c", "/in $x", read_only=runtime != "charliecloud"),
              Mount("/scratch/-x", "/out"))
    return Container(parse_reference("127.0.0.1:5443/lab/hello:1", "image"), command=command,
                     args=HOSTILE, working_dir="/work dir/$(x)", mounts=mounts, runtime=runtime,
                     runtime_args=("--site flag", "$(touch pwned)"))


def render(runtime: str, mode: str) -> tuple[list[str], list[str]]:
    command, script = MODES[mode]
    config = ImageConfig(entrypoint=("/bin/echo", *HOSTILE[:2]), cmd=HOSTILE[2:4],
                         env=(("IMG", "it's $HOME `x`"), ("TOKEN", "image value")))
    chosen = RUNTIMES[runtime]
    words = chosen.run_words(image=shlex.quote(IMAGE), container=container(runtime, command),
                             config=config, env_names=("TOKEN", "SLURM_*"), gpus=1,
                             script=script)
    return words, chosen.env_lines(("TOKEN",))


def run_sh(tmp_path: Path, program: str) -> bytes:
    done = subprocess.run(["/bin/sh", "-c", program], capture_output=True, check=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "TOKEN": SECRET},
                          timeout=30)
    assert not (tmp_path / "pwned").exists()
    return done.stdout


def expected(words: list[str]) -> list[str]:
    """The argv a POSIX shell makes of ``words``, read the way ``shlex`` reads them, with
    ``"$d"`` the attempt's directory."""
    return [word.replace("$d", ATTEMPT) if raw.startswith('"$d') else word
            for raw in words for word in shlex.split(raw)]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_sh_parses_the_words_and_prints_exactly_the_literals(tmp_path: Path, runtime: str,
                                                             mode: str) -> None:
    words, lines = render(runtime, mode)
    program = "\n".join([f"d={shlex.quote(ATTEMPT)}", *lines,
                         "printf '%s\\0' " + " ".join(words)])
    subprocess.run(["/bin/sh", "-n", "-c", program], check=True, timeout=30)
    printed = [arg.decode() for arg in run_sh(tmp_path, program).split(b"\0")[:-1]]
    assert printed == expected(words)
    assert printed[-len(HOSTILE):] == list(HOSTILE)
    assert f"{ATTEMPT}:{ATTEMPT}" in printed


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_no_value_of_the_environment_is_ever_a_word(tmp_path: Path, runtime: str) -> None:
    words, lines = render(runtime, "command")
    assert not any(SECRET in word for word in [*words, *lines])
    program = "\n".join([f"d={shlex.quote(ATTEMPT)}", *lines,
                         "printf '%s\\0' " + " ".join(words), "printf '\\1'", "env"])
    argv, _, environment = run_sh(tmp_path, program).partition(b"\1")
    assert SECRET.encode() not in argv
    if runtime in ("apptainer", "singularity"):
        prefix = "APPTAINERENV_" if runtime == "apptainer" else "SINGULARITYENV_"
        assert f"{prefix}TOKEN={SECRET}".encode() in environment.splitlines()
