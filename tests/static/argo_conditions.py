"""Argo Workflows' ``successCondition`` and ``failureCondition`` of a ``resource`` template, as its
executor evaluates them against the object it created: a small, faithful model in pure Python.

What Argo does, read in its source (argoproj/argo-workflows, ``workflow/executor/resource.go``;
the same code from v3.4 to v4.1):

- Each condition is parsed by ``labels.Parse`` of k8s.io/apimachinery
  (``pkg/labels/selector.go``): the label-selector grammar, applied to the object's fields.
- The fields are read by ``gjsonLabels`` (``Has``, ``Get``, ``Lookup``): the key is a gjson path
  (tidwall/gjson) into the JSON of the whole object as the API server returns it (a GET of the
  object, polled), so ``status.phase`` is the object's ``.status.phase``. A field is present when
  gjson's ``Result.Exists()`` says so (JSON ``null`` is present, its value ""), and its value is
  ``Result.String()``: a string as is, ``true``/``false``, a number as written (or Go's shortest
  decimal form when it has a fraction or exponent), an object or array as its JSON text.
- ``matchConditions`` checks the failure requirements first, one by one: **any one** that
  matches fails the step (so a comma in ``failureCondition`` is an *or*). Then the success
  requirements: the step succeeds when **all** match (a comma is an *and*; no
  ``successCondition`` at all succeeds at once). Otherwise it polls again: neither matched.

What ``Requirement.Matches`` does (apimachinery ``selector.go``), values compared as strings:

- ``=``, ``==``, ``in (a,b)``: the field is present and its value is one of the values; a
  missing field does **not** match.
- ``!=``, ``notin (a,b)``: a missing field **matches**; else its value is none of the values.
- ``key`` alone (exists) and ``!key`` (does not exist): presence only.
- ``>`` and ``<``: the field is present and both sides parse as base-10 int64; else no match.

And what ``labels.Parse`` accepts: requirements separated by commas; a key is a label key (an
optional DNS-subdomain prefix and ``/``, then at most 63 of ``[-A-Za-z0-9_.]``, starting and
ending alphanumeric), so only dots and array indexes of gjson's path syntax can be written;
a value is a label value (empty, or at most 63 of the same characters, alphanumeric at both
ends: ``-1`` is no value); ``in ()`` is the set of the empty string; ``==`` with nothing after it
compares with ""; ``in`` and ``notin`` are words only where an operator is expected.

Not modelled: Argo fails the step when the object is deleted while it waits, and the template's
``activeDeadlineSeconds`` ends the wait.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


class SelectorError(ValueError):
    """The condition is not a selector ``labels.Parse`` accepts (Argo fails the step)."""


class Operator(enum.StrEnum):
    """apimachinery's ``selection.Operator`` values."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


class Outcome(enum.StrEnum):
    """What one poll of the object says of the step."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    WAITING = "Waiting"


# The lexer's tokens: its special symbols, scanned greedily, and its two words.
_SYMBOLS = frozenset({"(", ")", ",", "!", "!=", "=", "==", ">", "<"})
_WORDS = frozenset({"in", "notin"})
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_IDENTIFIER = "identifier"
_END = "end"
_OPERATORS = {"in": Operator.IN, "notin": Operator.NOT_IN, "=": Operator.EQUALS,
              "==": Operator.DOUBLE_EQUALS, "!=": Operator.NOT_EQUALS,
              ">": Operator.GREATER_THAN, "<": Operator.LESS_THAN}

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INT64 = re.compile(r"^[+-]?[0-9]+$")
_INT64_RANGE = range(-(2**63), 2**63)


def _tokens(selector: str) -> list[tuple[str, str]]:
    """(token, literal) pairs as apimachinery's ``Lexer`` scans them, ending with the end."""
    out: list[tuple[str, str]] = []
    text = selector.split("\0", 1)[0]  # the lexer reads a NUL byte as the end
    i = 0
    while True:
        while i < len(text) and text[i] in _WHITESPACE:
            i += 1
        if i == len(text):
            out.append((_END, ""))
            return out
        if text[i] in _SPECIAL:
            # Longest run of special symbols that is still a token: "==" then "(" in "==(".
            j, token = i, ""
            while j < len(text) and text[j] in _SPECIAL and text[i : j + 1] in _SYMBOLS:
                token = text[i : j + 1]
                j += 1
            out.append((token, token))
            i = j
        else:
            j = i
            while j < len(text) and text[j] not in _SPECIAL and text[j] not in _WHITESPACE:
                j += 1
            word = text[i:j]
            out.append((word if word in _WORDS else _IDENTIFIER, word))
            i = j


def _check_key(key: str) -> None:
    """apimachinery's ``validateLabelKey``: content.IsLabelKey."""
    parts = key.split("/")
    if len(parts) > 2:
        raise SelectorError(f"invalid key {key!r}: more than one '/'")
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix):
            raise SelectorError(f"invalid key {key!r}: the prefix is no DNS subdomain")
    name = parts[-1]
    if not name or len(name) > 63 or not _NAME.match(name):
        raise SelectorError(f"invalid key {key!r}")


def _check_value(value: str) -> None:
    """apimachinery's ``validateLabelValue``: content.IsLabelValue."""
    if len(value) > 63 or not _VALUE.match(value):
        raise SelectorError(f"invalid value {value!r}")


class _Parser:
    """apimachinery's ``Parser``: a recursive descent over the scanned tokens. In the Values
    context (everywhere but where an operator is expected) ``in`` and ``notin`` are
    identifiers."""

    def __init__(self, selector: str) -> None:
        self.items = _tokens(selector)
        self.position = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        token, literal = self.items[self.position]
        return (_IDENTIFIER if values and token in _WORDS else token), literal

    def consume(self, values: bool = True) -> tuple[str, str]:
        item = self.lookahead(values)
        self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead()
            if token == _END:
                return requirements
            if token not in (_IDENTIFIER, "!"):
                raise SelectorError(f"found {literal!r}, expected: !, identifier, or end")
            requirements.append(self.requirement())
            token, literal = self.consume()
            if token == _END:
                return requirements
            if token != ",":
                raise SelectorError(f"found {literal!r}, expected: ',' or end")
            if self.lookahead()[0] not in (_IDENTIFIER, "!"):
                raise SelectorError(f"found {self.lookahead()[1]!r}, expected an identifier")

    def requirement(self) -> Requirement:
        operator: Operator | None = None
        token, key = self.consume()
        if token == "!":
            operator = Operator.DOES_NOT_EXIST
            token, key = self.consume()
        if token != _IDENTIFIER:
            raise SelectorError(f"found {key!r}, expected: identifier")
        _check_key(key)
        if self.lookahead()[0] in (_END, ",") and operator is None:
            operator = Operator.EXISTS
        if operator is not None:
            return Requirement.new(key, operator, ())
        token, literal = self.consume(values=False)
        if token not in _OPERATORS:
            raise SelectorError(f"found {literal!r}, expected an operator")
        operator = _OPERATORS[token]
        if operator in (Operator.IN, Operator.NOT_IN):
            values = self.value_set()
        else:
            values = self.exact_value()
        return Requirement.new(key, operator, tuple(sorted(values)))

    def value_set(self) -> set[str]:
        token, literal = self.consume()
        if token != "(":
            raise SelectorError(f"found {literal!r}, expected: '('")
        token, literal = self.lookahead()
        if token == ")":  # "()" is the set of ""
            self.consume()
            return {""}
        if token not in (_IDENTIFIER, ","):
            raise SelectorError(f"found {literal!r}, expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            token, literal = self.consume()
            if token == _IDENTIFIER:
                values.add(literal)
                following, what = self.lookahead()
                if following == ")":
                    self.consume()
                    return values
                if following != ",":
                    raise SelectorError(f"found {what!r}, expected: ',' or ')'")
            elif token == ",":  # an empty value: "(,a", "a,,b", "a,)"
                if not values:
                    values.add("")
                following = self.lookahead()[0]
                if following == ")":
                    values.add("")
                    self.consume()
                    return values
                if following == ",":
                    values.add("")
            else:
                raise SelectorError(f"found {literal!r}, expected: ',' or identifier")

    def exact_value(self) -> set[str]:
        if self.lookahead()[0] in (_END, ","):
            return {""}
        token, literal = self.consume()
        if token != _IDENTIFIER:
            raise SelectorError(f"found {literal!r}, expected: identifier")
        return {literal}


def _int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``, or None where it fails."""
    if not _INT64.match(text):
        return None
    number = int(text)
    return number if number in _INT64_RANGE else None


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...]

    @classmethod
    def new(cls, key: str, operator: Operator, values: tuple[str, ...]) -> Requirement:
        """apimachinery's ``NewRequirement``, with its checks."""
        _check_key(key)
        if operator in (Operator.IN, Operator.NOT_IN) and not values:
            raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
        if operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS,
                        Operator.GREATER_THAN, Operator.LESS_THAN) and len(values) != 1:
            raise SelectorError("exactly one value is required")
        if operator in (Operator.GREATER_THAN, Operator.LESS_THAN) and _int64(values[0]) is None:
            raise SelectorError(f"for 'gt', 'lt' operators, {values[0]!r} is no integer")
        for value in values:
            _check_value(value)
        return cls(key, operator, values)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """apimachinery's ``Requirement.Matches`` over ``gjsonLabels`` of ``obj``."""
        value, present = lookup(obj, self.key)
        if self.operator in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return present and value in self.values
        if self.operator in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return not present or value not in self.values
        if self.operator is Operator.EXISTS:
            return present
        if self.operator is Operator.DOES_NOT_EXIST:
            return not present
        number, bound = _int64(value), _int64(self.values[0])
        if not present or number is None or bound is None:
            return False
        return number > bound if self.operator is Operator.GREATER_THAN else number < bound


def parse(selector: str) -> tuple[Requirement, ...]:
    """The requirements of ``selector``, sorted by key as ``labels.Parse`` returns them (each
    one's values sorted, as its string set lists them)."""
    return tuple(sorted(_Parser(selector).parse(), key=lambda requirement: requirement.key))


def _string(value: Any) -> str:
    """gjson's ``Result.String()`` of a JSON value."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # Go's strconv.FormatFloat(f, 'f', -1, 64)
        return str(int(value)) if value.is_integer() else format(Decimal(repr(value)), "f")
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def lookup(obj: Mapping[str, Any], key: str) -> tuple[str, bool]:
    """gjson's ``GetBytes(json, key)``: ``String()`` and ``Exists()`` of the field at the dotted
    path ``key`` (an object member by name, an array element by its decimal index)."""
    node: Any = obj
    for part in key.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, Sequence) and not isinstance(node, str) and part.isdigit() \
                and part.isascii() and int(part) < len(node):
            node = node[int(part)]
        else:
            return "", False
    return _string(node), True


def resource_outcome(obj: Mapping[str, Any], success_condition: str = "",
                     failure_condition: str = "") -> Outcome:
    """What Argo's ``matchConditions`` makes of one poll of ``obj``: failed if any failure
    requirement matches, else succeeded if every success requirement does, else waiting."""
    failure, success = parse(failure_condition), parse(success_condition)
    if any(requirement.matches(obj) for requirement in failure):
        return Outcome.FAILED
    if all(requirement.matches(obj) for requirement in success):
        return Outcome.SUCCEEDED
    return Outcome.WAITING
