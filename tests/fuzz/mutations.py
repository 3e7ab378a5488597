"""Hypothesis strategies: the saved Metacontroller requests, mutated.

A mutation picks a field of a saved request (examples/requests/*.json) — anything in the
parent, its status, the Secrets and the observed log Pods; the controller object and the Pods'
specs only as a whole — and replaces it with a hostile value, drops it, wraps it in a list, or
adds an unknown key next to it. Hostile values: the wrong JSON type (a list where an object
goes), huge, negative and fractional numbers, control characters (NUL, CR, LF), very long
strings, nesting 1000 deep, names like ``..`` and ``../../x``, uids like ``precious``, Secret
data that is not base64 or not UTF-8, and JSON text Python cannot write (``NaN``, ``1e400``,
invalid UTF-8: see ``answers.RAW``).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.answers import RAW, Object, endpoint_of, saved_names, saved_request

Path = tuple[str | int, ...]
HOOKS = ("/customize", "/sync", "/finalize")
PASSWORD = "fuzz-password-4f1c9e27"
"""The password of a password login: a value no answer may ever contain."""


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


NAMES = [".", "..", "../../x", "../x", "/", "a/b", "research/hello", "precious", "-", "x-",
         "Hello", "hello world", "hello\n", "hello\x00", "x" * 254, "é", "*", "$(id)"]
"""Object names, namespaces and uids that no API server would store."""

TEXT = ["", " ", "\x00", "a\x00b", "\r\n", "line\nbreak", "\t", "\x1b[31m", "\u202e", "\ufeff",
        "'; rm -rf ~ #", "`id`", "${HOME}", "%s%n", "{}", "[]", "null", "true", "0", "-1",
        "1e400", "NaN", "#!", "#!/bin/sh\r\n", "Pod.v1", "Secret.v1", "True", "Unknown",
        "2026-11-22T10:00:00Z", "2026-13-45T99:99:99Z", "yesterday", "4Gi", "1.5", "0x10",
        "slurm", "htcondor", "login.hpc.example.org", "127.0.0.1", "::1", "[::1]",
        "a" * 64 + ".example", "a..b"]

SITE_TEXT = ["@cert-authority * ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==", "garbage line",
             "host ssh-ed25519 !!!", "|1|x|y ssh-rsa AAAA", "@revoked", "host", "48", "lots",
             "1Ti1", "-1h", "9" * 40 + "Ti", "NotIn", "Exists", "hpc.example.org/a", "a/b/c",
             "-", "In"]
"""Values of a BatchCluster's fields: known_hosts lines, quantities, selector words."""

LONG = ["x" * 100_000, "#!/bin/sh\n" + "y" * 300_000, "\n" * 50_000]

NUMBERS = [0, -1, 1, 2, 7, 65535, 65536, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1,
           -(2**63), -(2**63) - 1, 10**30, -(10**30), 0.5, -0.0, 1.0, 1e308, -1e-308, True, False,
           None]

SECRET_DATA = ["", "!!!", "YWxpY2U", "YW xpY2U=", "YWxpY2U=\n", "====", "@raw:not-utf8@",
               b64(b"\xff\xfe\xfd"), b64(b"\x00"), b64(b"alice\x00"), b64(b"\r\n"),
               b64("é".encode("latin-1")), b64(" "), b64("root"), 0, [], {}, None]

RAW_TOKENS = sorted(RAW)


def json_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                              allow_infinity=False)
        | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                    max_size=3),
        max_leaves=6,
    )


def hostile() -> st.SearchStrategy[Any]:
    """A value to put where any field of a request goes."""
    return st.one_of(
        st.sampled_from(NAMES + TEXT + SITE_TEXT + NUMBERS + SECRET_DATA + RAW_TOKENS),
        st.sampled_from(LONG),
        st.text(max_size=30),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.binary(max_size=16).map(b64),
        json_values(),
        st.just([[[[[[[[]]]]]]]]),
        st.just({"a": {"b": {"c": [{}]}}}),
    ).map(copy.deepcopy)  # a later mutation may change it in place


def unknown_keys() -> st.SearchStrategy[str]:
    return st.sampled_from(["x", "", "\x00", "__proto__", "$ref", "constructor", "status",
                            "Pod.v1", "Secret.v1", "@raw:deep-1000@", "k" * 10_000]) | st.text(
        max_size=12)


def _opaque(path: Path) -> bool:
    """Subtrees mutated only as a whole: the controller object and the Pods' spec and status."""
    if path[:1] == ("controller",):
        return len(path) >= 2
    in_pod = len(path) >= 4 and path[0] in ("children", "attachments") and path[1] == "Pod.v1"
    return in_pod and path[3] in ("spec", "status")


def paths(node: Any, path: Path = ()) -> Iterator[Path]:
    """The paths of every field below ``node`` that a mutation may pick."""
    if path:
        yield path
    if _opaque(path):
        return
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths(value, (*path, index))


def _parent_of(body: Any, path: Path) -> Any:
    node = body
    for part in path[:-1]:
        node = node[part]
    return node


def dotted(path: Path) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else
                   f".{part}" if part.isidentifier() else f"[{part!r}]" for part in path)[1:]


def shown(value: Any) -> str:
    """A short repr: long strings by their start and length."""
    if isinstance(value, str) and len(value) > 60:
        return f"{value[:20]!r}...({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}..."


@st.composite
def mutation(draw: st.DrawFn, body: Object) -> str:
    """One mutation of ``body``, in place; what it did."""
    if not body:
        key, value = draw(unknown_keys()), draw(hostile())
        body[key] = value
        return f"{dotted((key,))} = {shown(value)}"
    path = draw(st.sampled_from(list(paths(body))))
    parent, last = _parent_of(body, path), path[-1]
    operation = draw(st.sampled_from(["replace", "replace", "replace", "drop", "wrap", "add"]))
    if operation == "drop":
        del parent[last]
        return f"drop {dotted(path)}"
    if operation == "wrap":
        parent[last] = [parent[last]]
        return f"wrap {dotted(path)} in a list"
    if operation == "add" and isinstance(parent[last], dict):
        key, value = draw(unknown_keys()), draw(hostile())
        parent[last][key] = value
        return f"{dotted((*path, key))} = {shown(value)}"
    if operation == "add" and isinstance(parent[last], list):
        value = draw(hostile())
        parent[last].append(value)
        return f"append {shown(value)} to {dotted(path)}"
    value = draw(hostile())
    parent[last] = value
    return f"{dotted(path)} = {shown(value)}"


@dataclass
class Request:
    """A request to send, and how it came about (its repr, in a failure report)."""

    endpoint: str
    body: Object
    made: list[str]

    def __repr__(self) -> str:
        return f"POST {self.endpoint} " + "; ".join(self.made)


def with_password(body: Object, *, insecure: bool) -> None:
    """Log in with a password (no key): a sync then connects to the cluster, which refuses."""
    secrets = (body.get("related") or {}).get("Secret.v1") or {}
    for secret in secrets.values():
        data = secret["data"]
        data.pop("ssh-privatekey", None)
        data["password"] = b64(PASSWORD)
        if insecure:
            data.pop("known_hosts", None)
    if insecure:
        parent = body.get("parent") or body["object"]
        parent["spec"]["cluster"]["insecureSkipHostKeyCheck"] = True


def on_htcondor(body: Object) -> None:
    """The same BatchJob on an HTCondor pool: a cluster of two procs."""
    parent = body.get("parent") or body["object"]
    spec = parent["spec"]
    spec["backend"] = "htcondor"
    spec.pop("slurm", None)
    spec["resources"].pop("nodes", None)
    spec["htcondor"] = {"queue": 2, "submitOptions": {"+ProjectName": '"cms"'}}
    status = parent.get("status")
    if status:
        status.update(backend="htcondor", jobIDs=["15.0", "15.1"], active=2)


def on_batchcluster(body: Object) -> None:
    """The same BatchJob on BatchCluster ``hpc-a`` (the same host, port and keys), handed
    over with the BatchJob's Namespace, as hook version v2 does."""
    parent = body.get("parent") or body["object"]
    cluster = parent["spec"]["cluster"]
    if "name" in cluster:  # on one already
        return
    related = body.setdefault("related", {})
    secrets = related.get("Secret.v1") or {}
    known = next((base64.b64decode(s["data"]["known_hosts"]).decode() for s in secrets.values()
                  if "known_hosts" in s.get("data", {})), "")
    key = " ".join(known.split()[1:3])
    site = {
        "apiVersion": "hpcbridge.io/v1alpha1", "kind": "BatchCluster",
        "metadata": {"name": "hpc-a"},
        "spec": {"backend": parent["spec"]["backend"], "host": cluster["host"],
                 "port": cluster["port"], "knownHosts": f"[{cluster['host']}]:{cluster['port']} "
                                                        f"{key}\n",
                 "workDir": "/scratch/hpcbridge",
                 "jump": [{"host": "bastion.example.org", "port": 2222}],
                 "namespaceSelector": {"matchLabels": {"hpc.example.org/a": "enabled"},
                                       "matchExpressions": [{"key": "tier", "operator": "In",
                                                             "values": ["batch"]}]},
                 "defaults": {"resources": {"timeLimit": "1h", "memory": "2Gi"}},
                 "limits": {"maxTimeLimit": "48h", "maxCpus": 64, "maxMemory": "1Ti",
                            "maxGpus": 4}},
    }
    namespace = parent["metadata"].get("namespace", "research")
    related["BatchCluster.hpcbridge.io/v1alpha1"] = {"hpc-a": site}
    related["Namespace.v1"] = {namespace: {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {"hpc.example.org/a": "enabled",
                                                   "tier": "batch"}}}}
    parent["spec"]["cluster"] = {"name": "hpc-a", "secretRef": cluster["secretRef"]}
    status = parent.get("status") or {}
    if status.get("cluster"):
        status["cluster"].update(name="hpc-a", knownHosts=site["spec"]["knownHosts"])


@st.composite
def base_requests(draw: st.DrawFn) -> Request:
    """A saved request as it is, or logging in with a password, or on HTCondor, or on a
    BatchCluster, or just deleted; and the hook it goes to (mostly its own)."""
    name = draw(st.sampled_from(saved_names()))
    body = saved_request(name)
    made = [f"{name}.json"]
    if draw(st.integers(0, 3)) == 0:
        on_htcondor(body)
        made.append("on htcondor")
    if draw(st.integers(0, 2)) == 0:
        on_batchcluster(body)
        made.append("on batchcluster hpc-a")
    login = draw(st.sampled_from(["key", "password", "password-insecure"]))
    if login != "key":
        with_password(body, insecure=login == "password-insecure")
        made.append(f"{login} login")
    if name == "finalize" and draw(st.booleans()):
        # Deleted just now: finalize keeps the BatchJob while the cluster cannot be asked.
        del body["parent"]["metadata"]["deletionTimestamp"]
        made.append("deleted just now")
    own = endpoint_of(name)
    return Request(draw(st.sampled_from([own, own, own, *HOOKS])), body, made)


@st.composite
def mutated_requests(draw: st.DrawFn, max_mutations: int = 3) -> Request:
    request = draw(base_requests())
    for _ in range(draw(st.integers(1, max_mutations))):
        request.made.append(draw(mutation(request.body)))
    return request


def edited(name: str, *edits: tuple[Path, Any], password: bool = False,
           site: bool = False) -> Object:
    """A saved request (on BatchCluster hpc-a with ``site``) with fields set (``DROP`` removes
    one): the regression cases."""
    body = copy.deepcopy(saved_request(name))
    if site:
        on_batchcluster(body)
    if password:
        with_password(body, insecure=False)
    for path, value in edits:
        parent = _parent_of(body, path)
        if value is DROP:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    return body


DROP = object()
