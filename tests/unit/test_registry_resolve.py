"""The registry client against a real HTTPS server on 127.0.0.1 answering as a registry does
(distribution's answers, byte for byte where the digest depends on them): a tag to its digest,
an index to the platform's manifest, Basic and Bearer logins, what a registry refuses, bytes
that do not match their digest, bodies past the cap — and the way into the cluster's network
closed: a registry at an address that is not public, by name or by the address a public name
resolves to, a realm or a redirect elsewhere, all refused before any request reaches them
unless the BatchCluster lists the registry."""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hooks.core.spec.manifests import DOCKER_MANIFEST, OCI_CONFIG, OCI_INDEX, OCI_MANIFEST
from hooks.core.values.image import ImageConfig, parse_reference
from hooks.registry import resolve as registry
from hooks.registry.answers import RegistryError

USER, PASSWORD, TOKEN = "lab", "s3cret-pa55", "tok.en-1"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def document(value: object) -> bytes:
    """JSON as a registry stores it: the exact bytes are what the digest covers."""
    return json.dumps(value, indent=3).encode()


CONFIG = document({
    "architecture": "amd64", "os": "linux", "created": "2026-11-22T10:00:00Z",
    "config": {"Entrypoint": ["/bin/echo", "hello from the image"],
               "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                       "GREETING=hi"], "WorkingDir": "/"},
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "1" * 64]}})
ARM_CONFIG = CONFIG.replace(b'"amd64"', b'"arm64"')


def manifest(config: bytes, kind: str = OCI_CONFIG) -> bytes:
    return document({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                     "config": {"mediaType": kind, "digest": sha256(config),
                                "size": len(config)},
                     "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                 "digest": "sha256:" + "2" * 64, "size": 771}]})


MANIFEST, ARM_MANIFEST = manifest(CONFIG), manifest(ARM_CONFIG)
INDEX = document({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
    {"mediaType": OCI_MANIFEST, "digest": sha256(ARM_MANIFEST), "size": len(ARM_MANIFEST),
     "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
    {"mediaType": OCI_MANIFEST, "digest": sha256(MANIFEST), "size": len(MANIFEST),
     "platform": {"architecture": "amd64", "os": "linux"}}]})
HELLO = ImageConfig(("/bin/echo", "hello from the image"), (), (
    ("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
    ("GREETING", "hi")), "/")
UNKNOWN = document({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown",
                                "detail": {"Tag": "2"}}]})
UNAUTHORIZED = document({"errors": [{"code": "UNAUTHORIZED",
                                     "message": "authentication required", "detail": None}]})


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    length: bool = True
    """Whether to send ``Content-Length`` (else the body ends when the connection closes)."""


@dataclass(frozen=True)
class Asked:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


Route = Callable[[Asked], Reply]


@dataclass
class Registry:
    """The server's routes by path, and every request it was asked."""

    port: int = 0
    routes: dict[str, Route] = field(default_factory=dict)
    asked: list[Asked] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"127.0.0.1:{self.port}"

    def image(self, repository: str, tag: str, top: bytes, kind: str = OCI_MANIFEST) -> None:
        """Serve ``top`` for the tag, every manifest and blob of this module by digest."""
        self.routes[f"/v2/{repository}/manifests/{tag}"] = served(top, kind)
        for body, media in ((MANIFEST, OCI_MANIFEST), (ARM_MANIFEST, OCI_MANIFEST),
                            (INDEX, OCI_INDEX)):
            self.routes[f"/v2/{repository}/manifests/{sha256(body)}"] = served(body, media)
        for blob in (CONFIG, ARM_CONFIG):
            self.routes[f"/v2/{repository}/blobs/{sha256(blob)}"] = served(
                blob, "application/octet-stream")


def served(body: bytes, kind: str, digest: str = "") -> Route:
    """A route answering ``body`` as distribution does, with its Docker-Content-Digest."""
    headers = {"Content-Type": kind, "Docker-Content-Digest": digest or sha256(body)}
    return lambda asked: Reply(200, body, headers)


def guarded(route: Route, authorization: str, challenge: str) -> Route:
    """``route`` behind a login: 401 with ``challenge`` unless ``Authorization`` matches."""
    def answer(asked: Asked) -> Reply:
        if asked.headers.get("authorization") == authorization:
            return route(asked)
        return Reply(401, UNAUTHORIZED, {"Content-Type": "application/json",
                                         "WWW-Authenticate": challenge})
    return answer


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 and registry.example.org."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hpcbridge test registry")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.DNSName("registry.example.org")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return folder / "cert.pem", folder / "key.pem"


class QuietServer(ThreadingHTTPServer):
    """A server that lets a client hang up mid-answer (a body past the cap, a certificate
    refused) without printing a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@pytest.fixture
def fake(certificate: tuple[Path, Path]) -> Iterator[Registry]:
    found = Registry()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            asked = Asked(parts.path, parse_qs(parts.query),
                          {key.lower(): value for key, value in self.headers.items()})
            found.asked.append(asked)
            route = found.routes.get(parts.path)
            reply = route(asked) if route else Reply(404, UNKNOWN,
                                                     {"Content-Type": "application/json"})
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length" if reply.length else "Connection",
                             str(len(reply.body)) if reply.length else "close")
            self.end_headers()
            self.wfile.write(reply.body)
            self.close_connection = not reply.length

        def log_message(self, format: str, *args: Any) -> None:
            pass

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    server = QuietServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    found.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def resolve(fake: Registry, certificate: tuple[Path, Path], text: str, *,
            credentials: tuple[str, str] | None = None, allowed: bool = True,
            **options: Any) -> registry.Resolved:
    """``registry.resolve`` of ``text`` (``{registry}`` is the fake's) trusting its CA."""
    ref = parse_reference(text.format(registry=fake.name), "spec.container.image")
    options.setdefault("ca_bundle", str(certificate[0]))
    return registry.resolve(ref, credentials, allowed=(fake.name,) if allowed else (),
                            timeout=10, **options)


def refused(fake: Registry, certificate: tuple[Path, Path], text: str,
            **options: Any) -> RegistryError:
    with pytest.raises(RegistryError) as raised:
        resolve(fake, certificate, text, **options)
    error = raised.value
    assert error.sentence == str(error) and "\n" not in error.sentence
    assert error.sentence.endswith("."), error.sentence
    assert PASSWORD not in error.sentence and TOKEN not in error.sentence
    return error


def test_a_tag_resolves_to_its_manifests_digest_and_config(
        fake: Registry, certificate: tuple[Path, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    fake.image("lab/hello", "1", MANIFEST)
    found = resolve(fake, certificate, "{registry}/lab/hello:1")
    assert found == registry.Resolved(sha256(MANIFEST), HELLO)
    assert [asked.path for asked in fake.asked] == [
        "/v2/lab/hello/manifests/1", f"/v2/lab/hello/blobs/{sha256(CONFIG)}"]
    assert OCI_INDEX in fake.asked[0].headers["accept"]
    assert DOCKER_MANIFEST in fake.asked[0].headers["accept"]


@pytest.mark.parametrize(("platform", "chosen", "config"), [
    (("linux", "amd64"), MANIFEST, CONFIG), (("linux", "arm64"), ARM_MANIFEST, ARM_CONFIG)])
def test_an_index_resolves_to_the_platforms_manifest(
        fake: Registry, certificate: tuple[Path, Path], platform: tuple[str, str],
        chosen: bytes, config: bytes) -> None:
    fake.image("lab/multi", "1", INDEX, OCI_INDEX)
    found = resolve(fake, certificate, "{registry}/lab/multi:1", platform=platform)
    assert found.digest == sha256(chosen)
    assert fake.asked[-1].path == f"/v2/lab/multi/blobs/{sha256(config)}"


def test_an_index_without_the_platform_says_what_it_has(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    fake.image("lab/multi", "1", INDEX, OCI_INDEX)
    error = refused(fake, certificate, "{registry}/lab/multi:1", platform=("linux", "s390x"))
    assert error.sentence == (f"Registry {fake.name}, asked for lab/multi: the image index "
                              "lists no manifest for linux/s390x; it has linux/arm64, "
                              "linux/amd64.")
    assert not error.retryable


def test_a_reference_pinned_by_digest_resolves_to_it(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    fake.image("lab/hello", "1", MANIFEST)
    found = resolve(fake, certificate, f"{{registry}}/lab/hello@{sha256(MANIFEST)}")
    assert found.digest == sha256(MANIFEST)


def test_an_oras_reference_needs_no_config(fake: Registry,
                                           certificate: tuple[Path, Path]) -> None:
    sif = manifest(b"{}", "application/vnd.sylabs.sif.config.v1+json")
    fake.routes["/v2/lab/sim/manifests/2"] = served(sif, OCI_MANIFEST)
    found = resolve(fake, certificate, "oras://{registry}/lab/sim:2")
    assert found == registry.Resolved(sha256(sif), ImageConfig())
    assert len(fake.asked) == 1


def test_a_sif_artifact_is_no_container_image(fake: Registry,
                                              certificate: tuple[Path, Path]) -> None:
    fake.routes["/v2/lab/sim/manifests/2"] = served(
        manifest(b"{}", "application/vnd.sylabs.sif.config.v1+json"), OCI_MANIFEST)
    error = refused(fake, certificate, "{registry}/lab/sim:2")
    assert "write it as oras://" in error.sentence


def protected(fake: Registry, challenge: str, authorization: str) -> None:
    fake.image("lab/secret", "1", MANIFEST)
    fake.routes = {path: guarded(route, authorization, challenge)
                   for path, route in fake.routes.items()}


def test_basic_auth_sends_the_credentials_after_the_challenge(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    protected(fake, 'Basic realm="Registry Realm"', basic(USER, PASSWORD))
    found = resolve(fake, certificate, "{registry}/lab/secret:1",
                    credentials=(USER, PASSWORD))
    assert found.config == HELLO
    assert [asked.headers.get("authorization", "") for asked in fake.asked] == [
        "", basic(USER, PASSWORD), basic(USER, PASSWORD)]


def test_basic_auth_refused_names_the_registry_and_the_repository(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    protected(fake, 'Basic realm="Registry Realm"', basic(USER, PASSWORD))
    error = refused(fake, certificate, "{registry}/lab/secret:1", credentials=(USER, "wrong"))
    assert error.sentence == (f"Registry {fake.name} refused the credentials for lab/secret "
                              "(401 Unauthorized: authentication required).")
    assert not error.retryable


def test_a_login_asked_without_credentials_names_the_setting(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    protected(fake, 'Basic realm="Registry Realm"', basic(USER, PASSWORD))
    error = refused(fake, certificate, "{registry}/lab/secret:1")
    assert "asks for a login to pull lab/secret" in error.sentence
    assert "spec.container.imagePullSecrets" in error.sentence


def challenge_of(fake: Registry) -> str:
    """The Bearer challenge that names the token service of ``token_service``."""
    return (f'Bearer realm="https://{fake.name}/token",service="fake-registry",'
            'scope="repository:lab/secret:pull"')


def token_service(fake: Registry, authorization: str, answer: dict[str, str]) -> None:
    """A token service at ``/token`` of the same server, answering ``answer``."""
    fake.routes["/token"] = guarded(lambda asked: Reply(200, document(answer), {
        "Content-Type": "application/json"}), authorization, 'Basic realm="token"')


@pytest.mark.parametrize(("credentials", "answer"), [
    pytest.param((USER, PASSWORD), {"token": TOKEN}, id="with-login"),
    pytest.param(None, {"access_token": TOKEN}, id="anonymous"),
])
def test_bearer_auth_fetches_a_token_from_the_realm(
        fake: Registry, certificate: tuple[Path, Path],
        credentials: tuple[str, str] | None, answer: dict[str, str]) -> None:
    login = basic(*credentials) if credentials else None
    protected(fake, challenge_of(fake), f"Bearer {TOKEN}")
    token_service(fake, login or "", answer)
    if login is None:
        fake.routes["/token"] = lambda asked: Reply(200, document(answer))
    found = resolve(fake, certificate, "{registry}/lab/secret:1", credentials=credentials)
    assert found.digest == sha256(MANIFEST)
    token = next(asked for asked in fake.asked if asked.path == "/token")
    assert token.query == {"scope": ["repository:lab/secret:pull"],
                           "service": ["fake-registry"]}
    assert token.headers.get("authorization") == login


def test_a_token_service_refusing_the_credentials_says_so(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    protected(fake, challenge_of(fake), f"Bearer {TOKEN}")
    token_service(fake, basic(USER, PASSWORD), {"token": TOKEN})
    error = refused(fake, certificate, "{registry}/lab/secret:1", credentials=(USER, "wrong"))
    assert error.sentence.startswith(f"Registry {fake.name} refused the credentials")


def test_a_realm_at_an_inward_address_is_refused_for_an_allowed_registry(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    protected(fake, 'Bearer realm="https://169.254.169.254/token"', f"Bearer {TOKEN}")
    error = refused(fake, certificate, "{registry}/lab/secret:1")
    assert error.sentence.startswith("The token service of registry")
    assert "link-local address 169.254.169.254" in error.sentence
    assert "spec.containers.allowedRegistries" in error.sentence


def test_a_missing_manifest_says_what_the_registry_answered(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    error = refused(fake, certificate, "{registry}/lab/hello:2")
    assert error.sentence == (f"Registry {fake.name} has no manifest lab/hello:2 "
                              "(404 Not Found: manifest unknown).")
    assert not error.retryable


def test_a_registry_that_is_down_for_now_is_retryable(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    fake.routes["/v2/lab/hello/manifests/1"] = lambda asked: Reply(503, b"busy")
    error = refused(fake, certificate, "{registry}/lab/hello:1")
    assert error.sentence == (f"Registry {fake.name} answered 503 Service Unavailable when "
                              "asked for manifest lab/hello:1.")
    assert error.retryable


@pytest.mark.parametrize("where", ["claimed", "pinned", "config"])
def test_bytes_that_do_not_match_their_digest_are_refused(
        fake: Registry, certificate: tuple[Path, Path], where: str) -> None:
    fake.image("lab/hello", "1", MANIFEST)
    other = sha256(b"other")
    if where == "claimed":
        fake.routes["/v2/lab/hello/manifests/1"] = served(MANIFEST, OCI_MANIFEST, other)
    if where == "config":
        fake.routes[f"/v2/lab/hello/blobs/{sha256(CONFIG)}"] = served(CONFIG + b" ", "x")
    pinned = f"@{other}" if where == "pinned" else ":1"
    fake.routes[f"/v2/lab/hello/manifests/{other}"] = served(MANIFEST, OCI_MANIFEST, other)
    error = refused(fake, certificate, f"{{registry}}/lab/hello{pinned}")
    assert "do not match the digest" in error.sentence
    assert not error.retryable


@pytest.mark.parametrize("length", [True, False], ids=["declared", "streamed"])
def test_a_body_past_the_cap_is_refused(fake: Registry, certificate: tuple[Path, Path],
                                        length: bool) -> None:
    huge = b'{"schemaVersion": 2}' + b" " * (4 * 1024 * 1024)
    fake.routes["/v2/lab/hello/manifests/1"] = lambda asked: Reply(
        200, huge, {"Content-Type": OCI_MANIFEST}, length)
    error = refused(fake, certificate, "{registry}/lab/hello:1")
    assert error.sentence == f"Registry {fake.name} answered more than 4096 KiB."


@pytest.mark.parametrize(("location", "said"), [
    pytest.param("https://127.0.0.2:{port}/blob", "loopback address 127.0.0.2", id="loopback"),
    pytest.param("https://metadata.google.internal/blob", "inside the cluster", id="internal"),
    pytest.param("http://127.0.0.1:{port}/blob", "over HTTPS only", id="plain-http"),
])
def test_a_redirect_elsewhere_is_refused(fake: Registry, certificate: tuple[Path, Path],
                                         location: str, said: str) -> None:
    fake.image("lab/hello", "1", MANIFEST)
    fake.routes[f"/v2/lab/hello/blobs/{sha256(CONFIG)}"] = lambda asked: Reply(
        307, headers={"Location": location.format(port=fake.port)})
    error = refused(fake, certificate, "{registry}/lab/hello:1")
    assert error.sentence.startswith(f"A redirect of registry {fake.name} to ")
    assert said in error.sentence
    assert not error.retryable
    assert fake.asked[-1].path.startswith("/v2/")


def test_redirects_on_the_registrys_host_are_followed_three_times_at_most(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    fake.image("lab/hello", "1", MANIFEST)
    blob = fake.routes.pop(f"/v2/lab/hello/blobs/{sha256(CONFIG)}")
    fake.routes[f"/v2/lab/hello/blobs/{sha256(CONFIG)}"] = lambda asked: Reply(
        307, headers={"Location": "/storage/config"})
    fake.routes["/storage/config"] = blob
    assert resolve(fake, certificate, "{registry}/lab/hello:1").config == HELLO
    fake.routes["/storage/config"] = lambda asked: Reply(302, headers={"Location": "/loop"})
    fake.routes["/loop"] = fake.routes["/storage/config"]
    error = refused(fake, certificate, "{registry}/lab/hello:1")
    assert error.sentence == f"Registry {fake.name} redirected more than 3 times."


def test_a_registry_not_allowed_at_a_loopback_address_is_refused_unasked(
        fake: Registry, certificate: tuple[Path, Path]) -> None:
    fake.image("lab/hello", "1", MANIFEST)
    error = refused(fake, certificate, "{registry}/lab/hello:1", allowed=False)
    assert error.sentence == (
        f"Registry {fake.name} is at the loopback address 127.0.0.1; the hook server asks a "
        "registry that is not public only when the BatchCluster lists it in "
        "spec.containers.allowedRegistries.")
    assert not error.retryable
    assert fake.asked == []
    assert resolve(fake, certificate, "{registry}/lab/hello:1").config == HELLO


def test_a_public_name_that_resolves_inward_is_refused_by_its_address(
        fake: Registry, certificate: tuple[Path, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    lookup = socket.getaddrinfo

    def rebound(host: Any, *args: Any, **kwargs: Any) -> Any:
        return lookup("127.0.0.1" if host == "registry.example.org" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebound)
    ref = parse_reference(f"registry.example.org:{fake.port}/lab/hello:1", "image")
    with pytest.raises(RegistryError) as raised:
        registry.resolve(ref, None, allowed=(), timeout=10, ca_bundle=str(certificate[0]))
    assert raised.value.sentence.startswith(
        f"Registry registry.example.org:{fake.port} is at the loopback address 127.0.0.1;")
    assert fake.asked == []


def test_tls_is_verified_always(fake: Registry, certificate: tuple[Path, Path]) -> None:
    fake.image("lab/hello", "1", MANIFEST)
    error = refused(fake, certificate, "{registry}/lab/hello:1", ca_bundle=None)
    assert error.sentence == f"Registry {fake.name}'s TLS certificate could not be verified."
    assert fake.asked == []


def test_a_registry_that_does_not_listen_is_retryable(certificate: tuple[Path, Path]) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    ref = parse_reference(f"127.0.0.1:{port}/lab/hello:1", "image")
    with pytest.raises(RegistryError) as raised:
        registry.resolve(ref, None, allowed=(f"127.0.0.1:{port}",), timeout=5)
    assert raised.value.sentence == (f"Registry 127.0.0.1:{port} could not be reached "
                                     "(connection refused).")
    assert raised.value.retryable
