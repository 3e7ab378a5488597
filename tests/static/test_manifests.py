"""Static checks of what users install and send: the CRD, the Metacontroller controllers, the
deploy/ kustomizations, the Dockerfile, the examples and the saved hook requests. No network."""

from __future__ import annotations

import copy
import functools
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"  # CI clones shared/ beside the repository
METACONTROLLER_CRDS = (
    SHARED / "metacontroller-fixtures/upstream/manifests/production/metacontroller-crds-v1.yaml"
)
API_DOC = next(
    path
    for path in (REPO / "docs/batchjob-api.md", SHARED / "design/batchjob-api.md")
    if path.exists()
)
EXAMPLES = REPO / "examples"
REQUESTS = EXAMPLES / "requests"
NAMESPACE = "hpcbridge-system"
IMAGE = "hpcbridge:0.1.0"
METACONTROLLER_KINDS = {"CompositeController", "DecoratorController"}
Object = dict[str, Any]


def load_all(path: Path) -> list[Object]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def to_jsonschema(schema: Object) -> Object:
    """A Kubernetes structural schema as plain JSON Schema.

    ``x-kubernetes-int-or-string`` becomes a type union and other ``x-kubernetes-*`` keys are
    dropped. Objects with declared properties reject other keys, as the API server's strict field
    validation does; this is also the key check the Metacontroller CRDs need, since they do not
    set ``additionalProperties: false`` themselves.
    """
    out = {key: value for key, value in schema.items() if not key.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if "properties" in schema:
        out["properties"] = {name: to_jsonschema(sub) for name, sub in schema["properties"].items()}
        out.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out[key] = to_jsonschema(schema[key])
    return out


def crd_schema(crd: Object) -> Object:
    schema: Object = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@functools.cache
def batchjob_crd() -> Object:
    crd: Object
    (crd,) = load_all(REPO / "crds/batchjob.yaml")
    return crd


@functools.cache
def upstream_schema(kind: str) -> Object:
    crds = {crd["spec"]["names"]["kind"]: crd for crd in load_all(METACONTROLLER_CRDS)}
    return to_jsonschema(crd_schema(crds[kind]))


def schema_violations(instance: Object, schema: Object) -> list[str]:
    """Dotted paths of the fields a JSON schema rejects ("" for the root)."""
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(
        ".".join(str(part) for part in error.absolute_path)
        for error in validator.iter_errors(instance)
    )


def cel_violations(spec: Object) -> list[str]:
    """Messages of the spec's CEL rules that ``spec`` breaks."""
    env = celpy.Environment()
    activation = {"self": json_to_cel(spec)}
    rules = crd_schema(batchjob_crd())["properties"]["spec"]["x-kubernetes-validations"]
    failed = []
    for rule in rules:
        result = env.program(env.compile(rule["rule"])).evaluate(activation)
        if not (isinstance(result, BoolType) and result):
            failed.append(rule["message"])
    return failed


def batchjob_violations(batchjob: Object) -> list[str]:
    """What the API server would reject in a BatchJob: schema paths, then CEL messages."""
    schema = to_jsonschema(crd_schema(batchjob_crd()))
    return schema_violations(batchjob, schema) + cel_violations(batchjob["spec"])


def locate(obj: Any, field_path: str) -> tuple[Any, str]:
    """The parent of a kustomize-style field path (``containers.[name=hooks].image``) and the
    last key."""
    *parents, last = field_path.split(".")
    for segment in parents:
        if segment.startswith("["):
            key, _, value = segment[1:-1].partition("=")
            obj = next(item for item in obj if item[key] == value)
        else:
            obj = obj[segment]
    return obj, last


def field(obj: Object, field_path: str) -> Any:
    parent, last = locate(obj, field_path)
    return parent.get(last)


# --- (a) examples against the CRD -----------------------------------------------------------

EXAMPLE_OBJECTS = {
    f"{path.stem}:{doc['kind']}": doc
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


def merge(base: Object, change: Object) -> Object:
    """``base`` with ``change`` merged in, nested objects key by key."""
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


MINIMAL_SPEC: Object = {
    "backend": "slurm",
    "cluster": {"host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}},
    "script": "#!/bin/sh\ntrue\n",
}
SLURM_ONLY = "spec.slurm is only allowed with backend: slurm"
HTCONDOR_ONLY = "spec.htcondor is only allowed with backend: htcondor"
NODES_SLURM_ONLY = "spec.resources.nodes is only supported with backend: slurm"


@pytest.mark.parametrize(
    ("change", "violations"),
    [
        pytest.param({}, [], id="minimal"),
        pytest.param({"resources": {"memory": 1073741824}}, [], id="memory-as-integer"),
        pytest.param({"resources": {"memory": "1.5G"}}, [], id="memory-decimal-suffix"),
        pytest.param({"resources": {"timeLimit": "1d12h"}}, [], id="time-limit-days-hours"),
        pytest.param({"slurm": {"array": "1,3,5-9:2%2"}}, [], id="array-list-step-throttle"),
        pytest.param({"backend": "htcondor", "htcondor": {"queue": 10000}}, [], id="queue-max"),
        pytest.param(
            {"backend": "htcondor", "slurm": {"partition": "debug"}},
            [SLURM_ONLY],
            id="slurm-block-with-htcondor",
        ),
        pytest.param({"htcondor": {"queue": 2}}, [HTCONDOR_ONLY], id="htcondor-block-with-slurm"),
        pytest.param(
            {"backend": "htcondor", "resources": {"nodes": 2}},
            [NODES_SLURM_ONLY],
            id="nodes-with-htcondor",
        ),
        pytest.param({"backend": "pbs"}, ["spec.backend"], id="unknown-backend"),
        pytest.param({"script": "echo hi\n"}, ["spec.script"], id="script-without-shebang"),
        pytest.param({"script": "#!" + "x" * 262143}, ["spec.script"], id="script-too-long"),
        pytest.param({"cluster": {"port": 70000}}, ["spec.cluster.port"], id="port-70000"),
        pytest.param(
            {"cluster": {"host": "-oProxyCommand=x"}}, ["spec.cluster.host"], id="host-dash"
        ),
        pytest.param(
            {"cluster": {"secretRef": {"name": "Bad_Name"}}},
            ["spec.cluster.secretRef.name"],
            id="secret-name-not-dns",
        ),
        pytest.param(
            {"resources": {"timeLimit": "90min"}}, ["spec.resources.timeLimit"], id="time-90min"
        ),
        pytest.param(
            {"resources": {"timeLimit": "1h30"}}, ["spec.resources.timeLimit"], id="time-1h30"
        ),
        pytest.param(
            {"resources": {"timeLimit": ""}}, ["spec.resources.timeLimit"], id="time-empty"
        ),
        pytest.param({"resources": {"memory": "4GB"}}, ["spec.resources.memory"], id="memory-4GB"),
        pytest.param({"resources": {"cpus": 0}}, ["spec.resources.cpus"], id="cpus-0"),
        pytest.param({"resources": {"gpus": -1}}, ["spec.resources.gpus"], id="gpus-negative"),
        pytest.param({"slurm": {"array": "0-3%"}}, ["spec.slurm.array"], id="array-bad-throttle"),
        pytest.param({"slurm": {"array": "1:2"}}, ["spec.slurm.array"], id="array-step-no-range"),
        pytest.param(
            {"slurm": {"extraArgs": ["--x"] * 65}}, ["spec.slurm.extraArgs"], id="extra-args-65"
        ),
        pytest.param(
            {"backend": "htcondor", "htcondor": {"queue": 10001}},
            ["spec.htcondor.queue"],
            id="queue-10001",
        ),
        pytest.param(
            {"backend": "htcondor", "htcondor": {"submitOptions": {"+A": 1}}},
            ["spec.htcondor.submitOptions.+A"],
            id="submit-option-not-string",
        ),
        pytest.param({"backoffLimit": -1}, ["spec.backoffLimit"], id="backoff-negative"),
        pytest.param({"sript": "#!/bin/sh\n"}, ["spec"], id="unknown-field"),
    ],
)
def test_spec_rules(change: Object, violations: list[str]) -> None:
    spec = merge(copy.deepcopy(MINIMAL_SPEC), change)
    batchjob = {"apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchJob", "spec": spec}
    assert batchjob_violations(batchjob) == violations


@pytest.mark.parametrize(
    ("field_path", "default"),
    [
        pytest.param("cluster.port", 22, id="port"),
        pytest.param("cluster.insecureSkipHostKeyCheck", False, id="insecure"),
        pytest.param("logs.pod", True, id="logs-pod"),
        pytest.param("logs.follow", False, id="logs-follow"),
        pytest.param("backoffLimit", 0, id="backoff-limit"),
    ],
)
def test_spec_default(field_path: str, default: object) -> None:
    schema = crd_schema(batchjob_crd())["properties"]["spec"]
    for name in field_path.split("."):
        schema = schema["properties"][name]
    assert schema["default"] is default


# --- (b) the CRD against the API doc --------------------------------------------------------


def api_doc_block(top_key: str) -> Object:
    """The API doc's YAML block that holds ``top_key`` (the example BatchJob or the status)."""
    blocks = re.findall(r"```yaml\n(.*?)```", API_DOC.read_text(), re.DOTALL)
    return next(block[top_key] for block in map(yaml.safe_load, blocks) if top_key in block)


def undeclared(value: Any, schema: Object, path: str) -> Iterator[str]:
    """Paths in ``value`` that ``schema`` does not declare; the doc's ``...`` elisions skipped."""
    if isinstance(value, list):
        for item in value:
            yield from undeclared(item, schema["items"], f"{path}[]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "...":
                continue
            sub = schema.get("properties", {}).get(key, schema.get("additionalProperties"))
            if sub is None:
                yield f"{path}.{key}"
            else:
                yield from undeclared(item, sub, f"{path}.{key}")


@pytest.mark.parametrize("section", ["spec", "status"])
def test_crd_declares_every_api_doc_field(section: str) -> None:
    schema = crd_schema(batchjob_crd())["properties"][section]
    assert list(undeclared(api_doc_block(section), schema, section)) == []


def test_status_fields_are_the_api_doc_ones_plus_retries_and_cluster() -> None:
    declared = crd_schema(batchjob_crd())["properties"]["status"]["properties"]
    assert set(declared) == set(api_doc_block("status")) | {"retries", "cluster"}


def test_every_crd_field_has_a_description() -> None:
    def missing(schema: Object, path: str) -> Iterator[str]:
        if path != "metadata" and not schema.get("description"):
            yield path
        for name, sub in schema.get("properties", {}).items():
            yield from missing(sub, f"{path}.{name}".lstrip("."))
        if "items" in schema and "properties" in schema["items"]:
            for name, sub in schema["items"]["properties"].items():
                yield from missing(sub, f"{path}[].{name}")

    assert list(missing(crd_schema(batchjob_crd()), "")) == []


def test_crd_names_scope_and_status_subresource() -> None:
    crd = batchjob_crd()
    assert crd["metadata"]["name"] == "batchjobs.hpcbridge.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == "BatchJob"
    assert crd["spec"]["names"]["shortNames"] == ["bj"]
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}


def test_printer_columns() -> None:
    (version,) = batchjob_crd()["spec"]["versions"]
    columns = [
        (column["name"], column["type"], column["jsonPath"])
        for column in version["additionalPrinterColumns"]
    ]
    assert columns == [
        ("BACKEND", "string", ".spec.backend"),
        ("PHASE", "string", ".status.phase"),
        ("REASON", "string", ".status.reason"),
        ("JOBID", "string", ".status.jobIDs[0]"),
        ("ACTIVE", "integer", ".status.active"),
        ("SUCCEEDED", "integer", ".status.succeeded"),
        ("FAILED", "integer", ".status.failed"),
        ("AGE", "date", ".metadata.creationTimestamp"),
    ]


# --- (c) the Metacontroller controllers against the upstream CRDs ---------------------------

CONTROLLER_FILES = {
    "CompositeController": "compositecontroller.yaml",
    "DecoratorController": "decoratorcontroller.yaml",
}


@pytest.mark.parametrize(("kind", "file_name"), CONTROLLER_FILES.items(), ids=CONTROLLER_FILES)
def test_controller_matches_upstream_crd(kind: str, file_name: str) -> None:
    (controller,) = load_all(REPO / "metacontroller" / file_name)
    assert controller["kind"] == kind
    assert schema_violations(controller, upstream_schema(kind)) == []


@pytest.mark.parametrize("file_name", CONTROLLER_FILES.values())
def test_controller_hooks_and_resync(file_name: str) -> None:
    path = REPO / "metacontroller" / file_name
    (controller,) = load_all(path)
    assert path.read_text().startswith("# Alternative to ")
    assert controller["metadata"]["name"] == "hpcbridge-batchjob"
    assert controller["spec"]["resyncPeriodSeconds"] == 300
    assert controller["spec"]["hooks"] == {
        hook: {
            "version": "v1",
            "webhook": {"url": f"http://hpcbridge-hooks.{NAMESPACE}/{hook}", "timeout": "30s"},
        }
        for hook in ("customize", "sync", "finalize")
    }


def test_composite_controller_resources() -> None:
    (controller,) = load_all(REPO / "metacontroller/compositecontroller.yaml")
    spec = controller["spec"]
    assert spec["parentResource"] == {
        "apiVersion": "hpcbridge.io/v1alpha1",
        "resource": "batchjobs",
    }
    assert spec["childResources"] == [
        {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "Recreate"}}
    ]
    assert spec["generateSelector"] is True


def test_decorator_controller_resources() -> None:
    (controller,) = load_all(REPO / "metacontroller/decoratorcontroller.yaml")
    spec = controller["spec"]
    assert spec["resources"] == [{"apiVersion": "hpcbridge.io/v1alpha1", "resource": "batchjobs"}]
    assert spec["attachments"] == [
        {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "Recreate"}}
    ]


# --- (d) the deploy/ installs ---------------------------------------------------------------


@functools.cache
def render(directory: Path) -> tuple[Object, ...]:
    """What ``kustomize build`` gives for the features these kustomizations use: resources,
    images (rewriting container images) and then replacements."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert "namespace" not in kustomization, "the namespace transformer would hit cluster objects"
    docs: list[Object] = []
    for entry in kustomization["resources"]:
        path = (directory / entry).resolve()
        docs += copy.deepcopy(render(path)) if path.is_dir() else load_all(path)
    containers = [
        container
        for doc in docs
        if doc["kind"] == "Deployment"
        for container in doc["spec"]["template"]["spec"]["containers"]
    ]
    for image in kustomization.get("images", []):
        for container in containers:
            if container["image"].split(":")[0] == image["name"]:
                container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    for replacement in kustomization.get("replacements", []):
        source = replacement["source"]
        value = field(select(docs, source), source["fieldPath"])
        for target in replacement["targets"]:
            for field_path in target["fieldPaths"]:
                parent, last = locate(select(docs, target["select"]), field_path)
                parent[last] = value
    return tuple(docs)


def select(docs: Sequence[Object], selector: Object) -> Object:
    (doc,) = (
        doc
        for doc in docs
        if doc["kind"] == selector["kind"] and doc["metadata"]["name"] == selector["name"]
    )
    return doc


CONTROLLER_OF_INSTALL = {"deploy": "CompositeController", "decorator": "DecoratorController"}
INSTALLS = list(CONTROLLER_OF_INSTALL)


def render_install(install: str) -> tuple[Object, ...]:
    """The objects of an install; the decorator one is the three documented applies."""
    if install == "deploy":
        return render(REPO / "deploy")
    return (
        *render(REPO / "deploy/base"),
        *render(REPO / "crds"),
        *load_all(REPO / "metacontroller/decoratorcontroller.yaml"),
    )
CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", *METACONTROLLER_KINDS}


@pytest.mark.parametrize("install", INSTALLS)
def test_install_objects(install: str) -> None:
    docs = render_install(install)
    assert sorted(doc["kind"] for doc in docs) == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "Deployment",
            "Service",
            "CustomResourceDefinition",
            CONTROLLER_OF_INSTALL[install],
        ]
    )
    for doc in docs:
        expected = None if doc["kind"] in CLUSTER_SCOPED else NAMESPACE
        assert doc["metadata"].get("namespace") == expected, doc["kind"]


@pytest.mark.parametrize("install", INSTALLS)
def test_install_validates_against_kubernetes_schemas(install: str) -> None:
    for doc in render_install(install):
        if doc["kind"] not in METACONTROLLER_KINDS:  # checked against the upstream CRDs above
            kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


HOOKS = "spec.template.spec.containers.[name=hooks]"
POD_SPEC = "spec.template.spec"
LABELS = {"app.kubernetes.io/name": "hpcbridge", "app.kubernetes.io/component": "hooks"}
DEPLOYMENT_SETTINGS = [
    pytest.param("spec.replicas", 2, id="replicas"),
    pytest.param("spec.selector.matchLabels", LABELS, id="selector"),
    pytest.param("spec.template.metadata.labels", LABELS, id="pod-labels"),
    pytest.param(f"{HOOKS}.image", IMAGE, id="image"),
    pytest.param(f"{HOOKS}.command", None, id="image-cmd"),
    pytest.param(f"{HOOKS}.env.[name=HOST].value", "0.0.0.0", id="env-host"),
    pytest.param(f"{HOOKS}.env.[name=PORT].value", "8080", id="env-port"),
    pytest.param(f"{HOOKS}.env.[name=HPCBRIDGE_LOG_IMAGE].value", IMAGE, id="env-log-image"),
    pytest.param(
        f"{HOOKS}.ports", [{"name": "http", "containerPort": 8080, "protocol": "TCP"}], id="port"
    ),
    pytest.param(
        f"{HOOKS}.readinessProbe.httpGet", {"path": "/healthz", "port": "http"}, id="ready"
    ),
    pytest.param(f"{HOOKS}.livenessProbe.httpGet", {"path": "/healthz", "port": "http"}, id="live"),
    pytest.param(
        f"{HOOKS}.resources",
        {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        id="resources",
    ),
    pytest.param(
        f"{HOOKS}.securityContext",
        {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        id="container-security",
    ),
    pytest.param(
        f"{POD_SPEC}.securityContext",
        {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        id="pod-security",
    ),
    pytest.param(f"{HOOKS}.volumeMounts", [{"name": "tmp", "mountPath": "/tmp"}], id="tmp-mount"),
    pytest.param(f"{POD_SPEC}.volumes", [{"name": "tmp", "emptyDir": {}}], id="tmp-volume"),
    pytest.param(f"{POD_SPEC}.automountServiceAccountToken", False, id="no-token"),
    pytest.param(f"{POD_SPEC}.serviceAccountName", "hpcbridge-hooks", id="service-account"),
]


@pytest.mark.parametrize("install", INSTALLS)
@pytest.mark.parametrize(("field_path", "expected"), DEPLOYMENT_SETTINGS)
def test_deployment_setting(install: str, field_path: str, expected: object) -> None:
    deployment = select(render_install(install), {"kind": "Deployment", "name": "hpcbridge-hooks"})
    assert field(deployment, field_path) == expected


@pytest.mark.parametrize("install", INSTALLS)
def test_service_routes_to_the_hooks(install: str) -> None:
    service = select(render_install(install), {"kind": "Service", "name": "hpcbridge-hooks"})
    assert service["spec"]["selector"] == LABELS
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}
    ]


# --- (e) the Dockerfile ---------------------------------------------------------------------


def test_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--no-color", "Dockerfile"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("FROM python:3.11-slim-bookworm", id="base"),
        pytest.param("RUN pip install --no-cache-dir -r requirements.txt", id="pip"),
        pytest.param("COPY hooks/ hooks/", id="copy-hooks"),
        pytest.param("USER 65532:65532", id="user"),
        pytest.param("EXPOSE 8080", id="expose"),
        pytest.param(
            'CMD ["gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()"]',
            id="cmd",
        ),
    ],
)
def test_dockerfile_line(line: str) -> None:
    assert line in (REPO / "Dockerfile").read_text().splitlines()


# --- (f) saved hook requests ----------------------------------------------------------------

COMPOSITE_KEYS = ["controller", "parent", "children", "related", "finalizing"]
DECORATOR_KEYS = ["controller", "object", "attachments", "related", "finalizing"]
REQUEST_SHAPES = {  # file: (controller kind, top-level keys in wire order, hook version)
    "customize.json": ("CompositeController", ["controller", "parent"], "v1"),
    "sync-first.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "sync-running.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "sync-v2.json": ("CompositeController", COMPOSITE_KEYS, "v2"),
    "finalize.json": ("CompositeController", COMPOSITE_KEYS, "v1"),
    "decorator-sync.json": ("DecoratorController", DECORATOR_KEYS, "v1"),
}


def test_every_saved_request_is_checked() -> None:
    assert sorted(path.name for path in REQUESTS.iterdir()) == sorted(REQUEST_SHAPES)


@pytest.mark.parametrize(
    ("file_name", "kind", "keys", "version"),
    [pytest.param(name, *shape, id=name) for name, shape in REQUEST_SHAPES.items()],
)
def test_saved_request(file_name: str, kind: str, keys: list[str], version: str) -> None:
    body = json.loads((REQUESTS / file_name).read_text())
    assert list(body) == keys
    parent = body.get("parent") or body["object"]
    assert batchjob_violations(parent) == []
    assert body.get("finalizing", False) == ("deletionTimestamp" in parent["metadata"])

    controller = body["controller"]
    assert controller["kind"] == kind
    assert schema_violations(controller, upstream_schema(kind)) == []
    (manifest,) = load_all(REPO / "metacontroller" / CONTROLLER_FILES[kind])
    for hook in manifest["spec"]["hooks"].values():
        hook["version"] = version
    assert controller["metadata"]["name"] == manifest["metadata"]["name"]
    assert controller["spec"] == manifest["spec"]


@pytest.mark.parametrize(
    ("file_name", "version"),
    [pytest.param(name, version, id=name) for name, (_, _, version) in REQUEST_SHAPES.items()],
)
def test_saved_request_object_keys(file_name: str, version: str) -> None:
    """Children, attachments and related objects are keyed as the hook version says: v1 by
    bare name (same-namespace objects), v2 by namespace/name."""
    body = json.loads((REQUESTS / file_name).read_text())
    for section in ("children", "attachments", "related"):
        for group in body.get(section, {}).values():
            for key, obj in group.items():
                name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
                assert key == (name if version == "v1" else f"{namespace}/{name}")
