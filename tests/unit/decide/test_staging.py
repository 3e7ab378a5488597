"""Data around an attempt through whole sync calls (``hooks.core.decide.staging`` with the
executor's pure core): the submission waits for the inputs mover's report, and the end of an
attempt waits for the outputs mover's; the mover Pods are children while they are
needed."""

from __future__ import annotations

import json
from typing import Any

from hooks.core.decide.effects import Cleanup, ListActive, Submit
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.wire.child_pod import LAST_APPLIED
from tests.unit.builders import SUBMITTED, Loop, Run, condition, queue, request, submitted_loop

STORAGE = {"s3": {"endpoint": "http://s3.site:9000", "secretRef": {"name": "s3-creds"}}}
INPUTS = [{"s3": {"bucket": "data", "key": "runs/42/params.json"}, "path": "data/params.json"}]
OUTPUTS = [{"path": "results/*.h5", "s3": {"bucket": "results", "prefix": "alice/"}}]


def mover(run: Run, direction: str) -> dict[str, Any]:
    (pod,) = [c for c in run.answer.body["children"] if c["metadata"]["name"] == f"sim-{direction}"]
    return pod  # type: ignore[no-any-return]


def observe(loop: Loop, pod: dict[str, Any], code: int, report: dict[str, Any], *,
            restarts: int = 0) -> None:
    """The Pod as Metacontroller hands it back: its applied configuration and its container's
    end (``code``), with the report as its termination message."""
    ended = {"terminated": {"exitCode": code, "message": json.dumps(report)}}
    state = ({"state": ended} if code == 0 else
             {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": ended})
    loop.body["children"]["Pod.v1"][pod["metadata"]["name"]] = {
        **pod, "metadata": {**pod["metadata"], "annotations": {LAST_APPLIED: json.dumps(pod)}},
        "status": {"phase": "Succeeded" if code == 0 else "Running",
                   "containerStatuses": [{"restartCount": restarts, **state}]}}


def done(files: int, size: int) -> dict[str, Any]:
    return {"phase": "Done", "files": files, "bytes": size, "reason": "", "message": ""}


def test_the_submission_waits_for_the_inputs_mover_then_moves_its_files_in() -> None:
    loop = Loop(request({"storage": STORAGE, "inputs": INPUTS}))
    first = loop.sync(SUBMITTED)
    assert "Submit" not in first.kinds
    assert (first.status["phase"], first.status["reason"]) == ("Pending", "StagingInputs")
    assert first.status["inputs"]["phase"] in ("Pending", "Staging")
    pod = mover(first, "inputs")
    observe(loop, pod, 1, {"phase": "Failed", "reason": "InputNotFound",
                           "message": "s3://data/runs/42/params.json was not found (NoSuchKey)."})
    missing = loop.sync(SUBMITTED)
    assert "Submit" not in missing.kinds and missing.status["reason"] == "InputNotFound"
    assert "s3://data/runs/42/params.json" in missing.status["message"]
    assert mover(missing, "inputs") == pod
    observe(loop, pod, 0, done(1, 7), restarts=1)
    staged = loop.sync(SUBMITTED)
    submit = staged.action(Submit)
    assert submit.job.staging.endswith("/staging-1") and submit.job.staged == ("data",)
    assert staged.status["inputs"] == {"phase": "Done", "files": 1, "bytes": 7}
    assert condition(staged, "InputsReady")["status"] == "True"
    assert not [c for c in staged.answer.body["children"]
                if c["metadata"]["name"] == "sim-inputs"]


def finished(exit_code: int) -> dict[type, Any]:
    outcome = Outcome.SUCCEEDED if exit_code == 0 else Outcome.FAILED
    return queue(TaskState("500", outcome, exit_code=exit_code))


def test_a_succeeded_job_is_complete_once_its_outputs_are_collected() -> None:
    loop = submitted_loop(storage=STORAGE, outputs=OUTPUTS)
    ended = loop.sync(finished(0))
    assert (ended.status["phase"], ended.status["reason"]) == ("Running", "CollectingOutputs")
    pod = mover(ended, "outputs")
    assert loop.sync(finished(0)).status["reason"] == "CollectingOutputs"
    observe(loop, pod, 0, done(3, 4096))
    collected = loop.sync(finished(0))
    assert collected.status["phase"] == "Succeeded"
    assert collected.status["outputs"] == {"phase": "Done", "files": 3, "bytes": 4096}
    assert condition(collected, "OutputsCollected")["status"] == "True"
    assert not [c for c in collected.answer.body["children"]
                if c["metadata"]["name"] == "sim-outputs"]


def test_outputs_that_fail_fail_a_succeeded_job_and_never_a_failed_jobs_reason() -> None:
    loop = submitted_loop(storage=STORAGE, outputs=OUTPUTS)
    observe(loop, mover(loop.sync(finished(0)), "outputs"), 0, {
        "phase": "Failed", "reason": "OutputsFailed",
        "message": "The output pattern 'results/*.h5' matched no file."})
    failed = loop.sync(finished(0))
    assert (failed.status["phase"], failed.status["reason"]) == ("Failed", "OutputsFailed")
    assert "results/*.h5" in failed.status["message"]
    always = submitted_loop(storage=STORAGE, outputs=[{**OUTPUTS[0], "when": "Always"}])
    observe(always, mover(always.sync(finished(3)), "outputs"), 0, {
        "phase": "Failed", "reason": "OutputsFailed", "message": "no file"})
    own = always.sync(finished(3))
    assert own.status["phase"] == "Failed" and own.status["reason"] != "OutputsFailed"
    assert own.status["outputs"]["phase"] == "Failed"
    skipped = submitted_loop(storage=STORAGE, outputs=OUTPUTS)
    not_due = skipped.sync(finished(3))
    assert not_due.status["phase"] == "Failed" and "outputs" not in not_due.status


def test_deleting_the_batchjob_mid_copy_stops_the_mover_and_removes_the_directory() -> None:
    """Finalize answers without the mover Pod, so Metacontroller deletes it (the copy stops
    with its Pod), and still cancels what is left and removes the remote directory."""
    loop = submitted_loop(storage=STORAGE, outputs=OUTPUTS)
    ended = loop.sync(finished(0))
    assert mover(ended, "outputs")
    loop.body["finalizing"] = True
    gone = loop.sync({ListActive: (), Cleanup: "removed"})
    assert gone.kinds[:2] == ["ListActive", "Cleanup"]
    assert gone.answer.body["finalized"] is True
    assert not [c for c in gone.answer.body["children"]
                if c["metadata"]["name"].endswith(("-outputs", "-inputs"))]
