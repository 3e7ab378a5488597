"""``spec.htcondor.submitOptions``: every name and attribute of a command hpcbridge owns is
refused in every spelling condor_submit accepts, values stay one line, and a user's
``periodic_remove`` cannot reach into the time limit's expression.

The table under test (``OWNED_COMMANDS``) is written from HTCondor 23.9.6's submit_utils.h/.cpp
and condor_attributes.h; ``tests/integration/test_htcondor.py`` shows on the real pool what the
names the security review found would have done.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hooks.core.values.fields import SpecError
from hooks.schedulers.htcondor.description import submit_description, time_limit_expression
from hooks.schedulers.htcondor.rules import (
    OWNED_COMMANDS,
    RESERVED_KEYS,
    STATEMENTS,
    reserved_key,
)
from tests.unit.conftest import job
from tests.unit.spec.test_spec import one_sentence_naming

FIELD = "spec.htcondor.submitOptions"


def refused(options: dict[str, Any], **spec: Any) -> str:
    with pytest.raises(SpecError) as caught:
        job("htcondor", htcondor={"submitOptions": options}, **spec)
    message = str(caught.value)
    one_sentence_naming(message, FIELD)
    return message


def spellings(name: str) -> list[str]:
    """``name`` as written, in lower and in upper case: condor_submit ignores case."""
    return sorted({name, name.lower(), name.upper()})


COMMAND_NAMES = [
    pytest.param(spelling, command.names[0], id=f"{command.names[0]}:{spelling}")
    for command in OWNED_COMMANDS for name in command.names for spelling in spellings(name)
    if spelling.lower() != "periodic_remove"
]
ATTRIBUTE_KEYS = [
    pytest.param(f"{prefix}{spelling}", command.attribute,
                 id=f"{command.attribute}:{prefix}{spelling}")
    for command in OWNED_COMMANDS for spelling in spellings(command.attribute)
    for prefix in ("+", "MY.", "my.", "My.", "")
] + [
    pytest.param(f"{prefix}{attribute}", attribute, id=f"{attribute}:{prefix}")
    for attribute in ("HpcbridgeKey", "HpcbridgePeriodicRemove")
    for prefix in ("+", "MY.", "my.", "")
]


@pytest.mark.parametrize(("key", "command"), COMMAND_NAMES)
def test_every_name_of_an_owned_command_is_refused(key: str, command: str) -> None:
    message = refused({key: "x"})
    assert repr(key) in message and command in message and "hpcbridge manages" in message


@pytest.mark.parametrize(("key", "attribute"), ATTRIBUTE_KEYS)
def test_every_attribute_of_an_owned_command_is_refused_bare_and_as_an_attribute(
    key: str, attribute: str
) -> None:
    message = refused({key: '"x"'})
    assert repr(key) in message and "hpcbridge manages" in message


@pytest.mark.parametrize("key", [*STATEMENTS, "Queue", "QUEUE", "If", "ENDIF"])
def test_statements_of_the_submit_language_are_refused(key: str) -> None:
    assert "statement" in refused({key: "1"})


@pytest.mark.parametrize(
    ("key", "command"),
    [
        # The bypasses of the security review: condor_submit reads each as the command.
        pytest.param("iwd", "initialdir", id="iwd"),
        pytest.param("job_iwd", "initialdir", id="job_iwd"),
        pytest.param("initial_dir", "initialdir", id="initial_dir"),
        pytest.param("LeaveJobInQueue", "leave_in_queue", id="LeaveJobInQueue"),
        pytest.param("arguments2", "arguments2", id="arguments2"),
        pytest.param("+Out", "output", id="+Out"),
        pytest.param("MY.Err", "error", id="MY.Err"),
        pytest.param("+Iwd", "initialdir", id="+Iwd"),
        pytest.param("+UserLog", "log", id="+UserLog"),
        pytest.param("+Cmd", "executable", id="+Cmd"),
        pytest.param("+Args", "arguments", id="+Args"),
        pytest.param("+Arguments", "arguments2", id="+Arguments"),
        pytest.param("+In", "input", id="+In"),
        pytest.param("stdout", "output", id="stdout"),
        pytest.param("Cmd", "executable", id="Cmd"),
        pytest.param("+PeriodicRemove", "periodic_remove", id="+PeriodicRemove"),
        pytest.param("PeriodicRemove", "periodic_remove", id="PeriodicRemove"),
        pytest.param("+MY.Out", "output", id="plus-and-my"),
    ],
)
def test_the_reviewed_bypasses_are_reserved(key: str, command: str) -> None:
    what = reserved_key(key)
    assert what is not None and command in what
    assert command in refused({key: "x"})


def test_a_periodicremove_spelling_is_told_to_write_periodic_remove() -> None:
    assert refused({"PeriodicRemove": "false"}).endswith("write periodic_remove instead.")


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"+ProjectName": '"cms"'}, id="custom-attribute"),
        pytest.param({"MY.ProjectName": '"cms"'}, id="my-attribute"),
        pytest.param({"request_disk": "1GB", "requirements": 'OpSys == "LINUX"'}, id="commands"),
        pytest.param({"+HpcbridgeKeyOther": '"x"'}, id="longer-name"),
        pytest.param({"+Output": '"x"'}, id="output-is-no-attribute"),
        pytest.param({"+OutFile": '"x"'}, id="longer-than-Out"),
        pytest.param({"stream_output": "true", "transfer_executable": "false"}, id="not-owned"),
        pytest.param({"periodic_remove": "NumJobStarts > 3"}, id="periodic-remove"),
        pytest.param({"Periodic_Remove": 'NumJobStarts > 3 && Owner != "a(b"'},
                     id="periodic-remove-any-case-parens-in-a-string"),
        pytest.param({"+Note": "a\\b"}, id="backslash-inside"),
        pytest.param({"+Note": '"ends in a backslash-like \\ char"'}, id="backslash-then-more"),
    ],
)
def test_allowed_submit_options(options: dict[str, str]) -> None:
    parsed = job("htcondor", htcondor={"submitOptions": options})
    assert dict(parsed.spec.options.submit_options) == options


@pytest.mark.parametrize(
    ("value", "what"),
    [
        pytest.param("1 \\", "backslash", id="trailing-backslash"),
        pytest.param('"x" \\   ', "backslash", id="backslash-then-spaces"),
        pytest.param("\\", "backslash", id="only-a-backslash"),
        pytest.param("a\tb", "control character", id="tab"),
        pytest.param("a\x00b", "control character", id="nul"),
        pytest.param("a\x1b[31m", "control character", id="escape"),
        pytest.param("a\x7f", "control character", id="delete"),
        pytest.param("a\x85b", "control character", id="c1-next-line"),
        pytest.param("1\nqueue 100", "newline", id="newline"),
        pytest.param("1\rqueue 100", "newline", id="carriage-return"),
    ],
)
def test_values_are_one_line_of_printable_text(value: str, what: str) -> None:
    assert what in refused({"+Note": value})


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("+No\tte", id="tab"),
        pytest.param("+Note\x00", id="nul"),
        pytest.param("req\u0435st_disk", id="cyrillic-e"),
        pytest.param("+\u212aey", id="kelvin-sign"),
    ],
)
def test_keys_are_ascii_without_control_characters(key: str) -> None:
    refused({key: "1"})


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"request_disk": "1", "REQUEST_DISK": "2"}, id="case"),
        pytest.param({"+ProjectName": '"a"', "MY.ProjectName": '"b"'}, id="plus-and-my"),
        pytest.param({"periodic_remove": "false", "Periodic_Remove": "true"}, id="periodic"),
    ],
)
def test_one_command_set_twice_is_refused(options: dict[str, str]) -> None:
    assert "same command" in refused(options)


HOSTILE_PERIODIC_REMOVE = [
    pytest.param("false) ? false : (false", "closes a parenthesis", id="conditional"),
    pytest.param("false) || (true", "closes a parenthesis", id="or-true"),
    pytest.param("false)) && ((false", "closes a parenthesis", id="and-false"),
    pytest.param(")", "closes a parenthesis", id="close"),
    pytest.param("(false", "open", id="open"),
    pytest.param("false || (true", "open", id="left-open"),
    pytest.param('"a', "string literal open", id="open-string"),
    pytest.param('Owner == "a\\") || (true"', "backslash", id="escaped-quote"),
    pytest.param("false /* ) */", "comment", id="block-comment"),
    pytest.param("false // )", "comment", id="line-comment"),
    pytest.param("'odd)name' > 3", "quoted attribute", id="quoted-name"),
    pytest.param("$(x)", "macro", id="macro"),
]


@pytest.mark.parametrize(("value", "what"), HOSTILE_PERIODIC_REMOVE)
def test_a_periodic_remove_that_could_escape_is_refused(value: str, what: str) -> None:
    message = refused({"periodic_remove": value}, resources={"timeLimit": "1m"})
    assert "periodic_remove" in message and what in message


@pytest.mark.parametrize(("value", "what"), HOSTILE_PERIODIC_REMOVE)
def test_a_periodic_remove_that_could_escape_is_refused_without_a_time_limit_too(
    value: str, what: str
) -> None:
    refused({"Periodic_Remove": value})


@pytest.mark.parametrize(("value", "_what"), HOSTILE_PERIODIC_REMOVE)
def test_even_unchecked_the_time_limit_never_holds_their_text(value: str, _what: str) -> None:
    """The description's own guarantee, without the rules: their text is the value of a job
    attribute of its own, which condor_submit parses alone; the time limit's line holds none of
    it."""
    base = job("htcondor", resources={"timeLimit": "1m"})
    options = replace(base.spec.options, submit_options=(("periodic_remove", value),))
    text = submit_description(replace(base, spec=replace(base.spec, options=options)))
    [theirs] = [line for line in text.splitlines() if line.startswith("+HpcbridgePeriodicRemove")]
    [ours] = [line for line in text.splitlines() if line.startswith("periodic_remove")]
    assert theirs == f"+HpcbridgePeriodicRemove = {value}"
    assert ours == f"periodic_remove = ({time_limit_expression(60)}) || MY.HpcbridgePeriodicRemove"


def test_the_reserved_keys_are_the_table_in_lower_case() -> None:
    assert all(key == key.lower() for key in RESERVED_KEYS)
    for command in OWNED_COMMANDS:
        attribute = command.attribute.lower()
        assert {attribute, f"+{attribute}", f"my.{attribute}"} <= RESERVED_KEYS
        assert {name.lower() for name in command.names} - {"periodic_remove"} <= RESERVED_KEYS
    assert "periodic_remove" not in RESERVED_KEYS
