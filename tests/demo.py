"""`make demo`: walk examples/hello-slurm.yaml to Succeeded on the local SLURM test cluster.

Prints every status transition as the Metacontroller test driver applies the hooks' answers,
then runs the log Pod's command and prints what `kubectl logs hello-logs` would show.
"""

from __future__ import annotations

import argparse
import sys
import time

import yaml

from tests.driver import REPO, Driver, wait_serving
from tests.integration.conftest import cluster_from_state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the hook server")
    args = parser.parse_args()
    cluster = cluster_from_state("slurm")
    if cluster is None:
        raise SystemExit("the SLURM test cluster is not up: run tests/clusters/slurm-up.sh")
    batchjob = yaml.safe_load((REPO / "examples/hello-slurm.yaml").read_text())
    batchjob["spec"]["cluster"].update(host=cluster.host, port=cluster.port)
    batchjob["spec"].pop("resources", None)
    batchjob["spec"]["script"] += "sleep 4\necho done\n"
    namespace, name = batchjob["metadata"]["namespace"], batchjob["metadata"]["name"]
    secret_name = batchjob["spec"]["cluster"]["secretRef"]["name"]

    wait_serving(args.url)
    driver = Driver(args.url)
    driver.apply_secret(cluster.secret(secret_name))
    driver.create(batchjob)
    print(f"kubectl apply -f examples/hello-slurm.yaml  (cluster {cluster.host}:{cluster.port})")
    shown = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        answer = driver.sync(namespace, name)
        for line in driver.transitions[shown:]:
            print(f"  {line}")
        shown = len(driver.transitions)
        if driver.get(namespace, name)["status"]["phase"] in ("Succeeded", "Failed"):
            break
        time.sleep(min(answer.get("resyncAfterSeconds") or 2, 2))
    status = driver.get(namespace, name)["status"]
    print(f"phase {status['phase']}, exit code {status.get('exitCode')}, jobs {status['jobIDs']}")
    (pod,) = driver.pods_of(namespace, name)
    print(f"\nkubectl logs -n {namespace} {pod['metadata']['name']}:")
    logs = driver.run_pod(pod)
    sys.stdout.write(logs.stdout)
    sys.stderr.write(logs.stderr)
    driver.finalize(namespace, name)
    print(f"\nkubectl delete batchjob {name}: finalized, remote directory removed")
    return 0 if status["phase"] == "Succeeded" and logs.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
