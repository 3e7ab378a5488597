"""hooks.auth: the bearer token a hook call must bring and the probes' port it must not come
to, and the app's check of them (every view but /healthz and /metrics). TLS and the client
certificate, nginx's, are tested end to end in tests/integration/test_tls.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from hooks import auth
from hooks.app import create_app
from tests.unit.conftest import runtime

REPO = Path(__file__).resolve().parents[3]
CUSTOMIZE = json.loads((REPO / "examples/requests/customize.json").read_text())
TOKEN = b"0123456789abcdef"


Connection = dict[str, Any]
"""What the app sees of a connection: the WSGI environ keys gunicorn sets for it."""

HOOK_PORT: Connection = {"SERVER_PORT": "8080"}
PROBES_PORT: Connection = {"SERVER_PORT": "9090"}


@pytest.mark.parametrize(("header", "allowed"), [
    pytest.param("Bearer 0123456789abcdef", True, id="token"),
    pytest.param("bearer 0123456789abcdef", True, id="scheme-any-case"),
    pytest.param("  Bearer   0123456789abcdef  ", True, id="spaces"),
    pytest.param(None, False, id="no-header"),
    pytest.param("", False, id="empty"),
    pytest.param("Bearer", False, id="no-credentials"),
    pytest.param("Bearer 0123456789abcde", False, id="prefix"),
    pytest.param("Bearer 0123456789abcdef0", False, id="longer"),
    pytest.param("Basic 0123456789abcdef", False, id="basic"),
    pytest.param("0123456789abcdef", False, id="bare-token"),
    pytest.param("Bearer 0123456789abcdeé", False, id="latin-1"),
    pytest.param("Bearer 0123456789abcde\u20ac", False, id="not-latin-1"),
])
def test_token_allows(header: str | None, allowed: bool) -> None:
    assert auth.token_allows(TOKEN, header) is allowed


@pytest.mark.parametrize("header", [None, "", "Bearer anything", "Basic x"])
def test_without_a_configured_token_every_call_is_allowed(header: str | None) -> None:
    assert auth.token_allows(None, header) is True


def test_the_token_file_is_read_without_surrounding_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"  " + TOKEN + b"\n")
    assert auth.read_token(str(path)) == TOKEN


@pytest.mark.parametrize(("content", "message"), [
    pytest.param(b"\n", "is empty", id="empty"),
    pytest.param(None, "cannot be read: No such file or directory", id="missing"),
])
def test_an_unusable_token_file_stops_the_app(
        tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=f"^HPCBRIDGE_AUTH_TOKEN_FILE='{path}' {message}$"):
        auth.read_token(str(path))


@pytest.mark.parametrize(("env", "port"), [
    pytest.param({}, None, id="unset"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": "9090"}, "9090", id="set"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": "09090"}, "9090", id="leading-zero"),
])
def test_probes_port(env: dict[str, str], port: str | None) -> None:
    assert auth.probes_port(env) == port


@pytest.mark.parametrize("env", [
    pytest.param({"HPCBRIDGE_METRICS_PORT": "8080"}, id="the-hook-port"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": "9090", "PORT": "9090"}, id="the-hook-port-set"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": "0"}, id="zero"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": "65536"}, id="too-large"),
    pytest.param({"HPCBRIDGE_METRICS_PORT": "metrics"}, id="a-name"),
])
def test_a_probes_port_that_is_no_free_port_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="is not a free port number beside PORT"):
        auth.probes_port(env)


def test_client_requirements_from_env(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(TOKEN)
    assert auth.ClientRequirements.from_env({}) == auth.ClientRequirements(None, probes_port=None)
    required = auth.ClientRequirements.from_env({"HPCBRIDGE_AUTH_TOKEN_FILE": str(path),
                                   "HPCBRIDGE_METRICS_PORT": "9090"})
    assert required == auth.ClientRequirements(TOKEN, probes_port="9090")
    assert TOKEN.decode() not in repr(required)


def test_the_refusal() -> None:
    required = auth.ClientRequirements(TOKEN, probes_port="9090")
    assert required.refusal("Bearer " + TOKEN.decode()) is None
    assert required.refusal(None) == "an Authorization: Bearer token is required"
    assert required.refusal("Bearer x") == "the bearer token is not the one the hooks accept"
    assert auth.ClientRequirements().refusal(None) is None
    assert required.on_probes_port(PROBES_PORT)
    assert not required.on_probes_port(HOOK_PORT)
    assert auth.ClientRequirements().on_probes_port(PROBES_PORT) is False


# --- the app -------------------------------------------------------------------------------


@pytest.fixture
def secured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    """An app built with both settings, as deploy/ runs it."""
    path = tmp_path / "token"
    path.write_bytes(TOKEN + b"\n")
    monkeypatch.setenv("HPCBRIDGE_AUTH_TOKEN_FILE", str(path))
    monkeypatch.setenv("HPCBRIDGE_METRICS_PORT", "9090")
    return create_app(runtime=runtime()).test_client()


def call(client: FlaskClient, path: str, *, connection: Connection = HOOK_PORT,
         authorization: str | None = "Bearer " + TOKEN.decode()) -> Any:
    headers = {"Authorization": authorization} if authorization else {}
    return client.post(path, json=CUSTOMIZE, headers=headers,
                       base_url=f"http://localhost:{connection['SERVER_PORT']}")


def test_the_app_answers_a_call_with_the_token(secured: FlaskClient) -> None:
    answer = call(secured, "/customize")
    assert answer.status_code == 200
    assert answer.json["relatedResources"][0]["resource"] == "secrets"


@pytest.mark.parametrize("path", ["/customize", "/sync", "/finalize", "/nowhere"])
@pytest.mark.parametrize("authorization", [
    pytest.param(None, id="no-token"),
    pytest.param("Bearer wrong", id="wrong-token"),
])
def test_the_app_refuses_other_calls_with_a_json_401(
        secured: FlaskClient, path: str, authorization: str | None) -> None:
    answer = call(secured, path, authorization=authorization)
    assert answer.status_code == 401
    assert answer.json["error"] == "unauthorized"
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="hpcbridge"'


def hook_calls(client: FlaskClient, hook: str) -> dict[str, float]:
    """``hpcbridge_hook_requests_total`` of ``hook`` by outcome."""
    page = client.get("/metrics", base_url="http://localhost:9090").get_data(as_text=True)
    found = re.findall(rf'^hpcbridge_hook_requests_total{{hook="{hook}",outcome="(\w+)"}} (\S+)$',
                       page, re.MULTILINE)
    return {outcome: float(value) for outcome, value in found}


@pytest.mark.parametrize("authorization", [
    pytest.param(None, id="no-token"),
    pytest.param("Bearer wrong", id="wrong-token"),
])
def test_a_refused_call_counts_as_unauthorized_not_as_an_error(
        secured: FlaskClient, authorization: str | None) -> None:
    """``error`` is a 5xx, the hooks' own failure (alert HpcbridgeHookErrors); a call without
    the token is counted apart (alert HpcbridgeHookCallsUnauthorized)."""
    assert call(secured, "/sync", authorization=authorization).status_code == 401
    assert hook_calls(secured, "sync") == {"ok": 0, "bad_request": 0, "unauthorized": 1,
                                           "error": 0}


@pytest.mark.parametrize("path", ["/customize", "/sync", "/finalize"])
def test_the_probes_port_serves_no_hooks_even_with_the_token(secured: FlaskClient,
                                                              path: str) -> None:
    answer = call(secured, path, connection=PROBES_PORT)
    assert answer.status_code == 404
    assert answer.json == {"error": "not found",
                           "message": "the probes' port serves /healthz and /metrics only"}


@pytest.mark.parametrize("path", ["/healthz", "/metrics"])
def test_healthz_and_metrics_stay_open(secured: FlaskClient, path: str) -> None:
    answer = secured.get(path, base_url="http://localhost:9090")
    assert answer.status_code == 200


def test_without_the_settings_the_app_asks_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run`: plain HTTP, no token."""
    monkeypatch.delenv("HPCBRIDGE_AUTH_TOKEN_FILE", raising=False)
    monkeypatch.delenv("HPCBRIDGE_METRICS_PORT", raising=False)
    client = create_app(runtime=runtime()).test_client()
    assert client.post("/customize", json=CUSTOMIZE).status_code == 200


def test_an_empty_token_file_stops_the_app(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("")
    monkeypatch.setenv("HPCBRIDGE_AUTH_TOKEN_FILE", str(tmp_path / "token"))
    with pytest.raises(ValueError, match="is empty"):
        create_app(runtime=runtime())
