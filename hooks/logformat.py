"""The hook server's log lines as JSON (``HPCBRIDGE_LOG_FORMAT=json``), and the record of one
hook call: which BatchJob, which hook, its outcome, how long it took and the remote commands it
ran (collected per call, in the thread that serves it)."""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
from typing import Any

_commands: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "hpcbridge_commands", default=None)


def begin_call() -> None:
    """Start collecting the remote commands of the call this thread serves."""
    _commands.set([])


def remote_command(verb: str, outcome: str) -> None:
    """Note one remote command of the call under way (``squeue:ok``), if one is."""
    commands = _commands.get()
    if commands is not None:
        commands.append(f"{verb}:{outcome}")


def end_call() -> list[str]:
    """The remote commands of the call that just ended."""
    commands = _commands.get() or []
    _commands.set(None)
    return commands


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and a hook call's fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC)
            .isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "call", {}))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def gunicorn_logconfig(log_format: str, level: str, access_log: str | None) -> dict[str, Any]:
    """gunicorn's ``logconfig_dict``: with ``json``, gunicorn's own lines (its error log on
    stderr, its access log when ``access_log`` is set: ``-`` for stdout or a file) and any
    other library's are JSON lines too; with ``text``, none, and gunicorn keeps its own
    format."""
    if log_format != "json":
        return {}
    json_stream = {"class": "logging.StreamHandler", "formatter": "json"}
    access: dict[str, Any] = (
        {**json_stream, "stream": "ext://sys.stdout"} if access_log == "-"
        else {"class": "logging.FileHandler", "formatter": "json", "filename": access_log}
        if access_log else {"class": "logging.NullHandler"})
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JSONFormatter}},
        "handlers": {
            "error_console": {**json_stream, "stream": "ext://sys.stderr"},
            "access": access,
        },
        "root": {"level": "WARNING", "handlers": ["error_console"]},
        "loggers": {
            "gunicorn.error": {"level": level.upper(), "handlers": ["error_console"],
                               "propagate": False},
            "gunicorn.access": {"level": "INFO" if access_log else "CRITICAL",
                                "handlers": ["access"], "propagate": False},
        },
    }
