"""Fixtures for fuzzing the hook server: the real gunicorn server and a checking client.

The server runs as deployed (gunicorn with ``hooks.gunicorn_conf``) on a free 127.0.0.1 port.
No cluster is needed: the saved requests' Secrets hold a placeholder key that cannot log in
anywhere, and their cluster is moved to a 127.0.0.1 port where nothing listens, so a request
that gets as far as connecting is refused at once. Hypothesis keeps no example database and
writes nothing into the work tree. The terminal summary counts the requests and answers.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests.driver import serving
from tests.fuzz.answers import ANSWERS, Hooks, tracebacks_summary

CONNECT_TIMEOUT = "2"
"""The server's HPCBRIDGE_CONNECT_TIMEOUT: nothing here may wait long on the network."""
HYPOTHESIS_HOME = pytest.StashKey[str]()

settings.register_profile(
    "hpcbridge-fuzz",
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.large_base_example],
)
settings.load_profile("hpcbridge-fuzz")


def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis keeps a few caches (unicode tables): in a directory of this run, removed after.
    home = tempfile.mkdtemp(prefix="hpcbridge-fuzz-")
    config.stash[HYPOTHESIS_HOME] = home
    set_hypothesis_home_dir(home)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.stash.get(HYPOTHESIS_HOME, ""), ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.fuzz)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not ANSWERS:
        return
    codes: Counter[int] = Counter()
    for (_, code), count in ANSWERS.items():
        codes[code] += count
    terminalreporter.section("requests sent to the hook server")
    terminalreporter.write_line(
        f"{sum(ANSWERS.values())} requests; answers by status: "
        + ", ".join(f"{code}: {count}" for code, count in sorted(codes.items())))
    for (route, code), count in sorted(ANSWERS.items()):
        terminalreporter.write_line(f"  {route:<16} {code}  {count}")


@pytest.fixture(scope="session")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hooks") / "gunicorn.log"


@pytest.fixture(scope="session")
def hook_server(server_log: Path) -> Iterator[str]:
    """The hook server as deployed: gunicorn with the product's settings, on 127.0.0.1."""
    with serving(server_log, HPCBRIDGE_LOG_IMAGE="hpcbridge:test",
                 HPCBRIDGE_CONNECT_TIMEOUT=CONNECT_TIMEOUT) as url:
        yield url
    log = server_log.read_text(errors="replace")
    assert "Traceback" not in log, tracebacks_summary(log)


@pytest.fixture(scope="session")
def hooks(hook_server: str, server_log: Path) -> Hooks:
    return Hooks(hook_server, server_log)
