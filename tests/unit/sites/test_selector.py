"""Label selectors matched against a Namespace's labels as Metacontroller hands them over: a
hostile label (no string, unhashable) is one no value matches, never an error."""

from __future__ import annotations

import pytest

from hooks.core.sites.selector import parse_selector

SELECTOR = parse_selector({"matchLabels": {"hpc/a": "enabled"},
                           "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                 "values": ["gpu"]}]}, "spec.namespaceSelector")


@pytest.mark.parametrize("value", [{"a": 1}, ["enabled"], None, 1, True])
def test_a_label_value_that_is_no_string_matches_no_value(value: object) -> None:
    assert not SELECTOR.matches({"hpc/a": value})
    assert SELECTOR.matches({"hpc/a": "enabled", "tier": value})


@pytest.mark.parametrize(("labels", "selected"), [
    ({"hpc/a": "enabled"}, True),
    ({"hpc/a": "enabled", "tier": "gpu"}, False),
    ({"hpc/a": "disabled"}, False),
    ({}, False),
])
def test_labels_are_matched_as_the_api_server_does(labels: dict[str, str],
                                                   selected: bool) -> None:
    assert SELECTOR.matches(labels) is selected
