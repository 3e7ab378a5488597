"""With HPCBRIDGE_LOG_FORMAT=json every line the hook server writes is JSON, gunicorn's own
included, the per-call line carries the BatchJob's reason; counters have no _created series."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import prometheus_client

from hooks import logformat
from hooks.metrics import Metrics
from tests.driver import serving


def test_every_line_is_json_gunicorns_included(tmp_path: Path) -> None:
    log = tmp_path / "gunicorn.log"
    with serving(log, HPCBRIDGE_LOG_FORMAT="json", HPCBRIDGE_ACCESS_LOG="-") as url:
        urllib.request.urlopen(f"{url}/healthz", timeout=10).read()
    lines = log.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # each one parses
    loggers = {record["logger"] for record in records}
    assert "gunicorn.error" in loggers, lines
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert any("Booting worker" in r["message"] for r in records), lines


def test_text_leaves_gunicorn_its_own_format() -> None:
    assert logformat.gunicorn_logconfig("text", "info", "-") == {}


def test_without_an_access_log_none_is_written() -> None:
    config = logformat.gunicorn_logconfig("json", "info", None)
    assert config["handlers"]["access"] == {"class": "logging.NullHandler"}
    assert config["loggers"]["gunicorn.access"]["level"] == "CRITICAL"
    to_file = logformat.gunicorn_logconfig("json", "debug", "/var/log/access.json")
    assert to_file["handlers"]["access"]["filename"] == "/var/log/access.json"
    assert to_file["loggers"]["gunicorn.error"]["level"] == "DEBUG"


def test_counters_have_no_created_series() -> None:
    metrics = Metrics()
    metrics.submission("submitted")
    metrics.hook_answered("sync", 200, 0.01)
    page = prometheus_client.generate_latest(metrics.registry)
    assert b"_created" not in page
    assert b"hpcbridge_submissions_total" in page
