"""Counters read from Prometheus text pages (the API server's and the hooks' /metrics), and
their growth between two readings."""

from __future__ import annotations

from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

API_VERBS = {
    "write": ("POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE"),
    "read": ("GET", "LIST"),
    "watch": ("WATCH", "WATCHLIST"),
}
"""apiserver_request_total's verbs, by what they cost."""


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Pure: every sample of metric ``name`` with its labels (prometheus_client's parser)."""
    return [(dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == name]


def grown(before: str, after: str, name: str, by: str) -> defaultdict[str, float]:
    """Pure: how much metric ``name`` grew between two pages, summed by label ``by``."""
    growth: defaultdict[str, float] = defaultdict(float)
    for sign, text in ((-1, before), (1, after)):
        for labels, value in samples(text, name):
            growth[labels.get(by, "")] += sign * value
    return growth


def api_requests(before: str, after: str) -> dict[str, float]:
    """Pure: the API server's requests between two pages, by cost (write, read, watch,
    other) and in total."""
    by_verb = grown(before, after, "apiserver_request_total", "verb")
    kinds = {verb: kind for kind, verbs in API_VERBS.items() for verb in verbs}
    split = dict.fromkeys((*API_VERBS, "other"), 0.0)
    for verb, count in by_verb.items():
        split[kinds.get(verb.upper(), "other")] += count
    return {**split, "total": sum(by_verb.values())}
