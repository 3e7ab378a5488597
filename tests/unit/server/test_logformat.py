"""One log record per hook call, and the JSON lines of HPCBRIDGE_LOG_FORMAT=json."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hooks import logformat
from hooks.app import create_app
from tests.unit.conftest import FakePool, runtime

REQUESTS = Path(__file__).resolve().parents[3] / "examples" / "requests"


def test_a_hook_call_is_one_record_with_its_batchjob_outcome_and_duration(
    caplog: pytest.LogCaptureFixture
) -> None:
    client = create_app(runtime=runtime(FakePool())).test_client()
    with caplog.at_level(logging.INFO, logger="hooks.calls"):
        client.post("/sync", data=(REQUESTS / "sync-first.json").read_bytes(),
                    content_type="application/json")
        client.post("/finalize", data="{", content_type="application/json")
    first, second = (r for r in caplog.records if r.name == "hooks.calls")
    assert {k: v for k, v in first.call.items() if k != "duration_ms"} == {  # type: ignore[attr-defined]
        "hook": "sync", "batchjob": "research/hello", "outcome": "ok", "code": 200,
        "phase": "Pending", "reason": "ClusterUnreachable", "remote_commands": []}
    assert second.call["outcome"] == "bad_request"  # type: ignore[attr-defined]
    assert second.call["batchjob"] == "?/?"  # type: ignore[attr-defined]


def test_remote_commands_are_collected_per_call() -> None:
    logformat.remote_command("squeue", "ok")  # outside a call: not collected
    logformat.begin_call()
    logformat.remote_command("hpcbridge-submit", "ok")
    logformat.remote_command("squeue", "error")
    assert logformat.end_call() == ["hpcbridge-submit:ok", "squeue:error"]
    assert logformat.end_call() == []


def test_json_lines() -> None:
    record = logging.LogRecord("hooks.calls", logging.INFO, __file__, 1, "sync %s", ("x",), None)
    record.call = {"hook": "sync", "remote_commands": ["squeue:ok"]}
    line = json.loads(logformat.JSONFormatter().format(record))
    assert (line["level"], line["logger"], line["message"], line["hook"]) == (
        "info", "hooks.calls", "sync x", "sync")
    assert line["remote_commands"] == ["squeue:ok"]
    assert line["time"].endswith("+00:00")
