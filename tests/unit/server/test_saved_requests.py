"""The README's "Debugging a hook" commands, run as written against the hook server as
`make run` starts it: each saved request answers what the README says it shows."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.driver import serving

REPO = Path(__file__).resolve().parents[3]


def readme_block() -> list[str]:
    """The commands of the README's debugging block, continuation lines joined."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Debugging a hook", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1).replace("|\n  ", "| ").strip().splitlines()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("server") / "gunicorn.log"
    with serving(log) as url:
        yield url.replace("http://127.0.0.1", "localhost")
    assert "Traceback" not in log.read_text()


def run(command: str, server: str) -> str:
    done = subprocess.run(["bash", "-c", command.replace("localhost:8080", server)],
                          cwd=REPO, capture_output=True, text=True, check=True, timeout=60)
    return done.stdout


def commands() -> dict[str, str]:
    lines = readme_block()
    assert lines[0] == "make run &"
    return {hook: next(line for line in lines if f"8080/{hook}" in line)
            for hook in ("healthz", "customize", "sync", "finalize", "metrics")}


def test_block_waits_for_the_server_shows_errors_and_stops_it() -> None:
    """A fresh clone's first `make run` installs .venv/ first: the block waits for /healthz
    before the first hook call, no curl hides a refused connection, and it ends by stopping the
    server it started."""
    lines = readme_block()
    assert "8080/healthz" in lines[1] and "--retry-connrefused" in lines[1].split()
    curls = [word for line in lines for word in line.split() if word.startswith("-s")]
    assert curls and set(curls) == {"-sS"}
    assert lines[-1] == "kill %1"


def test_hook_answers_are_printed_indented(server: str) -> None:
    """Every hook call's answer goes through a JSON formatter: one field a line, not one long
    line."""
    hook_lines = [line for line in readme_block()
                  if re.search(r"8080/(customize|sync|finalize)\b", line)]
    assert len(hook_lines) == 4
    assert all(line.endswith("| python3 -m json.tool") for line in hook_lines)
    printed = run(commands()["customize"], server)
    assert printed.splitlines()[:2] == ["{", '    "relatedResources": [']


def test_the_batchcluster_sync_takes_the_route_and_backend_from_the_batchcluster(
        server: str) -> None:
    (line,) = (line for line in readme_block() if "sync-batchcluster.json" in line)
    request = json.loads((REPO / "examples/requests/sync-batchcluster.json").read_text())
    assert "backend" not in request["parent"]["spec"]
    status = json.loads(run(line, server))["status"]
    assert (status["phase"], status["reason"], status["backend"]) == (
        "Pending", "InvalidSecret", "slurm")
    assert (status["cluster"]["name"], status["cluster"]["host"]) == (
        "hpc-a", "login.hpc.example.org")


def test_healthz_answers_once_the_server_is_up(server: str) -> None:
    assert json.loads(run(commands()["healthz"], server)) == {"status": "ok"}


def test_customize_asks_for_the_secret(server: str) -> None:
    answer = json.loads(run(commands()["customize"], server))
    assert answer["relatedResources"][0]["names"] == ["hpc-login"]


def test_sync_shows_an_unusable_secret_without_contacting_the_cluster(server: str) -> None:
    answer = json.loads(run(commands()["sync"], server))
    status = answer["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "InvalidSecret")
    reachable = next(c for c in status["conditions"] if c["type"] == "ClusterReachable")
    assert reachable["status"] == "Unknown"
    assert answer["resyncAfterSeconds"] >= 45


def test_finalize_dated_now_keeps_the_batchjob_and_as_saved_gives_up(server: str) -> None:
    recent = json.loads(run(commands()["finalize"], server))
    assert recent["finalized"] is False
    curl = commands()["finalize"].split("|", 1)[1]
    as_saved = curl.replace("-d @-", "-d @examples/requests/finalize.json")
    assert json.loads(run(as_saved, server))["finalized"] is True
    assert "hpcbridge_finalize_gave_up_total 1.0" in run(commands()["metrics"], server)
