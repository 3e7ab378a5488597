"""What every answer of the hook server must be, whatever it was sent; and a client that checks
each answer it gets and counts them.

A hook answers 200 or a JSON 400 ``{error, message}``, never 500; no answer carries a traceback
or a value of the request's Secrets; a 200 sync or finalize answer carries a status that the
BatchJob CRD accepts (``tests.fuzz.crd_status``: formats included, as the API server checks) and
children that are Pods. The server logs no traceback while answering.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.driver import REPO, free_port
from tests.fuzz.crd_status import status_violations

SAVED = REPO / "examples/requests"
SITE_GROUP = "BatchCluster.hpcbridge.io/v1alpha1"
"""The related BatchClusters' group in a request."""
ANSWER_KEYS = {"status", "resyncAfterSeconds", "finalized"}
Object = dict[str, Any]

ANSWERS: Counter[tuple[str, int]] = Counter()
"""Requests sent to the hook server in this run, by ``METHOD /path`` and answer status."""


# --- request bodies -----------------------------------------------------------------------


CLOSED_PORT = free_port()
"""The saved requests' SSH port here: a 127.0.0.1 port where nothing listens (it was free a
moment ago, and nothing here listens on it)."""


RAW: dict[str, bytes] = {
    "@raw:deep-1000@": b"[" * 1000 + b"]" * 1000,
    "@raw:deep-object-600@": b'{"a":' * 600 + b"1" + b"}" * 600,
    "@raw:deep-100000@": b"[" * 100_000 + b"]" * 100_000,
    "@raw:nan@": b"NaN",
    "@raw:infinity@": b"-Infinity",
    "@raw:1e400@": b"1e400",
    "@raw:400-digits@": b"9" * 400,
    "@raw:not-utf8@": b'"\xff\xfe\xc3("',
    "@raw:lone-surrogate@": b'"\\ud800"',
}
"""JSON text that Python cannot produce from a value: a request names one by its key, and
``encode`` puts the text in its place."""


def encode(body: object) -> bytes:
    data = json.dumps(body).encode()
    for token, raw in RAW.items():
        quoted = json.dumps(token).encode()
        if quoted in data:
            data = data.replace(quoted, raw)
    return data


@functools.cache
def saved_requests() -> dict[str, Object]:
    """The saved requests (examples/requests/*.json) as they are, by name."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(SAVED.glob("*.json"))}


def saved_names() -> list[str]:
    return list(saved_requests())


def saved_request(name: str, port: int = CLOSED_PORT) -> Object:
    """A saved request (examples/requests/NAME.json) whose cluster is 127.0.0.1:``port``: the
    host the BatchJob names, or the BatchCluster's, without its jump hosts."""
    body = copy.deepcopy(saved_requests()[name])
    parent = body.get("parent") or body["object"]
    for cluster in (parent["spec"]["cluster"], (parent.get("status") or {}).get("cluster")):
        if cluster and "name" not in cluster:
            cluster.update(host="127.0.0.1", port=port)
    for site in (body.get("related") or {}).get(SITE_GROUP, {}).values():
        site["spec"].update(host="127.0.0.1", port=port, jump=[])
    return body


def endpoint_of(name: str) -> str:
    """The hook a saved request is sent to."""
    return {"customize": "/customize", "finalize": "/finalize"}.get(name, "/sync")


# --- what every answer must be --------------------------------------------------------------


def secret_values(body: object) -> set[str]:
    """The values of the request's Secrets, as sent (base64) and decoded, that an answer must
    never contain: those of 8 characters or more that appear nowhere else in the request."""
    if not isinstance(body, dict):
        return set()
    related = body.get("related")
    group = related.get("Secret.v1") if isinstance(related, dict) else None
    if not isinstance(group, dict):
        return set()
    found: set[str] = set()
    for secret in group.values():
        data = secret.get("data") if isinstance(secret, dict) else None
        for value in data.values() if isinstance(data, dict) else ():
            if not isinstance(value, str):
                continue
            found.add(value)
            with contextlib.suppress(ValueError):  # not base64 (binascii.Error), or not UTF-8
                found.add(base64.b64decode(value, validate=True).decode())
    rest = encode({key: value for key, value in body.items() if key != "related"})
    elsewhere = rest.decode(errors="replace")
    return {value for value in found if len(value.strip()) >= 8
            and value not in elsewhere and json.dumps(value)[1:-1] not in elsewhere}


def media_type(response: Any) -> str:
    """The Content-Type of a response of requests, or of schemathesis (lists of values)."""
    value = response.headers.get("Content-Type") or response.headers.get("content-type") or ""
    return str(value[0] if isinstance(value, list) else value)


def check_answer(path: str, body: object, response: Any) -> None:
    """What an answer of a hook must be, whatever the request."""
    code, text = response.status_code, response.content.decode(errors="replace")
    where = f"POST {path} answered {code}: {text[:2000]}"
    assert code in (200, 400), where
    assert "Traceback" not in text, where
    for value in secret_values(body):
        assert value not in text, f"POST {path} answered a Secret's value: {value[:40]!r}"
    assert media_type(response).startswith("application/json"), where
    answer = json.loads(text)
    assert isinstance(answer, dict), where
    if code == 400:
        assert set(answer) == {"error", "message"}, where
        assert all(isinstance(value, str) and value for value in answer.values()), where
    elif path == "/customize":
        check_customize(answer, where)
    else:
        check_sync(body, answer, where)


CLUSTER_SCOPED = {("hpcbridge.io/v1alpha1", "batchclusters"), ("v1", "namespaces")}


def check_customize(answer: Object, where: str) -> None:
    assert set(answer) == {"relatedResources"}, where
    for rule in answer["relatedResources"]:
        kind = (rule.get("apiVersion"), rule.get("resource"))
        if kind in CLUSTER_SCOPED:  # the BatchCluster, the Namespace: by name only (v2)
            assert set(rule) == {"apiVersion", "resource", "names"}, where
            assert len(rule["names"]) == 1, where
        else:
            assert set(rule) == {"apiVersion", "resource", "namespace", "names"}, where
            assert kind in (("v1", "secrets"), ("v1", "configmaps"),
                            ("hpcbridge.io/v1alpha1", "batchjobs")), where  # spec.dependsOn
            assert isinstance(rule["namespace"], str) and rule["namespace"], where
        names = rule["names"]
        assert names and all(isinstance(name, str) and name for name in names), where


def check_sync(body: object, answer: Object, where: str) -> None:
    """A 200 sync or finalize answer: a status the CRD accepts, children that are Pods."""
    decorator = isinstance(body, dict) and "object" in body
    children = "attachments" if decorator else "children"
    assert set(answer) <= ANSWER_KEYS | {children}, where
    assert "status" in answer and children in answer, where
    violations = status_violations(answer["status"])
    assert not violations, f"{where}\nthe CRD rejects the status: {violations}"
    assert isinstance(answer[children], list), where
    observed = observed_pods(body, children)
    for child in answer[children]:
        assert isinstance(child, dict), where
        assert child.get("apiVersion") == "v1" and child.get("kind") == "Pod", where
        meta = child.get("metadata")
        assert isinstance(meta, dict), where
        assert isinstance(meta.get("name"), str) and meta["name"], where
        if child not in observed:
            check_remote_dirs(child, where)
    resync = answer.get("resyncAfterSeconds")
    if resync is not None:
        assert isinstance(resync, int | float) and not isinstance(resync, bool), where
        assert 0 < resync < 3600, where
    if isinstance(body, dict) and body.get("finalizing") is True:
        assert isinstance(answer.get("finalized"), bool), where
    else:
        assert "finalized" not in answer, where


def observed_pods(body: object, group: str) -> list[Any]:
    """The last-applied configurations of the request's Pods (an answer may declare one again
    as it was)."""
    pods = body.get(group) if isinstance(body, dict) else None
    pods = pods.get("Pod.v1") if isinstance(pods, dict) else None
    found = []
    for pod in pods.values() if isinstance(pods, dict) else ():
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        notes = meta.get("annotations") if isinstance(meta, dict) else None
        applied = notes.get(LAST_APPLIED) if isinstance(notes, dict) else None
        with contextlib.suppress(ValueError, RecursionError):
            found.append(json.loads(applied) if isinstance(applied, str) else None)
    return found


LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"


def check_remote_dirs(pod: Object, where: str) -> None:
    """A log Pod the hooks declare reads the job's output from an attempt's directory
    (``<workDir>/<namespace>/<name>/<uid>/attempt-<N>``, absolute or under the home): no
    ``..`` (or ``.``, or empty) step may lead it elsewhere."""
    for container in pod.get("spec", {}).get("containers", []):
        for arg in container.get("args", []):
            option, _, value = arg.partition("=")
            if option == "--remote-dir":
                steps = value.removeprefix("/").split("/")
                assert not {"", ".", ".."} & set(steps) and len(steps) >= 5, (
                    f"{where}\nthe log Pod reads {value!r}, not an attempt's directory")
                assert steps[-1].startswith("attempt-"), f"{where}\nthe log Pod reads {value!r}"


# --- the client ---------------------------------------------------------------------------


@dataclass
class Hooks:
    """A client of the hook server that checks every answer (``check_answer``) and that the
    server logged no traceback while answering."""

    url: str
    log: Path
    http: requests.Session = field(default_factory=requests.Session)
    _read: int = 0

    def post(self, path: str, body: object, *, content_type: str = "application/json"
             ) -> requests.Response:
        data = body if isinstance(body, bytes) else encode(body)
        response = self.http.post(f"{self.url}{path}", data=data, timeout=30,
                                  headers={"Content-Type": content_type})
        self.record("POST", path, response)
        check_answer(path, body, response)
        return response

    def record(self, method: str, path: str, response: Any) -> None:
        """Count the answer, and fail on what the server logged meanwhile, if a traceback."""
        ANSWERS[(f"{method} {path}", response.status_code)] += 1
        with self.log.open("rb") as log:
            log.seek(self._read)
            new = log.read().decode(errors="replace")
            self._read = log.tell()
        assert "Traceback" not in new, f"the hook server logged:\n{new[-4000:]}"


LOG_RECORD = re.compile(r"\n(?=\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")


def tracebacks_summary(log: str) -> str:
    """The distinct tracebacks of a server log: each by its exception and the last frames of
    the hooks' own code, with how often it came."""
    seen: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for record in LOG_RECORD.split(log):
        if "Traceback (most recent call last):" not in record:
            continue
        last = record.rsplit("Traceback (most recent call last):", 1)[1]
        lines = [line for line in last.splitlines() if line.strip()]
        frames = [line.strip() for line in lines if line.startswith("  File ")]
        own = [frame for frame in frames if "/hooks/" in frame] or frames
        error = next((line for line in reversed(lines) if not line.startswith(" ")), "?")
        key = f"{error.split(':')[0]} {own[-1] if own else ''}"
        seen[key] += 1
        shown.setdefault(key, "\n".join([*own[-3:], error[:300]]))
    return "the hook server logged tracebacks:\n" + "\n\n".join(
        f"({count}x)\n{shown[key]}" for key, count in seen.most_common())
