"""``status.image``: the image the attempt runs, as asked (``reference``), as resolved
(``digest``) and with what (``runtime``), so that a rerun is known to run the same bytes; and
how many pulls of it failed in a row, with the time of the last, which the back-off of
``ImagePullBackOff`` counts from. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from hooks.core.status import stored
from hooks.core.values.image import DIGEST, ImageRecord
from hooks.core.values.text import readable

MAX_REFERENCE = 1024


def from_raw(raw: object) -> ImageRecord | None:
    """The stored ``status.image``, or None when there is none in a form the hooks write."""
    if not isinstance(raw, dict):
        return None
    reference, runtime, digest = raw.get("reference"), raw.get("runtime"), raw.get("digest", "")
    if not isinstance(reference, str) or not reference or len(reference) > MAX_REFERENCE:
        return None
    if not isinstance(digest, str) or (digest and not DIGEST.fullmatch(digest)):
        return None
    return ImageRecord(reference, stored.word(runtime), digest,
                       stored.count(raw.get("pullFailures")),
                       stored.timestamp(raw.get("lastPullFailure")) or "")


def to_raw(image: ImageRecord | None) -> dict[str, Any] | None:
    if image is None:
        return None
    raw: dict[str, Any] = {"reference": readable(image.reference, MAX_REFERENCE),
                           "runtime": image.runtime}
    if image.digest:
        raw["digest"] = image.digest
    if image.pull_failures:
        raw["pullFailures"] = image.pull_failures
    if image.last_failure:
        raw["lastPullFailure"] = image.last_failure
    return raw
