"""The gunicorn settings `make run` and the container use."""

from __future__ import annotations

import base64
import gc
import importlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from gunicorn.app.wsgiapp import WSGIApplication

from hooks import gunicorn_conf
from hooks.settings import Settings
from tests.driver import serving


@pytest.fixture
def restored_logging() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("hooks", "paramiko", "hooks.calls")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers[:], lg.propagate = handlers, propagate
        lg.setLevel(level)
    gc.unfreeze()


def test_one_threaded_process_by_default() -> None:
    """One worker process that runs the hooks in HPCBRIDGE_THREADS threads (gunicorn's
    gthread): one route or namespace holds at most half of them."""
    assert (gunicorn_conf.worker_class, gunicorn_conf.workers) == ("gthread", 1)
    settings = Settings()
    assert gunicorn_conf.threads == settings.threads
    assert settings.threads >= 2 * max(settings.cluster_threads, settings.namespace_threads)


def test_the_probes_port_is_bound_beside_the_hook_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBRIDGE_METRICS_PORT", "9090")
    monkeypatch.setenv("PORT", "8080")
    monkeypatch.delenv("HOST", raising=False)
    conf = importlib.reload(gunicorn_conf)
    try:
        assert conf.bind == ["127.0.0.1:8080", "127.0.0.1:9090"]
    finally:
        monkeypatch.undo()
        importlib.reload(gunicorn_conf)


def test_gunicorn_reads_the_settings_without_a_control_socket(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through gunicorn's own loader, which ignores a name it does not know: a misspelt
    setting would leave the control socket on."""
    monkeypatch.setattr(sys, "argv", ["gunicorn", "-c", "python:hooks.gunicorn_conf",
                                      "hooks.app:create_app()"])
    cfg = WSGIApplication().cfg
    assert cfg.control_socket_disable is True
    assert cfg.worker_class_str == "gthread"


def test_the_server_starts_cleanly_with_an_unwritable_home(tmp_path: Path) -> None:
    """As in the image: HOME cannot be written, and the server logs no error at start."""
    home = tmp_path / "home"
    home.mkdir(mode=0o500)
    log = tmp_path / "gunicorn.log"
    with serving(log, HOME=str(home), XDG_RUNTIME_DIR=""):
        pass
    assert "[ERROR]" not in log.read_text(), log.read_text()
    assert not any(home.iterdir())


@pytest.mark.usefixtures("restored_logging")
def test_the_loaded_app_is_kept_out_of_full_collections() -> None:
    gunicorn_conf.post_worker_init(object())
    assert gc.get_freeze_count() > 0
    assert logging.getLogger("hooks").handlers


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize(("log_format", "level", "shown"), [
    pytest.param("text", "info", False, id="text-info"),
    pytest.param("text", "debug", True, id="text-debug"),
    pytest.param("json", "info", True, id="json-info"),
])
def test_per_call_records_are_shown_in_json_and_at_debug(
    monkeypatch: pytest.MonkeyPatch, log_format: str, level: str, shown: bool
) -> None:
    monkeypatch.setattr(gunicorn_conf, "logformat", log_format)
    monkeypatch.setattr(gunicorn_conf, "loglevel", level)
    gunicorn_conf.post_worker_init(object())
    assert logging.getLogger("hooks.calls").isEnabledFor(logging.INFO) is shown


def test_the_access_log_records_no_part_of_a_basic_credential(tmp_path: Path) -> None:
    log = tmp_path / "gunicorn.log"
    credential = base64.b64encode(b"alice-the-user:her-password").decode()
    with serving(log, HPCBRIDGE_ACCESS_LOG="-") as url:
        answer = requests.get(f"{url}/healthz", headers={"Authorization": f"Basic {credential}"},
                              timeout=10)
    assert answer.ok
    text = log.read_text()
    assert '"GET /healthz HTTP/1.1" 200' in text, text
    assert "alice-the-user" not in text
    assert "her-password" not in text and credential not in text
