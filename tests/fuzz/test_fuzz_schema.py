"""Requests generated from docs/hooks-openapi.yaml against the real hook server: no server
error, and every answer as the document describes it (status code, media type, body)."""

from __future__ import annotations

import datetime

import schemathesis
from hypothesis import note, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.driver import REPO
from tests.fuzz.answers import Hooks, check_answer
from tests.fuzz.mutations import HOOKS

DOCUMENT = REPO / "docs/hooks-openapi.yaml"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]

# The coverage phase would send every boundary case of every field (thousands a hook): the
# explicit examples and the fuzzing phase, both valid and invalid bodies, stay within budget.
schema = schemathesis.openapi.from_path(DOCUMENT, config=SchemathesisConfig.from_dict(
    {"phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}}}))


@schema.parametrize()
@settings(max_examples=50, deadline=datetime.timedelta(seconds=5))
def test_hooks_answer_as_documented(case: schemathesis.Case, hooks: Hooks) -> None:
    response = case.call(base_url=hooks.url, session=hooks.http, timeout=30)
    note(case.as_curl_command())
    hooks.record(case.method, case.path, response)
    case.validate_response(response, checks=CHECKS)
    if case.method == "POST" and case.path in HOOKS:
        check_answer(case.path, case.body, response)
