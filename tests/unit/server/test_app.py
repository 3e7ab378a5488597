"""The Flask app end to end with Flask's test client and no SSH: sessions are fakes that either
must not be used or fail like an unreachable cluster. Every well-formed request gets a 200 with
a complete status and children; a malformed one a JSON 400; nothing ever leaks a traceback or
a Secret value."""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from hooks.app import create_app
from hooks.settings import Settings
from hooks.ssh.client import Target
from hooks.ssh.errors import ClusterUnreachable
from tests.unit.conftest import NOW, FakePool, runtime

REPO = Path(__file__).resolve().parents[3]
REQUESTS = REPO / "examples" / "requests"


def load(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REQUESTS / f"{name}.json").read_text())
    return body


class NoCluster(FakePool):
    """A pool for answers that must not touch the cluster."""

    @contextmanager
    def open(self, target: Target, credentials: object, *, deadline: object) -> Iterator[Any]:
        self.hosts.append(target.host)
        raise AssertionError(f"the cluster {target.host} was contacted")
        yield  # pragma: no cover


class Unreachable(FakePool):
    """A pool for a cluster that does not answer."""

    @contextmanager
    def open(self, target: Target, credentials: object, *, deadline: object) -> Iterator[Any]:
        self.hosts.append(target.host)
        raise ClusterUnreachable(target.host, f"connection to {target.host} timed out")
        yield  # pragma: no cover


def client(pool: FakePool, now: datetime.datetime = NOW, **settings: Any) -> FlaskClient:
    """An app whose runtime opens connections through ``pool``."""
    return create_app(runtime=runtime(pool, now=now, **settings)).test_client()


def post(c: FlaskClient, path: str, body: Any) -> tuple[int, dict[str, Any], str]:
    answer = c.post(path, json=body)
    text = answer.get_data(as_text=True)
    assert answer.mimetype == "application/json"
    return answer.status_code, json.loads(text), text


def secret_values(body: dict[str, Any]) -> list[str]:
    found = []
    for secret in (body.get("related") or {}).get("Secret.v1", {}).values():
        for value in secret.get("data", {}).values():
            found.append(value)
            with contextlib.suppress(ValueError):
                found += base64.b64decode(value, validate=True).decode().strip().splitlines()
    return [value for value in found if len(value) > 3]


def assert_clean(text: str, request: dict[str, Any]) -> None:
    assert "Traceback" not in text
    assert 'File "' not in text
    for value in secret_values(request):
        assert value not in text


def condition(answer: dict[str, Any], kind: str) -> dict[str, Any]:
    found, = (c for c in answer["status"]["conditions"] if c["type"] == kind)
    return found  # type: ignore[no-any-return]


def status_schema() -> dict[str, Any]:
    crd = yaml.safe_load((REPO / "crds" / "batchjob.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]  # type: ignore[no-any-return]


def assert_declared(status: dict[str, Any]) -> None:
    schema = status_schema()
    assert set(status) <= set(schema["properties"])
    condition_keys = set(schema["properties"]["conditions"]["items"]["properties"])
    for item in status["conditions"]:
        assert set(item) <= condition_keys


# --- malformed requests -------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/sync", "/finalize", "/customize"])
@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        pytest.param("{not json", "application/json", id="broken-json"),
        pytest.param("", "application/json", id="empty"),
        pytest.param("null", "application/json", id="null"),
        pytest.param("[]", "application/json", id="list"),
        pytest.param('"sync"', "application/json", id="string"),
        pytest.param('{"parent": 1}', "application/json", id="parent-not-an-object"),
        pytest.param('{"parent": {"metadata": {"name": "a", "namespace": "b"}}}',
                     "application/json", id="no-uid"),
        pytest.param('{"parent": {}}', "text/plain", id="not-json-content-type"),
    ],
)
def test_malformed_request_is_a_json_400(path: str, data: str, content_type: str) -> None:
    answer = client(NoCluster()).post(path, data=data, content_type=content_type)
    assert answer.status_code == 400
    body = answer.get_json()
    assert body["error"] == "bad request" and body["message"]
    assert "Traceback" not in answer.get_data(as_text=True)


@pytest.mark.parametrize(("content_type", "said"), [
    (None, "the request has no Content-Type: application/json header"),
    ("text/plain", "the request's Content-Type is 'text/plain', not application/json"),
    ("application/x-www-form-urlencoded",
     "the request's Content-Type is 'application/x-www-form-urlencoded', not application/json"),
])
def test_a_json_body_without_the_json_content_type_says_what_is_missing(
    content_type: str | None, said: str
) -> None:
    # It was answered "the request body must be JSON", which it was.
    headers = {"Content-Type": content_type} if content_type else {}
    answer = client(NoCluster()).post("/sync", data=json.dumps(load("sync-running")),
                                      headers=headers)
    assert (answer.status_code, answer.get_json()["message"]) == (400, said)


@pytest.mark.parametrize("data", ["{not json", "", "null"])
def test_a_body_that_is_no_json_object_is_named_so(data: str) -> None:
    answer = client(NoCluster()).post("/sync", data=data, content_type="application/json")
    assert (answer.status_code, answer.get_json()["message"]) == (
        400, "the request body is not a JSON object")


def test_unexpected_error_is_a_json_500_without_details() -> None:
    crash = RuntimeError("password=hunter2 in a crash")
    answer = client(FakePool(error=crash)).post("/sync", json=load("sync-running"))
    text = answer.get_data(as_text=True)
    assert answer.status_code == 500
    assert answer.get_json()["error"] == "internal error"
    assert "hunter2" not in text and "Traceback" not in text and "RuntimeError" not in text


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [pytest.param("get", "/sync", 405, id="get-sync"),
     pytest.param("post", "/nowhere", 404, id="unknown-path")],
)
def test_http_errors_are_json(method: str, path: str, code: int) -> None:
    answer = getattr(client(NoCluster()), method)(path)
    assert answer.status_code == code
    assert answer.get_json()["error"]


def test_healthz() -> None:
    answer = client(NoCluster()).get("/healthz")
    assert (answer.status_code, answer.get_json()) == (200, {"status": "ok"})


def test_metrics_lists_every_hook_and_cache_series_from_the_start() -> None:
    page = client(NoCluster()).get("/metrics").get_data(as_text=True)
    for hook in ("customize", "sync", "finalize"):
        for outcome in ("ok", "bad_request", "unauthorized", "error"):
            assert f'hpcbridge_hook_requests_total{{hook="{hook}",outcome="{outcome}"}}' in page
        assert f'hpcbridge_hook_duration_seconds_count{{hook="{hook}"}}' in page
    for result in ("hit", "miss", "wait", "single", "failed"):
        assert f'hpcbridge_status_cache_total{{result="{result}"}}' in page


def test_metrics_are_served_as_prometheus_text_with_one_charset() -> None:
    answer = client(NoCluster()).get("/metrics")
    assert answer.headers["Content-Type"] == "text/plain; version=1.0.0; charset=utf-8"


def test_a_hook_call_is_counted_by_outcome() -> None:
    app = client(NoCluster())

    def count(outcome: str) -> float:
        series = f'hpcbridge_hook_requests_total{{hook="sync",outcome="{outcome}"}} '
        page = app.get("/metrics").get_data(as_text=True)
        return float(next(line for line in page.splitlines() if line.startswith(series))
                     .rsplit(" ", 1)[1])

    before = count("bad_request"), count("ok")
    assert app.post("/sync", data="{", content_type="application/json").status_code == 400
    assert (count("bad_request"), count("ok")) == (before[0] + 1, before[1])


def test_an_unusable_key_is_no_refused_login() -> None:
    """The saved request's placeholder key cannot be loaded: the connect fails before any host
    is dialled, so it is counted as ``invalid_secret``, never as ``refused`` (the host's answer,
    which keeps HpcbridgeClusterUnreachable quiet)."""
    app = create_app(Settings(log_image="hpcbridge:test")).test_client()  # the real SSH pool
    status = app.post("/sync", json=load("sync-first")).get_json()["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "InvalidSecret")
    page = app.get("/metrics").get_data(as_text=True)
    connects = [line for line in page.splitlines()
                if line.startswith("hpcbridge_ssh_connects_total{")]
    assert connects == [
        'hpcbridge_ssh_connects_total{cluster="unverified",outcome="invalid_secret"} 1.0']


# --- customize ----------------------------------------------------------------------------


def test_customize_asks_for_the_secret_named_in_the_spec() -> None:
    code, body, _ = post(client(NoCluster()), "/customize", load("customize"))
    assert code == 200
    assert body == {"relatedResources": [{"apiVersion": "v1", "resource": "secrets",
                                          "namespace": "research", "names": ["hpc-login"]}]}


@pytest.mark.parametrize(
    "spec",
    [pytest.param({}, id="no-spec-fields"), pytest.param({"cluster": {}}, id="no-secret-ref"),
     pytest.param({"cluster": {"secretRef": {"name": ""}}}, id="empty-name")],
)
def test_customize_without_a_secret_name_asks_for_nothing(spec: dict[str, Any]) -> None:
    request = load("customize")
    request["parent"]["spec"] = spec
    code, body, _ = post(client(NoCluster()), "/customize", request)
    assert (code, body) == (200, {"relatedResources": []})


# --- answers that need no cluster ---------------------------------------------------------


def first_sync(**spec: Any) -> dict[str, Any]:
    request = load("sync-first")
    request["parent"]["spec"].update(spec)
    return request


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        pytest.param(first_sync(slurm={"extraArgs": ["--output=/tmp/x"]}), "spec.slurm.extraArgs",
                     id="reserved-option"),
        pytest.param(first_sync(script="echo no shebang"), "spec.script", id="no-shebang"),
        pytest.param(first_sync(resources={"timeLimit": "1x"}), "spec.resources.timeLimit",
                     id="bad-time-limit"),
        pytest.param(first_sync(backend="pbs"), "spec.backend", id="unknown-backend"),
        pytest.param(first_sync(cluster={"host": "", "secretRef": {"name": "hpc-login"}}),
                     "spec.cluster.host", id="no-host"),
    ],
)
def test_invalid_spec_fails_without_cluster_contact(
    request_body: dict[str, Any], field: str
) -> None:
    sessions = NoCluster()
    code, body, text = post(client(sessions), "/sync", request_body)
    assert code == 200
    assert (body["status"]["phase"], body["status"]["reason"]) == ("Failed", "InvalidSpec")
    assert body["status"]["message"].startswith(field)
    assert condition(body, "Failed")["status"] == "True"
    assert body["children"] == []
    assert "resyncAfterSeconds" not in body
    assert sessions.hosts == []
    assert_clean(text, request_body)
    assert_declared(body["status"])


def test_invalid_spec_answer_is_stable_across_syncs() -> None:
    request = first_sync(script="echo no shebang")
    c = client(NoCluster())
    _, first, _ = post(c, "/sync", request)
    request["parent"]["status"] = first["status"]
    _, second, _ = post(c, "/sync", request)
    assert second == first


def without_secret(name: str) -> dict[str, Any]:
    request = load(name)
    request["related"] = {"Secret.v1": {}}
    return request


def htcondor_first_sync() -> dict[str, Any]:
    example = next(doc for doc in yaml.safe_load_all((REPO / "examples/hello-htcondor.yaml")
                                                     .read_text()) if doc)
    request = without_secret("sync-first")
    request["parent"]["spec"] = example["spec"]
    return request


def secret_in_other_namespace() -> dict[str, Any]:
    request = load("sync-v2")
    request["parent"].pop("status")
    request["children"] = {"Pod.v1": {}}
    secrets = request["related"]["Secret.v1"]
    secrets["elsewhere/hpc-login"] = secrets.pop("research/hpc-login")
    return request


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(without_secret("sync-first"), id="composite"),
        pytest.param(without_secret("decorator-sync"), id="decorator"),
        pytest.param(secret_in_other_namespace(), id="v2-other-namespace"),
        pytest.param(htcondor_first_sync(), id="htcondor"),
    ],
)
def test_missing_secret_waits_in_pending(request_body: dict[str, Any]) -> None:
    sessions = NoCluster()
    code, body, text = post(client(sessions), "/sync", request_body)
    assert code == 200
    assert (body["status"]["phase"], body["status"]["reason"]) == ("Pending", "SecretNotFound")
    assert "hpc-login" in body["status"]["message"] or "htc-login" in body["status"]["message"]
    assert body["status"]["jobIDs"] == []
    assert body.get("children", body.get("attachments")) == []
    assert body["resyncAfterSeconds"] > 0
    assert sessions.hosts == []
    assert_clean(text, request_body)
    assert_declared(body["status"])


@pytest.mark.parametrize(
    ("key", "value", "mentions"),
    [
        pytest.param("known_hosts", None, "known_hosts", id="no-known-hosts"),
        pytest.param("username", None, "username", id="no-username"),
        pytest.param("ssh-privatekey", "%%%not-base64", "ssh-privatekey", id="bad-base64"),
    ],
)
def test_invalid_secret_waits_in_pending(key: str, value: str | None, mentions: str) -> None:
    request = load("sync-first")
    data = request["related"]["Secret.v1"]["hpc-login"]["data"]
    if value is None:
        del data[key]
    else:
        data[key] = value
    sessions = NoCluster()
    code, body, text = post(client(sessions), "/sync", request)
    assert code == 200
    assert (body["status"]["phase"], body["status"]["reason"]) == ("Pending", "InvalidSecret")
    assert mentions in body["status"]["message"]
    assert sessions.hosts == []
    assert_clean(text, request)


# --- an unreachable cluster ---------------------------------------------------------------


def running(follow: bool) -> dict[str, Any]:
    request = load("sync-running")
    request["parent"]["spec"]["logs"]["follow"] = follow
    return request


@pytest.mark.parametrize("follow", [pytest.param(True, id="follow"),
                                    pytest.param(False, id="no-follow")])
def test_unreachable_cluster_keeps_the_running_status_and_the_log_pod(follow: bool) -> None:
    request = running(follow)
    previous = copy.deepcopy(request["parent"]["status"])
    sessions = Unreachable()
    # The saved request's log Pod was built with make run's image, so only a server with
    # that image carries it over.
    code, body, text = post(client(sessions, log_image=Settings().log_image), "/sync", request)
    assert code == 200
    status = body["status"]
    assert status["phase"] == "Running"
    assert status["reason"] == "ClusterUnreachable"
    assert "login.hpc.example.org" in status["message"]
    assert (status["jobIDs"], status["attempt"], status["startTime"]) == (
        previous["jobIDs"], previous["attempt"], previous["startTime"]
    )
    reachable = condition(body, "ClusterReachable")
    assert (reachable["status"], reachable["reason"]) == ("False", "ClusterUnreachable")
    assert reachable["lastTransitionTime"] == "2026-11-22T10:05:00Z"
    assert condition(body, "Running")["lastTransitionTime"] == "2026-11-22T10:00:05Z"
    pods = body["children"]
    assert [p["metadata"]["name"] for p in pods] == ["hello-logs"]
    assert status["logsPod"] == "hello-logs"
    if follow:
        assert pods[0]["spec"]["containers"][0]["image"] == Settings().log_image
    else:
        applied = request["children"]["Pod.v1"]["hello-logs"]["metadata"]["annotations"]
        assert pods[0] == json.loads(applied["metacontroller.k8s.io/last-applied-configuration"])
    assert 0 < body["resyncAfterSeconds"] <= 140
    assert sessions.hosts == ["login.hpc.example.org"]
    assert_clean(text, request)
    assert_declared(status)


def test_unreachable_cluster_on_first_sync_waits_in_pending() -> None:
    request = load("sync-first")
    code, body, text = post(client(Unreachable()), "/sync", request)
    assert code == 200
    assert (body["status"]["phase"], body["status"]["reason"]) == ("Pending",
                                                                    "ClusterUnreachable")
    assert condition(body, "ClusterReachable")["status"] == "False"
    assert body["children"] == []
    assert_clean(text, request)


def test_unreachable_cluster_in_the_decorator_shape() -> None:
    request = load("decorator-sync")
    code, body, text = post(client(Unreachable()), "/sync", request)
    assert code == 200
    assert "attachments" in body and "children" not in body
    assert body["status"]["observedGeneration"] == 1
    assert_clean(text, request)


def test_composite_answer_leaves_observed_generation_to_metacontroller() -> None:
    code, body, _ = post(client(Unreachable()), "/sync", load("sync-running"))
    assert code == 200 and "observedGeneration" not in body["status"]


def test_a_finished_batchjob_is_answered_without_the_cluster() -> None:
    request = load("sync-running")
    request["parent"]["status"].update(phase="Succeeded", active=0, succeeded=1, exitCode=0,
                                       completionTime="2026-11-22T10:01:00Z")
    sessions = NoCluster()
    code, body, _ = post(client(sessions), "/sync", request)
    assert code == 200
    assert (body["status"]["phase"], body["status"]["exitCode"]) == ("Succeeded", 0)
    assert [p["metadata"]["name"] for p in body["children"]] == ["hello-logs"]
    assert "resyncAfterSeconds" not in body
    assert sessions.hosts == []


def test_an_active_attempt_is_tracked_where_it_was_submitted() -> None:
    request = load("sync-running")
    request["parent"]["metadata"]["generation"] = 2
    request["parent"]["spec"]["cluster"]["host"] = "login2.hpc.example.org"
    sessions = Unreachable()
    post(client(sessions), "/sync", request)
    assert sessions.hosts == ["login.hpc.example.org"]


# --- finalize -----------------------------------------------------------------------------


def test_finalize_with_skip_cancel_finishes_at_once() -> None:
    request = load("finalize")
    request["parent"]["metadata"]["annotations"] = {"hpcbridge.io/skip-cancel": "true"}
    sessions = NoCluster()
    code, body, text = post(client(sessions), "/finalize", request)
    assert (code, body["finalized"]) == (200, True)
    assert "resyncAfterSeconds" not in body  # as every finished finalize answers
    assert sessions.hosts == []
    assert_clean(text, request)


@pytest.mark.parametrize(
    ("now", "finalized"),
    [
        pytest.param(NOW, False, id="within-the-grace"),
        pytest.param(datetime.datetime(2026, 11, 22, 10, 13, 0, tzinfo=datetime.UTC), True,
                     id="after-the-grace"),
    ],
)
def test_finalize_with_an_unreachable_cluster(now: datetime.datetime, finalized: bool) -> None:
    request = load("finalize")
    code, body, text = post(client(Unreachable(), now=now), "/finalize", request)
    assert (code, body["finalized"]) == (200, finalized)
    assert body["status"]["phase"] == "Running"
    if finalized:
        assert "resyncAfterSeconds" not in body
    else:
        assert condition(body, "ClusterReachable")["status"] == "False"
        assert body["resyncAfterSeconds"] > 0
    assert_clean(text, request)
    assert_declared(body["status"])


def test_finalize_of_a_never_submitted_batchjob_without_its_secret() -> None:
    request = load("finalize")
    request["parent"].pop("status")
    request["related"] = {"Secret.v1": {}}
    sessions = NoCluster()
    code, body, _ = post(client(sessions), "/finalize", request)
    assert (code, body["finalized"]) == (200, True)
    assert sessions.hosts == []


def test_customize_also_asks_for_the_secret_of_the_running_attempt() -> None:
    request = load("sync-running")
    request["parent"]["spec"]["cluster"]["secretRef"]["name"] = "new-login"
    code, body, _ = post(client(NoCluster()), "/customize",
                         {"controller": request["controller"], "parent": request["parent"]})
    assert code == 200
    assert body["relatedResources"][0]["names"] == ["hpc-login", "new-login"]


def test_logs_pod_off_declares_no_log_pod_even_when_one_exists() -> None:
    request = load("sync-running")
    request["parent"]["status"].update(phase="Succeeded", active=0, succeeded=1)
    request["parent"]["spec"]["logs"] = {"pod": False, "follow": False}
    assert request["children"]["Pod.v1"]  # the saved request observes a log Pod
    code, body, _ = post(client(NoCluster()), "/sync", request)
    assert (code, body["children"]) == (200, [])
    assert "logsPod" not in body["status"]


def test_a_body_over_the_limit_is_a_json_413_without_being_read() -> None:
    app = client(NoCluster(), max_body=64 * 1024)
    big = json.dumps({**load("sync-first"), "padding": "x" * 70_000})
    answer = app.post("/sync", data=big, content_type="application/json")
    assert answer.status_code == 413
    assert answer.get_json()["error"] == "Request Entity Too Large"
    assert app.post("/customize", json=load("customize")).status_code == 200
