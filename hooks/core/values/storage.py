"""The value types of the data a BatchJob moves: the object store, S3 objects, claim volumes,
the inputs the mover fetches and the outputs it collects (``hooks.core.spec.data`` parses
them)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class When(enum.StrEnum):
    ON_SUCCESS = "OnSuccess"
    ON_FAILURE = "OnFailure"
    ALWAYS = "Always"


@dataclass(frozen=True, slots=True)
class S3Storage:
    """``spec.storage.s3``: the object store and the Secret with its keys (which only the
    mover Pods mount: the hooks never read it, and it never reaches the cluster)."""

    endpoint: str
    secret_name: str
    region: str = ""
    allowed: bool = False
    """The endpoint is on an allow-list (``hooks.core.spec.endpoints``): the mover Pods may
    reach it whatever its address; otherwise they refuse any address that is not public."""


@dataclass(frozen=True, slots=True)
class S3Object:
    """One object (``key``) or every object under ``prefix`` of a bucket."""

    bucket: str
    key: str = ""
    prefix: str = ""


@dataclass(frozen=True, slots=True)
class Volume:
    """A file or directory of a PersistentVolumeClaim: ``subPath`` of claim ``claim``."""

    claim: str
    sub_path: str = ""


@dataclass(frozen=True, slots=True)
class DataInput:
    """One input fetched by the inputs mover: from S3 or a claim, to ``path`` (a directory
    when it ends in ``/``) in the job's directory."""

    path: str
    s3: S3Object | None = None
    volume: Volume | None = None


@dataclass(frozen=True, slots=True)
class Output:
    """One entry of ``spec.outputs``: the files matching ``pattern`` go to S3 (``prefix`` +
    their path in the job's directory) or into a claim's directory."""

    pattern: str
    s3: S3Object | None = None
    volume: Volume | None = None
    when: When = When.ON_SUCCESS
    optional: bool = False


