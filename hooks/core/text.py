"""Text the hooks take from a request: shown in a message without ever failing, and checked
for control characters before it can reach a command line or a line-oriented file."""

from __future__ import annotations


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
