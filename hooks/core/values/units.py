"""Parsers for the small grammars of ``spec.resources``: time limits and memory quantities."""

from __future__ import annotations

import math
import re

_TIME_LIMIT = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_QUANTITY = re.compile(
    r"^((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def parse_time_limit(text: str) -> int:
    """Seconds in a ``1d12h30m10s``-style limit.

    >>> parse_time_limit("1h30m")
    5400
    >>> parse_time_limit("90s")
    90
    """
    match = _TIME_LIMIT.match(text)
    if not text or match is None:
        raise ValueError(f"{text!r} is not a duration like 90s, 30m, 2h or 1d12h")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    return total


def parse_memory_mib(value: object) -> int:
    """Whole MiB (rounded up) in a Kubernetes quantity such as ``4Gi``, ``512M`` or ``1073741824``.

    >>> parse_memory_mib("4Gi")
    4096
    >>> parse_memory_mib(1048577)
    2
    >>> parse_memory_mib(4096)
    Traceback (most recent call last):
    ValueError: '4096' is below 1Mi of bytes (did you mean 4096Mi?)
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (
            isinstance(value, int) and value.bit_length() > 64) or len(str(value)) > 64:
        raise ValueError("the value is not a memory quantity like 4Gi or 512Mi")
    text = str(value)
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a memory quantity like 4Gi or 512Mi")
    number, suffix = match.groups()
    if suffix == "m":
        factor: float = 1e-3
    else:
        factor = _BINARY.get(suffix or "", 0) or _DECIMAL.get(suffix or "", 1)
    try:
        size = float(number) * factor
        mib = math.ceil(size / 2**20)
    except (OverflowError, ValueError) as err:
        raise ValueError(f"{text!r} is not a memory size this cluster could offer") from err
    if size <= 0:
        raise ValueError(f"{text!r} must be at least 1Mi")
    if size < 2**20:
        # A number without a unit is bytes in a Kubernetes quantity: 4096 is 4 KiB.
        hint = f" (did you mean {text}Mi?)" if not suffix else ""
        raise ValueError(f"{text!r} is below 1Mi{' of bytes' if not suffix else ''}{hint}")
    return mib
