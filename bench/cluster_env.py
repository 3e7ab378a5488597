"""A SLURM cluster described by an env file (as tests/clusters/slurm-up.sh writes one): the login
Secret and the ``spec.cluster`` it gives the system benchmark's BatchJobs, and the scheduler
jobs that sacct lists for them, by the job name the hooks give each attempt (``hpcb-<the
BatchJob's uid>-<attempt>``: the comment they also set is not in accounting unless the cluster
stores it)."""

from __future__ import annotations

import datetime
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hooks.core.sites.secret import Credentials
from hooks.deadline import Deadline
from hooks.schedulers.slurm.commands import NAME_PREFIX
from hooks.ssh.client import Target
from hooks.ssh.login import connect
from tests.integration.conftest import b64, read_env

PREFIX = "HPCBRIDGE_SLURM_"


class ClusterEnv:
    def __init__(self, path: Path) -> None:
        env = read_env(path)
        missing = [k for k in ("HOST", "PORT", "USER", "KEY", "KNOWN_HOSTS")
                   if PREFIX + k not in env]
        if missing:
            raise SystemExit(f"{path} lacks {', '.join(PREFIX + k for k in missing)}")
        self.host, self.port = env[PREFIX + "HOST"], int(env[PREFIX + "PORT"])
        self.user = env[PREFIX + "USER"]
        self.key = Path(env[PREFIX + "KEY"]).read_text()
        self.known_hosts = Path(env[PREFIX + "KNOWN_HOSTS"]).read_text()
        self.partition = env.get(PREFIX + "PARTITION", "")

    def secret(self, name: str) -> dict[str, Any]:
        """The login Secret, with the keys of docs/batchjob-api.md's cluster Secret."""
        data = {"username": self.user, "ssh-privatekey": self.key,
                "known_hosts": self.known_hosts}
        return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name},
                "data": {key: b64(value) for key, value in data.items()}}

    def spec(self, secret: str) -> dict[str, Any]:
        """The part of a BatchJob's spec that says where it runs."""
        spec: dict[str, Any] = {"cluster": {"host": self.host, "port": self.port,
                                            "secretRef": {"name": secret}}}
        if self.partition:
            spec["slurm"] = {"partition": self.partition}
        return spec

    def sacct(self, since: datetime.datetime) -> list[str]:
        """The name of every job submitted since ``since`` (the cluster's local time)."""
        credentials = Credentials(self.user, private_key=self.key,
                                  known_hosts=self.known_hosts)
        conn = connect(Target(self.host, self.port), credentials, deadline=Deadline.after(30))
        try:
            done = conn.run(["sacct", "-X", "-n", "-P", "-S", f"{since:%Y-%m-%dT%H:%M:%S}",
                             "--format=JobName"], deadline=Deadline.after(60))
        finally:
            conn.close()
        if done.exit_status != 0:
            raise RuntimeError(f"sacct failed: {done.stderr.decode(errors='replace')[:300]}")
        return done.out.split()

    def jobs_per_batchjob(self, uids: dict[str, str], since: datetime.datetime,
                          settle: float = 20) -> Counter[str]:
        """Scheduler jobs per BatchJob (``uids`` maps each uid to its name), asked again every
        2 s until two answers agree (slurmdbd records submissions a little later) or ``settle``
        seconds pass."""
        last = None
        stop = time.monotonic() + settle
        while True:
            keys = [name.removeprefix(NAME_PREFIX).rpartition("-")[0]
                    for name in self.sacct(since) if name.startswith(NAME_PREFIX)]
            counts = Counter(uids[key] for key in keys if key in uids)
            if counts == last or time.monotonic() > stop:
                return counts
            last = counts
            time.sleep(2)
