"""The program an HTCondor pool's own runtime runs inside the image: what the BatchJob or the
image says to run, as a Pod's container runs it, each word quoted, in the job's scratch
directory or the container's ``workingDir``."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from hooks.core.runtimes import pool
from hooks.core.values.image import Container, ImageConfig, Transport
from hooks.core.values.image import ImageRef as Ref
from hooks.core.values.job import Spec
from tests.unit.conftest import job

IMAGE = Ref("registry.example.org/lab/sim:2.1", Transport.DOCKER, "registry.example.org",
            "lab/sim", "2.1")
CONFIG = ImageConfig(("/bin/echo", "entry"), ("default", "cmd"))


def spec(script: str = "", **fields: Any) -> Spec:
    base = job("htcondor", 1).spec
    return replace(base, script=script, container=Container(IMAGE, **fields))


def last(text: str) -> str:
    return text.splitlines()[-1]


def test_the_entrypoint_runs_with_args_in_place_of_the_images_cmd() -> None:
    assert last(pool.render(spec(), CONFIG)) == "exec /bin/echo entry default cmd"
    assert last(pool.render(spec(args=("--x", "a b")), CONFIG)) == "exec /bin/echo entry --x 'a b'"


def test_a_command_replaces_the_entrypoint_and_a_script_runs_from_the_scratch_directory() -> None:
    assert last(pool.render(spec(command=("python", "-c"), args=("print(1)",)), CONFIG)) == \
        "exec python -c 'print(1)'"
    text = pool.render(spec("#!/bin/sh\necho hi\n", args=("x",)), None)
    assert 'chmod u+x "$d/.hpcbridge-script" || exit 1' in text
    assert last(text) == 'exec "$d/.hpcbridge-script" x'


def test_an_image_that_names_nothing_fails_with_a_sentence() -> None:
    text = pool.render(spec(), ImageConfig())
    assert "names no entrypoint or command" in text and last(text).endswith("exit 127")


def test_hostile_words_stay_words_when_sh_runs_the_program(tmp_path: Path) -> None:
    words = ("$(touch pwned)", "; rm -rf /", "`id`", "'", "-n")
    text = pool.render(spec(command=("printf", "%s|"), args=words, working_dir=str(tmp_path)),
                       None)
    program = tmp_path / "program"
    program.write_text(text)
    done = subprocess.run(["sh", str(program)], capture_output=True, text=True, check=True,
                          cwd=tmp_path)
    assert done.stdout == "|".join(words) + "|"
    assert not (tmp_path / "pwned").exists()
