"""The BatchJob API's typed reasons, and the sets of them the core decides by."""

from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    """Typed reasons of the BatchJob API; ``NONE`` while all is well."""

    NONE = ""
    INVALID_SPEC = "InvalidSpec"
    SECRET_NOT_FOUND = "SecretNotFound"
    INVALID_SECRET = "InvalidSecret"
    HOST_KEY_MISMATCH = "HostKeyMismatch"
    AUTHENTICATION_FAILED = "AuthenticationFailed"
    CLUSTER_UNREACHABLE = "ClusterUnreachable"
    SUBMITTING = "Submitting"
    SUBMIT_FAILED = "SubmitFailed"
    NON_ZERO_EXIT_CODE = "NonZeroExitCode"
    TIMEOUT = "Timeout"
    OUT_OF_MEMORY = "OutOfMemory"
    NODE_FAIL = "NodeFail"
    BOOT_FAIL = "BootFail"
    PREEMPTED = "Preempted"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    DEPENDENCY_FAILED = "DependencyFailed"
    """``spec.activeDeadlineSeconds`` passed: the attempt was cancelled (the Kubernetes Job's
    reason)."""
    HELD = "Held"
    SUSPENDED = "Suspended"
    CONFIG_MAP_NOT_FOUND = "ConfigMapNotFound"
    CANCELLED_ON_CLUSTER = "CancelledOnCluster"
    DELETED = "Deleted"
    JOB_NOT_FOUND = "JobNotFound"
    UNKNOWN_STATE = "UnknownSchedulerState"
    """A scheduler state the hooks do not know: reported as such, never guessed."""
    BATCH_CLUSTER_NOT_FOUND = "BatchClusterNotFound"
    """``spec.cluster.name`` names a BatchCluster the request did not hand over."""
    INVALID_BATCH_CLUSTER = "InvalidBatchCluster"
    """The BatchCluster breaks a rule; its platform team fixes it."""
    CLUSTER_NOT_ALLOWED = "ClusterNotAllowed"
    """The BatchCluster's ``namespaceSelector`` does not select the BatchJob's namespace."""
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"
    """Pending until the jobs it depends on have ended as it asks."""
    WAITING_FOR_START_TIME = "WaitingForStartTime"
    """Pending until the start time it was given (SLURM ``--begin``)."""
    LIMIT_REACHED = "LimitReached"
    """Pending on a limit that lifts when other jobs end (a QOS's, an account's, a user's)."""
    UNSCHEDULABLE = "Unschedulable"
    """Pending, and the scheduler will not start it as submitted (a partition's limit, a
    request no machine meets); it does not end the BatchJob by itself."""
    STAGING_INPUTS = "StagingInputs"
    INPUT_NOT_FOUND = "InputNotFound"
    STORAGE_ACCESS_DENIED = "StorageAccessDenied"
    COLLECTING_OUTPUTS = "CollectingOutputs"
    OUTPUTS_FAILED = "OutputsFailed"
    PULLING_IMAGE = "PullingImage"
    """Pending while the login node pulls ``spec.container.image`` into the site's cache."""
    IMAGE_PULL_BACKOFF = "ImagePullBackOff"
    """Pending: the image could not be resolved or pulled; tried again with back-off."""
    ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
    """``imagePullPolicy: Never`` and the image is not in the site's cache: the attempt
    ends unsent."""


WAITING_REASONS = frozenset({Reason.WAITING_FOR_DEPENDENCY, Reason.WAITING_FOR_START_TIME,
                             Reason.LIMIT_REACHED, Reason.UNSCHEDULABLE})
"""Why a pending task waits, as the scheduler says, when it is more than ordinary queueing."""


INFRASTRUCTURE_REASONS = frozenset({Reason.NODE_FAIL, Reason.BOOT_FAIL, Reason.PREEMPTED})
"""Failures of the cluster rather than of the job: resubmitted within ``backoffLimit``."""

CONNECTION_REASONS = frozenset(
    {
        Reason.SECRET_NOT_FOUND,
        Reason.CONFIG_MAP_NOT_FOUND,
        Reason.INVALID_SECRET,
        Reason.HOST_KEY_MISMATCH,
        Reason.AUTHENTICATION_FAILED,
        Reason.CLUSTER_UNREACHABLE,
    }
)
"""Reasons that say the cluster could not be asked; the user or time fixes them."""
