"""The hook server as deploy/ runs it: nginx in front (deploy/base/nginx.conf) serving HTTPS
with a private CA and requiring Metacontroller's client certificate, the app requiring its
bearer token, and gunicorn's probes' port: /healthz and /metrics in plain HTTP, open to probes
that present no certificate, and no hooks.

gunicorn and nginx start as ``tests.driver.serving`` starts them; the CA and the certificates
are made here, in a temporary directory. No test cluster is needed: the hook
called is customize, which answers without contacting one.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.driver import REPO, free_port, serving
from tests.front import TlsFiles

CUSTOMIZE = (REPO / "examples/requests/customize.json").read_bytes()
JSON = {"Content-Type": "application/json"}
TOKEN = "6f1d0c5e9b7a4e2f8c3d1a0b9e8f7a6d"
SERVICE = "hpcbridge-hooks.hpcbridge-system.svc"


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path

    @property
    def pair(self) -> tuple[str, str]:
        return str(self.cert), str(self.key)


def issue(directory: Path, name: str, *, signer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]
          | None = None, usage: x509.ObjectIdentifier | None = None
          ) -> tuple[Issued, x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A key and certificate: a self-signed CA without ``signer``, else a leaf it signs for
    ``usage`` (server or client authentication)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_cert, issuer_key = signer or (None, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_cert.subject if issuer_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if issuer_cert is None:
        builder = (
            builder
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
        )
    else:
        ski = issuer_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        builder = (
            builder
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage or ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
        )
        if usage == ExtendedKeyUsageOID.SERVER_AUTH:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName(SERVICE), x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    cert = builder.sign(issuer_key, hashes.SHA256())
    issued = Issued(directory / f"{name}.crt", directory / f"{name}.key")
    write_atomically(issued.key, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    write_atomically(issued.cert, cert.public_bytes(serialization.Encoding.PEM))
    return issued, cert, key


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` at once, as Kubernetes updates a mounted Secret."""
    part = path.with_suffix(path.suffix + ".part")
    part.write_bytes(data)
    part.chmod(0o600)
    os.replace(part, path)


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Issued
    ca_cert: x509.Certificate
    ca_key: ec.EllipticCurvePrivateKey
    server: Issued
    client: Issued
    other_client: Issued
    token: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """The CA the hooks trust, their serving certificate, Metacontroller's client certificate,
    a client certificate from a CA they do not trust, and the bearer token's file."""
    directory = tmp_path_factory.mktemp("pki")
    ca, ca_cert, ca_key = issue(directory, "hpcbridge-ca")
    server, _, _ = issue(directory, "hooks", signer=(ca_cert, ca_key),
                         usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client, _, _ = issue(directory, "metacontroller", signer=(ca_cert, ca_key))
    _, other_cert, other_key = issue(directory, "other-ca")
    other_client, _, _ = issue(directory, "intruder", signer=(other_cert, other_key))
    token = directory / "token"
    token.write_text(TOKEN + "\n")  # as `kubectl create secret --from-file` may keep it
    return Pki(directory, ca, ca_cert, ca_key, server, client, other_client, token)


@dataclass(frozen=True)
class Server:
    url: str
    metrics_url: str
    port: int
    pki: Pki


HEADER_TIMEOUT = 2.0
"""nginx's client_header_timeout here: a stalled handshake is cut off after it."""
NO_CERTIFICATE = {"error": "Bad Request",
                  "message": "HTTPS with a client certificate that the hooks trust is required"}
"""nginx's answer to a client without a trusted certificate: the app is never asked."""


@pytest.fixture(scope="module")
def server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    metrics_port = free_port()
    log = tmp_path_factory.mktemp("hooks-tls") / "gunicorn.log"
    tls = TlsFiles(pki.server.cert, pki.server.key, pki.ca.cert)
    with serving(log, tls=tls, front={"client_header_timeout": f"{HEADER_TIMEOUT:g}s"},
                 HPCBRIDGE_LOG_IMAGE="hpcbridge:test", HPCBRIDGE_AUTH_TOKEN_FILE=str(pki.token),
                 HPCBRIDGE_METRICS_PORT=str(metrics_port)) as url:
        yield Server(url, f"http://127.0.0.1:{metrics_port}", int(url.rsplit(":", 1)[1]), pki)
    server_log = log.read_text()
    assert "Traceback" not in server_log, server_log


def customize(server: Server, *, cert: Issued | None = None,
              authorization: str | None = f"Bearer {TOKEN}") -> requests.Response:
    headers = {**JSON, **({"Authorization": authorization} if authorization else {})}
    return requests.post(f"{server.url}/customize", data=CUSTOMIZE, headers=headers,
                         verify=str(server.pki.ca.cert), cert=cert.pair if cert else None,
                         timeout=10)


def test_healthz_needs_no_client_certificate_nor_token_on_the_probes_port(
        server: Server) -> None:
    """As the kubelet's probe asks: plain HTTP, with no certificate and no token."""
    answer = requests.get(f"{server.metrics_url}/healthz", timeout=10)
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})


def test_the_hook_port_answers_healthz_to_a_client_with_a_certificate(server: Server) -> None:
    answer = requests.get(f"{server.url}/healthz", verify=str(server.pki.ca.cert),
                          cert=server.pki.client.pair, timeout=10)
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})


def test_the_server_proves_its_name_with_the_private_ca(server: Server) -> None:
    answer = requests.get(f"https://localhost:{server.port}/healthz",
                          verify=str(server.pki.ca.cert), cert=server.pki.client.pair,
                          timeout=10)
    assert answer.ok
    with pytest.raises(requests.exceptions.SSLError):  # the system's CAs do not know it
        requests.get(f"{server.url}/healthz", cert=server.pki.client.pair, timeout=10)


def test_a_hook_call_with_certificate_and_token_is_answered(server: Server) -> None:
    answer = customize(server, cert=server.pki.client)
    assert answer.status_code == 200, answer.text
    assert answer.json()["relatedResources"][0]["resource"] == "secrets"


@pytest.mark.parametrize("path", ["/customize", "/sync", "/finalize", "/healthz"])
def test_a_client_without_a_certificate_is_refused_by_the_front(server: Server,
                                                                  path: str) -> None:
    """nginx requires the certificate: such a client never reaches the app."""
    answer = requests.post(f"{server.url}{path}", data=CUSTOMIZE,
                           headers={**JSON, "Authorization": f"Bearer {TOKEN}"},
                           verify=str(server.pki.ca.cert), timeout=10)
    assert (answer.status_code, answer.json()) == (400, NO_CERTIFICATE)


def test_a_stalled_handshake_is_cut_off_after_the_header_timeout(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        raw.sendall(b"\x16\x03\x01")  # the start of a ClientHello, and nothing more
        assert raw.recv(1024) == b""  # closed by the server, no more than its timeout later


@pytest.mark.parametrize(("authorization", "message"), [
    pytest.param(None, "an Authorization: Bearer token is required", id="no-token"),
    pytest.param("Bearer not-the-token", "the bearer token is not the one the hooks accept",
                 id="wrong-token"),
    pytest.param(f"Basic {TOKEN}", "the bearer token is not the one the hooks accept",
                 id="wrong-scheme"),
])
def test_a_hook_call_without_the_token_is_refused(
        server: Server, authorization: str | None, message: str) -> None:
    for hook in ("customize", "sync", "finalize"):
        headers = {**JSON, **({"Authorization": authorization} if authorization else {})}
        answer = requests.post(f"{server.url}/{hook}", data=CUSTOMIZE, headers=headers,
                               verify=str(server.pki.ca.cert), cert=server.pki.client.pair,
                               timeout=10)
        assert answer.status_code == 401, hook
        assert answer.json() == {"error": "unauthorized", "message": message}
        assert answer.headers["WWW-Authenticate"] == 'Bearer realm="hpcbridge"'


def test_a_client_certificate_from_another_ca_is_refused_by_the_front(server: Server) -> None:
    answer = customize(server, cert=server.pki.other_client)
    assert (answer.status_code, answer.json()) == (400, NO_CERTIFICATE)


def test_the_serving_certificate_is_no_client_certificate(server: Server) -> None:
    """Signed by the right CA, but for server authentication only (its extended key usage)."""
    answer = customize(server, cert=server.pki.server)
    assert (answer.status_code, answer.json()) == (400, NO_CERTIFICATE)


def test_plain_http_to_the_tls_port_is_refused_by_the_front(server: Server) -> None:
    answer = requests.post(f"http://127.0.0.1:{server.port}/customize", data=CUSTOMIZE,
                           headers={**JSON, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert (answer.status_code, answer.json()) == (400, NO_CERTIFICATE)


def metric(text: str, name: str, labels: str) -> float:
    match = re.search(rf"^{re.escape(name)}{{{re.escape(labels)}}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_the_metrics_port_serves_the_hooks_registry_in_plain_http(server: Server) -> None:
    before = requests.get(f"{server.metrics_url}/metrics", timeout=10)
    assert customize(server, cert=server.pki.client).ok
    after = requests.get(f"{server.metrics_url}/metrics", timeout=10)
    assert before.status_code == after.status_code == 200
    assert 'hpcbridge_build_info{python=' in after.text
    labels = 'hook="customize",outcome="ok"'
    counted = metric(after.text, "hpcbridge_hook_requests_total", labels)
    assert counted == metric(before.text, "hpcbridge_hook_requests_total", labels) + 1


def test_the_metrics_port_serves_no_hooks(server: Server) -> None:
    """Not even with the token: the hooks are served behind the front only."""
    answer = requests.post(f"{server.metrics_url}/customize", data=CUSTOMIZE,
                           headers={**JSON, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert answer.status_code == 404
    assert answer.json()["message"] == "the probes' port serves /healthz and /metrics only"


def served_certificate(server: Server) -> x509.Certificate:
    context = ssl.create_default_context(cafile=str(server.pki.ca.cert))
    context.load_cert_chain(*server.pki.client.pair)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_a_renewed_serving_certificate_is_used_without_a_restart(server: Server) -> None:
    """As cert-manager renews the Secret and the kubelet updates the mounted files."""
    first = served_certificate(server)
    pki = server.pki
    renewed_dir = pki.directory / "renewed"
    renewed_dir.mkdir()
    renewed, cert, _ = issue(renewed_dir, "hooks", signer=(pki.ca_cert, pki.ca_key),
                             usage=ExtendedKeyUsageOID.SERVER_AUTH)
    write_atomically(pki.server.key, renewed.key.read_bytes())
    write_atomically(pki.server.cert, renewed.cert.read_bytes())
    assert served_certificate(server).serial_number == cert.serial_number != first.serial_number
    assert customize(server, cert=pki.client).ok


def test_the_probes_port_on_the_hook_port_stops_the_server() -> None:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("HPCBRIDGE_METRICS_")}
    done = subprocess.run([sys.executable, "-c", "import hooks.gunicorn_conf"], cwd=REPO,
                          env={**env, "HPCBRIDGE_METRICS_PORT": "8080", "PORT": "8080"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    message = "HPCBRIDGE_METRICS_PORT='8080' is not a free port number beside PORT"
    assert f"ValueError: {message}" in done.stderr
