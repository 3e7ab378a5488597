"""The logins of ``spec.container.imagePullSecrets``: found by any key Docker writes for a
registry, and every Secret that is missing, of another type or unreadable named in one sentence
that never shows its password."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from hooks.core.sites.pull_secrets import DOCKERCONFIGJSON, PullSecretError, pull_credentials
from tests.unit.spec.test_spec import one_sentence_naming

PASSWORD = "s3cret-pa55"


def pull_secret(auths: object, *, kind: str = DOCKERCONFIGJSON) -> dict[str, Any]:
    """A Secret as Metacontroller hands it over: ``data`` in base64."""
    config = base64.b64encode(json.dumps({"auths": auths}).encode()).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": kind,
            "metadata": {"name": "regcred"}, "data": {".dockerconfigjson": config}}


def auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("key", [
    "127.0.0.1:5444", "https://127.0.0.1:5444", "https://127.0.0.1:5444/v1/",
    "http://127.0.0.1:5444/v2/", "HTTPS://127.0.0.1:5444/"])
def test_a_login_is_found_by_any_key_docker_writes(key: str) -> None:
    secrets = {"regcred": pull_secret({key: {"auth": auth("lab", PASSWORD)}})}
    assert pull_credentials(secrets, ["regcred"], "127.0.0.1:5444") == (
        "lab", PASSWORD)


def test_a_login_may_be_username_and_password() -> None:
    secrets = {"regcred": pull_secret({"ghcr.io": {"username": "lab", "password": PASSWORD}})}
    assert pull_credentials(secrets, ["regcred"], "ghcr.io") == ("lab", PASSWORD)


def test_docker_hub_logins_are_keyed_by_the_old_index() -> None:
    secrets = {"hub": pull_secret({"https://index.docker.io/v1/": {"auth": auth("u", "p:q")}})}
    assert pull_credentials(secrets, ["hub"], "docker.io") == ("u", "p:q")


def test_the_first_secret_with_a_login_for_the_registry_wins() -> None:
    secrets = {"other": pull_secret({"ghcr.io": {"auth": auth("no", "no")}}),
               "empty": pull_secret({"quay.io:443": {}}),
               "first": pull_secret({"quay.io:443": {"auth": auth("yes", "1")}}),
               "second": pull_secret({"quay.io:443": {"auth": auth("no", "2")}})}
    names = ["other", "empty", "first", "second"]
    assert pull_credentials(secrets, names, "quay.io:443") == ("yes", "1")


def test_no_login_for_the_registry_is_none() -> None:
    secrets = {"regcred": pull_secret({"ghcr.io": {"auth": auth("lab", PASSWORD)}})}
    assert pull_credentials(secrets, ["regcred"], "quay.io") is None
    assert pull_credentials(secrets, [], "ghcr.io") is None


@pytest.mark.parametrize(("secret", "said"), [
    pytest.param(None, "was not found", id="missing"),
    pytest.param(pull_secret({}, kind="Opaque"), "of type 'Opaque'", id="wrong-type"),
    pytest.param({"type": DOCKERCONFIGJSON, "data": {}}, "no .dockerconfigjson",
                 id="no-data"),
    pytest.param({"type": DOCKERCONFIGJSON, "data": {".dockerconfigjson": "%%"}},
                 "base64 of a JSON document", id="not-base64"),
    pytest.param({"type": DOCKERCONFIGJSON,
                  "data": {".dockerconfigjson": base64.b64encode(b"{x").decode()}},
                 "base64 of a JSON document", id="not-json"),
    pytest.param(pull_secret([]), "auths is not an object", id="auths-list"),
    pytest.param(pull_secret({"ghcr.io": "x"}), "is not an object", id="entry-string"),
    pytest.param(pull_secret({"ghcr.io": {"auth": base64.b64encode(PASSWORD.encode()).decode()}}),
                 "not base64 of user:password", id="auth-without-colon"),
    pytest.param(pull_secret({"ghcr.io": {"auth": PASSWORD + "!"}}),
                 "not base64 of user:password", id="auth-not-base64"),
])
def test_a_pull_secret_that_does_not_read_names_the_secret(secret: dict[str, Any] | None,
                                                           said: str) -> None:
    secrets = {} if secret is None else {"regcred": secret}
    with pytest.raises(PullSecretError) as raised:
        pull_credentials(secrets, ["regcred"], "ghcr.io")
    message = str(raised.value)
    one_sentence_naming(message, "Secret 'regcred' (spec.container.imagePullSecrets)")
    assert said in message
    assert PASSWORD not in message and PASSWORD not in repr(raised.value)
