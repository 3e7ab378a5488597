"""A stand-in for Metacontroller v4.17.2 that drives the hooks over HTTP.

It keeps BatchJobs, Secrets and Pods the way the API server would, and reconciles one BatchJob
the way Metacontroller's CompositeController (or DecoratorController) does: customize for the
related Secret (cached per uid and generation), then sync — or finalize once the BatchJob is
being deleted — with the exact request shape and key form of the hook version; a 200 answer
replaces the status wholesale (plus ``observedGeneration``) and the children list is the
complete desired set: missing Pods are created, unlisted ones deleted, changed ones deleted
and recreated on a later sync (``Recreate``). A non-200 answer changes nothing.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.front import TlsFiles, nginx

REPO = Path(__file__).resolve().parent.parent
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
V2_RESPONSE_KEYS = {"status", "children", "resyncAfterSeconds", "finalized"}
Object = dict[str, Any]


class HookFailed(AssertionError):
    """The hook answered something Metacontroller would reject."""


def now_text() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(log: Path, *, tls: TlsFiles | None = None, front: Mapping[str, str] | None = None,
            **env: str) -> Iterator[str]:
    """The hook server as `make run` starts it (gunicorn with the product's settings) on a free
    127.0.0.1 port, with ``env`` set and its output in ``log``: its URL, and the server stopped
    by its PID on the way out. With ``tls`` or ``front`` (nginx directives to set, such as
    ``client_header_timeout``), nginx runs in front of it as deploy/ runs it
    (``tests.front``; https with ``tls``), the URL is nginx's, and the server is awaited on its
    probes' port (``HPCBRIDGE_METRICS_PORT``, a free one unless given)."""
    port = free_port()
    behind = tls is not None or front is not None
    if behind:
        env = {"HPCBRIDGE_METRICS_PORT": str(free_port()), **env}
    gunicorn = Path(sys.executable).with_name("gunicorn")
    with log.open("w") as sink:
        server = subprocess.Popen(
            [str(gunicorn), "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()"],
            cwd=REPO, env={**os.environ, "HOST": "127.0.0.1", "PORT": str(port), **env},
            stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    probes = env.get("HPCBRIDGE_METRICS_PORT")
    try:
        try:
            wait_serving(f"http://127.0.0.1:{probes}" if probes else url)
        except RuntimeError as error:
            raise RuntimeError(f"{error}: {log.read_text()}") from None
        if not behind:
            yield url
            return
        directory = Path(tempfile.mkdtemp(prefix="nginx-", dir=log.parent))
        front_port = free_port()
        with nginx(directory, port=front_port, upstream=port, tls=tls, **(front or {})):
            yield f"{'https' if tls else 'http'}://127.0.0.1:{front_port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def wait_serving(url: str, within: float = 120.0, verify: str | bool = True) -> None:
    """Wait until the hook server at `url` answers /healthz.

    gunicorn's master listens before its worker has loaded the app, so until then a connection
    is accepted and left unanswered: a read timeout means "not yet", like a refused connection.
    """
    deadline = time.monotonic() + within
    while True:
        try:
            if requests.get(f"{url}/healthz", timeout=2, verify=verify).ok:
                return
        except (requests.ConnectionError, requests.Timeout):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer /healthz within {within:.0f} s")
        time.sleep(0.1)


@dataclass
class Driver:
    url: str
    shape: str = "composite"
    hook_version: str = "v1"
    timeout: float = 30.0
    batchjobs: dict[tuple[str, str], Object] = field(default_factory=dict)
    secrets: dict[tuple[str, str], Object] = field(default_factory=dict)
    config_maps: dict[tuple[str, str], Object] = field(default_factory=dict)
    pods: dict[tuple[str, str], Object] = field(default_factory=dict)
    batchclusters: dict[str, Object] = field(default_factory=dict)
    namespaces: dict[str, Object] = field(default_factory=dict)
    """Cluster-scoped related objects, by name (v1 hooks never see them: Metacontroller drops
    them from a namespaced parent's request)."""
    transitions: list[str] = field(default_factory=list)
    _related: dict[tuple[str, int], list[Object]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        name = "compositecontroller" if self.shape == "composite" else "decoratorcontroller"
        self.controller = yaml.safe_load((REPO / f"metacontroller/{name}.yaml").read_text())
        for hook in self.controller["spec"]["hooks"].values():
            hook["version"] = self.hook_version
        self.http = requests.Session()

    # -- the API server's side -------------------------------------------------------------

    def apply_secret(self, secret: Object) -> None:
        meta = secret["metadata"]
        self.secrets[(meta["namespace"], meta["name"])] = copy.deepcopy(secret)

    def apply_cluster_scoped(self, obj: Object) -> None:
        """Create or replace a BatchCluster or Namespace."""
        store = self.batchclusters if obj["kind"] == "BatchCluster" else self.namespaces
        store[obj["metadata"]["name"]] = copy.deepcopy(obj)

    def delete_secret(self, namespace: str, name: str) -> None:
        self.secrets.pop((namespace, name), None)

    def apply_config_map(self, config_map: Object) -> None:
        meta = config_map["metadata"]
        self.config_maps[(meta["namespace"], meta["name"])] = copy.deepcopy(config_map)

    def create(self, batchjob: Object) -> Object:
        obj = copy.deepcopy(batchjob)
        meta = obj["metadata"]
        meta.update(uid=str(uuid.uuid4()), generation=1, creationTimestamp=now_text(),
                    resourceVersion="1")
        meta.setdefault("finalizers", []).append(self._finalizer)
        self.batchjobs[(meta["namespace"], meta["name"])] = obj
        return obj

    def get(self, namespace: str, name: str) -> Object:
        return self.batchjobs[(namespace, name)]

    def update_spec(self, namespace: str, name: str, change: Callable[[Object], None]) -> None:
        obj = self.get(namespace, name)
        change(obj["spec"])
        obj["metadata"]["generation"] += 1

    def delete(self, namespace: str, name: str) -> None:
        self.get(namespace, name)["metadata"]["deletionTimestamp"] = now_text()

    def pods_of(self, namespace: str, name: str) -> list[Object]:
        uid = self.get(namespace, name)["metadata"]["uid"]
        return [pod for pod in self.pods.values()
                if pod["metadata"]["labels"].get("controller-uid") == uid]

    # -- Metacontroller's side --------------------------------------------------------------

    @property
    def _finalizer(self) -> str:
        kind = "compositecontroller" if self.shape == "composite" else "decoratorcontroller"
        return f"metacontroller.io/{kind}-{self.controller['metadata']['name']}"

    def _key(self, namespace: str, name: str) -> str:
        return f"{namespace}/{name}" if self.hook_version == "v2" else name

    def request(self, namespace: str, name: str) -> Object:
        """The body Metacontroller would send for this BatchJob now (serialise it before the
        next change: it shares the stored objects)."""
        parent = self.get(namespace, name)
        related: dict[str, dict[str, Object]] = {"Secret.v1": {}, "ConfigMap.v1": {}}
        if (parent.get("spec") or {}).get("dependsOn"):
            related["BatchJob.hpcbridge.io/v1alpha1"] = {}
        for obj in self._related_objects(parent):
            group = f"{obj['kind']}.{obj['apiVersion']}"
            if "namespace" not in obj["metadata"]:
                if self.hook_version == "v2":
                    related.setdefault(group, {})[obj["metadata"]["name"]] = obj
                continue
            related[group][self._key(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        children = {self._key(namespace, p["metadata"]["name"]): p
                    for p in self.pods_of(namespace, name)}
        body: Object = {"controller": self.controller}
        if self.shape == "composite":
            body.update(parent=parent, children={"Pod.v1": children})
        else:
            body.update(object=parent, attachments={"Pod.v1": children})
        body.update(related=related,
                    finalizing="deletionTimestamp" in parent["metadata"])
        return body

    def _related_objects(self, parent: Object) -> list[Object]:
        meta = parent["metadata"]
        cache_key = (meta["uid"], meta["generation"])
        if cache_key not in self._related:
            answer = self._post("customize", {"controller": self.controller, "parent": parent})
            self._related[cache_key] = answer["relatedResources"]
        found = []
        for rule in self._related[cache_key]:
            assert "labelSelector" not in rule, "names and labelSelector cannot be combined"
            if rule["resource"] in ("batchclusters", "namespaces"):
                assert "namespace" not in rule, "cluster-scoped objects have no namespace"
                scoped = (self.batchclusters if rule["resource"] == "batchclusters"
                          else self.namespaces)
                found += [scoped[n] for n in rule["names"] if n in scoped]
                continue
            store = {"secrets": self.secrets, "configmaps": self.config_maps,
                     "batchjobs": self.batchjobs}[rule["resource"]]
            for object_name in rule["names"]:
                obj = store.get((rule["namespace"], object_name))
                if obj is not None:
                    found.append(obj)
        return found

    def _post(self, hook: str, body: Object, timeout: float | None = None) -> Object:
        response = self.http.post(f"{self.url}/{hook}", json=body,
                                  timeout=timeout or self.timeout)
        if response.status_code != 200:
            raise HookFailed(f"{hook} answered {response.status_code}: {response.text[:500]}")
        answer = response.json()
        if not isinstance(answer, dict):
            raise HookFailed(f"{hook} answered {answer!r}")
        if "Traceback" in response.text:
            raise HookFailed(f"{hook} answered a traceback")
        return answer

    def sync(self, namespace: str, name: str) -> Object:
        """One reconcile of the BatchJob, applied as Metacontroller applies it."""
        body = self.request(namespace, name)
        hook = "finalize" if body["finalizing"] else "sync"
        answer = self._post(hook, body)
        self.apply(namespace, name, answer, finalizing=body["finalizing"])
        return answer

    def apply(self, namespace: str, name: str, answer: Object, *, finalizing: bool) -> None:
        """Apply a hook's answer as Metacontroller does (see the module docstring)."""
        if self.hook_version == "v2" and not set(answer) <= V2_RESPONSE_KEYS | {"attachments"}:
            raise HookFailed(f"v2 strict decoding rejects keys {set(answer) - V2_RESPONSE_KEYS}")
        obj = self.get(namespace, name)
        desired = answer.get("children" if self.shape == "composite" else "attachments") or []
        if any(child is None or "kind" not in child or "apiVersion" not in child
               for child in desired):
            raise HookFailed("every child needs kind and apiVersion")
        if answer.get("finalized") and finalizing:
            del self.batchjobs[(namespace, name)]
            for pod in self.pods_of_uid(obj["metadata"]["uid"]):
                self.pods.pop((namespace, pod["metadata"]["name"]))
            self.transitions.append(f"{namespace}/{name}: finalized")
            return
        self._manage_children(obj, desired)
        status = answer.get("status")
        if self.shape == "composite":
            status = dict(status or {})
            status["observedGeneration"] = obj["metadata"]["generation"]
        if status is not None:
            self._note_transition(obj, status)
            obj["status"] = json.loads(json.dumps(status))

    def pods_of_uid(self, uid: str) -> list[Object]:
        return [pod for pod in self.pods.values()
                if pod["metadata"]["labels"].get("controller-uid") == uid]

    def _manage_children(self, parent: Object, desired: list[Object]) -> None:
        meta = parent["metadata"]
        namespace, uid = meta["namespace"], meta["uid"]
        wanted = {}
        for child in desired:
            child = copy.deepcopy(child)
            child["metadata"].setdefault("labels", {})["controller-uid"] = uid
            wanted[child["metadata"]["name"]] = child
        for pod in self.pods_of_uid(uid):
            pod_name = pod["metadata"]["name"]
            applied = pod["metadata"]["annotations"][LAST_APPLIED]
            if pod_name not in wanted or json.loads(applied) != wanted[pod_name]:
                del self.pods[(namespace, pod_name)]
                wanted.pop(pod_name, None)  # Recreate: created again on a later sync
            else:
                wanted.pop(pod_name)
        for pod_name, child in wanted.items():
            pod = copy.deepcopy(child)
            pod["metadata"].update(
                namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=now_text(),
                annotations={**child["metadata"].get("annotations", {}),
                             LAST_APPLIED: json.dumps(child, sort_keys=True)},
                ownerReferences=[{"apiVersion": parent["apiVersion"], "kind": "BatchJob",
                                  "name": meta["name"], "uid": uid, "controller": True,
                                  "blockOwnerDeletion": True}],
            )
            pod["status"] = {"phase": "Pending"}
            self.pods[(namespace, pod_name)] = pod

    def _note_transition(self, obj: Object, status: Object) -> None:
        old = obj.get("status") or {}
        keys = ("phase", "reason", "jobIDs", "attempt")
        if any(old.get(k) != status.get(k) for k in keys):
            meta = obj["metadata"]
            self.transitions.append(
                f"{meta['namespace']}/{meta['name']}: {status.get('phase')}"
                f"{'/' + status['reason'] if status.get('reason') else ''} "
                f"attempt {status.get('attempt')} jobs {','.join(status.get('jobIDs') or [])}"
                f" — {status.get('message', '')}"
            )

    def run_until(
        self, namespace: str, name: str, done: Callable[[Object], bool], *,
        timeout: float = 120.0, max_sleep: float = 2.0,
    ) -> Object:
        """Sync again and again, honouring resyncAfterSeconds (capped), until ``done``."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.sync(namespace, name)
            if (namespace, name) not in self.batchjobs or done(self.get(namespace, name)):
                return answer
            if time.monotonic() > deadline:
                status = self.get(namespace, name).get("status")
                raise AssertionError(f"{namespace}/{name} not done in {timeout} s: {status}")
            time.sleep(min(answer.get("resyncAfterSeconds") or max_sleep, max_sleep))

    def run_to_phase(self, namespace: str, name: str, *phases: str, **kwargs: Any) -> Object:
        self.run_until(namespace, name,
                       lambda obj: (obj.get("status") or {}).get("phase") in phases, **kwargs)
        return self.get(namespace, name)

    def finalize(self, namespace: str, name: str, *, timeout: float = 60.0) -> Object:
        """Delete the BatchJob and call finalize until it answers finalized: true."""
        self.delete(namespace, name)
        return self.run_until(namespace, name, lambda obj: False, timeout=timeout)

    # -- the kubelet's side -----------------------------------------------------------------

    def run_pod(self, pod: Object, *, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run the Pod's container locally: its Secret volume as files, its command and args."""
        spec = pod["spec"]
        (container,) = spec["containers"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert not any("valueFrom" in e for e in container.get("env", [])), "secret in env"
        with tempfile.TemporaryDirectory() as tmp:
            args = list(container["args"])
            # The longest path first: a mount's path may begin with another's.
            for mount in sorted(container["volumeMounts"], key=lambda m: -len(m["mountPath"])):
                secret_name = volumes[mount["name"]]["secret"]["secretName"]
                secret = self.secrets[(pod["metadata"]["namespace"], secret_name)]
                directory = Path(tmp) / mount["name"]
                directory.mkdir()
                for key, value in secret["data"].items():
                    (directory / key).write_bytes(base64.b64decode(value))
                args = [a.replace(mount["mountPath"], str(directory)) for a in args]
            command = [sys.executable if c == "python" else c for c in container["command"]]
            env = {**os.environ, **{e["name"]: e["value"] for e in container.get("env", [])}}
            return subprocess.run([*command, *args], capture_output=True, text=True, env=env,
                                  timeout=timeout, cwd=REPO, check=False)
