"""examples/ against the CRD and the core schemas: every object valid, one example for each site
feature, and every Secret and ConfigMap an example BatchJob reads among the examples."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import kubernetes_validate
import pytest

from tests.static.admission import batchjob_violations
from tests.static.kube import EXAMPLES, Object, field, load_all

EXAMPLE_OBJECTS = {
    f"{path.stem}:{doc['kind']}:{doc['metadata']['name']}": doc
    for path in sorted(EXAMPLES.glob("*.yaml"))
    for doc in load_all(path)
}
EXAMPLE_DOCS = [pytest.param(doc, id=name) for name, doc in EXAMPLE_OBJECTS.items()]
EXAMPLE_BATCHJOBS = [
    pytest.param(doc, id=name) for name, doc in EXAMPLE_OBJECTS.items() if doc["kind"] == "BatchJob"
]
EXAMPLE_OTHERS = [
    pytest.param(doc, id=name) for name, doc in EXAMPLE_OBJECTS.items() if doc["kind"] != "BatchJob"
]


@pytest.mark.parametrize("batchjob", EXAMPLE_BATCHJOBS)
def test_example_batchjob_is_accepted(batchjob: Object) -> None:
    assert batchjob_violations(batchjob) == []


@pytest.mark.parametrize("obj", EXAMPLE_OTHERS)
def test_example_core_object_is_valid(obj: Object) -> None:
    kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


@pytest.mark.parametrize("obj", EXAMPLE_DOCS)
def test_example_lives_in_research(obj: Object) -> None:
    assert obj["metadata"]["namespace"] == "research"


def test_example_names_are_unique() -> None:
    files = [doc for path in EXAMPLES.glob("*.yaml") for doc in load_all(path)]
    names = [(doc["kind"], doc["metadata"]["name"]) for doc in files]
    assert len(names) == len(set(names))


# One example for each site feature: the field it shows.
FEATURE_EXAMPLES = {
    "jump-slurm": "cluster.jump",
    "workdir-slurm": "cluster.workDir",
    "env-slurm": "env",
    "inputs-slurm": "inputs",
    "suspend-htcondor": "suspend",
    "deadline-slurm": "activeDeadlineSeconds",
}


def example_batchjob(stem: str) -> Object:
    (batchjob,) = (doc for doc in load_all(EXAMPLES / f"{stem}.yaml") if doc["kind"] == "BatchJob")
    return batchjob


@pytest.mark.parametrize(("stem", "field_path"), FEATURE_EXAMPLES.items(), ids=FEATURE_EXAMPLES)
def test_feature_example_shows_its_field(stem: str, field_path: str) -> None:
    """The example sets its feature's field to more than leaving it out would mean."""
    assert field(example_batchjob(stem)["spec"], field_path) not in (None, False, "", [], {})


def test_certificate_example_logs_in_with_a_user_certificate() -> None:
    """The Secret that certificate-slurm's BatchJob logs in with holds an OpenSSH user
    certificate beside its private key."""
    spec = example_batchjob("certificate-slurm")["spec"]
    secret = example_data("Secret", spec["cluster"]["secretRef"]["name"])
    assert "ssh-privatekey" in secret
    assert secret["ssh-certificate"].split()[0].endswith("-cert-v01@openssh.com")


def example_data(kind: str, name: str) -> dict[str, str]:
    """The keys and values of the example Secret or ConfigMap ``name`` (stringData or data)."""
    (obj,) = (
        doc
        for doc in EXAMPLE_OBJECTS.values()
        if doc["kind"] == kind and doc["metadata"]["name"] == name
    )
    data: dict[str, str] = dict(obj.get("data", {}))
    if kind == "Secret":
        data = {key: base64.b64decode(value).decode() for key, value in data.items()}
    return {**data, **obj.get("stringData", {})}


def referenced_keys(spec: Object) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key or None for the whole object) of every Secret and ConfigMap a spec names."""
    cluster = spec["cluster"]
    yield "Secret", cluster["secretRef"]["name"], "username"
    for hop in cluster.get("jump", []):
        yield "Secret", hop.get("secretRef", cluster["secretRef"])["name"], "username"
    for variable in spec.get("env", []):
        for field_name, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            ref = variable.get("valueFrom", {}).get(field_name)
            if ref is not None:
                yield kind, ref["name"], ref["key"]
    for entry in spec.get("inputs", []):
        for field_name, kind in (("secret", "Secret"), ("configMap", "ConfigMap")):
            if field_name in entry:
                name = entry[field_name]["name"]
                keys = [item["key"] for item in entry.get("items", [])] or [None]
                yield from ((kind, name, key) for key in keys)


@pytest.mark.parametrize("batchjob", EXAMPLE_BATCHJOBS)
def test_example_objects_it_names_are_examples_too(batchjob: Object) -> None:
    """Every Secret and ConfigMap an example BatchJob names (and every key it reads) is among
    the examples, so that applying examples/ gives each BatchJob what it needs."""
    for kind, name, key in referenced_keys(batchjob["spec"]):
        data = example_data(kind, name)
        assert key is None or key in data, f"{kind} {name} has no key {key}"


def known_host_names(known_hosts: str) -> set[str]:
    return {
        name for line in known_hosts.splitlines() if line.strip() and not line.startswith("#")
        for name in line.split()[0].split(",")
    }  # fmt: skip


@pytest.mark.parametrize("batchjob", EXAMPLE_BATCHJOBS)
def test_example_known_hosts_list_each_hop(batchjob: Object) -> None:
    """Each hop's Secret lists that hop in known_hosts (``[host]:port`` off port 22), and the
    cluster's Secret lists the login node by the name the spec gives."""
    cluster = batchjob["spec"]["cluster"]
    for hop in [*cluster.get("jump", []), cluster]:
        secret = hop.get("secretRef", cluster["secretRef"])["name"]
        port = hop.get("port", 22)
        name = hop["host"] if port == 22 else f"[{hop['host']}]:{port}"
        assert name in known_host_names(example_data("Secret", secret)["known_hosts"]), secret
