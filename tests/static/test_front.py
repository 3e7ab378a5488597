"""The TLS front as deploy/ runs it: nginx's configuration (deploy/base/nginx.conf) and its
container beside the hooks. nginx itself is run with this configuration by the integration
tests (tests/front.py, tests/integration/test_tls.py, test_slow_clients.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hooks.settings import Settings
from tests.front import nginx_binary, render
from tests.static.conftest import Render

REPO = Path(__file__).resolve().parents[2]
CONF = (REPO / "deploy/base/nginx.conf").read_text()


def directive(name: str) -> list[str]:
    """The values of every ``name ...;`` line of nginx.conf."""
    return re.findall(rf"^\s*{name} (.*);$", CONF, re.MULTILINE)


@pytest.mark.parametrize(("name", "value"), [
    pytest.param("ssl_verify_client", "on", id="client-certificate-required"),
    pytest.param("ssl_client_certificate", "/etc/hpcbridge/tls/ca.crt", id="client-ca"),
    pytest.param("ssl_certificate", "$hpcbridge_cert", id="certificate-read-per-handshake"),
    pytest.param("ssl_certificate_key", "$hpcbridge_key", id="key-read-per-handshake"),
    pytest.param("proxy_request_buffering", "on", id="whole-requests"),
    pytest.param("proxy_pass", "http://127.0.0.1:8080", id="upstream"),
    pytest.param("client_header_timeout", "10s", id="header-timeout"),
    pytest.param("client_body_timeout", "10s", id="body-timeout"),
    pytest.param("reset_timedout_connection", "on", id="cut-off"),
    pytest.param("server_tokens", "off", id="no-version"),
])
def test_nginx_setting(name: str, value: str) -> None:
    assert directive(name) == [value]


def test_the_body_cap_is_the_apps() -> None:
    (cap,) = directive("client_max_body_size")
    assert int(cap.removesuffix("m")) * 1024 * 1024 == Settings().max_body


FRONT_REFUSALS = {400, 413, 414, 494, 495, 496, 497, 501, 505}
"""Every status nginx answers a request with by itself, before gunicorn sees it: a malformed
request (400), a body above the cap (413), a request line or a head that does not fit its
buffers (414, and its own 494), no trusted client certificate or plain HTTP on the TLS port
(495 to 497), a transfer encoding it does not know (501), an HTTP version it does not speak
(505)."""


def error_pages() -> dict[int, str]:
    """The internal location each status of an ``error_page`` line goes to."""
    return {int(code): uri for line in directive("error_page")
            for *codes, uri in [line.split()] for code in codes}


def test_every_refusal_of_the_front_is_json() -> None:
    """nginx's own HTML page never answers: each refusal is a JSON ``{error, message}`` of its
    own location (tests/integration/test_slow_clients.py sends each to nginx itself)."""
    pages = error_pages()
    assert set(pages) == FRONT_REFUSALS
    for code, uri in pages.items():
        found = re.search(rf"location = {re.escape(uri)} {{\s*internal;\s*return (\d+) '(.*)';",
                          CONF)
        assert found, code
        assert set(json.loads(found.group(2))) == {"error", "message"}, code
    assert directive("default_type") == ["application/json"]


def test_the_certificate_variables_name_the_mounted_files() -> None:
    for variable, path in (("hpcbridge_cert", "tls.crt"), ("hpcbridge_key", "tls.key")):
        assert re.search(rf"map \$ssl_server_name \${variable} {{\s*default "
                         rf"/etc/hpcbridge/tls/{re.escape(path)};\s*}}", CONF)


def test_nginx_accepts_the_configuration(tmp_path: Path) -> None:
    """``nginx -t`` on the file as the plain-HTTP integration tests run it (their ports and
    paths; test_tls.py runs it with TLS)."""
    conf = render(tmp_path, port=8443, upstream=8080, tls=None)
    done = subprocess.run([nginx_binary(), "-t", "-e", "stderr", "-p", str(tmp_path), "-c",
                           str(conf)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def containers(render: Render) -> dict[str, dict[str, Any]]:
    (deployment,) = (doc for doc in render(REPO / "deploy/base") if doc["kind"] == "Deployment")
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}


def test_the_nginx_container_runs_the_configmap_read_only_and_unprivileged(
        render: Render) -> None:
    nginx = containers(render)["nginx"]
    assert nginx["image"].split(":")[0].endswith("nginx-unprivileged")
    assert nginx["securityContext"] == {"readOnlyRootFilesystem": True,
                                        "allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"]}}
    mounts = {m["name"]: m for m in nginx["volumeMounts"]}
    assert nginx["command"][-1] == mounts["nginx"]["mountPath"] + "/nginx.conf"
    assert mounts["tls"] == {"name": "tls", "mountPath": "/etc/hpcbridge/tls", "readOnly": True}
    assert mounts["nginx-tmp"]["mountPath"] == "/tmp"
    assert nginx["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    assert "listen 8443 ssl;" in CONF


def test_the_hooks_listen_where_nginx_forwards_and_the_probes_on_all_addresses(
        render: Render) -> None:
    env = {item["name"]: item["value"] for item in containers(render)["hooks"]["env"]}
    assert f"http://{env['HOST']}:{env['PORT']}" == directive("proxy_pass")[0]
    assert (env["HPCBRIDGE_METRICS_HOST"], env["HPCBRIDGE_METRICS_PORT"]) == ("0.0.0.0", "9090")
