"""Sync requests with usable Secrets and ConfigMaps (jump hosts, workDir, env, inputs, suspend,
the deadline), and a driver that answers the effects a decision yields with results the test
fabricates.

Tests import the plain functions (``from tests.unit.builders import request``).
"""

from __future__ import annotations

import base64
import copy
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hooks.core.decide import finalize, sync
from hooks.core.decide.effects import Action, Answer, Decision, Effect, Query, Submit, Trouble
from hooks.core.values.job import SubmitAnswer, SubmitOutcome
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from tests.unit.conftest import NOW, UID, call

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP0vcqgNFWx83GT6XarPgHsbgLZ3ORKXoMapg3PHaQhG"
"""A real ed25519 public key (the private half was thrown away): known_hosts lines must hold
one."""
LOGIN = "login.hpc.example.org"
T0 = "2026-11-22T10:00:00Z"
"""Five minutes before ``NOW``."""


def b64(value: str | bytes) -> str:
    return base64.b64encode(value.encode() if isinstance(value, str) else value).decode()


def login_secret(*hosts: str, username: str = "alice") -> dict[str, Any]:
    """A Secret with a password and a known_hosts line for each host."""
    known = "".join(f"{host} {HOST_KEY}\n" for host in hosts or (LOGIN,))
    return {"metadata": {"name": "x", "namespace": "research"},
            "data": {"username": b64(username), "password": b64("pw"),
                     "known_hosts": b64(known)}}


def secret(**data: str | bytes) -> dict[str, Any]:
    """A Secret as the API server sends it: base64 data."""
    return {"data": {key: b64(value) for key, value in data.items()}}


def config_map(binary: Mapping[str, bytes] | None = None, /, **data: str) -> dict[str, Any]:
    """A ConfigMap: text ``data``, and ``binaryData`` in base64 as the API server sends it."""
    found: dict[str, Any] = {"data": dict(data)}
    if binary:
        found["binaryData"] = {key: b64(value) for key, value in binary.items()}
    return found


def spec(**fields: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "backend": "slurm",
        "script": "#!/bin/sh\ntrue\n",
        "cluster": {"host": LOGIN, "secretRef": {"name": "login"}},
    }
    raw.update(fields)
    return raw


def request(
    spec_fields: Mapping[str, Any] | None = None, *, status: Mapping[str, Any] | None = None,
    secrets: Mapping[str, Any] | None = None, config_maps: Mapping[str, Any] | None = None,
    generation: int = 1, finalizing: bool = False,
) -> dict[str, Any]:
    """A composite sync request for research/sim; the Secret ``login`` is there unless
    ``secrets`` maps it to None."""
    related_secrets = {"login": login_secret(), **(secrets or {})}
    return {
        "controller": {},
        "parent": {
            "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob",
            "metadata": {"name": "sim", "namespace": "research", "uid": UID,
                         "generation": generation},
            "spec": spec(**(spec_fields or {})),
            "status": dict(status or {}),
        },
        "children": {"Pod.v1": {}},
        "related": {
            "Secret.v1": {k: v for k, v in related_secrets.items() if v is not None},
            "ConfigMap.v1": dict(config_maps or {}),
        },
        "finalizing": finalizing,
    }


Results = Mapping[type, Any]
"""What each kind of action answers: a value, or a function of the action."""


@dataclass
class Run:
    """One hook call driven to its answer: the actions asked for, in order, and the answer."""

    actions: list[Action]
    answer: Answer

    @property
    def status(self) -> dict[str, Any]:
        found: dict[str, Any] = self.answer.body["status"]
        return found

    @property
    def kinds(self) -> list[str]:
        return [type(action).__name__ for action in self.actions]

    def action(self, kind: type) -> Any:
        """The only action of that kind."""
        (found,) = [action for action in self.actions if isinstance(action, kind)]
        return found


def drive(decision: Decision, results: Results, effects: list[Effect] | None = None) -> Run:
    """Answer every effect ``decision`` yields from ``results`` (None for a kind not listed)."""
    actions: list[Action] = []
    sent: Any = None
    while True:
        try:
            effect = decision.send(sent)
        except StopIteration as done:
            return Run(actions, done.value)
        if effects is not None:
            effects.append(effect)
        actions.append(effect.action)
        result = results.get(type(effect.action))
        sent = result(effect.action) if callable(result) else result


@dataclass
class Loop:
    """Metacontroller in miniature for the pure core: each answer's status goes into the next
    request; ``edit`` changes the spec and bumps the generation like the API server."""

    body: dict[str, Any]
    now: datetime.datetime = NOW
    effects: list[Effect] = field(default_factory=list)

    def sync(self, results: Results | None = None) -> Run:
        parsed = call(copy.deepcopy(self.body), now=self.now)
        run = finalize.decide if self.body.get("finalizing") else sync.decide
        outcome = drive(run(parsed), results or {}, self.effects)
        self.body["parent"]["status"] = outcome.status
        return outcome

    def edit(self, **fields: Any) -> None:
        self.body["parent"]["spec"].update(fields)
        self.body["parent"]["metadata"]["generation"] += 1

    def later(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


SUBMITTED: dict[type, Any] = {Submit: SubmitOutcome(SubmitAnswer.SUBMITTED, "500")}
"""The results of a call whose submission went through as job 500."""
DOWN = Trouble(Reason.CLUSTER_UNREACHABLE, "Connection refused.")
"""What an action answers when the cluster cannot be reached."""


def queue(*states: TaskState) -> dict[type, Any]:
    """The results of a call whose status query shows ``states``."""
    return {Query: list(states)}


def pending(reason: Reason = Reason.NONE, task: str = "500") -> TaskState:
    return TaskState(task, Outcome.PENDING, reason)


def running(task: str = "500") -> TaskState:
    return TaskState(task, Outcome.RUNNING, start_time="2026-11-22T10:05:10Z")


def condition(run: Run, kind: str) -> dict[str, str]:
    (found,) = [c for c in run.status["conditions"] if c["type"] == kind]
    return found  # type: ignore[no-any-return]


def submitted_loop(**spec: Any) -> Loop:
    """A BatchJob whose attempt 1 was just submitted as job 500."""
    loop = Loop(request(spec))
    assert loop.sync(SUBMITTED).kinds == ["Submit", "Track"]
    return loop


# --- stored statuses -----------------------------------------------------------------------------


STORED_ROUTE = {"host": LOGIN, "port": 22, "secretRef": {"name": "login"}}
"""The cluster of a stored attempt, as the status holds it."""
ANOTHER_JOB = "8534"
"""A job of another BatchJob of the same cluster account."""


def stored_status(backend: str = "slurm", **fields: Any) -> dict[str, Any]:
    """A status as a user who may write it could leave it: attempt 1 queued."""
    return {"phase": "Pending", "backend": backend, "attempt": 1, "attemptGeneration": 1,
            "cluster": STORED_ROUTE, **fields}
