"""Spec validation: the examples pass; reserved options, smuggled newlines, oversized scripts and
bad grammars fail with one sentence that names the field (the message of Failed/InvalidSpec)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks.core.spec.batchjob import MAX_SCRIPT_BYTES, parse, parse_placement
from hooks.core.values.fields import SpecError
from hooks.schedulers.registry import REGISTRY
from hooks.schedulers.slurm import forms
from tests.unit.conftest import spec_of as parse_spec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def batchjobs() -> list[Any]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "BatchJob":
                found.append(pytest.param(doc, id=f"{path.stem}/{doc['metadata']['name']}"))
    return found


def spec(backend: str = "slurm", **fields: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "backend": backend,
        "cluster": {"host": "login.hpc.example.org", "secretRef": {"name": "hpc-login"}},
        "script": "#!/bin/bash\necho hi\n",
    }
    raw.update(fields)
    return raw


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    return str(caught.value)


def one_sentence_naming(message: str, field: str) -> None:
    assert message.startswith(field), message
    assert message.endswith("."), message
    assert "\n" not in message
    assert not re.search(r"[.!?]\s+[A-Z]", message), f"more than one sentence: {message}"


def test_there_are_examples() -> None:
    assert len(batchjobs()) >= 3


@pytest.mark.parametrize("doc", batchjobs())
def test_example_is_valid(doc: dict[str, Any]) -> None:
    parsed = parse_spec(doc["spec"])
    assert parsed.backend == doc["spec"]["backend"]
    assert parsed.script.startswith("#!")


def test_example_values() -> None:
    docs = {p.id: p.values[0] for p in batchjobs()}
    hello = parse_spec(docs["hello-slurm/hello"]["spec"])
    assert (hello.resources.cpus, hello.resources.memory_mib, hello.resources.time_limit_seconds,
            hello.resources.nodes) == (2, 4096, 1800, 1)
    assert (hello.logs_pod, hello.logs_follow) == (True, True)
    assert hello.cluster.port == 22 and not hello.cluster.insecure_skip_host_key_check
    array = parse_spec(docs["array-slurm/hello-array"]["spec"])
    assert (array.options.array_tasks, array.backoff_limit) == ((0, 1, 2, 3), 1)
    condor = parse_spec(docs["hello-htcondor/hello-condor"]["spec"])
    assert condor.options.queue == 2
    assert condor.options.submit_options == (("+ProjectName", '"demo"'),)


def test_parse_spec_does_not_change_its_input() -> None:
    raw = spec(slurm={"extraArgs": ["--constraint=haswell"]}, resources={"memory": "1Gi"})
    before = copy.deepcopy(raw)
    parse_spec(raw)
    assert raw == before


RESERVED_SBATCH = [
    # (extraArgs, the option the message names)
    (["--job-name=x"], "--job-name"),
    (["--job-name", "x"], "--job-name"),
    (["-J", "x"], "-J"),
    (["-Jx"], "-J"),
    (["--job=x"], "--job-name"),
    (["--output=/tmp/x"], "--output"),
    (["--out=/tmp/x"], "--output"),
    (["-o", "/tmp/x"], "-o"),
    (["-o/tmp/x"], "-o"),
    (["--error=/tmp/x"], "--error"),
    (["--err=/tmp/x"], "--error"),
    (["-e", "/tmp/x"], "-e"),
    (["--array=0-3"], "--array"),
    (["--arr=0-3"], "--array"),
    (["-a", "0-3"], "-a"),
    (["--parsable"], "--parsable"),
    (["--pars"], "--parsable"),
    (["--comment=x"], "--comment"),
    (["--comm=x"], "--comment"),
    (["--chdir=/tmp"], "--chdir"),
    (["--ch=/tmp"], "--chdir"),
    (["-D", "/tmp"], "-D"),
    (["-D/tmp"], "-D"),
    (["--wrap=hostname"], "--wrap"),
    (["--wr=hostname"], "--wrap"),
    (["--constraint=haswell", "--output=x"], "--output"),
]


@pytest.mark.parametrize(
    ("args", "option"),
    [pytest.param(args, option, id=" ".join(args)) for args, option in RESERVED_SBATCH],
)
def test_reserved_sbatch_option(args: list[str], option: str) -> None:
    message = refused(spec(slurm={"extraArgs": args}))
    one_sentence_naming(message, "spec.slurm.extraArgs")
    assert f"sets {option}," in message


@pytest.mark.parametrize(
    "arg",
    [
        pytest.param("-vJx", id="verbose-then-job-name"),
        pytest.param("-Ho/tmp/x", id="hold-then-output"),
        pytest.param("-Qe/tmp/x", id="quiet-then-error"),
    ],
)
def test_reserved_sbatch_option_bundled_behind_a_flag(arg: str) -> None:
    refused(spec(slurm={"extraArgs": [arg]}))


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--constraint=haswell"], id="constraint"),
        pytest.param(["--exclusive"], id="flag"),
        pytest.param(["--open-mode=append"], id="open-mode-is-not-output"),
        pytest.param(["--export=NONE"], id="export-is-not-error"),
        pytest.param(["--cpus-per-gpu=4"], id="cpus-per-gpu-is-not-chdir"),
        pytest.param(["-pdebug"], id="short-with-value"),
        pytest.param(["--mail-type=END", "--mail-user=a@example.org"], id="two"),
        pytest.param([], id="none"),
    ],
)
def test_allowed_sbatch_options(args: list[str]) -> None:
    assert parse_spec(spec(slurm={"extraArgs": args})).options.extra_args == tuple(args)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        pytest.param(["haswell"], "spec.slurm.extraArgs", id="not-an-option"),
        pytest.param("--exclusive", "spec.slurm.extraArgs", id="not-a-list"),
        pytest.param([3], "spec.slurm.extraArgs", id="not-strings"),
    ],
)
def test_bad_extra_args(extra: object, field: str) -> None:
    one_sentence_naming(refused(spec(slurm={"extraArgs": extra})), field)


RESERVED_HTCONDOR = [
    "executable", "Executable", "arguments", "ARGUMENTS", "output", "error", "log", "Log",
    "queue", "universe", "Universe", "leave_in_queue", "Leave_In_Queue", "batch_name",
    "+HpcbridgeKey", "+hpcbridgekey", "+HPCBRIDGEKEY", "MY.HpcbridgeKey", "my.hpcbridgekey",
]


@pytest.mark.parametrize("key", [pytest.param(key, id=key) for key in RESERVED_HTCONDOR])
def test_reserved_htcondor_key(key: str) -> None:
    message = refused(spec("htcondor", htcondor={"submitOptions": {key: "x"}}))
    one_sentence_naming(message, "spec.htcondor.submitOptions")
    assert repr(key) in message


@pytest.mark.parametrize(
    ("options", "field"),
    [
        pytest.param({"request_disk": "1GB\nqueue 1000"}, "spec.htcondor.submitOptions",
                     id="newline-in-value"),
        pytest.param({"request_disk": "1GB\rqueue 1000"}, "spec.htcondor.submitOptions",
                     id="carriage-return-in-value"),
        pytest.param({"request_disk\nqueue": "5"}, "spec.htcondor.submitOptions",
                     id="newline-in-key"),
        pytest.param({"\nexecutable": "/bin/sh"}, "spec.htcondor.submitOptions",
                     id="key-starting-with-newline"),
        pytest.param({"+Project\r": '"x"'}, "spec.htcondor.submitOptions",
                     id="carriage-return-in-key"),
        pytest.param({"request disk": "1"}, "spec.htcondor.submitOptions", id="space-in-key"),
        pytest.param({"a=b": "1"}, "spec.htcondor.submitOptions", id="equals-in-key"),
        pytest.param({"+": "1"}, "spec.htcondor.submitOptions", id="bare-plus"),
        pytest.param({"": "1"}, "spec.htcondor.submitOptions", id="empty-key"),
        pytest.param({"request_cpus": 2}, "spec.htcondor.submitOptions", id="non-string"),
        pytest.param(["request_cpus = 2"], "spec.htcondor.submitOptions", id="not-an-object"),
    ],
)
def test_bad_htcondor_submit_options(options: object, field: str) -> None:
    message = refused(spec("htcondor", htcondor={"submitOptions": options}))
    one_sentence_naming(message, field)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"+ProjectName": '"cms"'}, id="custom-attribute"),
        pytest.param({"MY.ProjectName": '"cms"'}, id="my-attribute"),
        pytest.param({"request_disk": "1GB", "requirements": 'OpSys == "LINUX"'}, id="commands"),
        pytest.param({"+HpcbridgeKeyOther": '"x"'}, id="longer-name-is-not-reserved"),
    ],
)
def test_allowed_htcondor_submit_options(options: dict[str, str]) -> None:
    parsed = parse_spec(spec("htcondor", htcondor={"submitOptions": options}))
    assert dict(parsed.options.submit_options) == options


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("echo hi\n", id="no-shebang"),
        pytest.param(" #!/bin/sh\n", id="leading-space"),
        pytest.param("\n#!/bin/sh\n", id="leading-newline"),
        pytest.param("", id="empty"),
        pytest.param(None, id="missing"),
        pytest.param(["#!/bin/sh"], id="not-a-string"),
        pytest.param("#!/bin/sh\n" + "x" * MAX_SCRIPT_BYTES, id="one-over-256KiB"),
        pytest.param("#!/bin/sh\n" + "é" * (MAX_SCRIPT_BYTES // 2), id="over-in-bytes-not-chars"),
    ],
)
def test_bad_script(script: object) -> None:
    one_sentence_naming(refused(spec(script=script)), "spec.script")


def test_script_of_exactly_256KiB_is_accepted() -> None:
    script = "#!/bin/sh\n" + "x" * (MAX_SCRIPT_BYTES - len("#!/bin/sh\n"))
    assert len(script.encode()) == MAX_SCRIPT_BYTES
    assert parse_spec(spec(script=script)).script == script


def test_script_is_kept_byte_for_byte() -> None:
    script = "#!/bin/bash\r\nprintf '%s\\n' \"$(hostname)\" 'é'\n\n"
    assert parse_spec(spec(script=script)).script == script


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("90s", 90, id="90s"),
        pytest.param("30m", 1800, id="30m"),
        pytest.param("2h", 7200, id="2h"),
        pytest.param("1h30m", 5400, id="1h30m"),
        pytest.param("1d12h", 129600, id="1d12h"),
        pytest.param("1d", 86400, id="1d"),
        pytest.param("1d2h3m4s", 93784, id="all-units"),
        pytest.param("0h1s", 1, id="zero-part"),
    ],
)
def test_time_limit(text: str, seconds: int) -> None:
    assert parse_spec(spec(resources={"timeLimit": text})).resources.time_limit_seconds == seconds
    assert forms.slurm_time(seconds).count(":") == 2


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("1x", id="bad-unit"),
        pytest.param("0s", id="zero"),
        pytest.param("0d0h", id="all-zero"),
        pytest.param("", id="empty"),
        pytest.param("h", id="no-number"),
        pytest.param("1.5h", id="fraction"),
        pytest.param("-1h", id="negative"),
        pytest.param("1h 30m", id="space"),
        pytest.param("30m1h", id="wrong-order"),
        pytest.param("90", id="no-unit"),
        pytest.param(90, id="number"),
    ],
)
def test_bad_time_limit(text: object) -> None:
    one_sentence_naming(refused(spec(resources={"timeLimit": text})), "spec.resources.timeLimit")


@pytest.mark.parametrize(
    ("seconds", "slurm"),
    [
        pytest.param(90, "0-00:01:30", id="90s"),
        pytest.param(5400, "0-01:30:00", id="1h30m"),
        pytest.param(129600, "1-12:00:00", id="1d12h"),
    ],
)
def test_slurm_time(seconds: int, slurm: str) -> None:
    assert forms.slurm_time(seconds) == slurm


@pytest.mark.parametrize(
    ("quantity", "mib"),
    [
        pytest.param("4Gi", 4096, id="4Gi"),
        pytest.param("512Mi", 512, id="512Mi"),
        pytest.param("512M", 489, id="512M-rounded-up"),
        pytest.param("1e9", 954, id="1e9"),
        pytest.param("1.5Gi", 1536, id="fraction"),
        pytest.param("1G", 954, id="1G"),
        pytest.param("1Ti", 1048576, id="1Ti"),
        pytest.param(1073741824, 1024, id="int-bytes"),
        pytest.param("1073741824", 1024, id="string-bytes"),
        pytest.param(1048577, 2, id="a-byte-over-1Mi-rounds-up"),
        pytest.param("1Mi", 1, id="1Mi"),
    ],
)
def test_memory(quantity: object, mib: int) -> None:
    assert parse_spec(spec(resources={"memory": quantity})).resources.memory_mib == mib


@pytest.mark.parametrize(
    "quantity",
    [
        pytest.param("bad", id="word"),
        pytest.param("4GB", id="4GB"),
        pytest.param("4 Gi", id="space"),
        pytest.param("-1Gi", id="negative"),
        pytest.param("Gi", id="no-number"),
        pytest.param("0", id="zero"),
        pytest.param("", id="empty"),
        pytest.param(True, id="bool"),
        pytest.param(4.5, id="float"),
        pytest.param(["4Gi"], id="list"),
        pytest.param("zero", id="word-zero"),
        pytest.param("duration", id="word-duration"),
        pytest.param("512Ki", id="below-1Mi"),
        pytest.param("1000000", id="a-million-bytes"),
    ],
)
def test_bad_memory(quantity: object) -> None:
    one_sentence_naming(refused(spec(resources={"memory": quantity})), "spec.resources.memory")


@pytest.mark.parametrize("quantity", [pytest.param(4096, id="int"), pytest.param("4096", id="str")])
def test_memory_without_a_unit_below_1Mi_suggests_Mi(quantity: object) -> None:
    message = refused(spec(resources={"memory": quantity}))
    one_sentence_naming(message, "spec.resources.memory")
    assert "did you mean 4096Mi?" in message


@pytest.mark.parametrize(
    ("array", "tasks"),
    [
        pytest.param("0-3", (0, 1, 2, 3), id="range"),
        pytest.param("7", (7,), id="one"),
        pytest.param("1,3,5-9:2", (1, 3, 5, 7, 9), id="list-and-step"),
        pytest.param("0-15:4", (0, 4, 8, 12), id="step"),
        pytest.param("0-3%2", (0, 1, 2, 3), id="throttle"),
        pytest.param("3,1,3", (1, 3), id="duplicates-sorted"),
        pytest.param("0-99999", tuple(range(100000)), id="largest"),
    ],
)
def test_array(array: str, tasks: tuple[int, ...]) -> None:
    parsed = parse_spec(spec(slurm={"array": array}))
    assert (parsed.options.array, parsed.options.array_tasks) == (array, tasks)


@pytest.mark.parametrize(
    "array",
    [
        pytest.param("3-1", id="reversed"),
        pytest.param("0-3:0", id="zero-step"),
        pytest.param("a", id="word"),
        pytest.param("0-3%x", id="bad-throttle"),
        pytest.param("1,,2", id="empty-item"),
        pytest.param("-1", id="negative"),
        pytest.param("0-100000", id="too-many"),
        pytest.param("", id="empty"),
        pytest.param("0-3\n", id="newline"),
        pytest.param(3, id="number"),
    ],
)
def test_bad_array(array: object) -> None:
    one_sentence_naming(refused(spec(slurm={"array": array})), "spec.slurm.array")


def test_array_with_empty_throttle() -> None:
    refused(spec(slurm={"array": "0-3%"}))


@pytest.mark.parametrize("array", [
    pytest.param("1" * 5000, id="one"),
    pytest.param("0-" + "9" * 5000, id="range-end"),
    pytest.param("0-9:" + "1" * 5000, id="step"),
    pytest.param("0-3%" + "1" * 5000, id="throttle"),
    pytest.param("\u0661", id="arabic-indic-digit"),
])
def test_array_with_a_number_no_index_has_is_one_clear_sentence(array: str) -> None:
    message = refused(spec(slurm={"array": array}))
    one_sentence_naming(message, "spec.slurm.array")
    assert "int_max_str_digits" not in message and "limit" not in message
    assert len(message) < 200


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param(spec("slurm", htcondor={"queue": 2}), "spec.htcondor",
                     id="htcondor-block-on-slurm"),
        pytest.param(spec("htcondor", slurm={"partition": "debug"}), "spec.slurm",
                     id="slurm-block-on-htcondor"),
        pytest.param(spec("htcondor", resources={"nodes": 2}), "spec.resources.nodes",
                     id="nodes-on-htcondor"),
        pytest.param(spec("pbs"), "spec.backend", id="unknown-backend"),
        pytest.param({k: v for k, v in spec().items() if k != "backend"}, "spec.backend",
                     id="no-backend"),
        pytest.param(spec("htcondor", htcondor={"queue": 0}), "spec.htcondor.queue",
                     id="queue-0"),
        pytest.param(spec("htcondor", htcondor={"queue": 10001}), "spec.htcondor.queue",
                     id="queue-10001"),
        pytest.param(spec(slurm={"partition": "a b\nc"}), "spec.slurm.partition",
                     id="partition-newline"),
        pytest.param(spec(slurm={"account": ""}), "spec.slurm.account", id="empty-account"),
        pytest.param(spec(resources={"cpus": 0}), "spec.resources.cpus", id="cpus-0"),
        pytest.param(spec(resources={"cpus": "2"}), "spec.resources.cpus", id="cpus-string"),
        pytest.param(spec(resources={"gpus": -1}), "spec.resources.gpus", id="gpus-negative"),
        pytest.param(spec(resources={"nodes": 0}), "spec.resources.nodes", id="nodes-0"),
        pytest.param(spec(resources=["cpus"]), "spec.resources", id="resources-list"),
        pytest.param(spec(logs={"pod": "yes"}), "spec.logs.pod", id="logs-pod-string"),
        pytest.param(spec(logs={"follow": 1}), "spec.logs.follow", id="logs-follow-int"),
        pytest.param(spec(backoffLimit=-1), "spec.backoffLimit", id="backoff-negative"),
        pytest.param(spec(backoffLimit=True), "spec.backoffLimit", id="backoff-bool"),
        pytest.param("not an object", "spec", id="spec-string"),
    ],
)
def test_bad_spec_names_the_field(raw: object, field: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    one_sentence_naming(str(caught.value), field)


def cluster(**fields: Any) -> dict[str, Any]:
    return spec(cluster={"host": "login.hpc.example.org", "secretRef": {"name": "s"}, **fields})


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param(cluster(port=0), "spec.cluster.port", id="port-0"),
        pytest.param(cluster(port=65536), "spec.cluster.port", id="port-65536"),
        pytest.param(cluster(port=-22), "spec.cluster.port", id="port-negative"),
        pytest.param(cluster(port="22"), "spec.cluster.port", id="port-string"),
        pytest.param(cluster(port=True), "spec.cluster.port", id="port-bool"),
        pytest.param(cluster(port=22.0), "spec.cluster.port", id="port-float"),
        pytest.param(cluster(host=""), "spec.cluster.host", id="host-empty"),
        pytest.param(cluster(host="login node"), "spec.cluster.host", id="host-space"),
        pytest.param(cluster(host="login\n"), "spec.cluster.host", id="host-newline"),
        pytest.param(cluster(host=None), "spec.cluster.host", id="host-missing"),
        pytest.param(cluster(secretRef={}), "spec.cluster.secretRef.name", id="no-secret-name"),
        pytest.param(cluster(secretRef="s"), "spec.cluster.secretRef", id="secret-ref-string"),
        pytest.param(cluster(insecureSkipHostKeyCheck="true"),
                     "spec.cluster.insecureSkipHostKeyCheck", id="insecure-string"),
        pytest.param(spec(cluster=None), "spec.cluster", id="no-cluster"),
    ],
)
def test_bad_cluster(raw: dict[str, Any], field: str) -> None:
    one_sentence_naming(refused(raw), field)


@pytest.mark.parametrize(
    ("port", "expected"),
    [pytest.param(1, 1, id="1"), pytest.param(65535, 65535, id="65535"),
     pytest.param(None, 22, id="default")],
)
def test_port_range(port: int | None, expected: int) -> None:
    raw = cluster() if port is None else cluster(port=port)
    assert parse_spec(raw).cluster.port == expected


def test_the_placement_survives_other_broken_fields() -> None:
    """An attempt already submitted stays reachable when a later edit breaks another rule."""
    raw = spec(slurm={"extraArgs": ["--output=x"]}, resources={"memory": "bad"})
    placement = parse_placement(raw, REGISTRY)
    assert (placement.backend, placement.cluster.host, placement.cluster.secret_name) == (
        "slurm", "login.hpc.example.org", "hpc-login")
    parsed = parse(raw, REGISTRY)
    assert (parsed.placement, parsed.spec) == (placement, None)
    assert parsed.error.startswith("spec.resources.memory")


def test_an_unknown_backend_is_kept_for_messages() -> None:
    parsed = parse(spec("pbs"), REGISTRY)
    assert (parsed.backend, parsed.placement, parsed.spec) == ("pbs", None, None)
    assert parsed.error.startswith("spec.backend")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param(spec(slurm={"partition": "debug\x00x"}), "spec.slurm.partition", id="nul"),
        pytest.param(spec(slurm={"account": "a\rb"}), "spec.slurm.account", id="cr"),
        pytest.param(spec(slurm={"qos": "a\x1b[31m"}), "spec.slurm.qos", id="escape"),
        pytest.param(spec(slurm={"extraArgs": ["--constraint=a\x00b"]}),
                     "spec.slurm.extraArgs", id="nul-in-extra-args"),
        pytest.param(spec(slurm={"extraArgs": ["--comment=a\nb"]}),
                     "spec.slurm.extraArgs", id="newline-in-extra-args"),
        pytest.param(spec(cluster={"host": "login\x00.example.org",
                                   "secretRef": {"name": "hpc-login"}}),
                     "spec.cluster.host", id="nul-in-host"),
        pytest.param(spec(cluster={"host": "login", "secretRef": {"name": "../x"}}),
                     "spec.cluster.secretRef.name", id="secret-name-path"),
        pytest.param(spec(backoffLimit=10**5000), "spec.backoffLimit", id="huge-number"),
        pytest.param(spec(resources={"memory": 10**5000}), "spec.resources.memory",
                     id="huge-memory"),
        pytest.param(spec(resources={"timeLimit": 10**5000}), "spec.resources.timeLimit",
                     id="huge-time-limit"),
        pytest.param(spec(resources={"cpus": -10**5000}), "spec.resources.cpus",
                     id="huge-negative"),
    ],
)
def test_control_characters_and_huge_numbers_are_refused_plainly(
    raw: dict[str, Any], field: str
) -> None:
    message = refused(raw)
    one_sentence_naming(message, field)
    assert "set_int_max_str_digits" not in message and len(message) < 300
