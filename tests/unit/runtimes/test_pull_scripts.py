"""The runtimes' pull lines run by the real ``/bin/sh`` as the image cache runs them (in a
subshell, with ``$src``, ``$ref``, ``$tmp`` and ``$auth`` set), against stand-in runtimes that
record what they were given: the commands and their order, the registry login only ever in a
file or in ``ch-image``'s own environment (never a word of a command line), the image left at
``$tmp``, and a failure's status and message."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hooks.core.runtimes import RUNTIMES

REF = "127.0.0.1:5443/lab/hello@sha256:" + "5a" * 32
SRC = f"docker://{REF}"
USER, PASSWORD = "robot$lab", "pa ss'word $(touch pwned)"
STAND_IN = r"""#!/bin/sh
tool=${0##*/}
{ printf '%s' "$tool"; printf ' [%s]' "$@"
  printf ' login=[%s:%s] user=[%s]\n' "${CH_IMAGE_USERNAME-}" "${CH_IMAGE_PASSWORD-}" "${USER-}"
} >> "$LOG"
if [ -n "${FAIL-}" ] && { [ "$tool" != podman ] || [ "$FAIL" = "$1" ]; }; then
  echo "error: the registry said no" >&2; exit 1
fi
last=; for a; do before=$last; last=$a; done
case $tool in
  apptainer|singularity) : > "$before" ;;
  podman)
    case $1 in
      image) [ -n "${HAD-}" ] ;;
      pull) echo 0123abcd ;;
      save) while [ "$1" != -o ]; do shift; done; : > "$2" ;;
    esac ;;
  ch-image)  # as the real one: it makes its storage directory itself
    mkdir -- "$CH_IMAGE_STORAGE" || { echo "error: storage directory seems invalid" >&2; exit 1; }
    ;;
  ch-convert) mkdir -- "$last" ;;
esac
"""
PROGRAM = 'src=$1; ref=$2; tmp=$3; auth=$4\nset -u\n( eval "$5" ) < /dev/null'


def pull(tmp_path: Path, runtime: str, *, auth: bool = True,
         **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    for tool in ("apptainer", "singularity", "podman", "ch-image", "ch-convert"):
        (tools / tool).write_text(STAND_IN)
        (tools / tool).chmod(0o755)
    login = tmp_path / "auth"
    login.mkdir(mode=0o700, exist_ok=True)
    for name, content in (("auth.json", '{"auths": {}}'), ("username", USER),
                          ("password", PASSWORD)):
        (login / name).write_text(content)
        (login / name).chmod(0o600)
    log = tmp_path / "calls.log"
    done = subprocess.run(
        ["/bin/sh", "-c", PROGRAM, "pull", SRC, REF, str(tmp_path / ".tmp-image"),
         str(login) if auth else "", RUNTIMES[runtime].pull_script()],
        capture_output=True, text=True, cwd=tmp_path, timeout=30,
        env={"PATH": f"{tools}:/usr/bin:/bin", "LOG": str(log), "TMPDIR": str(tmp_path),
             **env}, check=False)
    assert not (tmp_path / "pwned").exists()
    return done, log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_apptainer_pulls_with_the_login_file(tmp_path: Path, runtime: str) -> None:
    done, calls = pull(tmp_path, runtime)
    assert done.returncode == 0, done.stderr
    assert calls == [f"{runtime} [pull] [--disable-cache] [--authfile] [{tmp_path}/auth/auth.json]"
                     f" [{tmp_path}/.tmp-image] [{SRC}] login=[:] user=[]"]
    assert (tmp_path / ".tmp-image").is_file()


def test_apptainer_pulls_without_a_login(tmp_path: Path) -> None:
    done, calls = pull(tmp_path, "apptainer", auth=False)
    assert done.returncode == 0, done.stderr
    assert calls == [f"apptainer [pull] [--disable-cache] [{tmp_path}/.tmp-image] [{SRC}]"
                     " login=[:] user=[]"]


def test_podman_pulls_saves_the_archive_and_drops_its_own_copy(tmp_path: Path) -> None:
    done, calls = pull(tmp_path, "podman")
    assert done.returncode == 0, done.stderr
    assert [call.partition(" login=")[0] for call in calls] == [
        f"podman [image] [exists] [{REF}]",
        f"podman [pull] [--quiet] [--authfile] [{tmp_path}/auth/auth.json] [{SRC}]",
        f"podman [save] [--quiet] [--format] [oci-archive] [-o] [{tmp_path}/.tmp-image] [{REF}]",
        f"podman [rmi] [{REF}]",
    ]
    assert (tmp_path / ".tmp-image").is_file()


def test_podman_keeps_an_image_the_user_had(tmp_path: Path) -> None:
    done, calls = pull(tmp_path, "podman", auth=False, HAD="1")
    assert done.returncode == 0, done.stderr
    assert [call.split(" [")[1] for call in calls] == ["image]", "pull]", "save]"]
    assert "--authfile" not in "".join(calls)


def test_charliecloud_hands_the_login_to_ch_image_alone(tmp_path: Path) -> None:
    done, calls = pull(tmp_path, "charliecloud", USER="hpcuser")
    assert done.returncode == 0, done.stderr
    assert calls == [
        f"ch-image [--no-cache] [pull] [--auth] [{REF}] login=[{USER}:{PASSWORD}] user=[hpcuser]",
        f"ch-convert [-i] [ch-image] [-o] [dir] [{REF}] [{tmp_path}/.tmp-image] login=[:]"
        " user=[hpcuser]",
    ]
    assert (tmp_path / ".tmp-image").is_dir()
    assert not list(tmp_path.glob("hpcbridge-ch.*")), "the pull's own storage is left behind"


def test_charliecloud_without_a_login_and_without_user(tmp_path: Path) -> None:
    done, calls = pull(tmp_path, "charliecloud", auth=False)
    assert done.returncode == 0, done.stderr
    assert calls[0].startswith(f"ch-image [--no-cache] [pull] [{REF}] login=[:] user=[")
    assert not calls[0].endswith("user=[]"), "ch-image needs $USER"


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_no_login_is_ever_a_word(tmp_path: Path, runtime: str) -> None:
    _, calls = pull(tmp_path, runtime)
    for call in calls:
        words = call.partition(" login=")[0]
        assert USER not in words and PASSWORD not in words


@pytest.mark.parametrize(
    ("runtime", "fail"),
    [
        pytest.param("apptainer", "1", id="apptainer"),
        pytest.param("podman", "pull", id="podman-pull"),
        pytest.param("podman", "save", id="podman-save"),
        pytest.param("charliecloud", "1", id="charliecloud"),
    ],
)
def test_a_failed_pull_says_why_and_leaves_no_image(tmp_path: Path, runtime: str,
                                                    fail: str) -> None:
    done, _ = pull(tmp_path, runtime, FAIL=fail)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == "error: the registry said no"
    assert not (tmp_path / ".tmp-image").exists()
    assert not list(tmp_path.glob("hpcbridge-ch.*"))
