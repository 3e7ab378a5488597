"""The mover Pods run as a kubelet would: their Secret volumes as files, their claims as
directories of this machine, their command and args, the termination message read from the
file the container wrote, and the Pod's status updated (a failed run waits to be run again,
``restartPolicy: OnFailure``)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from tests.driver import REPO, Driver

Object = dict[str, Any]


class Ran(NamedTuple):
    code: int
    peak_rss: int
    """The container's peak resident memory (bytes): its process's VmHWM when it ended."""


def run_mover(driver: Driver, pod: Object, claims: dict[str, Path], *,
              timeout: float = 600.0, kill_after: float | None = None) -> Ran:
    """Run the mover Pod once (SIGKILL after ``kill_after`` seconds, as a node that dies)
    and record its end in the Pod's status; its exit status and peak RSS."""
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert not any("valueFrom" in e for e in container.get("env", [])), "a secret in env"
    volumes = {v["name"]: v for v in spec["volumes"]}
    namespace = pod["metadata"]["namespace"]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "termination-log")
        args = [a.replace(container["terminationMessagePath"], str(report))
                for a in container["args"]]
        for mount in sorted(container["volumeMounts"], key=lambda m: -len(m["mountPath"])):
            volume = volumes[mount["name"]]
            if "secret" in volume:
                directory = Path(tmp, mount["name"])
                directory.mkdir()
                secret = driver.secrets[(namespace, volume["secret"]["secretName"])]
                for key, value in secret["data"].items():
                    (directory / key).write_bytes(base64.b64decode(value))
            else:
                directory = claims[volume["persistentVolumeClaim"]["claimName"]]
                assert volume["persistentVolumeClaim"]["readOnly"] is mount["readOnly"]
            args = [a.replace(mount["mountPath"], str(directory)) for a in args]
        command = [sys.executable if c == "python" else c for c in container["command"]]
        process = subprocess.Popen([*command, *args], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, cwd=REPO,
                                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        returncode, peak = finished(process, kill_after or timeout)
        message = report.read_text() if report.exists() else ""
    ended = {"exitCode": returncode, "message": message}
    old = (pod.get("status") or {}).get("containerStatuses") or [{}]
    restarts = old[0].get("restartCount", 0)
    if returncode == 0:
        pod["status"] = {"phase": "Succeeded", "containerStatuses": [
            {"restartCount": restarts, "state": {"terminated": ended}}]}
    else:
        pod["status"] = {"phase": "Running", "containerStatuses": [
            {"restartCount": restarts + 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": ended}}]}
    return Ran(returncode, peak)


def finished(process: subprocess.Popen[bytes], seconds: float) -> tuple[int, int]:
    """The exit status of ``process`` (SIGKILLed after ``seconds``) and its peak RSS: its
    VmHWM, read every 20 ms until it ends. (The ``ru_maxrss`` that wait4 reports is no
    substitute: it counts the forking parent's RSS too.)"""
    deadline, peak = time.monotonic() + seconds, 0
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        try:
            lines = status.read_text().splitlines()
        except OSError:
            lines = []
        peak = max([peak, *(int(line.split()[1]) * 1024 for line in lines
                            if line.startswith("VmHWM:"))])
        if time.monotonic() > deadline:
            process.kill()
        time.sleep(0.02)
    return process.returncode, peak
