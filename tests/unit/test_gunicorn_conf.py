"""The gunicorn settings `make run` and the container use."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator

import pytest

from hooks import gunicorn_conf


@pytest.fixture
def restored_logging() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("hooks", "paramiko")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers[:], lg.propagate = handlers, propagate
        lg.setLevel(level)
    gc.unfreeze()


def test_threads_in_one_process_by_default() -> None:
    assert (gunicorn_conf.worker_class, gunicorn_conf.workers) == ("gthread", 1)
    assert gunicorn_conf.threads >= 8


@pytest.mark.usefixtures("restored_logging")
def test_the_loaded_app_is_kept_out_of_full_collections() -> None:
    gunicorn_conf.post_worker_init(object())
    assert gc.get_freeze_count() > 0
    assert logging.getLogger("hooks").handlers
