"""Kubernetes label selectors (``metav1.LabelSelector``): read one, and match labels against it.

A BatchCluster's ``namespaceSelector`` is one; it is matched against the labels of the
BatchJob's Namespace object as Metacontroller hands it over. The rules are the API server's:
``matchLabels`` and every ``matchExpressions`` entry must all hold; ``{}`` selects everything.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hooks.core.values.fields import SpecError, mapping
from hooks.core.values.text import shown

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
MAX_TERMS = 64
LABEL_KEY = re.compile(
    r"((?=.{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
"""A label key: an optional DNS-subdomain prefix and ``/``, then a name of at most 63
characters."""
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, object]) -> bool:
        """Whether ``labels`` meet every requirement (``{}`` selects everything)."""
        return all(_holds(req, labels) for req in self.requirements)


def parse_selector(raw: object, where: str) -> Selector:
    """A ``LabelSelector`` as the API server would take it, or ``SpecError`` naming the
    field."""
    selector = mapping(raw, where)
    unknown = sorted(set(selector) - {"matchLabels", "matchExpressions"})
    if unknown:
        raise SpecError(f"{where} has {shown(unknown[0])}; a label selector has matchLabels "
                        "and matchExpressions.")
    requirements: list[Requirement] = []
    labels = mapping(selector.get("matchLabels") or {}, f"{where}.matchLabels")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list) or len(labels) + len(expressions) > MAX_TERMS:
        raise SpecError(f"{where} must have at most {MAX_TERMS} labels and expressions in "
                        "all.")
    for key, value in labels.items():
        _key(key, f"{where}.matchLabels")
        if not isinstance(value, str) or not LABEL_VALUE.fullmatch(value):
            raise SpecError(f"{where}.matchLabels[{shown(key)}] must be a label value, not "
                            f"{shown(value)}.")
        requirements.append(Requirement(key, "In", frozenset({value})))
    for i, item in enumerate(expressions):
        requirements.append(_expression(mapping(item, f"{where}.matchExpressions[{i}]"),
                                        f"{where}.matchExpressions[{i}]"))
    return Selector(tuple(requirements))


def _expression(raw: Mapping[str, object], where: str) -> Requirement:
    key = _key(raw.get("key"), f"{where}.key")
    operator = raw.get("operator")
    if operator not in OPERATORS:
        raise SpecError(f"{where}.operator must be one of {', '.join(OPERATORS)}, not "
                        f"{shown(operator)}.")
    assert isinstance(operator, str)
    values = raw.get("values") or []
    if not isinstance(values, list) or len(values) > MAX_TERMS or not all(
            isinstance(v, str) and LABEL_VALUE.fullmatch(v) for v in values):
        raise SpecError(f"{where}.values must be a list of label values.")
    if operator in ("In", "NotIn") and not values:
        raise SpecError(f"{where}.values must not be empty with {operator}.")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SpecError(f"{where}.values must be empty with {operator}.")
    return Requirement(key, operator, frozenset(values))


def _key(key: object, where: str) -> str:
    if not isinstance(key, str) or not LABEL_KEY.fullmatch(key):
        raise SpecError(f"{where} has {shown(key)}, which is not a label key.")
    return key


def _holds(req: Requirement, labels: Mapping[str, object]) -> bool:
    """Whether ``labels`` meet ``req``; a label whose value is no string (which no API server
    stores) is one no value matches."""
    present = req.key in labels
    value = labels.get(req.key)
    among = isinstance(value, str) and value in req.values
    match req.operator:
        case "In":
            return among
        case "NotIn":
            return not among
        case "Exists":
            return present
        case _:
            return not present
