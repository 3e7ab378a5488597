"""Text the hooks take from a request: shown in a message without ever failing, and checked
for control characters before it can reach a command line or a line-oriented file; and text
from a remote host (an SSH banner, a scheduler's error line) made readable before it reaches
the BatchJob's status."""

from __future__ import annotations

import unicodedata

MAX_MESSAGE = 1024
"""The longest message the status carries, in characters."""
LINE_BREAKS = frozenset("\t\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029")
HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories that print nothing or act on a terminal: controls (NUL, BEL, ESC, DEL, C1),
formats (bidirectional overrides, zero-width characters), surrogates and paragraph breaks."""


def shown(value: object) -> str:
    """``value`` for a message: short, and never a number too long to print."""
    if isinstance(value, int) and value.bit_length() > 64:
        return "a number of more than 19 digits"
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (NUL, CR, LF, ESC...)."""
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def readable(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` safe to show whatever a remote host put in it: line breaks and tabs become
    spaces, other control and format characters are written as escapes (``\\x1b``,
    ``\\u202e``), and it is cut to ``limit`` characters. Readable text comes back unchanged.

    >>> readable("SSH-2.0-\\x1b]0;pwned\\x07\\r\\nevil\\x00\\u202e")
    'SSH-2.0-\\\\x1b]0;pwned\\\\x07  evil\\\\x00\\\\u202e'
    >>> len(readable("x" * 5000))
    1024
    """
    safe = "".join(map(_safe, text))
    return safe if len(safe) <= limit else safe[:limit - 3] + "..."


def _safe(char: str) -> str:
    if char in LINE_BREAKS:
        return " "
    if unicodedata.category(char) not in HIDDEN:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else (
        f"\\U{code:08x}")
