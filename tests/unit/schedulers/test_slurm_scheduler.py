"""The SLURM scheduler package: the sbatch command line, the guarded submission's answer,
and how squeue and sacct answers become task states (a fake connection, no SSH)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hooks.core.values.fields import SpecError
from hooks.core.values.job import JobRef, SubmitAnswer
from hooks.core.values.phases import Outcome, TaskState
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import SchedulerError
from hooks.schedulers import guard
from hooks.schedulers.registry import REGISTRY
from hooks.schedulers.slurm.commands import IN_PLACE, sbatch_argv
from hooks.schedulers.slurm.options import (
    SBATCH_LONG_WITH_VALUE,
    SBATCH_LONG_WITHOUT_VALUE,
    SBATCH_SHORT_FLAGS,
    SBATCH_SHORT_OPTIONAL_VALUE,
    SBATCH_SHORT_WITH_VALUE,
)
from hooks.schedulers.slurm.remote import submit_outcome
from hooks.schedulers.slurm.rules import missing_value
from hooks.schedulers.slurm.scheduler import SCHEDULER
from hooks.ssh.client import Completed
from tests.unit.conftest import (
    UID,
    FakeConnection,
    completed,
    deadline,
    job,
    recorded,
    stand_ins,
)
from tests.unit.spec.test_spec import one_sentence_naming


def test_sbatch_argv_carries_the_attempts_identity() -> None:
    argv = sbatch_argv(job(attempt=3))
    assert argv[:6] == ["sh", "-c", IN_PLACE, "hpcbridge-sbatch", "%j", "--parsable"]
    assert f"--job-name=hpcb-{UID}-3" in argv
    assert "--comment=research/hello" in argv
    assert argv[-1] == "script"


@pytest.mark.parametrize(("directory", "written"), [
    pytest.param("out-%j", "out-%%j", id="percent"),
    pytest.param("100%", "100%%", id="trailing-percent"),
    pytest.param("plain dir", "plain dir", id="plain"),
])
@pytest.mark.parametrize(("slurm", "pattern"), [({}, "%j"), ({"array": "0-1"}, "%A_%a")])
def test_sbatch_writes_output_where_the_directory_is_named_percent_signs_escaped(
    tmp_path: Path, directory: str, written: str, slurm: dict[str, str], pattern: str,
) -> None:
    # sbatch expands "%" in --output/--error, the directory's included: ~/out-%j became
    # ~/out-281 for job 281 on the real cluster. "%%" is sbatch's "%".
    attempt = tmp_path / "home" / directory
    attempt.mkdir(parents=True)
    env = stand_ins(tmp_path, home=tmp_path / "home", sbatch='printf "%s\\n" "$@"')
    argv = sbatch_argv(job(slurm=slurm))
    args = subprocess.run(argv, cwd=attempt, env=env, capture_output=True, text=True,
                          check=True).stdout.splitlines()
    escaped = str(tmp_path / "home").replace("%", "%%")
    assert args[:2] == [f"--output={escaped}/{written}/{pattern}.out",
                        f"--error={escaped}/{written}/{pattern}.err"]
    assert args[2:] == argv[5:]


def test_sbatch_argv_maps_resources_and_options() -> None:
    argv = sbatch_argv(
        job(
            resources={"cpus": 2, "memory": "4Gi", "gpus": 1, "timeLimit": "1d12h", "nodes": 1},
            slurm={"partition": "debug", "account": "research", "qos": "normal",
                   "array": "0-3"},
        )
    )
    for expected in (
        "--cpus-per-task=2", "--mem=4096M", "--gpus=1", "--time=1-12:00:00", "--nodes=1",
        "--partition=debug", "--account=research", "--qos=normal", "--array=0-3",
    ):
        assert expected in argv


def test_sbatch_argv_puts_extra_args_last_as_separate_arguments() -> None:
    argv = sbatch_argv(job(slurm={"extraArgs": ["--constraint=haswell", "--mail-type=END"]}))
    assert argv[-3:] == ["--constraint=haswell", "--mail-type=END", "script"]


def test_sbatch_argv_leaves_unset_options_out() -> None:
    argv = sbatch_argv(job())
    assert not [a for a in argv if a.startswith(("--mem", "--time", "--array", "--partition"))]


def test_guarded_submission_sends_the_script_on_stdin_and_never_in_argv() -> None:
    script = "#!/bin/bash\necho 'secret-looking $(rm -rf /)'\n"
    request = job(script=script)
    argv, stdin = guard.command(
        remote_dir=request.remote_dir, files=[("script", script.encode())],
        submit=sbatch_argv(request), lookup="true", transient="x",
        stale_seconds=request.guard_stale,
    )
    assert stdin == script.encode()
    assert not any(script in arg for arg in argv)
    assert request.remote_dir in argv
    assert argv[-len(sbatch_argv(request)):] == sbatch_argv(request)


def test_submit_is_one_guarded_command_with_the_jobs_staleness() -> None:
    request = job(attempt=2)
    conn = FakeConnection({"hpcbridge-submit": [completed("submitted 4242\n")]})
    outcome = SCHEDULER.submit(conn, request, deadline=deadline(10))
    assert (outcome.answer, outcome.job_id) == (SubmitAnswer.SUBMITTED, "4242")
    [(argv, stdin)] = conn.calls
    assert stdin == request.spec.script.encode()
    assert argv[:5] == ["sh", "-c", guard.PROGRAM, "hpcbridge-submit", request.remote_dir]
    assert argv[5] == str(request.guard_stale)
    assert argv[-len(sbatch_argv(request)):] == sbatch_argv(request)


@pytest.mark.parametrize(
    ("result", "answer", "job_id", "message"),
    [
        pytest.param(completed("submitted 4242\n"), SubmitAnswer.SUBMITTED, "4242", "4242",
                     id="new"),
        pytest.param(completed("existing 4242\n"), SubmitAnswer.EXISTING, "4242", "4242",
                     id="existing"),
        pytest.param(completed("inflight\n"), SubmitAnswer.IN_FLIGHT, "", "", id="in-flight"),
        pytest.param(
            completed("refused sbatch: error: Batch job submission failed: Invalid partition "
                      "name specified\n"),
            SubmitAnswer.REFUSED, "",
            "sbatch: error: Batch job submission failed: Invalid partition name specified",
            id="refused",
        ),
        pytest.param(
            completed("transient sbatch: error: Unable to contact slurm controller\n"),
            SubmitAnswer.TRANSIENT, "", "sbatch: error: Unable to contact slurm controller",
            id="transient",
        ),
        pytest.param(completed("submitted 4;cluster\n"), SubmitAnswer.REFUSED, "",
                     "sbatch printed '4;cluster'", id="not-a-number"),
    ],
)
def test_submit_outcome(
    result: Completed, answer: SubmitAnswer, job_id: str, message: str
) -> None:
    outcome = submit_outcome(result)
    assert (outcome.answer, outcome.job_id, outcome.message) == (answer, job_id, message)


@pytest.mark.parametrize(
    ("result", "message"),
    [
        pytest.param(completed("error cannot create .hpcbridge/research/hello\n"),
                     "error cannot create .hpcbridge/research/hello", id="guard-error"),
        pytest.param(completed("", "sh: 1: timeout: not found\n", 127),
                     "sh: 1: timeout: not found", id="exit-status"),
        pytest.param(completed("", "", 1), "submission exited 1", id="silent-failure"),
    ],
)
def test_submit_outcome_raises_scheduler_error(result: Completed, message: str) -> None:
    with pytest.raises(SchedulerError) as caught:
        submit_outcome(result)
    assert str(caught.value) == message


def slurm(squeue: Completed, sacct: Completed | None = None) -> FakeConnection:
    """A connection whose squeue answers ``squeue`` and whose sacct answers ``sacct`` (an
    empty success when not given)."""
    return FakeConnection({"squeue": [squeue], "sacct": [sacct] if sacct else []})


def query(conn: FakeConnection, key: str, job_id: str) -> list[TaskState]:
    tasks = SCHEDULER.query(conn, [JobRef(key, job_id)], deadline=deadline(5))
    return sorted(tasks[key], key=lambda t: t.task_id)


def line(task_id: str, name: str, state: str, reason: str = "None") -> str:
    return f"{task_id}|{name}|{state}|{reason}|2026-11-22T10:00:00|2026-11-22T10:00:01|NONE|" \
           f"{task_id.split('_')[0]}\n"


def test_query_reads_squeue_while_the_job_is_active() -> None:
    conn = slurm(completed(line("4242", f"hpcb-{UID}-1", "RUNNING")))
    task, = query(conn, f"{UID}-1", "4242")
    assert (task.task_id, task.outcome) == ("4242", Outcome.RUNNING)
    assert "sacct" not in conn.programs()


def test_query_falls_back_to_sacct_after_min_job_age() -> None:
    sacct = f"4242|hpcb-{UID}-1|FAILED|3:0|2026-11-22T10:00:00|2026-11-22T10:00:01|" \
            "2026-11-22T10:00:09|None\n"
    conn = slurm(completed(recorded("slurm", "squeue.txt")), completed(sacct))
    task, = query(conn, f"{UID}-1", "4242")
    assert (task.outcome, task.reason, task.exit_code) == (
        Outcome.FAILED, Reason.NON_ZERO_EXIT_CODE, 3
    )
    assert "sacct" in conn.programs()


def test_query_ignores_other_jobs_of_the_login_user() -> None:
    conn = slurm(completed(recorded("slurm", "squeue.txt")),
                 completed(recorded("slurm", "sacct.txt")))
    assert query(conn, f"{UID}-1", "4242") == []


def test_query_also_answers_attempts_of_ours_not_asked_about() -> None:
    other = "9c8d7e6f-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"
    listing = line("4242", f"hpcb-{UID}-1", "RUNNING") + line("4300", f"hpcb-{other}", "PENDING")
    conn = slurm(completed(listing + recorded("slurm", "squeue.txt")))
    tasks = SCHEDULER.query(conn, [JobRef(f"{UID}-1", "4242")], deadline=deadline(5))
    assert set(tasks) == {f"{UID}-1", other}  # the login user's other jobs are not ours
    assert [(t.task_id, t.outcome) for t in tasks[other]] == [("4300", Outcome.PENDING)]
    assert "sacct" not in conn.programs()


def test_query_of_one_attempt_alone_answers_that_attempt_only() -> None:
    other = "9c8d7e6f-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"
    listing = line("4242", f"hpcb-{UID}-1", "RUNNING") + line("4300", f"hpcb-{other}", "PENDING")
    conn = slurm(completed(listing))
    tasks = SCHEDULER.query(conn, [JobRef(f"{UID}-1", "4242")], deadline=deadline(5),
                            whole_queue=False)
    assert set(tasks) == {f"{UID}-1"}


def test_query_reads_compressed_array_records_from_sacct() -> None:
    name = f"hpcb-{UID}-1"
    sacct = recorded("slurm", "sacct.txt").replace("|parr|", f"|{name}|")
    conn = slurm(completed(""), completed(sacct))
    tasks = query(conn, f"{UID}-1", "2")
    assert [(t.task_id, t.outcome) for t in tasks] == [
        ("2_0", Outcome.CANCELLED), ("2_2", Outcome.CANCELLED), ("2_3", Outcome.CANCELLED)
    ]


@pytest.mark.parametrize(
    "squeue",
    [
        pytest.param(completed("", "squeue: error: Unable to contact slurm controller "
                                   "(connect failure)\n", 1), id="slurmctld-down"),
    ],
)
def test_query_raises_when_the_scheduler_does_not_answer(squeue: Completed) -> None:
    with pytest.raises(SchedulerError, match="Unable to contact slurm controller"):
        query(slurm(squeue), f"{UID}-1", "4242")


def test_active_jobs_lists_only_this_batchjobs_active_jobs_once_each() -> None:
    text = (
        line("10", f"hpcb-{UID}-1", "COMPLETED")
        + line("11_0", f"hpcb-{UID}-2", "RUNNING")
        + line("11_1", f"hpcb-{UID}-2", "PENDING", "JobHeldUser")
        + line("12", "hpcb-other-uid-1", "RUNNING")
    )
    active = SCHEDULER.active_jobs(slurm(completed(text)), UID, deadline=deadline(5))
    assert list(active) == ["11"]  # the array, for both its active tasks


def test_the_registry_holds_the_slurm_scheduler_and_each_under_its_own_name() -> None:
    """The spec's backend picks the scheduler by its key; the status and the log Pod name it by
    ``name``: the two must agree for every scheduler registered."""
    assert REGISTRY["slurm"] is SCHEDULER
    assert {key: scheduler.name for key, scheduler in REGISTRY.items()} == {
        key: key for key in REGISTRY}


def refused_extra_args(args: list[str]) -> str:
    with pytest.raises(SpecError) as caught:
        job(slurm={"extraArgs": args})
    message = str(caught.value)
    one_sentence_naming(message, "spec.slurm.extraArgs")
    return message


RESERVED_LONG_NAMES = {"job-name", "output", "error", "array", "parsable", "comment", "chdir",
                       "wrap"}
NOT_A_SUBMISSION = {"wait", "test-only", "help", "usage", "version"}
VALUE_OPTIONS = sorted(SBATCH_LONG_WITH_VALUE - RESERVED_LONG_NAMES)
SHORT_VALUE_OPTIONS = sorted(SBATCH_SHORT_WITH_VALUE - set("JoeaD"))


@pytest.mark.parametrize("name", VALUE_OPTIONS)
def test_a_long_option_without_its_value_is_refused(name: str) -> None:
    message = refused_extra_args([f"--{name}"])
    assert f"--{name} takes a value" in message and "batch script" in message


@pytest.mark.parametrize("name", VALUE_OPTIONS)
def test_a_long_option_with_its_value_attached_is_allowed(name: str) -> None:
    assert job(slurm={"extraArgs": [f"--{name}=x"]}).spec.options.extra_args == (f"--{name}=x",)


@pytest.mark.parametrize("letter", SHORT_VALUE_OPTIONS)
def test_a_short_option_without_its_value_is_refused(letter: str) -> None:
    assert f"-{letter} takes a value" in refused_extra_args([f"-{letter}"])
    assert f"-{letter} takes a value" in refused_extra_args([f"-H{letter}"])  # behind a flag


@pytest.mark.parametrize("letter", SHORT_VALUE_OPTIONS)
def test_a_short_option_with_its_value_attached_is_allowed(letter: str) -> None:
    for arg in (f"-{letter}x", f"-v{letter}x"):
        assert job(slurm={"extraArgs": [arg]}).spec.options.extra_args == (arg,)


@pytest.mark.parametrize(
    "arg",
    [
        *(f"--{name}" for name in sorted(SBATCH_LONG_WITHOUT_VALUE - RESERVED_LONG_NAMES
                                         - NOT_A_SUBMISSION)),
        *(f"-{letter}" for letter in sorted(SBATCH_SHORT_FLAGS - set("WhV")
                                            | SBATCH_SHORT_OPTIONAL_VALUE)),
        "--exclusive=user", "-koff", "-vH", "--requeue", "--exclus", "--hol", "--wait-all-nodes=1",
        "--verb",
    ],
)
def test_options_without_a_value_stay_allowed(arg: str) -> None:
    assert missing_value(arg) is None
    assert job(slurm={"extraArgs": [arg]}).spec.options.extra_args == (arg,)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        pytest.param(["-p"], "-p takes a value", id="p"),
        pytest.param(["--partition"], "--partition takes a value", id="partition"),
        pytest.param(["--account"], "--account takes a value", id="account"),
        pytest.param(["--part"], "--partition takes a value", id="abbreviated"),
        pytest.param(["-A"], "-A takes a value", id="A"),
        pytest.param(["-vHp"], "-p takes a value", id="bundled"),
        pytest.param(["--constraint=haswell", "-q"], "-q takes a value", id="second"),
        pytest.param(["--excl"], "--exclude takes a value", id="exclude-or-exclusive"),
        pytest.param(["--tasks-per-node"], "--tasks-per-node is not an option sbatch documents",
                     id="undocumented-long"),
        pytest.param(["-Z"], "-Z is not an option sbatch documents", id="undocumented-short"),
        pytest.param(["-ZJx"], "-Z is not an option sbatch documents", id="unknown-then-J"),
    ],
)
def test_bare_value_options_from_the_review_are_refused(args: list[str], named: str) -> None:
    assert named in refused_extra_args(args)


@pytest.mark.parametrize("arg", ["-", "--", "script", "debug"])
def test_what_is_no_option_is_refused(arg: str) -> None:
    assert "write each option with its value in one element" in refused_extra_args([arg])


def test_the_option_tables_do_not_overlap() -> None:
    assert not SBATCH_LONG_WITH_VALUE & SBATCH_LONG_WITHOUT_VALUE
    shorts = [SBATCH_SHORT_WITH_VALUE, SBATCH_SHORT_OPTIONAL_VALUE, SBATCH_SHORT_FLAGS]
    assert sum(len(s) for s in shorts) == len(set().union(*shorts))
    assert {"partition", "account", "qos", "time", "mem"} <= SBATCH_LONG_WITH_VALUE
    assert {"exclusive", "hold", "requeue", "wait"} <= SBATCH_LONG_WITHOUT_VALUE


@pytest.mark.parametrize(
    ("arg", "named"),
    [("--wait", "--wait"), ("--wai", "--wait"), ("-W", "-W"), ("-vW", "-W"),
     ("--test-only", "--test-only"), ("--test", "--test-only"), ("--help", "--help"),
     ("-h", "-h"), ("--usage", "--usage"), ("--version", "--version"), ("-V", "-V"),
     ("-HV", "-V")],
)
def test_options_that_make_sbatch_not_submit_are_refused(arg: str, named: str) -> None:
    # --wait held the submission until the job ended; --test-only submits nothing.
    message = refused_extra_args([arg])
    assert f"sets {named}," in message and "instead of submitting" in message


def refused_script(body: str) -> str:
    with pytest.raises(SpecError) as caught:
        job(script=f"#!/bin/sh\n{body}")
    message = str(caught.value)
    one_sentence_naming(message, "spec.script")
    return message


@pytest.mark.parametrize(
    ("directive", "named"),
    [
        ("--chdir=/elsewhere", "--chdir"), ("--chdir /elsewhere", "--chdir"),
        ("--ch=/elsewhere", "--chdir"), ("-D/elsewhere", "-D"), ("-D /elsewhere", "-D"),
        ("-v -D /elsewhere", "-D"), ("-vD /elsewhere", "-D"), ("--array=0-3", "--array"),
        ("-a 0-3", "-a"), ("--output out.txt", "--output"), ("-J name", "-J"),
        ("-p debug --error=e", "--error"), ('"--chdir=/a b"', "--chdir"),
        ("--constraint x\\ y --wrap=id", "--wrap"), ("--wait", "--wait"), ("-W", "-W"),
        ("--test-only", "--test-only"),
    ],
)
def test_a_directive_setting_a_refused_option_is_refused_naming_its_line(
    directive: str, named: str
) -> None:
    lines = ["# a comment", "", "  # indented", "#SBATCH --time=5", f"#SBATCH {directive}"]
    message = refused_script("\n".join(lines) + "\n")
    assert message.startswith(f"spec.script line 6 ({f'#SBATCH {directive}'!r}) sets {named}, ")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("echo\n#SBATCH --chdir=/elsewhere\n", id="after-a-command"),
        pytest.param("  echo\n#SBATCH --array=0-3\n", id="after-an-indented-command"),
        pytest.param(" #SBATCH --chdir=/elsewhere\n", id="indented"),
        pytest.param("#SBATCH --exclusive # --chdir=/elsewhere\n", id="in-a-comment"),
        pytest.param("#SBATCH --constraint='-J x'\n", id="quoted-value"),
        pytest.param("#PBS -d /elsewhere\n#BSUB -cwd /elsewhere\n", id="pbs-ignored"),
        pytest.param("#SBATCH --time=5 -p debug --exclusive\n", id="allowed-options"),
    ],
)
def test_what_sbatch_does_not_read_as_a_refused_directive_is_allowed(body: str) -> None:
    assert job(script=f"#!/bin/sh\n{body}").spec.script.endswith(body)


def test_sbatch_ignores_pbs_and_bsub_directives() -> None:
    # "#BSUB -cwd /tmp" moved a job to /tmp on the test cluster.
    assert "--ignore-pbs" in sbatch_argv(job())


def test_htcondor_reads_no_directives_from_the_script() -> None:
    assert job("htcondor", script="#!/bin/sh\n#SBATCH --chdir=/x\n").spec.script
