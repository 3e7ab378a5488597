"""SSH user certificates on both real test clusters: a BatchJob whose Secret holds a signed key
runs, one whose certificate has expired is refused before any login."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.driver import Driver
from tests.integration.conftest import (
    NAMESPACE,
    Cluster,
)


def certificate_secret(cluster: Cluster, name: str, certificate: Path) -> dict[str, Any]:
    return cluster.secret(name, **{"ssh-privatekey": cluster.cert_key.read_text(),
                                   "ssh-certificate": certificate.read_text()})


def test_a_certificate_signed_key_runs_and_an_expired_one_is_refused(
    driver: Driver, cluster: Cluster, name: str
) -> None:
    driver.apply_secret(certificate_secret(cluster, f"{name}-login", cluster.cert))
    driver.create(cluster.batchjob(name, "#!/bin/sh\necho signed\n", f"{name}-login"))
    status = driver.run_to_phase(NAMESPACE, name, "Succeeded", "Failed")["status"]
    assert status["phase"] == "Succeeded", status
    assert f'Accepted certificate ID "{cluster.cert_id}"' in cluster.ssh_log.read_text(
        errors="replace")

    expired = f"{name}-old"
    driver.apply_secret(certificate_secret(cluster, f"{expired}-login", cluster.cert_expired))
    driver.create(cluster.batchjob(expired, "#!/bin/sh\necho never\n", f"{expired}-login"))
    status = driver.sync(NAMESPACE, expired)["status"]
    assert (status["phase"], status["reason"]) == ("Pending", "InvalidSecret"), status
    assert "2020-01-01" in status["message"] and "expired" in status["message"], status
