"""The BatchJob CRD's status schema as the API server checks a status: its structural schema
(crds/batchjob.yaml) with the formats the API server checks, date-time and int64."""

from __future__ import annotations

import datetime
import functools
import re

import jsonschema

from tests.static.admission import batchjob_crd, crd_schema
from tests.static.kube import to_jsonschema

DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})?$")
FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time")
def is_date_time(value: object) -> bool:
    """The API server's date-time: RFC 3339, and the few variants it also accepts."""
    if not isinstance(value, str):
        return True
    if not DATE_TIME.match(value):
        return False
    try:
        datetime.datetime.fromisoformat(value[:19])
    except ValueError:
        return False
    return True


@FORMATS.checks("int64")
def is_int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@functools.cache
def status_validator() -> jsonschema.Draft202012Validator:
    schema = to_jsonschema(crd_schema(batchjob_crd())["properties"]["status"])
    return jsonschema.Draft202012Validator(schema, format_checker=FORMATS)


def status_violations(status: object) -> list[str]:
    return sorted(f"status.{'.'.join(map(str, error.absolute_path))}: {error.message[:200]}"
                  for error in status_validator().iter_errors(status))
