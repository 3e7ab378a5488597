"""The mover Pods as the hooks declare them (restricted, Secrets mounted, never in env, claims
read-only for inputs) and what the hooks read back from an observed one: a termination
message is hostile text."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hooks.core.status.transfers import Stage
from hooks.core.values.job import JobRequest
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from hooks.core.values.storage import When
from hooks.core.wire import mover_pods
from hooks.core.wire.child_pod import LAST_APPLIED
from hooks.pods.movers import program
from tests.unit.conftest import UID, raw_spec, spec_of

STORAGE = {"s3": {"endpoint": "http://s3.site:9000", "secretRef": {"name": "s3-creds"}}}


def job(**fields: Any) -> JobRequest:
    spec = spec_of(raw_spec(storage=STORAGE, **fields))
    return JobRequest("research", "hello", UID, 2, spec, 120)


INPUTS = job(inputs=[{"s3": {"bucket": "data", "key": "a/b.json"}, "path": "b.json"},
                     {"persistentVolumeClaim": {"claimName": "prep", "subPath": "r"},
                      "path": "p/"}])


def observed(pod: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"],
                                "annotations": {LAST_APPLIED: json.dumps(pod)}},
            "status": status}


def test_the_inputs_mover_is_restricted_and_mounts_secrets_and_claims_read_only() -> None:
    pod = mover_pods.inputs_pod(INPUTS, image="img")
    (container,) = pod["spec"]["containers"]
    assert pod["metadata"]["name"] == "hello-inputs"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["command"] == ["python", "-m", "hooks.pods.movers"]
    assert container["args"][0] == "inputs"
    assert "valueFrom" not in json.dumps(container.get("env", []))
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["s3-secret"]["secret"]["secretName"] == "s3-creds"
    assert volumes["claim-0"]["persistentVolumeClaim"] == {"claimName": "prep", "readOnly": True}
    plan = json.loads(next(a for a in container["args"] if a.startswith("--plan="))[7:])
    assert plan[1]["dir"] == f"{mover_pods.VOLUME_MOUNT}/0/r"
    assert f"--staging-dir=.hpcbridge/research/hello/{UID}/staging-2" in container["args"]


def test_outputs_are_collected_when_their_when_matches() -> None:
    request = job(outputs=[{"path": "a", "persistentVolumeClaim": {"claimName": "c"},
                            "when": "OnFailure"}])
    assert mover_pods.outputs_pod(request, Phase.SUCCEEDED, image="img") is None
    pod = mover_pods.outputs_pod(request, Phase.FAILED, image="img")
    assert pod is not None and pod["spec"]["volumes"][-1]["persistentVolumeClaim"][
        "readOnly"] is False
    assert [mover_pods.due(w, Phase.CANCELLED) for w in When] == [False, True, True]


def test_a_done_report_is_read_back() -> None:
    pod = mover_pods.inputs_pod(INPUTS, image="img")
    report = mover_pods.Report(Stage.DONE, 3, 42).to_json()
    seen = mover_pods.observe(observed(pod, phase="Succeeded", containerStatuses=[
        {"state": {"terminated": {"exitCode": 0, "message": report}}}]), pod)
    assert (seen.phase, seen.files, seen.bytes) == (Stage.DONE, 3, 42)


def test_a_failed_run_is_retried_with_its_reason() -> None:
    pod = mover_pods.inputs_pod(INPUTS, image="img")
    report = mover_pods.Report(Stage.FAILED, reason=Reason.INPUT_NOT_FOUND,
                           message="s3://data/a/b.json was not found").to_json()
    seen = mover_pods.observe(observed(pod, phase="Running", containerStatuses=[
        {"restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "message": report}}}]), pod)
    assert (seen.phase, seen.reason) == (Stage.STAGING, Reason.INPUT_NOT_FOUND)
    assert "s3://data/a/b.json" in seen.message
    assert mover_pods.observe(observed(pod, phase="Running", containerStatuses=[
        {"restartCount": 5, "lastState": {"terminated": {"exitCode": 1, "message": report}}}]),
        pod, tries=5).phase is Stage.FAILED


def test_hostile_reports_and_other_pods_count_for_nothing() -> None:
    pod = mover_pods.inputs_pod(INPUTS, image="img")
    other = mover_pods.inputs_pod(job(inputs=[{"s3": {"bucket": "data", "key": "k"},
                                           "path": "k"}]), image="img")
    done = [{"state": {"terminated": {"exitCode": 0, "message": "{}"}}}]
    assert mover_pods.observe(observed(other, containerStatuses=done), pod).phase is Stage.PENDING
    for message in ("[" * 10000, '{"phase": "Done", "files": -1, "bytes": 1e99}',
                    '{"phase": "Failed", "reason": "Deleted"}', "\x00" * 10000):
        seen = mover_pods.observe(observed(pod, containerStatuses=[
            {"state": {"terminated": {"exitCode": 0, "message": message}}}]), pod)
        assert seen.files >= 0 and seen.bytes >= 0 and seen.reason in (
            Reason.NONE, Reason.OUTPUTS_FAILED)


def test_a_mover_on_a_batchclusters_route_trusts_its_host_keys_only() -> None:
    """As the log Pod does: the BatchCluster's knownHosts are handed to the mover, which trusts
    them instead of any known_hosts in the login Secret."""
    site = replace(INPUTS, spec=replace(INPUTS.spec, cluster=replace(
        INPUTS.spec.cluster, site="hpc-a", known_hosts="login.hpc ssh-ed25519 AAAA")))
    (container,) = mover_pods.inputs_pod(site, image="img")["spec"]["containers"]
    assert "--batchcluster=hpc-a" in container["args"]
    assert "--known-hosts=login.hpc ssh-ed25519 AAAA" in container["args"]
    parsed = program._parser("movers").parse_args(container["args"])
    assert (parsed.batchcluster, parsed.known_hosts) == ("hpc-a", "login.hpc ssh-ed25519 AAAA")
    (own,) = mover_pods.inputs_pod(INPUTS, image="img")["spec"]["containers"]
    assert not [a for a in own["args"] if a.startswith(("--batchcluster", "--known-hosts"))]
