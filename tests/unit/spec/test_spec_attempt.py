"""Spec validation of suspend and activeDeadlineSeconds, and the digest that makes an attempt:
what changes it (everything but those two), what does not, and that every process agrees; a
Secret's values stay out of the spec's repr."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

import pytest

from hooks.core.spec.batchjob import digest, essence
from tests.unit.conftest import login_cluster, raw_spec, refusal, spec_of
from tests.unit.spec.test_spec import one_sentence_naming

REPO = Path(__file__).resolve().parents[3]


def test_suspend_and_deadline() -> None:
    parsed = spec_of(raw_spec(suspend=True, activeDeadlineSeconds=1))
    assert (parsed.suspend, parsed.active_deadline_seconds) == (True, 1)
    default = spec_of(raw_spec())
    assert (default.suspend, default.active_deadline_seconds) == (False, None)
    assert spec_of(raw_spec(activeDeadlineSeconds=2**63 - 1)).active_deadline_seconds == 2**63 - 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param({"suspend": "true"}, "spec.suspend", id="suspend-text"),
        pytest.param({"suspend": 1}, "spec.suspend", id="suspend-number"),
        pytest.param({"suspend": None}, "spec.suspend", id="suspend-null"),
        pytest.param({"activeDeadlineSeconds": 0}, "spec.activeDeadlineSeconds", id="zero"),
        pytest.param({"activeDeadlineSeconds": -60}, "spec.activeDeadlineSeconds",
                     id="negative"),
        pytest.param({"activeDeadlineSeconds": "60"}, "spec.activeDeadlineSeconds", id="text"),
        pytest.param({"activeDeadlineSeconds": 1.5}, "spec.activeDeadlineSeconds",
                     id="fraction"),
        pytest.param({"activeDeadlineSeconds": True}, "spec.activeDeadlineSeconds", id="bool"),
        pytest.param({"activeDeadlineSeconds": 2**63}, "spec.activeDeadlineSeconds",
                     id="beyond-int64"),
        pytest.param({"activeDeadlineSeconds": 10**400}, "spec.activeDeadlineSeconds",
                     id="too-long-to-print"),
    ],
)
def test_invalid_suspend_and_deadline(fields: dict[str, Any], field: str) -> None:
    message = refusal(**fields)
    one_sentence_naming(message, field)
    assert len(message) < 200


# --- digest --------------------------------------------------------------------------------------


def test_digest_is_sixteen_hex_digits() -> None:
    assert re.fullmatch(r"[0-9a-f]{16}", digest(spec_of(raw_spec())))


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"suspend": True}, id="suspend"),
        pytest.param({"activeDeadlineSeconds": 60}, id="deadline"),
        pytest.param({"suspend": True, "activeDeadlineSeconds": 1}, id="both"),
    ],
)
def test_digest_leaves_out_suspend_and_the_deadline(fields: dict[str, Any]) -> None:
    assert digest(spec_of(raw_spec(**fields))) == digest(spec_of(raw_spec()))


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"script": "#!/bin/sh\necho other\n"}, id="script"),
        pytest.param({"env": [{"name": "A", "value": "1"}]}, id="env"),
        pytest.param({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {
            "name": "s", "key": "k"}}}]}, id="env-from"),
        pytest.param({"inputs": [{"configMap": {"name": "c"}}]}, id="inputs"),
        pytest.param({"cluster": login_cluster(workDir="/scratch")}, id="work-dir"),
        pytest.param({"cluster": login_cluster(jump=[{"host": "bastion"}])}, id="jump"),
        pytest.param({"backoffLimit": 2}, id="backoff-limit"),
        pytest.param({"resources": {"cpus": 2}}, id="resources"),
        pytest.param({"logs": {"follow": True}}, id="logs"),
    ],
)
def test_digest_changes_with_anything_else(fields: dict[str, Any]) -> None:
    assert digest(spec_of(raw_spec(**fields))) != digest(spec_of(raw_spec()))


def test_env_values_change_the_digest() -> None:
    one = spec_of(raw_spec(env=[{"name": "A", "value": "1"}]))
    two = spec_of(raw_spec(env=[{"name": "A", "value": "2"}]))
    assert digest(one) != digest(two)


DIGEST_PROGRAM = """
from hooks.core.spec.batchjob import digest
from tests.unit.conftest import login_cluster, raw_spec, refusal, spec_of
print(digest(spec_of(raw_spec("htcondor", env=[{"name": "A", "value": "x"}],
    htcondor={"queue": 2, "submitOptions": {"+ProjectName": '"demo"', "rank": "Memory"}},
    inputs=[{"configMap": {"name": "c"}, "items": [{"key": "k", "path": "p"}]}]))))
"""


def test_digest_is_the_same_in_every_process() -> None:
    """Hook server processes (and restarts) must agree: nothing in it may depend on hash
    randomization."""
    found = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", DIGEST_PROGRAM], capture_output=True,
                              check=True, timeout=60, cwd=REPO,
                              env={**os.environ, "PYTHONHASHSEED": seed})
        found.add(done.stdout.decode().strip())
    assert len(found) == 1


# --- secret values -------------------------------------------------------------------------------


def test_env_values_are_not_in_the_specs_repr() -> None:
    parsed = spec_of(raw_spec(env=[{"name": "PASSWORD", "value": "hunter2-literal"}]))
    assert "hunter2-literal" not in repr(parsed)
    assert "PASSWORD" in repr(parsed)


def test_a_field_added_at_its_default_leaves_the_digest_as_it_was() -> None:
    """An upgrade that adds a spec field must not make every running attempt's spec look
    changed: fields at their defaults do not count."""
    @dataclass(frozen=True)
    class Spec:
        script: str
        env: tuple[str, ...] = ()

    newer = make_dataclass("Spec", [("script", str), ("env", tuple, field(default=())),
                                    ("added", int, field(default=0))], frozen=True)
    assert essence(Spec("#!/bin/sh")) == essence(newer("#!/bin/sh"))
    assert essence(Spec("#!/bin/sh")) != essence(newer("#!/bin/sh", added=1))
