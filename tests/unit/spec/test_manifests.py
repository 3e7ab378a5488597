"""What a registry answers, read without I/O: the login challenge (hostile text first), the
manifests and indexes, an image's config, and the logins ``imagePullSecrets`` hold. Anything
malformed is ``ValueError`` with one sentence; a password never reaches a message."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from hooks.core.spec import manifests
from hooks.core.spec.manifests import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_CONFIG,
    OCI_INDEX,
    OCI_MANIFEST,
    SIF_CONFIG,
    Challenge,
)
from hooks.core.values.image import ImageConfig, config_bytes
from tests.unit.spec.test_spec import one_sentence_naming

AMD64 = "sha256:" + "a" * 64
ARM64 = "sha256:" + "b" * 64
CONFIG = "sha256:" + "c" * 64
PASSWORD = "s3cret-pa55"


@pytest.mark.parametrize(("header", "expected"), [
    pytest.param('Basic realm="Registry Realm"', Challenge("basic", "Registry Realm"),
                 id="basic"),
    pytest.param('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
                 'scope="repository:library/busybox:pull"',
                 Challenge("bearer", "https://auth.docker.io/token", "registry.docker.io",
                           "repository:library/busybox:pull"), id="docker-hub"),
    pytest.param('bearer  Realm = "https://a.example/t" , service=reg',
                 Challenge("bearer", "https://a.example/t", "reg"), id="case-space-token"),
    pytest.param(r'Bearer realm="https://a.example/t?x=\"y\"&z=\\"',
                 Challenge("bearer", 'https://a.example/t?x="y"&z=\\'), id="escapes"),
    pytest.param('Basic realm="b", Bearer realm="https://a.example/t"',
                 Challenge("bearer", "https://a.example/t"), id="bearer-preferred"),
    pytest.param('Negotiate YWJj==, Basic realm="x",,', Challenge("basic", "x"),
                 id="token68-then-basic"),
    pytest.param("Basic", Challenge("basic"), id="bare-basic"),
])
def test_challenges_read(header: str, expected: Challenge) -> None:
    assert manifests.parse_challenge(header) == expected


@pytest.mark.parametrize("header", [
    pytest.param("", id="empty"),
    pytest.param('Bearer service="reg"', id="bearer-without-realm"),
    pytest.param('Digest realm="x", nonce="y"', id="digest-only"),
    pytest.param('Bearer realm="https://a.example/t', id="unterminated"),
    pytest.param('Bearer realm="https://a.example/t" junk', id="trailing-junk"),
    pytest.param('Basic realm="a", realm="b"', id="twice"),
    pytest.param('Bearer realm="a\nb"', id="newline-in-quoted"),
    pytest.param('Bearer realm="a\x00b"', id="nul-in-quoted"),
    pytest.param('Bearer realm="' + "a" * 9000 + '"', id="too-long"),
    pytest.param('"Bearer"', id="quoted-scheme"),
])
def test_challenges_that_do_not_read_are_one_sentence(header: str) -> None:
    with pytest.raises(ValueError) as raised:
        manifests.parse_challenge(header)
    one_sentence_naming(str(raised.value), "The registry")


def test_any_header_raises_nothing_but_value_error() -> None:
    pieces = ['Bearer', 'Basic', ' ', '\t', ',', '=', '"', '\\', 'realm', 'a', '==', '\x00',
              '\u202e', 'é', 'service="x"', 'realm="https://h/t"']
    chosen = random.Random(20261122)
    for _ in range(3000):
        header = "".join(chosen.choice(pieces) for _ in range(chosen.randint(0, 24)))
        try:
            found = manifests.parse_challenge(header)
        except ValueError:
            continue
        assert found.scheme in ("basic", "bearer")


def test_the_accept_header_names_every_manifest_and_index() -> None:
    accepted = manifests.accept_header().split(", ")
    assert set(accepted) == {OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST}


@pytest.mark.parametrize(("document", "content_type", "expected"), [
    pytest.param({"mediaType": DOCKER_LIST}, "application/json", DOCKER_LIST, id="own"),
    pytest.param({"schemaVersion": 2}, f"{OCI_MANIFEST}; charset=utf-8", OCI_MANIFEST,
                 id="served"),
])
def test_media_types(document: dict[str, Any], content_type: str, expected: str) -> None:
    assert manifests.media_type(json.dumps(document).encode(), content_type) == expected


def test_a_document_that_is_no_manifest_is_refused() -> None:
    schema1 = {"mediaType": "application/vnd.docker.distribution.manifest.v1+prettyjws"}
    with pytest.raises(ValueError, match="not an image manifest or index"):
        manifests.media_type(json.dumps(schema1).encode())


def index(*entries: dict[str, Any]) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                       "manifests": list(entries)}).encode()


def entry(digest: str, system: str, architecture: str,
          kind: str = OCI_MANIFEST) -> dict[str, Any]:
    return {"mediaType": kind, "digest": digest, "size": 500,
            "platform": {"os": system, "architecture": architecture}}


MULTI = index(entry(ARM64, "linux", "arm64"), entry(AMD64, "linux", "amd64"),
              entry("sha256:" + "d" * 64, "unknown", "unknown"))


@pytest.mark.parametrize(("platform", "expected"), [
    (("linux", "amd64"), AMD64), (("linux", "arm64"), ARM64)])
def test_an_index_gives_the_platforms_manifest(platform: tuple[str, str], expected: str) -> None:
    assert manifests.pick_manifest(MULTI, platform) == expected


def test_an_index_without_the_platform_names_those_it_has() -> None:
    with pytest.raises(ValueError) as raised:
        manifests.pick_manifest(MULTI, ("linux", "s390x"))
    assert str(raised.value) == ("The image index lists no manifest for linux/s390x; it has "
                                 "linux/arm64, linux/amd64, unknown/unknown.")


@pytest.mark.parametrize("document", [
    pytest.param(b"not json", id="not-json"),
    pytest.param(b"[]", id="not-object"),
    pytest.param(b'{"manifests": {}}', id="not-list"),
    pytest.param(index(entry("sha256:xyz", "linux", "amd64")), id="bad-digest"),
    pytest.param(b'{"manifests": ["x"]}', id="entry-not-object"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep"),
    pytest.param(b'{"manifests": []}' + b" " * manifests.MAX_DOCUMENT, id="oversize"),
    pytest.param(b'{"manifests": [\xff]}', id="not-utf8"),
])
def test_an_index_that_does_not_read_is_one_sentence(document: bytes) -> None:
    with pytest.raises(ValueError) as raised:
        manifests.pick_manifest(document)
    one_sentence_naming(str(raised.value), "The image index")


def test_a_manifest_names_its_config() -> None:
    manifest = {"schemaVersion": 2, "config": {"mediaType": SIF_CONFIG, "digest": CONFIG}}
    assert manifests.config_digest(json.dumps(manifest).encode()) == (CONFIG, SIF_CONFIG)


@pytest.mark.parametrize("manifest", [
    pytest.param({"layers": []}, id="no-config"),
    pytest.param({"config": {"mediaType": OCI_CONFIG, "digest": "md5:00"}}, id="bad-digest"),
    pytest.param({"config": {"digest": CONFIG}}, id="no-type"),
])
def test_a_manifest_without_a_config_is_refused(manifest: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as raised:
        manifests.config_digest(json.dumps(manifest).encode())
    one_sentence_naming(str(raised.value), "The image manifest")


def test_a_config_reads_entrypoint_cmd_env_and_workdir() -> None:
    document = {"architecture": "amd64", "os": "linux", "config": {
        "Entrypoint": ["/bin/echo", "hello from the image"], "Cmd": None,
        "Env": ["PATH=/usr/bin:/bin", "QUERY=a=b", "EMPTY="], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [CONFIG]}}
    config = manifests.parse_config(json.dumps(document).encode())
    assert config == ImageConfig(("/bin/echo", "hello from the image"), (),
                                 (("PATH", "/usr/bin:/bin"), ("QUERY", "a=b"), ("EMPTY", "")),
                                 "/")


@pytest.mark.parametrize("document", [b"{}", b'{"config": null}', b'{"config": {}}'])
def test_a_config_without_settings_is_empty(document: bytes) -> None:
    assert manifests.parse_config(document) == ImageConfig()


def test_a_config_the_cache_keeps_reads_back() -> None:
    config = ImageConfig(("/bin/sh", "-c"), ("echo hi",), (("A", "1=2"),), "/work")
    assert manifests.parse_config(config_bytes(config)) == config


@pytest.mark.parametrize(("settings", "field"), [
    pytest.param({"Entrypoint": "/bin/echo"}, "Entrypoint", id="entrypoint-string"),
    pytest.param({"Cmd": ["sh", 1]}, "Cmd", id="cmd-number"),
    pytest.param({"Env": ["NOVALUE"]}, "Env", id="env-without-equals"),
    pytest.param({"Env": ["=value"]}, "Env", id="env-without-name"),
    pytest.param({"WorkingDir": 7}, "WorkingDir", id="workdir-number"),
    pytest.param({"Cmd": ["a\x00b"]}, "Cmd", id="nul"),
    pytest.param({"Env": ["A=b"] * (manifests.MAX_ENTRIES + 1)}, "Env", id="too-many"),
])
def test_a_malformed_config_is_one_sentence_naming_the_field(settings: dict[str, Any],
                                                             field: str) -> None:
    with pytest.raises(ValueError) as raised:
        manifests.parse_config(json.dumps({"config": settings}).encode())
    one_sentence_naming(str(raised.value), f"The image config's {field}")


@pytest.mark.parametrize("document", [b'{"config": []}', b"\x00", b"[" * 50_000])
def test_a_config_that_is_no_object_is_refused(document: bytes) -> None:
    with pytest.raises(ValueError, match=r"^The image config"):
        manifests.parse_config(document)


@pytest.mark.parametrize(("answer", "expected"), [
    (b'{"token": "abc.def"}', "abc.def"), (b'{"access_token": "xyz"}', "xyz")])
def test_a_token_service_answers_a_token(answer: bytes, expected: str) -> None:
    assert manifests.bearer_token(answer) == expected


@pytest.mark.parametrize("answer", [b"{}", b'{"token": "a b"}', b'{"token": "a\\r\\nX: y"}',
                                    b'{"token": 5}', b"<html>"])
def test_a_token_answer_without_a_usable_token_is_refused(answer: bytes) -> None:
    with pytest.raises(ValueError, match=r"^The token service's answer"):
        manifests.bearer_token(answer)


@pytest.mark.parametrize(("answer", "expected"), [
    (b'{"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}',
     "authentication required"),
    (b'{"errors": [{"code": "DENIED"}, {"message": "\\u001b[31mred"}]}', "DENIED; \\x1b[31mred"),
    (b"<html>502 Bad Gateway</html>", ""),
    (b'{"errors": "no"}', ""),
])
def test_error_answers_read_short_and_safe(answer: bytes, expected: str) -> None:
    assert manifests.error_text(answer) == expected


@pytest.mark.parametrize(("registry", "expected"), [
    ("docker.io", "registry-1.docker.io"), ("index.docker.io", "registry-1.docker.io"),
    ("ghcr.io", "ghcr.io"), ("127.0.0.1:5443", "127.0.0.1:5443")])
def test_docker_hubs_api_is_not_docker_io(registry: str, expected: str) -> None:
    assert manifests.docker_hub_api(registry) == expected
