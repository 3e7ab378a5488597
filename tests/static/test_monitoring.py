"""Static checks of deploy/monitoring/: the alert rules (promtool check and unit tests), the
Grafana dashboard, the ServiceMonitor and the kube-state-metrics configuration, and that every
metric they query is one the hook server or kube-state-metrics serves."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from hooks.metrics import Metrics
from tests.static.kube import REPO, Object, Render

MONITORING = REPO / "deploy/monitoring"
RULES = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
KSM_CONFIG = MONITORING / "kube-state-metrics-batchjobs.yaml"
RULE_TESTS = Path(__file__).parent / "monitoring/alerts-test.yaml"
SCHEMAS = Path(__file__).parent / "schemas/monitoring.yaml"
OPERATIONS_DOC = REPO / "docs/operations.md"


def served_hook_metrics() -> dict[str, tuple[str, tuple[str, ...]]]:
    """The hook server's metrics as `GET /metrics` serves them (hooks/metrics.py): name, type and
    labels, read from a server's Metrics after a login and a remote command, when every series
    has a labelled sample."""
    metrics = Metrics()
    metrics.ssh_connect("login.hpc.example.org:22", ok=True)
    with metrics.remote_command("login.hpc.example.org:22", ["squeue"]):
        pass
    served = {}
    for family in metrics.registry.collect():
        if family.name.startswith("hpcbridge_"):
            (labels,) = {tuple(k for k in s.labels if k != "le") for s in family.samples}
            suffix = "_total" if family.type == "counter" else ""
            served[family.name + suffix] = (family.type, labels)
    return served


HOOK_METRICS = served_hook_metrics()
SERIES_SUFFIXES = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@functools.cache
def ksm_metrics() -> dict[str, tuple[str, ...]]:
    """kube-state-metrics' BatchJob series, as deploy/monitoring's configuration names them:
    name and labels."""
    metrics = {}
    for resource in load(KSM_CONFIG)["spec"]["resources"]:
        common = tuple(resource.get("labelsFromPath", {}))
        for metric in resource["metrics"]:
            each = metric["each"]
            own = (
                (each["stateSet"]["labelName"],)
                if each["type"] == "StateSet"
                else tuple(each.get(each["type"].lower(), {}).get("labelsFromPath", {}))
            )
            metrics[f"{resource['metricNamePrefix']}_{metric['name']}"] = common + own
    return metrics


def known_series() -> set[str]:
    hook_series = {
        name + suffix
        for name, (kind, _) in HOOK_METRICS.items()
        for suffix in SERIES_SUFFIXES[kind]
    }
    return hook_series | set(ksm_metrics())


PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
PROMQL_WORDS |= {"and", "or", "unless", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    keywords, label names, strings or durations."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"(?<![\w.$])[A-Za-z_:][\w:]*", expr):
        followed_by = expr[match.end() :].lstrip()[:1]
        if followed_by != "(" and match.group().lower() not in PROMQL_WORDS:
            names.add(match.group())
    return names


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        pytest.param(
            'sum by (hook) (rate(a_total{outcome="error"}[5m])) > 0', {"a_total"}, id="rate"
        ),
        pytest.param(
            "histogram_quantile(0.99, sum by (le) (rate(b_bucket[$__rate_interval])))",
            {"b_bucket"},
            id="quantile",
        ),
        pytest.param("x > 0 unless on (cluster) y > 1e3", {"x", "y"}, id="unless"),
        pytest.param('c * on (a) group_left (phase) (d{p=~"A|B"} == 1)', {"c", "d"}, id="join"),
        pytest.param("absent(e)", {"e"}, id="absent"),
    ],
)
def test_metric_names_reads_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def rule_exprs() -> list[str]:
    return [rule["expr"] for group in load(RULES)["spec"]["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    return [
        target["expr"]
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel.get("targets", [])
    ]


# --- the alert rules --------------------------------------------------------------------------


def promtool_run(promtool: str, *args: str, cwd: Path) -> None:
    result = subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    """The PrometheusRule's spec as a plain rules file, beside the promtool unit tests."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(load(RULES)["spec"], sort_keys=False))
    shutil.copy(RULE_TESTS, tmp_path / "alerts-test.yaml")
    return tmp_path


def test_rules_pass_promtool_check(promtool: str, rules_dir: Path) -> None:
    promtool_run(promtool, "check", "rules", "rules.yaml", cwd=rules_dir)


def test_rules_pass_their_unit_tests(promtool: str, rules_dir: Path) -> None:
    promtool_run(promtool, "test", "rules", "alerts-test.yaml", cwd=rules_dir)


def test_every_alert_has_a_unit_test() -> None:
    alerts = {rule["alert"] for group in load(RULES)["spec"]["groups"] for rule in group["rules"]}
    tested = {
        case["alertname"] for test in load(RULE_TESTS)["tests"] for case in test["alert_rule_test"]
    }
    assert tested == alerts


def test_rules_query_only_served_metrics() -> None:
    used = set().union(*map(metric_names, rule_exprs()))
    assert used and used <= known_series() - set(ksm_metrics())


# --- the dashboard ----------------------------------------------------------------------------


def test_dashboard_queries_only_served_metrics() -> None:
    used = set().union(*map(metric_names, dashboard_exprs()))
    assert used and used <= known_series()
    assert used & set(ksm_metrics()), "the dashboard shows the BatchJob phases"


def test_dashboard_queries_are_promql(promtool: str, tmp_path: Path) -> None:
    """Each query as a recording rule, with Grafana's interval variables set, for promtool."""
    rules = [
        {"record": f"dashboard:query_{number}", "expr": re.sub(r"\$__\w+", "5m", expr)}
        for number, expr in enumerate(dashboard_exprs())
    ]
    (tmp_path / "dashboard.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]})
    )
    promtool_run(promtool, "check", "rules", "dashboard.yaml", cwd=tmp_path)


def test_dashboard_structure() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "hpcbridge"
    variable, *filters = dashboard["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    assert [(f["name"], f["query"]["query"]) for f in filters] == [
        ("namespace", "label_values(kube_batchjob_status_phase, namespace)"),
        ("batchcluster", "label_values(kube_batchjob_status_phase, batchcluster)"),
        ("cluster", "label_values(kube_batchjob_status_phase, cluster)"),
    ]
    panels = dashboard["panels"]
    assert [panel["id"] for panel in panels] == list(range(1, len(panels) + 1))
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["title"] and panel["description"] and panel["targets"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


# --- kube-state-metrics' BatchJob phases ------------------------------------------------------


def schema(kind: str) -> Object:
    schemas = load(SCHEMAS)
    return {"$schema": schemas["$schema"], "$defs": schemas["$defs"], **schemas[kind]}


def violations(instance: Object, kind: str) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema(kind))
    return sorted(
        ".".join(map(str, error.absolute_path)) + f": {error.message}"
        for error in validator.iter_errors(instance)
    )


def test_ksm_config_is_well_formed() -> None:
    assert violations(load(KSM_CONFIG), "CustomResourceStateMetrics") == []


def test_ksm_config_reads_batchjob_phases_from_the_crd() -> None:
    """The phases are read from `.status.phase`, all of them, of the BatchJob's served version."""
    (crd,) = [doc for doc in yaml.safe_load_all((REPO / "crds/batchjob.yaml").read_text())]
    (version,) = crd["spec"]["versions"]
    (resource,) = load(KSM_CONFIG)["spec"]["resources"]
    assert resource["groupVersionKind"] == {
        "group": crd["spec"]["group"],
        "version": version["name"],
        "kind": crd["spec"]["names"]["kind"],
    }
    phases = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["phase"]
    (phase,) = [m["each"]["stateSet"] for m in resource["metrics"] if m["name"] == "status_phase"]
    assert phase == {"labelName": "phase", "path": ["status", "phase"], "list": phases["enum"]}


def test_ksm_series_names_and_labels() -> None:
    common = ("namespace", "batchjob", "backend", "batchcluster", "cluster")
    usage = ("queue_seconds", "elapsed_seconds", "cpu_seconds", "max_rss_bytes",
             "cpu_efficiency", "memory_efficiency")
    assert ksm_metrics() == {
        "kube_batchjob_status_phase": (*common, "phase"),
        "kube_batchjob_status_reason": (*common, "reason"),
        "kube_batchjob_status_scheduler_reason": (*common, "scheduler_reason"),
        "kube_batchjob_status_condition": (*common, "type", "reason"),
        **{f"kube_batchjob_usage_{name}": common for name in usage},
    }


# --- the kustomization ------------------------------------------------------------------------


def test_monitoring_kustomization(render: Render) -> None:
    docs = {doc["kind"]: doc for doc in render(MONITORING)}
    assert sorted(docs) == ["ClusterRole", "ConfigMap", "PrometheusRule", "ServiceMonitor"]
    for kind in ("PrometheusRule", "ServiceMonitor"):
        assert violations(docs[kind], kind) == []
        assert docs[kind]["metadata"]["namespace"] == "hpcbridge-system"
    for kind in ("ClusterRole", "ConfigMap"):
        kubernetes_validate.validate(docs[kind], kubernetes_validate.latest_version(), strict=True)
    assert docs["PrometheusRule"] == load(RULES)
    config_map = docs["ConfigMap"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["hpcbridge.json"]) == json.loads(DASHBOARD.read_text())


def test_service_monitor_scrapes_the_hook_service(render: Render) -> None:
    (monitor,) = [doc for doc in render(MONITORING) if doc["kind"] == "ServiceMonitor"]
    (service,) = [doc for doc in render(REPO / "deploy/base") if doc["kind"] == "Service"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {port["name"]: port for port in service["spec"]["ports"]}
    endpoints = [(e["port"], e["path"], e.get("scheme")) for e in monitor["spec"]["endpoints"]]
    assert endpoints == [("metrics", "/metrics", None)]  # plain HTTP, the hooks' port is TLS
    assert ports["metrics"]["targetPort"] == "metrics"


def test_ksm_role_reads_batchjobs(render: Render) -> None:
    (role,) = [doc for doc in render(MONITORING) if doc["kind"] == "ClusterRole"]
    assert {
        "apiGroups": ["hpcbridge.io"],
        "resources": ["batchjobs"],
        "verbs": ["list", "watch"],
    } in (role["rules"])


# --- the documentation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "labels"),
    [pytest.param(name, labels, id=name) for name, (_, labels) in HOOK_METRICS.items()]
    + [pytest.param(name, labels, id=name) for name, labels in ksm_metrics().items()],
)
def test_operations_doc_lists_the_metric_with_its_labels(
    name: str, labels: tuple[str, ...]
) -> None:
    """docs/operations.md has a table row `| `name` | labels… |` for every metric."""
    rows = {
        match[1]: match[2]
        for match in re.finditer(r"^\| `(\w+)` \| ([^|]*)\|", OPERATIONS_DOC.read_text(), re.M)
    }
    assert name in rows
    assert re.findall(r"`(\w+)`", rows[name]) == list(labels)
