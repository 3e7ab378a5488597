"""The workflow-engine recipes of docs/workflows.md and examples/workflows/. Argo Workflows,
Tekton and Kubeflow Pipelines do not run here; instead:

- the model of Argo's condition evaluation (tests/static/argo_conditions.py) is tested on its
  own, with cases of apimachinery's and Argo's own tests among them;
- the Argo recipe's ``successCondition`` and ``failureCondition`` are evaluated by it against
  BatchJobs whose status the hooks' own renderer wrote, for every phase;
- the conditions the ``kubectl wait`` recipes wait for are read in the same statuses as kubectl
  reads them, and the Tekton and Kubeflow scripts run in bash against a stand-in kubectl that
  answers from those statuses;
- every file has the shape its engine takes, the BatchJobs in it are valid, the RBAC objects are
  valid and grant what the recipe's commands use, and the page shows the files verbatim.
"""

from __future__ import annotations

import ast
import base64
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from hooks.core.status.dependencies import Seen
from hooks.core.status.record import CONDITION_TYPES, Status, to_raw
from hooks.core.values.job import Condition
from hooks.core.values.phases import Phase
from hooks.core.values.reasons import Reason
from tests.static.admission import batchjob_violations
from tests.static.argo_conditions import (
    Operator,
    Outcome,
    Requirement,
    SelectorError,
    lookup,
    parse,
    resource_outcome,
)
from tests.static.conftest import require_program
from tests.static.kube import EXAMPLES, REPO, Object, load_all
from tests.static.test_docs import heading_anchors

WORKFLOWS = EXAMPLES / "workflows"
DOC = REPO / "docs/workflows.md"
NAMESPACE = "research"
NOW = "2026-11-22T10:05:00Z"
T0 = "2026-11-22T10:00:00Z"

# The Argo recipe's conditions, and the variant the page offers that ends the step on Unknown.
SUCCESS = "status.phase == Succeeded"
FAILURE = "status.phase in (Failed,Cancelled)"
FAILURE_WITH_UNKNOWN = "status.phase in (Failed,Cancelled,Unknown)"


# --- the model of Argo's evaluation, on its own ----------------------------------------------

def req(key: str, operator: Operator, *values: str) -> Requirement:
    return Requirement(key, operator, tuple(sorted(values)))


# Cases of apimachinery's pkg/labels/selector_test.go (TestSetSelectorParser, TestSelectorParse).
PARSED = {
    "": (),
    "\rx": (req("x", Operator.EXISTS),),
    "this-is-a-dns.domain.com/key-with-dash": (
        req("this-is-a-dns.domain.com/key-with-dash", Operator.EXISTS),),
    "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)": (
        req("0.1.2.domain/99", Operator.NOT_IN, "10.10.100.1", "tick.tack.clock"),),
    "foo  in\t (abc)": (req("foo", Operator.IN, "abc"),),
    "x notin\n (abc)": (req("x", Operator.NOT_IN, "abc"),),
    "x in (abc,)": (req("x", Operator.IN, "abc", ""),),
    "x in (abc,abc)": (req("x", Operator.IN, "abc"),),
    "x in ()": (req("x", Operator.IN, ""),),
    "x in (a,,a,,a,,a,,)": (req("x", Operator.IN, "a", ""),),
    "x notin (abc,,def),bar,z in (),w": (
        req("bar", Operator.EXISTS), req("w", Operator.EXISTS),
        req("x", Operator.NOT_IN, "abc", "", "def"), req("z", Operator.IN, "")),
    "x=a,y!=b": (req("x", Operator.EQUALS, "a"), req("y", Operator.NOT_EQUALS, "b")),
    "x==a": (req("x", Operator.DOUBLE_EQUALS, "a"),),
    "x=": (req("x", Operator.EQUALS, ""),),
    "x= ,z= ": (req("x", Operator.EQUALS, ""), req("z", Operator.EQUALS, "")),
    "!x": (req("x", Operator.DOES_NOT_EXIST),),
    "x>1,z<5": (req("x", Operator.GREATER_THAN, "1"), req("z", Operator.LESS_THAN, "5")),
    "a in (x,y,notin, z,in)": (req("a", Operator.IN, "in", "notin", "x", "y", "z"),),
    "notin=in": (req("notin", Operator.EQUALS, "in"),),
    "a ": (req("a", Operator.EXISTS),),
    # Argo's own examples (docs/workflow-of-workflows.md, walk-through/kubernetes-resources.md).
    "status.phase in (Failed, Error)": (req("status.phase", Operator.IN, "Error", "Failed"),),
    "status.succeeded > 0": (req("status.succeeded", Operator.GREATER_THAN, "0"),),
}
INVALID = [
    "x=a||y=b", "x==a==b", "!x=a", "x<a", "x,,y", ",x,y", "x nott in (y)", "a in (xyz),",
    "a in (xyz)b notin ()", "a in (xyz abc)", "a notin(", "a (", "(",
    "x > -1",  # a value is a label value: "-1" starts with no alphanumeric
    "x <= 1",  # no such operator: "<" then "="
    "status.conditions.#.type", "status.*", "-x", "Upper.Prefix/x", "a/b/c", "x" * 64,
]


@pytest.mark.parametrize(("selector", "requirements"), PARSED.items(), ids=repr)
def test_parse_as_labels_parse_does(selector: str, requirements: tuple[Requirement, ...]) -> None:
    assert parse(selector) == requirements


@pytest.mark.parametrize("selector", INVALID, ids=repr)
def test_parse_refuses_what_labels_parse_refuses(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse(selector)


OBJECT: Object = {
    "metadata": {"name": "x", "labels": {"app": "demo"}},
    "status": {"phase": "Running", "active": 2, "ratio": 0.5, "round": 3.0, "flag": True,
               "none": None, "jobIDs": ["4242_0", "4242_1"], "conditions": [
                   {"type": "Complete", "status": "False"}, {"type": "Failed", "status": "True"}]},
}


@pytest.mark.parametrize(("key", "found"), [
    ("status.phase", ("Running", True)),
    ("status.active", ("2", True)),
    ("status.ratio", ("0.5", True)),
    ("status.round", ("3", True)),  # Go's shortest form of 3.0
    ("status.flag", ("true", True)),
    ("status.none", ("", True)),  # JSON null exists, as gjson has it
    ("status.jobIDs.1", ("4242_1", True)),
    ("status.conditions.1.type", ("Failed", True)),
    ("status.conditions.2.type", ("", False)),
    ("status.conditions.type", ("", False)),  # a name into an array finds nothing
    ("status.jobIDs", ('["4242_0","4242_1"]', True)),
    ("metadata.labels.app", ("demo", True)),
    ("status.reason", ("", False)),
    ("spec.script", ("", False)),
])
def test_lookup_reads_fields_as_gjson_does(key: str, found: tuple[str, bool]) -> None:
    assert lookup(OBJECT, key) == found


@pytest.mark.parametrize(("selector", "matches"), [
    ("status.phase == Running", True),
    ("status.phase = Running", True),
    ("status.phase == Pending", False),
    ("status.phase in (Pending,Running)", True),
    ("status.phase in (Pending)", False),
    ("status.phase notin (Pending)", True),
    ("status.phase notin (Pending,Running)", False),
    ("status.phase != Running", False),
    ("status.phase != Pending", True),
    ("status.phase", True),
    ("!status.phase", False),
    # A missing field: == and in do not match, != and notin do, and ! does.
    ("status.reason == Failed", False),
    ("status.reason in (Failed)", False),
    ("status.reason != Failed", True),
    ("status.reason notin (Failed)", True),
    ("status.reason", False),
    ("!status.reason", True),
    ("status.reason ==", False),  # compares with "", and the field is still missing
    ("status.none ==", True),  # null is present, its value ""
    # Numbers: compared as strings by = and in, as int64 by > and <.
    ("status.active == 2", True),
    ("status.active > 1", True),
    ("status.active < 2", False),
    ("status.ratio > 0", False),  # 0.5 is no int64
    ("status.round in (3)", True),
    ("status.phase > 1", False),
    ("status.flag == true", True),
    ("status.conditions.1.status == True", True),
    ("status.conditions.0.type == Complete", True),
    # Several requirements: all must match.
    ("status.phase == Running,status.active > 1", True),
    ("status.phase == Running,status.active > 2", False),
    ("status.phase == Running, metadata.labels.app == demo", True),
])
def test_requirements_match_as_apimachinery_does(selector: str, matches: bool) -> None:
    assert all(requirement.matches(OBJECT) for requirement in parse(selector)) is matches


def test_argos_own_matching_cases() -> None:
    """Argo's TestResourceConditionsMatching (workflow/executor/resource_test.go)."""
    success, failure = "status.phase == Succeeded", "status.phase == Error"
    for phase, outcome in (("Error", Outcome.FAILED), ("Succeeded", Outcome.SUCCEEDED),
                           ("Pending", Outcome.WAITING)):
        obj = {"name": "test", "status": {"phase": phase}}
        assert resource_outcome(obj, success, failure) is outcome


def test_failure_is_checked_first_and_any_failure_requirement_fails() -> None:
    obj = {"status": {"phase": "Succeeded", "failed": 1}}
    assert resource_outcome(obj, "status.phase == Succeeded", "status.failed > 0") is Outcome.FAILED
    # A comma in failureCondition: any requirement that matches fails the step.
    assert resource_outcome(obj, "status.phase == Pending",
                            "status.phase == Succeeded,status.failed > 5") is Outcome.FAILED
    # In successCondition: all must match.
    assert resource_outcome(obj, "status.phase == Succeeded,status.failed == 0",
                            "status.phase == Failed") is Outcome.WAITING


def test_no_success_condition_succeeds_at_the_first_poll() -> None:
    assert resource_outcome({}, "", "status.phase == Failed") is Outcome.SUCCEEDED


def test_a_bad_condition_is_refused() -> None:
    with pytest.raises(SelectorError):
        resource_outcome({}, "status.phase in Succeeded", FAILURE)


# --- real BatchJob statuses -------------------------------------------------------------------

STATUSES = {
    "new": Status(),
    "waiting-for-dependency": Status(
        reason=Reason.WAITING_FOR_DEPENDENCY, message="Waits for BatchJob preprocess (Running).",
        backend="slurm", attempt=1, attempt_generation=1,
        dependencies=(Seen(name="preprocess", condition=Condition.SUCCEEDED, uid="u-1",
                           phase="Running", attempt=1),)),
    "queued": Status(backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1,
                     active=1, submit_time=T0, reachable=True, scheduler_reason="Priority"),
    "suspended": Status(reason=Reason.SUSPENDED, message="The BatchJob is suspended.",
                        backend="slurm", attempt=1, attempt_generation=1),
    "running": Status(phase=Phase.RUNNING, backend="slurm", job_ids=("4242",), attempt=1,
                      attempt_generation=1, active=1, submit_time=T0, start_time=T0,
                      reachable=True),
    "running-unreachable": Status(phase=Phase.RUNNING, reason=Reason.CLUSTER_UNREACHABLE,
                                  message="Connection refused.", backend="slurm",
                                  job_ids=("4242",), attempt=1, attempt_generation=1, active=1,
                                  submit_time=T0, start_time=T0, reachable=False,
                                  reachability_reason="ClusterUnreachable",
                                  reachability_message="Connection refused."),
    "collecting-outputs": Status(phase=Phase.RUNNING, reason=Reason.COLLECTING_OUTPUTS,
                                 message="The job completed.", backend="htcondor",
                                 job_ids=("15.0",), attempt=1, attempt_generation=1,
                                 succeeded=1, exit_code=0, submit_time=T0, start_time=T0,
                                 reachable=True),
    "succeeded": Status(phase=Phase.SUCCEEDED, message="The job completed.", backend="slurm",
                        job_ids=("4242",), attempt=1, attempt_generation=1, succeeded=1,
                        exit_code=0, submit_time=T0, start_time=T0, completion_time=NOW,
                        reachable=True),
    "non-zero-exit-code": Status(phase=Phase.FAILED, reason=Reason.NON_ZERO_EXIT_CODE,
                                 message="The job exited with code 3.", backend="htcondor",
                                 job_ids=("15.0",), attempt=1, attempt_generation=1, failed=1,
                                 exit_code=3, submit_time=T0, start_time=T0,
                                 completion_time=NOW, reachable=True),
    "dependency-failed": Status(
        phase=Phase.FAILED, reason=Reason.DEPENDENCY_FAILED,
        message="BatchJob preprocess ended Failed.", backend="slurm", attempt=1,
        attempt_generation=1,
        dependencies=(Seen(name="preprocess", condition=Condition.SUCCEEDED, uid="u-1",
                           phase="Failed", attempt=1),)),
    "invalid-spec": Status(phase=Phase.FAILED, reason=Reason.INVALID_SPEC,
                           message="spec.script must start with #!.", backend="slurm"),
    "deadline-exceeded": Status(phase=Phase.FAILED, reason=Reason.DEADLINE_EXCEEDED,
                                message="Too long.", backend="slurm", job_ids=("4242",),
                                attempt=1, attempt_generation=1, cancelled=1, submit_time=T0,
                                completion_time=NOW, reachable=True),
    "cancelled": Status(phase=Phase.CANCELLED, reason=Reason.CANCELLED_ON_CLUSTER,
                        message="The job was cancelled on the cluster (by 1001).",
                        backend="slurm", job_ids=("4242",), attempt=1, attempt_generation=1,
                        cancelled=1, submit_time=T0, completion_time=NOW, reachable=True),
    "lost": Status(phase=Phase.UNKNOWN, reason=Reason.JOB_NOT_FOUND,
                   message="Job 4242 is in neither squeue nor sacct.", backend="slurm",
                   job_ids=("4242",), attempt=1, attempt_generation=1, submit_time=T0,
                   reachable=True),
}
STATUS_CASES = [pytest.param(name, id=name) for name in STATUSES]

# What each recipe makes of each phase (docs/workflows.md, "What a step waits for").
ARGO = {Phase.PENDING: Outcome.WAITING, Phase.RUNNING: Outcome.WAITING,
        Phase.SUCCEEDED: Outcome.SUCCEEDED, Phase.FAILED: Outcome.FAILED,
        Phase.CANCELLED: Outcome.FAILED,
        Phase.UNKNOWN: Outcome.WAITING}  # the scheduler lost the job; a later answer may come
ARGO_STOPPING_ON_UNKNOWN = {**ARGO, Phase.UNKNOWN: Outcome.FAILED}
TRUE_CONDITION = {Phase.PENDING: None, Phase.RUNNING: None, Phase.SUCCEEDED: "Complete",
                  Phase.FAILED: "Failed", Phase.CANCELLED: "Failed", Phase.UNKNOWN: "Failed"}


def test_every_phase_has_a_status() -> None:
    assert {status.phase for status in STATUSES.values()} == set(Phase)


def batchjob(status: Status | None, name: str = "hello", generation: int = 1) -> Object:
    """A BatchJob as the API server returns it: its status rendered by the hooks (and
    ``observedGeneration`` written), or none yet."""
    obj: Object = {
        "apiVersion": "hpcbridge.io/v1alpha1",
        "kind": "BatchJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "generation": generation,
                     "uid": "6a3c1f4e-0000-4000-8000-000000000001"},
        "spec": {"cluster": {"name": "hpc-a", "secretRef": {"name": "hpc-login"}},
                 "script": "#!/bin/bash\ntrue\n"},
    }
    if status is not None:
        obj["status"] = to_raw(status, previous={}, now=NOW, generation=1)
    return obj


def argo_conditions() -> set[tuple[str, str]]:
    """The (successCondition, failureCondition) pairs of the Argo recipe's templates."""
    (workflow,) = load_all(WORKFLOWS / "argo-workflow.yaml")
    return {(template["resource"]["successCondition"], template["resource"]["failureCondition"])
            for template in workflow["spec"]["templates"] if "resource" in template}


def test_the_argo_recipe_uses_the_documented_conditions() -> None:
    assert argo_conditions() == {(SUCCESS, FAILURE)}
    text = DOC.read_text()
    assert f"failureCondition: {FAILURE_WITH_UNKNOWN}" in text
    assert "successCondition: status.phase != Failed" in text  # the pitfall the page warns of


@pytest.mark.parametrize("name", STATUS_CASES)
def test_argo_conditions_on_real_statuses(name: str) -> None:
    """Succeeded: success only; Failed and Cancelled: failure only; Pending, Running and
    Unknown: neither, so the step waits (Unknown is not final: a later answer replaces it)."""
    status = STATUSES[name]
    obj = batchjob(status)
    ((success, failure),) = argo_conditions()
    assert resource_outcome(obj, success, failure) is ARGO[status.phase]
    assert all(r.matches(obj) for r in parse(success)) is (status.phase is Phase.SUCCEEDED)
    assert any(r.matches(obj) for r in parse(failure)) is (
        status.phase in (Phase.FAILED, Phase.CANCELLED))
    stopping = resource_outcome(obj, success, FAILURE_WITH_UNKNOWN)
    assert stopping is ARGO_STOPPING_ON_UNKNOWN[status.phase]


def test_argo_waits_for_a_batchjob_with_no_status_yet() -> None:
    obj = batchjob(None)
    assert resource_outcome(obj, SUCCESS, FAILURE) is Outcome.WAITING
    assert resource_outcome(obj, SUCCESS, FAILURE_WITH_UNKNOWN) is Outcome.WAITING
    # The page's warning: != matches a missing field, so this would succeed at once.
    assert resource_outcome(obj, "status.phase != Failed", FAILURE) is Outcome.SUCCEEDED


# --- kubectl wait ------------------------------------------------------------------------------

def condition_met(obj: Object, condition_type: str, condition_status: str = "True") -> bool:
    """``kubectl wait --for=condition=TYPE``, as kubectl's ConditionalWait.checkCondition
    (kubernetes/kubectl, pkg/cmd/wait/condition.go) reads the object: the first condition of
    the type (case-insensitive) decides, by its status (case-insensitive), unless its
    observedGeneration, or the status', is behind ``metadata.generation``."""
    for condition in obj.get("status", {}).get("conditions", []):
        if not isinstance(condition, dict) or not isinstance(condition.get("type"), str):
            continue
        if condition["type"].lower() != condition_type.lower():
            continue
        if not isinstance(condition.get("status"), str):
            continue
        generation = obj["metadata"].get("generation")
        observed = condition.get("observedGeneration",
                                 obj.get("status", {}).get("observedGeneration"))
        if generation is not None and observed is not None and observed < generation:
            return False
        return bool(condition["status"].lower() == condition_status.lower())
    return False


@pytest.mark.parametrize("name", STATUS_CASES)
def test_kubectl_wait_conditions_on_real_statuses(name: str) -> None:
    """Complete is True on Succeeded only; Failed on Failed, Cancelled and Unknown; neither
    before the end."""
    status = STATUSES[name]
    obj = batchjob(status)
    met = {kind for kind in ("Complete", "Failed") if condition_met(obj, kind)}
    expected = TRUE_CONDITION[status.phase]
    assert met == ({expected} if expected else set())


def test_kubectl_wait_ignores_an_earlier_specs_conditions() -> None:
    """After a spec change the stored status is the earlier spec's until the hooks see the
    new one: kubectl wait does not take it."""
    obj = batchjob(STATUSES["succeeded"], generation=2)
    assert obj["status"]["observedGeneration"] == 1
    assert not condition_met(obj, "Complete")


def test_kubectl_wait_finds_nothing_before_the_first_status() -> None:
    assert not condition_met(batchjob(None), "Complete")
    assert not condition_met(batchjob(None), "Failed")


def waited_conditions(script: str) -> list[str]:
    return re.findall(r"--for=condition=(\w+)", script)


# --- the scripts, in bash, against a stand-in kubectl ------------------------------------------

FAKE_KUBECTL = '''\
import json, os, re, sys, time

state = json.load(open(os.environ["FAKE_KUBECTL_STATE"]))
args = sys.argv[1:]
entry = {"argv": args}
if args[:1] == ["apply"]:
    entry["stdin"] = sys.stdin.read()
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps(entry) + "\\n")


def value(flag):
    return args[args.index(flag) + 1] if flag in args else None


if value("-n") != state["namespace"]:
    sys.exit("error: namespace " + str(value("-n")))
verb = args[0]
if verb == "apply":
    if state.get("apply_fails"):
        sys.exit("error: the server could not find the requested resource")
    print("batchjob.hpcbridge.io/" + state["name"] + " configured")
    sys.exit(0)
if "bj/" + state["name"] not in args:
    sys.exit("Error from server (NotFound): batchjobs.hpcbridge.io not found")
if verb == "wait":
    (condition,) = [a.split("=", 2)[2] for a in args if a.startswith("--for=condition=")]
    (timeout,) = [a.split("=", 1)[1] for a in args if a.startswith("--timeout=")]
    if state["met"].get(condition):
        print("batchjob.hpcbridge.io/" + state["name"] + " condition met")
        sys.exit(0)
    number, unit = re.fullmatch(r"([0-9.]+)(ms|s|m|h)", timeout).groups()
    time.sleep(float(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit])
    sys.exit("error: timed out waiting for the condition on batchjobs/" + state["name"])
if verb == "get":
    if value("-o") == "jsonpath={.status.phase}":
        sys.stdout.write(state["phase"])
    else:
        print("NAME PHASE\\n" + state["name"] + " " + state["phase"])
    sys.exit(0)
sys.exit("unknown command " + verb)
'''

MANIFEST = """\
apiVersion: hpcbridge.io/v1alpha1
kind: BatchJob
metadata:
  name: hello
  namespace: research
spec:
  cluster:
    name: hpc-a
    secretRef: {name: hpc-login}
  script: |
    #!/bin/bash
    scratch=/tmp/hello.$$
    echo "hello from $(hostname) in $(NAME) and ${HOME}" > "$scratch"
"""
"""A BatchJob whose script holds what a shell, Tekton or Kubernetes would expand if it were
passed carelessly: it must reach ``kubectl apply`` as written."""


class Stand:
    """A directory with the stand-in kubectl on PATH, the state it answers from and its log."""

    def __init__(self, root: Path, status: Status, *, apply_fails: bool = False) -> None:
        self.root = root
        bin_dir = root / "bin"
        bin_dir.mkdir()
        kubectl = bin_dir / "kubectl"
        kubectl.write_text(f"#!{sys.executable}\n{FAKE_KUBECTL}")
        kubectl.chmod(0o755)
        obj = batchjob(status)
        state = {"name": "hello", "namespace": NAMESPACE, "phase": obj["status"]["phase"],
                 "apply_fails": apply_fails,
                 "met": {kind: condition_met(obj, kind) for kind in ("Complete", "Failed")}}
        (root / "state.json").write_text(json.dumps(state))
        self.log = root / "log.jsonl"
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                    "FAKE_KUBECTL_STATE": str(root / "state.json"),
                    "FAKE_KUBECTL_LOG": str(self.log)}

    def run(self, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=self.root, env={**self.env, **env}, capture_output=True,
                              text=True, timeout=60, check=False)

    def calls(self) -> list[Object]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def tekton_tasks() -> dict[str, Object]:
    return {doc["metadata"]["name"]: doc for doc in load_all(WORKFLOWS / "tekton-task.yaml")}


def tekton_step(task: str, params: dict[str, str], result_dir: Path) -> tuple[str, dict[str, str]]:
    """The step's script and environment as Tekton makes them: ``$(params.X)`` and
    ``$(results.X.path)`` replaced in the script and the env values."""
    (step,) = tekton_tasks()[task]["spec"]["steps"]

    def substitute(text: str) -> str:
        text = re.sub(r"\$\(params\.([\w-]+)\)", lambda m: params[m.group(1)], text)
        return re.sub(r"\$\(results\.([\w-]+)\.path\)",
                      lambda m: str(result_dir / m.group(1)), text)

    script = substitute(step["script"])
    env = {item["name"]: substitute(item["value"]) for item in step.get("env", [])}
    return script, env


# (phase's status case, the step succeeds)
SCRIPT_CASES = [pytest.param(name, name == "succeeded", id=name) for name in
                ("succeeded", "non-zero-exit-code", "cancelled", "lost", "running")]
TIMEOUT = "300ms"


def check_calls(calls: list[Object], waits: list[str]) -> None:
    """One apply of MANIFEST, as written, in the namespace; then waits for the conditions, as
    written. (Which waits logged depends on timing: one that another's return cut short may
    have been killed before it could.)"""
    apply, *rest = calls
    assert apply["argv"] == ["apply", "-n", NAMESPACE, "-f", "-"]
    assert apply["stdin"].strip("\n") == MANIFEST.strip("\n")
    expected = [["wait", "-n", NAMESPACE, "bj/hello", f"--for=condition={kind}",
                 f"--timeout={TIMEOUT}"] for kind in waits]
    waited = [call["argv"] for call in rest if call["argv"][0] == "wait"]
    assert waited and all(argv in expected for argv in waited)


@pytest.mark.parametrize(("name", "succeeds"), SCRIPT_CASES)
def test_the_tekton_any_end_task_in_bash(tmp_path: Path, name: str, succeeds: bool) -> None:
    require_program("bash")
    stand = Stand(tmp_path, STATUSES[name])
    params = {"manifest": MANIFEST, "name": "hello", "namespace": NAMESPACE, "timeout": TIMEOUT}
    (tmp_path / "results").mkdir()
    script, env = tekton_step("batchjob", params, tmp_path / "results")
    assert script.startswith("#!/bin/bash\n")
    (tmp_path / "step").write_text(script)
    result = stand.run(["bash", str(tmp_path / "step")], env)
    assert (result.returncode == 0) is succeeds, result.stderr
    assert (tmp_path / "results/phase").read_text() == str(STATUSES[name].phase)
    check_calls(stand.calls(), ["Complete", "Failed"])


@pytest.mark.parametrize(("name", "succeeds"), SCRIPT_CASES)
def test_the_tekton_complete_task_in_bash(tmp_path: Path, name: str, succeeds: bool) -> None:
    require_program("bash")
    stand = Stand(tmp_path, STATUSES[name])
    params = {"manifest": MANIFEST, "name": "hello", "namespace": NAMESPACE, "timeout": TIMEOUT}
    script, env = tekton_step("batchjob-complete", params, tmp_path)
    (tmp_path / "step").write_text(script)
    result = stand.run(["bash", str(tmp_path / "step")], env)
    assert (result.returncode == 0) is succeeds, result.stderr
    check_calls(stand.calls(), ["Complete"])


@pytest.mark.parametrize("task", ["batchjob", "batchjob-complete"])
def test_a_tekton_step_stops_when_the_apply_fails(tmp_path: Path, task: str) -> None:
    require_program("bash")
    stand = Stand(tmp_path, STATUSES["succeeded"], apply_fails=True)
    params = {"manifest": MANIFEST, "name": "hello", "namespace": NAMESPACE, "timeout": TIMEOUT}
    script, env = tekton_step(task, params, tmp_path)
    (tmp_path / "step").write_text(script)
    assert stand.run(["bash", str(tmp_path / "step")], env).returncode != 0
    assert [call["argv"][0] for call in stand.calls()] == ["apply"]


# --- the Kubeflow component, read without kfp ----------------------------------------------------

KUBEFLOW = WORKFLOWS / "kubeflow-component.py"


def kubeflow_module() -> ast.Module:
    return ast.parse(KUBEFLOW.read_text())


def constants(module: ast.Module) -> dict[str, str]:
    """The module's string constants, by name."""
    found = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found[node.targets[0].id] = node.value.value
    return found


def decorated(module: ast.Module, decorator: str) -> ast.FunctionDef:
    """The one function decorated with ``dsl.<decorator>`` (called or not)."""
    (function,) = (
        node for node in module.body if isinstance(node, ast.FunctionDef)
        for mark in node.decorator_list
        if ast.unparse(mark.func if isinstance(mark, ast.Call) else mark) == f"dsl.{decorator}"
    )
    return function


def calls_in(node: ast.AST, name: str) -> list[ast.Call]:
    return [call for call in ast.walk(node)
            if isinstance(call, ast.Call) and ast.unparse(call.func).endswith(name)]


def keyword(call: ast.Call, name: str) -> ast.expr:
    (value,) = (item.value for item in call.keywords if item.arg == name)
    return value


def kubeflow_container() -> tuple[list[str], list[str], str]:
    """The component's command (constants resolved), its args (the function's parameters they
    name) and its image."""
    module = kubeflow_module()
    function = decorated(module, "container_component")
    (spec,) = calls_in(function, "dsl.ContainerSpec")
    command_node, args_node = keyword(spec, "command"), keyword(spec, "args")
    assert isinstance(command_node, ast.List) and isinstance(args_node, ast.List)
    names = constants(module)
    command = [names[item.id] if isinstance(item, ast.Name) else ast.literal_eval(item)
               for item in command_node.elts]
    args = [item.id for item in args_node.elts if isinstance(item, ast.Name)]
    assert len(args) == len(args_node.elts)
    assert [arg.arg for arg in function.args.args] == args
    image = ast.literal_eval(keyword(spec, "image"))
    assert isinstance(image, str)
    return command, args, image


def kubernetes_expand(text: str, env: dict[str, str]) -> str:
    """What Kubernetes does to a container's command, args and env values
    (kubernetes/kubernetes, third_party/forked/golang/expansion/expand.go): ``$$`` becomes
    ``$``, ``$(VAR)`` the value of a variable the container defines (unknown ones stay)."""
    out, cursor = [], 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            following = text[cursor + 1]
            close = text.find(")", cursor + 2) if following == "(" else -1
            if following == "$":
                out.append("$")
                cursor += 2
            elif close != -1:
                name = text[cursor + 2 : close]
                out.append(env.get(name, f"$({name})"))
                cursor = close + 1
            else:
                out.append("$" + following)
                cursor += 2
        else:
            out.append(text[cursor])
            cursor += 1
    return "".join(out)


POD_ENV = {"NAME": "defined-in-the-pod", "NAMESPACE": "kubeflow", "HOME": "/root"}


@pytest.mark.parametrize(("text", "expanded"), [
    ("pid $$", "pid $"),
    ("$$$$", "$$"),
    ("$(NAMESPACE)/x", "kubeflow/x"),
    ("$$(NAMESPACE)", "$(NAMESPACE)"),
    ("$(hostname) $(kubectl get x)", "$(hostname) $(kubectl get x)"),
    ("$NAME ${HOME} $1 $", "$NAME ${HOME} $1 $"),
    ("$(unclosed", "$(unclosed"),
])
def test_kubernetes_expand(text: str, expanded: str) -> None:
    assert kubernetes_expand(text, POD_ENV) == expanded


def test_a_manifest_in_a_pods_args_would_be_changed_but_not_in_base64() -> None:
    assert kubernetes_expand(MANIFEST, POD_ENV) != MANIFEST
    encoded = base64.b64encode(MANIFEST.encode()).decode()
    assert kubernetes_expand(encoded, POD_ENV) == encoded


@pytest.mark.parametrize(("name", "succeeds"), SCRIPT_CASES)
def test_the_kubeflow_component_in_bash(tmp_path: Path, name: str, succeeds: bool) -> None:
    """The container's command and args, the step's arguments given as ``run_batchjob``
    gives them, expanded as Kubernetes expands a Pod's, run as the Pod would run them."""
    require_program("bash")
    stand = Stand(tmp_path, STATUSES[name])
    command, args, _ = kubeflow_container()
    given = {"manifest_base64": base64.b64encode(MANIFEST.encode()).decode(), "name": "hello",
             "namespace": NAMESPACE, "timeout": TIMEOUT}
    argv = [kubernetes_expand(word, POD_ENV) for word in [*command, *(given[a] for a in args)]]
    result = stand.run(argv, {})
    assert (result.returncode == 0) is succeeds, result.stderr
    check_calls(stand.calls(), ["Complete", "Failed"])


def test_kubeflow_runs_the_script_of_tekton_s_any_end_task() -> None:
    """The same commands from the apply on, the manifest read from base64 instead of a
    here-document; Tekton's also records the phase as its result."""
    command, _, _ = kubeflow_container()
    assert command[:2] == ["bash", "-c"]
    assert kubernetes_expand(command[2], POD_ENV) == command[2]  # in the Pod's spec too
    kubeflow = command[2].strip().splitlines()
    assert kubeflow[:3] == [
        "set -u", "NAME=$2 NAMESPACE=$3 TIMEOUT=$4",
        """printf '%s' "$1" | base64 -d | kubectl apply -n "$NAMESPACE" -f - || exit"""]
    (step,) = tekton_tasks()["batchjob"]["spec"]["steps"]
    tekton = step["script"].strip().splitlines()
    assert tekton[:3] == ["#!/bin/bash", "set -u",
                          """kubectl apply -n "$NAMESPACE" -f - <<'BATCHJOB' || exit"""]
    assert tekton[3:5] == ["$(params.manifest)", "BATCHJOB"]
    assert [line for line in tekton[5:] if "results." not in line] == kubeflow[3:]


# --- shapes -------------------------------------------------------------------------------------

FILES = {
    "argo-rbac.yaml": [("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "Role"),
                       ("rbac.authorization.k8s.io/v1", "RoleBinding")],
    "argo-workflow.yaml": [("argoproj.io/v1alpha1", "Workflow")],
    "tekton-rbac.yaml": [("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "Role"),
                         ("rbac.authorization.k8s.io/v1", "RoleBinding")],
    "tekton-task.yaml": [("tekton.dev/v1", "Task"), ("tekton.dev/v1", "Task")],
    "tekton-taskrun.yaml": [("tekton.dev/v1", "TaskRun")],
    "kubeflow-rbac.yaml": [("rbac.authorization.k8s.io/v1", "Role"),
                           ("rbac.authorization.k8s.io/v1", "RoleBinding")],
}
RBAC_FILES = [name for name in FILES if name.endswith("-rbac.yaml")]


def test_the_directory_holds_the_recipes() -> None:
    assert sorted(path.name for path in WORKFLOWS.iterdir()) == sorted(
        [*FILES, "kubeflow-component.py"])


@pytest.mark.parametrize(("name", "kinds"), FILES.items(), ids=list(FILES))
def test_each_file_has_its_kinds_in_the_namespace(name: str, kinds: list[tuple[str, str]]) -> None:
    docs = load_all(WORKFLOWS / name)
    assert [(doc["apiVersion"], doc["kind"]) for doc in docs] == kinds
    for doc in docs:
        assert doc["metadata"]["namespace"] == NAMESPACE
        assert ("name" in doc["metadata"]) != ("generateName" in doc["metadata"])


WORKFLOW_NAME = "hpc-pipeline-x7k2p"
"""What Argo puts for ``{{workflow.name}}``: the Workflow's generated name."""


def argo_templates() -> dict[str, Object]:
    (workflow,) = load_all(WORKFLOWS / "argo-workflow.yaml")
    return {template["name"]: template for template in workflow["spec"]["templates"]}


def argo_batchjob(template: Object) -> Object:
    """The BatchJob a resource template creates, as Argo renders its manifest."""
    manifest = template["resource"]["manifest"].replace("{{workflow.name}}", WORKFLOW_NAME)
    assert "{{" not in manifest
    batchjob: Object = yaml.safe_load(manifest)
    return batchjob


def test_the_argo_workflow_is_a_dag_of_three_batchjobs() -> None:
    (workflow,) = load_all(WORKFLOWS / "argo-workflow.yaml")
    templates = argo_templates()
    tasks = templates[workflow["spec"]["entrypoint"]]["dag"]["tasks"]
    assert [(task["name"], task["template"], task.get("dependencies", [])) for task in tasks] == [
        ("preprocess", "preprocess", []),
        ("simulate", "simulate", ["preprocess"]),
        ("reduce", "reduce", ["simulate"]),
    ]
    for task in tasks:
        resource = templates[task["template"]]["resource"]
        assert set(resource) == {"action", "successCondition", "failureCondition", "manifest"}
        assert resource["action"] == "create"


@pytest.mark.parametrize("step", ["preprocess", "simulate", "reduce"])
def test_each_argo_step_creates_a_valid_batchjob(step: str) -> None:
    batchjob = argo_batchjob(argo_templates()[step])
    assert batchjob["apiVersion"] == "hpcbridge.io/v1alpha1"
    assert batchjob["kind"] == "BatchJob"
    assert batchjob["metadata"] == {"generateName": f"{step}-", "namespace": NAMESPACE}
    assert batchjob_violations(batchjob) == []


def test_each_argo_step_reads_what_the_one_before_wrote() -> None:
    templates = argo_templates()
    steps = [argo_batchjob(templates[name])["spec"] for name in ("preprocess", "simulate",
                                                                 "reduce")]
    for before, after in itertools.pairwise(steps):
        written = [(out["s3"]["bucket"], out["s3"]["prefix"]) for out in before["outputs"]]
        for item in after["inputs"]:
            assert any(item["s3"]["bucket"] == bucket and item["s3"]["prefix"].startswith(prefix)
                       for bucket, prefix in written)
    for spec in steps:
        for out in spec["outputs"]:
            assert out["s3"]["prefix"].startswith(f"{WORKFLOW_NAME}/")


def test_the_argo_workflow_sites_are_the_examples() -> None:
    sites = {doc["metadata"]["name"] for path in (EXAMPLES / "sites/batchcluster-slurm.yaml",
                                                  EXAMPLES / "pipeline/batchcluster-htcondor.yaml")
             for doc in load_all(path)}
    for template in argo_templates().values():
        if "resource" in template:
            assert argo_batchjob(template)["spec"]["cluster"]["name"] in sites


def go_seconds(duration: str) -> float:
    """A Go duration of h, m, s and ms parts, in seconds."""
    parts = re.findall(r"([0-9.]+)(ms|h|m|s)", duration)
    assert "".join(number + unit for number, unit in parts) == duration, duration
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(number) * scale[unit] for number, unit in parts)


@pytest.mark.parametrize("task", ["batchjob", "batchjob-complete"])
def test_each_tekton_task_declares_what_it_uses(task: str) -> None:
    spec = tekton_tasks()[task]["spec"]
    assert [param["name"] for param in spec["params"]] == ["manifest", "name", "namespace",
                                                           "timeout"]
    assert all(param["type"] == "string" for param in spec["params"])
    (step,) = spec["steps"]
    text = json.dumps(step)
    assert set(re.findall(r"\$\(params\.([\w-]+)\)", text)) == {p["name"] for p in spec["params"]}
    used = set(re.findall(r"\$\(results\.([\w-]+)\.path\)", text))
    assert used == {result["name"] for result in spec.get("results", [])}
    assert not re.findall(r"\$\((?:context|workspaces|steps)\.", text)
    assert step["image"] == kubeflow_container()[2]
    expected = {"batchjob": ["Complete", "Failed"], "batchjob-complete": ["Complete"]}[task]
    assert waited_conditions(step["script"]) == expected
    assert set(expected) <= set(CONDITION_TYPES)


def test_the_tekton_taskrun_runs_a_valid_batchjob() -> None:
    (run,) = load_all(WORKFLOWS / "tekton-taskrun.yaml")
    task = tekton_tasks()[run["spec"]["taskRef"]["name"]]
    params = {param["name"]: param["value"] for param in run["spec"]["params"]}
    declared = task["spec"]["params"]
    assert {p["name"] for p in declared if "default" not in p} <= set(params) <= {
        p["name"] for p in declared}
    batchjob = yaml.safe_load(params["manifest"])
    assert batchjob_violations(batchjob) == []
    assert batchjob["metadata"] == {"name": params["name"], "namespace": params["namespace"]}
    assert go_seconds(run["spec"]["timeout"]) > go_seconds(params["timeout"])


def function(module: ast.Module, name: str) -> ast.FunctionDef:
    (found,) = (node for node in module.body
                if isinstance(node, ast.FunctionDef) and node.name == name)
    return found


def test_the_kubeflow_pipeline_runs_a_valid_batchjob_uncached() -> None:
    module = kubeflow_module()
    (step,) = calls_in(decorated(module, "pipeline"), "run_batchjob")
    manifest = step.args[0]
    assert isinstance(manifest, ast.Name)
    batchjob = yaml.safe_load(constants(module)[manifest.id])
    assert batchjob_violations(batchjob) == []
    assert batchjob["metadata"] == {"name": ast.literal_eval(keyword(step, "name")),
                                    "namespace": ast.literal_eval(keyword(step, "namespace"))}
    helper = function(module, "run_batchjob")
    (component,) = calls_in(helper, "batchjob")
    assert ast.unparse(keyword(component, "manifest_base64")) == "encoded"
    assert "base64.b64encode(manifest.encode()).decode()" in ast.unparse(helper)
    (caching,) = calls_in(helper, "set_caching_options")
    assert [ast.literal_eval(arg) for arg in caching.args] == [False]
    command, _, _ = kubeflow_container()
    assert waited_conditions(command[2]) == ["Complete", "Failed"]


# --- RBAC ---------------------------------------------------------------------------------------

# The verbs on batchjobs each kubectl command of the recipes needs.
KUBECTL_VERBS = {"apply": {"get", "create", "patch"}, "wait": {"get", "list", "watch"},
                 "get": {"get"}}
BASE_VERBS = {"create", "get", "list", "watch", "delete"}


def kubectl_commands(script: str) -> set[str]:
    return set(re.findall(r"\bkubectl (\w+)", script))


def engine_needs() -> dict[str, tuple[set[str], tuple[str, str]]]:
    """Per RBAC file: the verbs on batchjobs its engine's steps use, and the ServiceAccount
    (namespace, name) they run as."""
    (workflow,) = load_all(WORKFLOWS / "argo-workflow.yaml")
    (run,) = load_all(WORKFLOWS / "tekton-taskrun.yaml")
    tekton = {command for task in tekton_tasks().values() for step in task["spec"]["steps"]
              for command in kubectl_commands(step["script"])}
    kubeflow = kubectl_commands(kubeflow_container()[0][2])
    # An Argo resource template: kubectl create, then a GET of the object until a condition
    # holds.
    argo = {template["resource"]["action"] for template in argo_templates().values()
            if "resource" in template}
    assert argo == {"create"} and tekton == kubeflow == {"apply", "wait", "get"}
    return {
        "argo-rbac.yaml": ({"create", "get"},
                           (NAMESPACE, workflow["spec"]["serviceAccountName"])),
        "tekton-rbac.yaml": (set().union(*(KUBECTL_VERBS[c] for c in tekton)),
                             (NAMESPACE, run["spec"]["serviceAccountName"])),
        "kubeflow-rbac.yaml": (set().union(*(KUBECTL_VERBS[c] for c in kubeflow)),
                               (NAMESPACE, "default-editor")),
    }


@pytest.mark.parametrize("name", RBAC_FILES)
def test_rbac_objects_are_valid(name: str) -> None:
    for obj in load_all(WORKFLOWS / name):
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


@pytest.mark.parametrize("name", RBAC_FILES)
def test_rbac_grants_the_engines_serviceaccount_what_its_steps_do(name: str) -> None:
    docs = {doc["kind"]: doc for doc in load_all(WORKFLOWS / name)}
    verbs, (namespace, account) = engine_needs()[name]
    role, binding = docs["Role"], docs["RoleBinding"]
    granted = {verb for rule in role["rules"] if "hpcbridge.io" in rule["apiGroups"]
               and "batchjobs" in rule["resources"] for verb in rule["verbs"]}
    assert granted >= verbs | BASE_VERBS
    assert granted <= BASE_VERBS | {"patch"}
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": namespace}]
    if "ServiceAccount" in docs:
        assert docs["ServiceAccount"]["metadata"] == {"name": account, "namespace": namespace}


def test_argos_executor_may_report_its_results() -> None:
    """Argo Workflows 3.4 and later: the executor writes WorkflowTaskResults."""
    role = next(doc for doc in load_all(WORKFLOWS / "argo-rbac.yaml") if doc["kind"] == "Role")
    assert {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"],
            "verbs": ["create", "patch"]} in role["rules"]


def test_the_page_names_the_standalone_kubeflow_account() -> None:
    text = DOC.read_text()
    assert "`pipeline-runner`" in text and "`default-editor`" in text
    assert "name: pipeline-runner, namespace: kubeflow" in " ".join(
        (WORKFLOWS / "kubeflow-rbac.yaml").read_text().replace("#", "").split())


# --- the page -------------------------------------------------------------------------------

def fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.DOTALL)


def file_documents(name: str) -> list[str]:
    """A file's YAML documents as text, comments kept."""
    return [chunk.strip("\n") for chunk in re.split(r"^---$", (WORKFLOWS / name).read_text(),
                                                     flags=re.MULTILINE)]


def test_the_pages_yaml_blocks_are_the_files_verbatim() -> None:
    """Every document of every file, in the order of the files as the page shows them."""
    blocks = [block.strip("\n") for block in fenced("yaml")]
    text = DOC.read_text()
    order = sorted(FILES, key=lambda name: text.index(f"```yaml\n{file_documents(name)[0]}"))
    assert blocks == [document for name in order for document in file_documents(name)]


def test_the_pages_python_block_is_the_component() -> None:
    assert fenced("python") == [KUBEFLOW.read_text()]


def test_the_page_links_each_file_and_its_links_resolve() -> None:
    text = DOC.read_text()
    for path in WORKFLOWS.iterdir():
        assert f"](../examples/workflows/{path.name})" in text, path.name
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (DOC.parent / path).resolve() if path else DOC
        assert linked.exists(), target
        if anchor:
            assert anchor in heading_anchors(linked.read_text()), target


def test_the_page_says_the_engines_do_not_run_in_the_tests() -> None:
    text = " ".join(DOC.read_text().split())
    assert ("Argo Workflows, Tekton and Kubeflow Pipelines do not run in hpcbridge's tests"
            in text)


def test_every_yaml_block_of_the_page_is_one_document() -> None:
    """docs/ YAML blocks are read one document each (tests/static/test_doc_examples.py)."""
    for block in fenced("yaml"):
        assert len(list(yaml.safe_load_all(block))) == 1


def test_the_rendered_statuses_are_what_the_page_shows() -> None:
    """The table's Complete and Failed columns, read from the rendered statuses."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[1] in ("True", "False"):
            for phase in re.findall(r"`(Pending|Running|Succeeded|Failed|Cancelled|Unknown)`",
                                    cells[0]):
                rows[phase] = (cells[1], cells[2], cells[3], cells[4])
    assert set(rows) == {str(phase) for phase in Phase}
    for status in STATUSES.values():
        obj = batchjob(status)
        complete, failed, argo, waited = rows[str(status.phase)]
        assert condition_met(obj, "Complete") is (complete == "True")
        assert condition_met(obj, "Failed") is (failed == "True")
        assert argo == {Outcome.WAITING: "waits", Outcome.SUCCEEDED: "succeeds",
                        Outcome.FAILED: "fails"}[resource_outcome(obj, SUCCESS, FAILURE)]
        assert waited == ("succeeds" if status.phase is Phase.SUCCEEDED else
                          "fails" if TRUE_CONDITION[status.phase] else "waits")


def test_the_script_reads_the_phase_the_argo_conditions_read() -> None:
    """Both kinds of recipe read the same field, status.phase."""
    command, _, _ = kubeflow_container()
    assert "jsonpath='{.status.phase}'" in command[2]
    assert {r.key for pair in argo_conditions() for text in pair for r in parse(text)} == {
        "status.phase"}
