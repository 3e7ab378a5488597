"""The words each runtime renders to run an image, as exact vectors: the image's entrypoint, a
command, the BatchJob's script, mounts, GPUs, the environment and the site's flags; and what
each runtime keeps in its cache and pulls."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.core.runtimes import RUNTIMES, wrapper
from hooks.core.runtimes.apptainer import APPTAINER, SINGULARITY
from hooks.core.runtimes.charliecloud import CHARLIECLOUD
from hooks.core.runtimes.podman import PODMAN
from hooks.core.values import shell_words
from hooks.core.values.image import Container, ImageConfig, Mount, Transport, parse_reference

DIGEST = "sha256:" + "5a" * 32
NAME = "sha256-" + "5a" * 32
IMAGE = f"/cache/hpcuser/x/{NAME}"
TASKS = ("SLURM_*", "_CONDOR_*")
MOUNTS = (Mount("/scratch/in", "/in", read_only=True), Mount("/scratch/out", "/out"))
CONFIG = ImageConfig(entrypoint=("/bin/echo", "hello"), cmd=("default",),
                     env=(("GREETING", "hi"), ("TOKEN", "from the image")))


def container(**changes: Any) -> Container:
    return Container(parse_reference("127.0.0.1:5443/lab/hello:1", "image"), **changes)


def words(runtime: str, *, config: ImageConfig = CONFIG, env_names: tuple[str, ...] = (),
          gpus: int = 0, script: bool = False, **changes: Any) -> list[str]:
    return RUNTIMES[runtime].run_words(image=IMAGE, container=container(**changes),
                                       config=config, env_names=env_names, gpus=gpus,
                                       script=script)


APPTAINER_HEAD = ["--bind", '"$d:$d"', "--pwd", '"$d"', IMAGE]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, ["apptainer", "run", *APPTAINER_HEAD], id="entrypoint"),
        pytest.param({"args": ("-n", "a b")}, ["apptainer", "run", *APPTAINER_HEAD, "-n",
                                               "'a b'"], id="entrypoint-args"),
        pytest.param({"command": ("/bin/sh", "-c"), "args": ("echo $HOME",)},
                     ["apptainer", "exec", *APPTAINER_HEAD, "/bin/sh", "-c", "'echo $HOME'"],
                     id="command-args"),
        pytest.param({"script": True, "args": ("x",)},
                     ["apptainer", "exec", *APPTAINER_HEAD, '"$d/.hpcbridge-script"', "x"],
                     id="script"),
        pytest.param({"script": True, "command": ("bash", "-x")},
                     ["apptainer", "exec", *APPTAINER_HEAD, "bash", "-x",
                      '"$d/.hpcbridge-script"'], id="command-runs-script"),
        pytest.param({"mounts": MOUNTS},
                     ["apptainer", "run", "--bind", '"$d:$d"', "--bind", "/scratch/in:/in:ro",
                      "--bind", "/scratch/out:/out", "--pwd", '"$d"', IMAGE], id="mounts"),
        pytest.param({"gpus": 1, "working_dir": "/work dir"},
                     ["apptainer", "run", "--nv", "--bind", '"$d:$d"', "--pwd", "'/work dir'",
                      IMAGE], id="gpu-workdir"),
        pytest.param({"runtime_args": ("--cleanenv", "--contain"), "command": ("true",)},
                     ["apptainer", "exec", "--cleanenv", "--contain", *APPTAINER_HEAD, "true"],
                     id="site-flags"),
        pytest.param({"env_names": ("TOKEN", *TASKS)}, ["apptainer", "run", *APPTAINER_HEAD],
                     id="env-needs-no-word"),
    ],
)
def test_apptainer_words(changes: dict[str, Any], expected: list[str]) -> None:
    assert words("apptainer", **changes) == expected
    assert words("singularity", **changes) == ["singularity", *expected[1:]]


def test_apptainer_hands_the_environment_in_by_prefixed_variables() -> None:
    names = ("TOKEN", "MODE", *TASKS)
    assert APPTAINER.env_lines(names) == ['export APPTAINERENV_TOKEN="$TOKEN"',
                                          'export APPTAINERENV_MODE="$MODE"']
    assert SINGULARITY.env_lines(names)[0] == 'export SINGULARITYENV_TOKEN="$TOKEN"'
    with pytest.raises(ValueError, match="not a variable name"):
        APPTAINER.env_lines(("A;rm -rf ~",))


PODMAN_HEAD = ["podman", "run", "--rm", "--quiet", "--log-driver=none", "-v", '"$d:$d"', "-w",
               '"$d"']
ARCHIVE = f"oci-archive:{IMAGE}"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, [*PODMAN_HEAD, ARCHIVE], id="entrypoint"),
        pytest.param({"args": ("-n", "a b")}, [*PODMAN_HEAD, ARCHIVE, "-n", "'a b'"],
                     id="entrypoint-args"),
        pytest.param({"command": ("/bin/sh", "-c"), "args": ("echo $HOME",)},
                     [*PODMAN_HEAD, "--entrypoint", """'["/bin/sh", "-c"]'""", ARCHIVE,
                      "'echo $HOME'"], id="command-args"),
        pytest.param({"script": True, "args": ("x",)},
                     [*PODMAN_HEAD, "--entrypoint", '"$d/.hpcbridge-script"', ARCHIVE, "x"],
                     id="script"),
        pytest.param({"script": True, "command": ("bash", "-x")},
                     [*PODMAN_HEAD, "--entrypoint", """'["bash", "-x"]'""", ARCHIVE,
                      '"$d/.hpcbridge-script"'], id="command-runs-script"),
        pytest.param({"mounts": MOUNTS},
                     [*PODMAN_HEAD[:7], "-v", "/scratch/in:/in:ro", "-v", "/scratch/out:/out",
                      "-w", '"$d"', ARCHIVE], id="mounts"),
        pytest.param({"gpus": 2, "working_dir": "/w"},
                     [*PODMAN_HEAD[:5], "--device", "nvidia.com/gpu=all", "-v", '"$d:$d"', "-w",
                      "/w", ARCHIVE], id="gpu-workdir"),
        pytest.param({"env_names": ("TOKEN", *TASKS)},
                     [*PODMAN_HEAD, "--env", "TOKEN", "--env", "'SLURM_*'", "--env",
                      "'_CONDOR_*'", ARCHIVE], id="env-by-name"),
        pytest.param({"runtime_args": ("--network=host", "--runtime=runc")},
                     ["podman", "run", "--network=host", "--runtime=runc", *PODMAN_HEAD[2:],
                      ARCHIVE], id="site-flags"),
    ],
)
def test_podman_words(changes: dict[str, Any], expected: list[str]) -> None:
    assert words("podman", **changes) == expected
    assert PODMAN.env_lines(("TOKEN",)) == []


QUOTE = "'\"'\"'"
"""A single quote inside a single-quoted word."""
CH_HEAD = ["ch-run", "--write", "-b", '"$d:$d"', "--cd", '"$d"', "--env-no-expand",
           f"'--set-env=GREETING={QUOTE}hi{QUOTE}'",
           f"'--set-env=TOKEN={QUOTE}from the image{QUOTE}'"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, [*CH_HEAD, IMAGE, "--", "/bin/echo", "hello", "default"],
                     id="entrypoint-cmd"),
        pytest.param({"args": ("-n", "a b")},
                     [*CH_HEAD, IMAGE, "--", "/bin/echo", "hello", "-n", "'a b'"],
                     id="entrypoint-args"),
        pytest.param({"command": ("/bin/sh", "-c"), "args": ("echo $HOME",)},
                     [*CH_HEAD, IMAGE, "--", "/bin/sh", "-c", "'echo $HOME'"],
                     id="command-args"),
        pytest.param({"script": True, "args": ("x",)},
                     [*CH_HEAD, IMAGE, "--", '"$d/.hpcbridge-script"', "x"], id="script"),
        pytest.param({"script": True, "command": ("bash",)},
                     [*CH_HEAD, IMAGE, "--", "bash", '"$d/.hpcbridge-script"'],
                     id="command-runs-script"),
        pytest.param({"mounts": MOUNTS[1:], "gpus": 1, "config": ImageConfig(cmd=("/bin/true",))},
                     ["ch-run", "--write", "-b", '"$d:$d"', "-b", "/scratch/out:/out", "--cd",
                      '"$d"', IMAGE, "--", "/bin/true"], id="mounts-gpu-no-env"),
        pytest.param({"env_names": ("TOKEN", *TASKS), "working_dir": "/w"},
                     [*CH_HEAD[:4], "--cd", "/w", *CH_HEAD[6:8], IMAGE, "--", "/bin/echo",
                      "hello", "default"], id="passed-env-wins"),
        pytest.param({"env_names": ("TOK*",), "config": ImageConfig(env=(("TOKEN", "x"),))},
                     [*CH_HEAD[:6], IMAGE, "--"], id="prefix-passes-env"),
    ],
)
def test_charliecloud_words(changes: dict[str, Any], expected: list[str]) -> None:
    assert words("charliecloud", **changes) == expected
    assert CHARLIECLOUD.env_lines(("TOKEN",)) == []


@pytest.mark.parametrize(
    ("site", "written"),
    [
        pytest.param(("-W",), ["-W"], id="write-fake-short"),
        pytest.param(("--write-fake=4g",), ["--write-fake=4g"], id="write-fake-size"),
        pytest.param(("--write-fake",), ["--write-fake"], id="write-fake"),
        pytest.param(("-w", "--private-tmp"), ["-w", "--private-tmp"], id="write"),
        pytest.param(("--private-tmp",), ["--private-tmp", "--write"], id="other-flag"),
    ],
)
def test_charliecloud_writes_the_image_as_the_site_says(site: tuple[str, ...],
                                                         written: list[str]) -> None:
    rendered = words("charliecloud", runtime_args=site, config=ImageConfig(cmd=("true",)))
    assert rendered[:len(written) + 3] == ["ch-run", *written, "-b", '"$d:$d"']


def test_charliecloud_binds_are_never_read_only() -> None:
    assert CHARLIECLOUD.supports_read_only is False
    assert APPTAINER.supports_read_only and PODMAN.supports_read_only
    assert "/scratch/in:/in" in words("charliecloud", mounts=MOUNTS[:1])


@pytest.mark.parametrize(
    ("runtime", "cached", "file", "transports"),
    [
        pytest.param("apptainer", f"{NAME}.sif", "/img/a.sif", {Transport.DOCKER, Transport.ORAS},
                     id="apptainer"),
        pytest.param("singularity", f"{NAME}.sif", "/img/a.sif",
                     {Transport.DOCKER, Transport.ORAS}, id="singularity"),
        pytest.param("podman", f"{NAME}.tar", "oci-archive:/img/a.sif", {Transport.DOCKER},
                     id="podman"),
        pytest.param("charliecloud", NAME, "/img/a.sif", {Transport.DOCKER}, id="charliecloud"),
    ],
)
def test_what_each_runtime_caches_pulls_and_runs_from_a_file(
    runtime: str, cached: str, file: str, transports: set[Transport]
) -> None:
    chosen = RUNTIMES[runtime]
    assert chosen.cached_name(DIGEST) == cached
    assert chosen.file_image("/img/a.sif") == file
    assert {t for t in Transport if chosen.pulls(t)} == transports
    assert chosen.version_note


def test_the_runtimes_by_name() -> None:
    assert list(RUNTIMES) == ["apptainer", "singularity", "podman", "charliecloud"]
    assert [RUNTIMES[name].command for name in RUNTIMES] == [
        "apptainer", "singularity", "podman", "ch-run"]
    assert shell_words.SCRIPT == wrapper.SCRIPT


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("path", ["/scratch/a:b", "/scratch/a,b"])
def test_a_path_a_bind_cannot_hold_is_refused(runtime: str, path: str) -> None:
    assert not shell_words.bindable(path)
    with pytest.raises(ValueError, match="cannot be bound"):
        words(runtime, mounts=(Mount(path, "/in"),))
    with pytest.raises(ValueError, match="cannot be bound"):
        words(runtime, mounts=(Mount("/scratch", path),))


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_no_gpu_flag_without_gpus(runtime: str) -> None:
    assert RUNTIMES[runtime].gpu_flags(0) == []
