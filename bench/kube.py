"""The Kubernetes API for the system benchmark: the current kubeconfig context as kubectl
resolves it, plain HTTPS requests with ``requests``, watches as threads, and kubectl itself for
what a user would do with it."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

OnEvent = Callable[[str, dict[str, Any], float], None]
"""Called with a watch event's type (ADDED, MODIFIED, DELETED, or ERROR when the watch lost
events), its object and the monotonic time it arrived."""


class KubeError(RuntimeError):
    """The cluster cannot be reached as the kubeconfig says, or refused a request."""


def kubectl(*args: str) -> str:
    """Run kubectl with the caller's environment (so its KUBECONFIG); its output."""
    done = subprocess.run(["kubectl", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KubeError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


class Kube:
    """One API server, reached with the current context's server, CA and credentials."""

    def __init__(self) -> None:
        config = json.loads(kubectl("config", "view", "--raw", "--minify", "--flatten",
                                    "-o", "json"))
        try:
            cluster = config["clusters"][0]["cluster"]
            user = config["users"][0]["user"] if config.get("users") else {}
        except (KeyError, IndexError) as e:
            raise KubeError("the kubeconfig has no current context: set KUBECONFIG") from e
        if "exec" in user or "auth-provider" in user:
            raise KubeError("the kubeconfig's user logs in through an auth plugin, which this "
                            "benchmark does not support: use a token or a client certificate")
        self._dir = tempfile.TemporaryDirectory(prefix="hpcbridge-bench-")
        self.server = cluster["server"].rstrip("/")
        self.session = requests.Session()
        # A kept-alive connection the API server closed while the benchmark waited: a read or
        # a delete is sent again once (urllib3 retries only idempotent methods after sending).
        self.session.mount("https://", HTTPAdapter(max_retries=Retry(
            total=1, connect=1, read=1, status=0, raise_on_status=False)))
        self.verify = self._ca(cluster)
        """Given with every request: the session's own is overridden by REQUESTS_CA_BUNDLE."""
        if "token" in user:
            self.session.headers["Authorization"] = f"Bearer {user['token']}"
        elif "tokenFile" in user:
            token = Path(user["tokenFile"]).read_text().strip()
            self.session.headers["Authorization"] = f"Bearer {token}"
        elif "client-certificate-data" in user:
            self.session.cert = (self._private("client.crt", user["client-certificate-data"]),
                                 self._private("client.key", user["client-key-data"]))
        elif "username" in user:
            self.session.auth = (user["username"], user.get("password", ""))

    def _ca(self, cluster: dict[str, Any]) -> bool | str:
        if cluster.get("insecure-skip-tls-verify"):
            return False
        if "certificate-authority-data" in cluster:
            return self._private("ca.crt", cluster["certificate-authority-data"])
        return True

    def _private(self, name: str, data: str) -> str:
        """Write base64 ``data`` to a file only this user can read; its path."""
        path = Path(self._dir.name) / name
        path.touch(mode=0o600)
        path.write_bytes(base64.b64decode(data))
        return str(path)

    def close(self) -> None:
        self.session.close()
        self._dir.cleanup()

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                ok: tuple[int, ...] = ()) -> dict[str, Any]:
        """One request; its JSON answer. A status in ``ok`` (e.g. 404, 409) is not an error."""
        response = self.session.request(method, self.server + path, json=body,
                                        verify=self.verify, timeout=60)
        if response.status_code >= 400 and response.status_code not in ok:
            raise KubeError(f"{method} {path} answered {response.status_code}: "
                            f"{response.text[:300]}")
        answer: dict[str, Any] = response.json() if response.content else {}
        return answer

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def post(self, path: str, body: dict[str, Any], ok: tuple[int, ...] = ()) -> dict[str, Any]:
        return self.request("POST", path, body, ok)

    def delete(self, path: str) -> dict[str, Any]:
        """Delete what ``path`` names. A collection of BatchJobs with finalizers can outlast the
        API server's request timeout (504): the deletion goes on, and the caller waits for it."""
        return self.request("DELETE", path, ok=(404, 504))

    def text(self, path: str) -> str:
        """A plain-text resource, such as /metrics."""
        response = self.session.get(self.server + path, verify=self.verify, timeout=60)
        if response.status_code != 200:
            raise KubeError(f"GET {path} answered {response.status_code}")
        return response.text

    def watch(self, path: str, on_event: OnEvent, stop: threading.Event) -> threading.Thread:
        """Watch the collection at ``path`` from now on, in a daemon thread, until ``stop``."""
        version = self.get(path)["metadata"]["resourceVersion"]
        thread = threading.Thread(target=self._follow, args=(path, version, on_event, stop),
                                  daemon=True, name=f"watch {path}")
        thread.start()
        return thread

    def _follow(self, path: str, version: str, on_event: OnEvent,
                stop: threading.Event) -> None:
        """Stream the watch, reconnecting from the last version seen (bookmarks keep it
        fresh); when the server has forgotten that version (410), say so and list again."""
        while not stop.is_set():
            params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
                      "timeoutSeconds": "600"}
            try:
                with self.session.get(self.server + path, params=params, stream=True,
                                      verify=self.verify, timeout=(10, 120)) as response:
                    response.raise_for_status()
                    for line in response.iter_lines():
                        if stop.is_set():
                            return
                        event = json.loads(line) if line else None
                        if event is None:
                            continue
                        kind, obj = event["type"], event["object"]
                        if kind == "ERROR":
                            on_event(kind, obj, time.monotonic())
                            version = self.get(path)["metadata"]["resourceVersion"]
                            break
                        version = obj["metadata"]["resourceVersion"]
                        if kind != "BOOKMARK":
                            on_event(kind, obj, time.monotonic())
            except (requests.RequestException, KubeError):
                time.sleep(0.5)
