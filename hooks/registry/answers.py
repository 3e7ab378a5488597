"""What a registry answered, and what a resolution says of it: the answer as read, the
``RegistryError`` a BatchJob's status shows, and the words of its sentences (the status and
the registry's own error, why a connection failed, which inward address a name led to).
"""

from __future__ import annotations

import http
import ipaddress
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from hooks.core.spec import endpoints, manifests
from hooks.core.values.image import ImageRef
from hooks.core.values.text import readable


class RegistryError(Exception):
    """The registry did not tell the digest or the config: ``sentence`` says what it answered,
    for the BatchJob's status; ``retryable`` whether asking again later may help."""

    def __init__(self, sentence: str, *, retryable: bool) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


def inward(host: str) -> str:
    """``host``, which ``endpoints.refusal`` found inward, as a sentence names it."""
    try:
        return f"the {endpoints.address_kind(ipaddress.ip_address(host))} address {host}"
    except ValueError:
        return f"{host}, a name that leads inside the cluster's network"


def answer_text(answer: Answer) -> str:
    """The status of ``answer`` and what its body says: ``404 Not Found: manifest unknown``."""
    try:
        status = f"{answer.status} {http.HTTPStatus(answer.status).phrase}"
    except ValueError:
        status = str(answer.status)
    said = manifests.error_text(answer.body)
    return f"{status}: {said}" if said else status


def cause(err: BaseException) -> str:
    """The system's word for why a connection failed (`` (connection refused)``), or empty."""
    seen: BaseException | None = err
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.strerror:
            return f" ({readable(str(seen.strerror), 80).lower()})"
        reason = getattr(seen, "reason", None)
        seen = reason if isinstance(reason, BaseException) else (
            seen.__cause__ or seen.__context__)
    return ""


@contextmanager
def unreadable(ref: ImageRef) -> Iterator[None]:
    """A ``ValueError`` of reading what the registry sent, as a ``RegistryError``."""
    try:
        yield
    except ValueError as err:
        said = str(err)
        raise RegistryError(f"Registry {ref.registry}, asked for {ref.repository}: "
                            f"{said[:1].lower()}{said[1:]}", retryable=False) from None


def split_url(url: str, what: str) -> SplitResult:
    """``url``'s parts, its port checked; a ``RegistryError`` naming ``what`` otherwise."""
    try:
        parts = urlsplit(url)
        valid = parts.port is None or parts.port > 0
    except ValueError:
        valid = False
    if not valid:
        raise RegistryError(f"{what} leads to {readable(url, 120)}, which is not a URL.",
                            retryable=False)
    return parts
