"""The hooks' TLS and client authentication: the Secrets the hook Pods mount and the controllers
name, made by the README's steps and the Certificates or by docs/operations.md's openssl
recipe; hook URLs under the serving certificate's name."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.static.install import (
    HOOKS,
    INSTALLS,
    NAMESPACE,
    POD_SPEC,
    SERVICE_HOST,
    operations_section,
    render_install,
)
from tests.static.kube import METACONTROLLER_KINDS, REPO, Object, Render, field, load_all, select


def dry_run_secrets(script: str, cwd: Path, kubectl: str) -> list[Object]:
    """The Secrets a shell script's `kubectl create secret` steps would create, printed by a
    client-side dry run with no cluster configured; its `kubectl apply` steps are skipped (the
    tests render those themselves)."""
    out = cwd / "dry-run"
    out.mkdir()
    shim = (
        'n=0; kubectl() { if [ "$1" = apply ]; then return 0; fi; n=$((n + 1)); '
        f'"{kubectl}" "$@" --dry-run=client -o yaml > "{out}/$n.yaml"; }}\n'
    )
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", shim + script],
        cwd=cwd,
        env={**os.environ, "KUBECONFIG": str(cwd / "no-cluster")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"{script}\n{result.stdout}{result.stderr}"
    return [
        doc for path in sorted(out.iterdir(), key=lambda p: int(p.stem)) for doc in load_all(path)
    ]


TLS_SECRET_KEYS = ("tls.crt", "tls.key", "ca.crt")  # what cert-manager and the recipe write


def webhooks(docs: Sequence[Object]) -> list[Object]:
    (controller,) = (doc for doc in docs if doc["kind"] in METACONTROLLER_KINDS)
    return [hook["webhook"] for hook in controller["spec"]["hooks"].values()]


def secret_references(docs: Sequence[Object]) -> set[tuple[str, str, str]]:
    """(namespace, Secret, key) of every Secret key the hook Pods mount and Metacontroller
    reads for the hooks' connections, with the controllers' defaults filled in."""
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    found = {
        (NAMESPACE, volume["secret"]["secretName"], item["key"])
        for volume in field(deployment, f"{POD_SPEC}.volumes")
        if "secret" in volume
        for item in volume["secret"]["items"]
    }
    for webhook in webhooks(docs):
        ca, client = webhook["caBundle"]["secretRef"], webhook["clientTLS"]
        token = webhook["authorization"]["secretRef"]
        found.add((ca["namespace"], ca["name"], ca.get("key", "ca.crt")))
        for key in (client.get("certKey", "tls.crt"), client.get("privateKeyKey", "tls.key")):
            found.add((client["secretRef"]["namespace"], client["secretRef"]["name"], key))
        found.add((token["namespace"], token["name"], token["key"]))
    return found


def secrets_made(secrets: Sequence[Object], docs: Sequence[Object] = ()) -> set[tuple[str, ...]]:
    """(namespace, Secret, key) of the Secrets given and of those the Certificates make."""
    made = {
        (secret["metadata"]["namespace"], secret["metadata"]["name"], key)
        for secret in secrets
        for key in secret["data"]
    }
    for doc in docs:
        if doc["kind"] == "Certificate":
            meta, name = doc["metadata"], doc["spec"]["secretName"]
            made |= {(meta["namespace"], name, key) for key in TLS_SECRET_KEYS}
    return made


@pytest.mark.parametrize("install", INSTALLS)
def test_readme_install_makes_every_secret_the_hooks_need(
    install: str, readme_installs: dict[str, Object], kubectl: str, tmp_path: Path
) -> None:
    """The README's token step (run as a client-side dry run) and the Certificates make every
    Secret key the hook Pods mount and the controller's hooks name."""
    result = readme_installs[install]
    secrets = dry_run_secrets("\n".join(result["secret_steps"]), tmp_path, kubectl)
    (token,) = secrets
    meta = token["metadata"]
    assert (meta["name"], meta["namespace"]) == ("hpcbridge-hooks-token", NAMESPACE)
    assert re.fullmatch(r"[0-9a-f]{64}\n?", base64.b64decode(token["data"]["token"]).decode())
    assert secret_references(result["objects"]) <= secrets_made(secrets, result["objects"])


@pytest.mark.parametrize("install", INSTALLS)
def test_hook_urls_reach_the_tls_port_under_the_certificate_name(
    install: str, render: Render
) -> None:
    docs = render_install(install, render)
    service = select(docs, {"kind": "Service", "name": "hpcbridge-hooks"})
    deployment = select(docs, {"kind": "Deployment", "name": "hpcbridge-hooks"})
    serving = select(docs, {"kind": "Certificate", "name": "hpcbridge-hooks-tls"})
    (https,) = (port for port in service["spec"]["ports"] if port["name"] == "https")
    nginx = "spec.template.spec.containers.[name=nginx]"
    container_port = field(deployment, f"{nginx}.ports.[name={https['targetPort']}].containerPort")
    assert f"listen {container_port} ssl;" in (REPO / "deploy/base/nginx.conf").read_text()
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" == SERVICE_HOST
    assert SERVICE_HOST in serving["spec"]["dnsNames"]
    for webhook in webhooks(docs):
        assert re.fullmatch(
            rf"https://{re.escape(SERVICE_HOST)}:{https['port']}/[a-z]+", webhook["url"]
        )


def test_the_deployment_reads_tls_and_token_from_read_only_secret_mounts(render: Render) -> None:
    deployment = select(
        render(REPO / "deploy/base"), {"kind": "Deployment", "name": "hpcbridge-hooks"}
    )
    (container,) = (c for c in field(deployment, f"{POD_SPEC}.containers") if c["name"] == "hooks")
    env = {item["name"]: item.get("value") for item in container["env"]}
    volumes = {volume["name"]: volume for volume in field(deployment, f"{POD_SPEC}.volumes")}
    for name in ("HPCBRIDGE_AUTH_TOKEN_FILE",):
        path = Path(env[name])
        (mount,) = (m for m in container["volumeMounts"] if Path(m["mountPath"]) == path.parent)
        assert mount["readOnly"] is True
        secret = volumes[mount["name"]]["secret"]
        assert {"key": path.name, "path": path.name} in secret["items"], name
        assert secret["defaultMode"] == 0o440
    metrics = field(deployment, f"{HOOKS}.ports.[name=metrics].containerPort")
    assert env["HPCBRIDGE_METRICS_PORT"] == str(metrics)


CERTIFICATE_USAGES = {  # Certificate: (usages, the Secret)
    "hpcbridge-hooks-tls": (["digital signature", "server auth"], "hpcbridge-hooks-tls"),
    "hpcbridge-metacontroller-client": (
        ["digital signature", "client auth"], "hpcbridge-metacontroller-client",
    ),
}  # fmt: skip


def test_the_certificates_come_from_the_namespaced_private_ca(render: Render) -> None:
    docs = render(REPO / "deploy/tls")
    ca = select(docs, {"kind": "Certificate", "name": "hpcbridge-ca"})
    assert ca["spec"]["isCA"] is True
    assert ca["spec"]["issuerRef"]["name"] == "hpcbridge-selfsigned"
    assert select(docs, {"kind": "Issuer", "name": "hpcbridge-selfsigned"})["spec"] == {
        "selfSigned": {}
    }
    ca_issuer = select(docs, {"kind": "Issuer", "name": "hpcbridge-ca"})
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    for name, (usages, secret) in CERTIFICATE_USAGES.items():
        spec = select(docs, {"kind": "Certificate", "name": name})["spec"]
        assert spec["issuerRef"] == {
            "name": "hpcbridge-ca",
            "kind": "Issuer",
            "group": "cert-manager.io",
        }
        assert (spec["usages"], spec["secretName"]) == (usages, secret)
        assert spec["privateKey"]["rotationPolicy"] == "Always"
    assert all(doc["metadata"]["namespace"] == NAMESPACE for doc in docs)


def test_openssl_recipe_makes_the_secrets_the_install_needs(
    tmp_path: Path, render: Render, kubectl: str, openssl: str
) -> None:
    """docs/operations.md's recipe for clusters without cert-manager, run as written (its
    `kubectl create secret` steps as client-side dry runs): the Secrets the hook Pods and the
    controller name, with a serving certificate for the hooks' name and a client certificate,
    both signed by the CA in ca.crt."""
    recipe = operations_section("Without cert-manager")
    (script,) = re.findall(r"```sh\n(.*?)```", recipe, re.DOTALL)
    secrets = dry_run_secrets(script, tmp_path, kubectl)
    docs = [
        *render(REPO / "deploy/base"),
        *load_all(REPO / "metacontroller/compositecontroller.yaml"),
    ]
    assert secret_references(docs) <= secrets_made(secrets)
    by_name = {secret["metadata"]["name"]: secret for secret in secrets}
    assert sorted(by_name) == sorted(
        ["hpcbridge-hooks-tls", "hpcbridge-metacontroller-client", "hpcbridge-hooks-token"]
    )

    def pem(secret: str, key: str) -> bytes:
        return base64.b64decode(by_name[secret]["data"][key])

    ca = x509.load_pem_x509_certificate(pem("hpcbridge-hooks-tls", "ca.crt"))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    for secret, usage in (
        ("hpcbridge-hooks-tls", ExtendedKeyUsageOID.SERVER_AUTH),
        ("hpcbridge-metacontroller-client", ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        assert by_name[secret]["type"] == "kubernetes.io/tls"
        assert pem(secret, "ca.crt") == pem("hpcbridge-hooks-tls", "ca.crt")
        cert = x509.load_pem_x509_certificate(pem(secret, "tls.crt"))
        cert.verify_directly_issued_by(ca)
        assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [usage]
        key = serialization.load_pem_private_key(pem(secret, "tls.key"), password=None)
        assert key.public_key() == cert.public_key()
    serving = x509.load_pem_x509_certificate(pem("hpcbridge-hooks-tls", "tls.crt"))
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert SERVICE_HOST in names.get_values_for_type(x509.DNSName)
    assert (tmp_path / "ca.key").stat().st_mode & 0o077 == 0  # the recipe's umask 077
