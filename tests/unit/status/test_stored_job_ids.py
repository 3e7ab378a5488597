"""Job ids read back from a stored status, which a user who may write the status can set to
anything: only ids in the form of the stored backend's scheduler, of one job, are kept, and
none of the others reaches a command."""

from __future__ import annotations

import pytest

from hooks.core.decide import sync
from hooks.core.decide.effects import Cancel, Hold, Query, Release, Submit
from hooks.core.status import record
from hooks.core.values.job import SubmitAnswer, SubmitOutcome
from hooks.core.values.phases import Outcome, TaskState
from hooks.schedulers.registry import REGISTRY
from tests.unit.builders import T0, drive, request, stored_status
from tests.unit.conftest import call

EXISTING = SubmitOutcome(SubmitAnswer.EXISTING, "500")
"""The guard's answer for an attempt submitted before: the job id it recorded."""


@pytest.mark.parametrize("backend", ["slurm", "htcondor"])
@pytest.mark.parametrize("ids", [
    ["-u", "hpcuser"], ["--user=hpcuser"], ["-all"], ["jobname=hpcb-x-1"], ["1,2"],
    ["4242", "4343"], ["15.0", "16.0"], ["abc"], ["4242_--x"], ["4242 4343"], [""],
    ["1" * 21],
], ids=repr)
def test_stored_job_ids_of_no_scheduler_form_or_of_two_jobs_are_dropped(
        ids: list[str], backend: str) -> None:
    assert record.from_raw({"backend": backend, "jobIDs": ids}, REGISTRY).job_ids == ()


@pytest.mark.parametrize(("backend", "ids"), [
    ("slurm", ["4242"]), ("slurm", ["4242_0", "4242_1"]), ("slurm", ["4242+0", "4242+1"]),
    ("slurm", ["4242_[3-5%2]"]), ("htcondor", ["15.0", "15.1"]), ("htcondor", ["15"]),
], ids=repr)
def test_stored_job_ids_of_one_job_are_kept(backend: str, ids: list[str]) -> None:
    assert record.from_raw({"backend": backend, "jobIDs": ids}, REGISTRY).job_ids == tuple(ids)


@pytest.mark.parametrize(("backend", "ids"), [
    ("slurm", ["15.0"]), ("htcondor", ["4242_0"]), ("htcondor", ["4242+1"]),
    ("pbs", ["4242"]), ("", ["4242"]),
], ids=repr)
def test_stored_job_ids_are_kept_only_in_the_form_of_the_stored_backend(
        backend: str, ids: list[str]) -> None:
    """Each scheduler says which task ids are its own; a backend no scheduler answers to has
    none."""
    assert record.from_raw({"backend": backend, "jobIDs": ids}, REGISTRY).job_ids == ()


def test_an_option_as_a_stored_job_id_reaches_no_command() -> None:
    """``scancel -u hpcuser`` would cancel every job of the account: the ids are dropped and
    the attempt is submitted again, which its guard answers with the job it recorded."""
    body = request({"activeDeadlineSeconds": 5},
                   status=stored_status(jobIDs=["-u", "hpcuser", "500"], submitTime=T0))
    run = drive(sync.decide(call(body)), {Query: [TaskState("500", Outcome.RUNNING)],
                                          Submit: EXISTING})
    assert run.kinds[0] == "Submit"
    assert not [a for a in run.actions if isinstance(a, (Cancel, Hold, Release))]


def test_a_non_numeric_htcondor_id_is_no_server_error() -> None:
    """``condor_hold`` takes the ids as ``ClusterId == int(id)``: ``abc`` was a 500."""
    body = request({"backend": "htcondor", "suspend": True},
                   status=stored_status("htcondor", jobIDs=["abc"]))
    run = drive(sync.decide(call(body)), {Query: [], Submit: EXISTING})
    assert not [a for a in run.actions if isinstance(a, Hold)]
    assert isinstance(run.actions[0], Submit)
