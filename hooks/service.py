"""The imperative shell: runs one customize, sync or finalize call against a cluster.

Each call parses the request, lets the pure core decide, talks to the cluster over SSH only
where the decision needs it, and answers with the complete status and children. Trouble on
the way (no Secret, a wrong host key, an unreachable cluster, a scheduler that does not
answer) becomes a typed reason in a 200 answer with the last known state, never an error.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from hooks import backends, metrics
from hooks.backends import guard
from hooks.backends.base import Backend, SchedulerError, Submitted
from hooks.core import aggregate, children, lifecycle, response, status
from hooks.core.lifecycle import Plan, Step
from hooks.core.model import ClusterRef, JobRef, JobRequest, Reason, Spec, attempt_key, job_root
from hooks.core.request import HookRequest, parse_customize, parse_sync
from hooks.core.secret import Credentials, SecretError, parse_secret
from hooks.core.spec import SpecError, parse_spec, parse_target
from hooks.core.status import Status
from hooks.pool import Limited, Pool
from hooks.settings import Settings
from hooks.ssh import errors
from hooks.ssh.client import Target
from hooks.status_cache import StatusCache

log = logging.getLogger(__name__)

SKIP_CANCEL = "hpcbridge.io/skip-cancel"
SLACK = 4.0
SSH_REASONS: Mapping[type[errors.SSHError], Reason] = {
    errors.HostKeyMismatch: Reason.HOST_KEY_MISMATCH,
    errors.AuthenticationFailed: Reason.AUTHENTICATION_FAILED,
    errors.BadCredentials: Reason.INVALID_SECRET,
}


class Trouble(Exception):
    """The cluster could not be asked; carries the typed reason and one sentence."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Budget:
    """The time one hook call may still spend on the cluster."""

    def __init__(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds

    def take(self, wanted: float) -> float:
        """Seconds for the next remote step; a command may overrun its own limit by a few
        seconds (the remote kill grace), which is held back here."""
        left = self._deadline - time.monotonic() - SLACK
        if left < 1:
            raise Trouble(Reason.CLUSTER_UNREACHABLE, "The cluster answered too slowly.")
        return min(wanted, left)


@dataclass(frozen=True, slots=True)
class Work:
    """What a call works on: the backend, the cluster, and the spec when it is valid."""

    backend: Backend
    cluster: ClusterRef
    spec: Spec | None
    spec_error: str


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


class Hooks:
    def __init__(
        self,
        settings: Settings,
        *,
        pool: Pool | None = None,
        clock: Callable[[], datetime.datetime] = utcnow,
    ) -> None:
        self.settings = settings
        self.pool = pool or Pool(max_channels=settings.max_channels)
        self.cache = StatusCache(ttl=settings.status_ttl)
        self.clock = clock

    def customize(self, body: object) -> dict[str, Any]:
        parent = parse_customize(body)
        spec = parent.get("spec") or {}
        cluster = spec.get("cluster") if isinstance(spec, dict) else None
        ref = cluster.get("secretRef") if isinstance(cluster, dict) else None
        name = ref.get("name") if isinstance(ref, dict) else None
        attempt = status.from_raw(parent.get("status")).cluster
        names = [n for n in (name, attempt.secret_name if attempt else None)
                 if isinstance(n, str) and n]
        if not names:
            return {"relatedResources": []}
        namespace = parent["metadata"]["namespace"]
        rule = {"apiVersion": "v1", "resource": "secrets", "namespace": namespace,
                "names": sorted(set(names))}
        return {"relatedResources": [rule]}

    def sync(self, body: object) -> dict[str, Any]:
        req = parse_sync(body)
        if req.finalizing:
            return self._finalize(req)
        now = self.clock()
        prev = status.from_raw(req.parent.get("status"))
        spec_target = self._target(req)
        budget = Budget(self.settings.sync_budget)
        new = self._step(req, spec_target, prev, now, budget)
        if new.finished and not prev.finished and new.attempt_generation == req.generation:
            # A node failure within backoffLimit resubmits at once, so that the BatchJob does
            # not flash Failed. (After a spec edit the end stays visible, with its log Pod,
            # and the next attempt follows on the next sync.)
            new = self._step(req, spec_target, new, now, budget)
        return self._answer(req, spec_target, new, now)

    def _step(
        self, req: HookRequest, target: Work | None, prev: Status, now: datetime.datetime,
        budget: Budget,
    ) -> Status:
        """Plan and run one step of the BatchJob's life."""
        backoff = target.spec.backoff_limit if target and target.spec else 0
        plan = lifecycle.plan(prev, generation=req.generation, backoff_limit=backoff)
        if plan.step is Step.TRACK or (plan.step is Step.SUBMIT and plan.attempt == prev.attempt):
            # The attempt stays where it was first sent, also while its submission is retried.
            target = _where_submitted(target, prev, req)
        if plan.step is Step.IDLE:
            return prev
        if target is None or (target.spec is None and plan.step is Step.SUBMIT):
            message = target.spec_error if target else _spec_error(req)
            return lifecycle.invalid_spec(prev, message, backend=_backend_name(req))
        if plan.step is Step.SUBMIT and prev.finished:
            log.info("%s/%s: attempt %d after %s", req.namespace, req.name, plan.attempt,
                     prev.reason or prev.phase)
        return self._engage(req, target, prev, plan, now, budget)

    def _target(self, req: HookRequest) -> Work | None:
        raw = req.parent.get("spec")
        try:
            spec = parse_spec(raw)
            return Work(backends.for_name(spec.backend), spec.cluster, spec, "")
        except SpecError as err:
            error = str(err)
        try:
            name, cluster = parse_target(raw)
        except SpecError:
            return None
        return Work(backends.for_name(name), cluster, None, error)

    def _engage(
        self, req: HookRequest, target: Work, prev: Status, plan: Plan, now: datetime.datetime,
        budget: Budget,
    ) -> Status:
        backend = target.backend.name
        try:
            credentials = self._credentials(req, target.cluster)
            with self._connect(target.cluster, credentials, budget) as conn:
                if plan.step is Step.SUBMIT:
                    assert target.spec is not None
                    return self._submit(conn, req, target, prev, plan, now, budget)
                return self._track(conn, req, target, prev, plan, now, budget)
        except Trouble as trouble:
            return lifecycle.unreachable(prev, plan, trouble.reason, trouble.message,
                                         backend=backend, cluster=target.cluster)

    def _credentials(self, req: HookRequest, cluster: ClusterRef) -> Credentials:
        secret = req.secrets.get(cluster.secret_name)
        if secret is None:
            raise Trouble(
                Reason.SECRET_NOT_FOUND,
                f"Secret {cluster.secret_name!r} was not found in namespace {req.namespace}.",
            )
        try:
            return parse_secret(secret, insecure_host_keys=cluster.insecure_skip_host_key_check)
        except SecretError as err:
            raise Trouble(Reason.INVALID_SECRET,
                          f"Secret {cluster.secret_name!r}: {err}") from err

    @contextmanager
    def _connect(
        self, cluster: ClusterRef, credentials: Credentials, budget: Budget
    ) -> Iterator[Limited]:
        """A connection for this call; SSH and scheduler failures inside become ``Trouble``."""
        target = Target(cluster.host, cluster.port, cluster.insecure_skip_host_key_check)
        try:
            timeout = budget.take(self.settings.connect_timeout)
            with self.pool.open(target, credentials, timeout=timeout) as conn:
                yield conn
        except errors.SSHError as err:
            raise _trouble(err) from err
        except SchedulerError as err:
            raise Trouble(Reason.CLUSTER_UNREACHABLE,
                          f"The scheduler did not answer: {err}.") from err
        except TimeoutError as err:
            raise Trouble(Reason.CLUSTER_UNREACHABLE, "The cluster answered too slowly.") from err

    def _submit(
        self, conn: Limited, req: HookRequest, target: Work, prev: Status, plan: Plan,
        now: datetime.datetime, budget: Budget,
    ) -> Status:
        backend, spec, cluster = target.backend, target.spec, target.cluster
        assert spec is not None
        job = JobRequest(req.namespace, req.name, req.uid, plan.attempt, spec)
        outcome = backend.submit(conn, job, timeout=budget.take(self.settings.command_timeout))
        if outcome.kind in (Submitted.NEW, Submitted.EXISTING):
            tasks = backend.expected_tasks(spec, outcome.job_id)
            self.cache.track(conn.key, backend, JobRef(job.key, outcome.job_id, tasks))
            if outcome.kind is Submitted.NEW:
                log.info("submitted %s/%s attempt %d as %s job %s", req.namespace, req.name,
                         plan.attempt, backend.name, outcome.job_id)
            return lifecycle.submitted(prev, plan, backend=backend.name, cluster=cluster,
                                       job_id=outcome.job_id, tasks=tasks,
                                       now=response.format_time(now))
        if outcome.kind is Submitted.IN_FLIGHT:
            return lifecycle.in_flight(prev, plan, backend=backend.name, cluster=cluster)
        if outcome.kind is Submitted.REFUSED:
            return lifecycle.refused(prev, plan, backend=backend.name, cluster=cluster,
                                     message=outcome.message)
        raise Trouble(Reason.CLUSTER_UNREACHABLE,
                      f"The scheduler did not take the submission ({outcome.message}); "
                      "it is retried once the attempt's guard expires.")

    def _track(
        self, conn: Limited, req: HookRequest, target: Work, prev: Status, plan: Plan,
        now: datetime.datetime, budget: Budget,
    ) -> Status:
        backend, spec = target.backend, target.spec
        job_id = backend.job_id(prev.job_ids[0])
        expected = prev.job_ids  # the tasks the attempt was submitted with, or has shown since
        key = attempt_key(req.uid, plan.attempt)
        ref = JobRef(key=key, job_id=job_id, expected_tasks=expected)
        found = self.cache.lookup(conn.key, backend, conn, ref,
                                  timeout=budget.take(self.settings.command_timeout))
        submitted_at = response.parse_time(prev.submit_time) or now
        summary = aggregate.summarize(
            found,
            expected=expected,
            single=len(expected) == 1,
            seconds_since_submit=(now - submitted_at).total_seconds(),
        )
        new = lifecycle.observed(prev, plan, summary, backend=backend.name,
                                 generation=req.generation,
                                 backoff_limit=spec.backoff_limit if spec else 0)
        if target.spec_error and not new.finished:
            new = replace(new, message=f"{new.message} The new spec is invalid: "
                                       f"{target.spec_error}".strip())
        if new.finished:
            self.cache.drop(conn.key, backend, key)
        return new

    def _finalize(self, req: HookRequest) -> dict[str, Any]:
        try:
            return self._finalize_once(req)
        except Exception:
            # A bug must not keep a deleted BatchJob forever: past the grace, let it go.
            if not self._past_grace(req, self.clock()):
                raise
            log.exception("finalizing %s/%s failed; giving up after the grace period",
                          req.namespace, req.name)
            metrics.FINALIZE_GAVE_UP.inc()
            metrics.record_phase(req.uid, None)
            return response.envelope(req.shape, status=req.parent.get("status") or {},
                                     children=[], resync=0, finalized=True)

    def _finalize_once(self, req: HookRequest) -> dict[str, Any]:
        now = self.clock()
        prev = status.from_raw(req.parent.get("status"))
        target = _where_submitted(self._target(req), prev, req)
        annotations = req.metadata.get("annotations") or {}
        if annotations.get(SKIP_CANCEL) == "true":
            log.info("%s/%s deleted with %s: cluster left alone", req.namespace, req.name,
                     SKIP_CANCEL)
            return self._finished(req, target, prev, now, done=True)
        never_submitted = prev.attempt == 0 or (not prev.job_ids and prev.finished)
        try:
            if target is None:
                raise Trouble(Reason.INVALID_SPEC, _spec_error(req))
            credentials = self._credentials(req, target.cluster)
            budget = Budget(self.settings.sync_budget)
            with self._connect(target.cluster, credentials, budget) as conn:
                return self._cancel_and_clean(conn, req, target, prev, now, budget)
        except Trouble as trouble:
            give_up = never_submitted and trouble.reason in (
                Reason.INVALID_SPEC, Reason.SECRET_NOT_FOUND, Reason.INVALID_SECRET)
            if give_up or self._past_grace(req, now):
                metrics.FINALIZE_GAVE_UP.inc()
                log.warning("finalizing %s/%s without cleaning up on the cluster: %s",
                            req.namespace, req.name, trouble.message)
                return self._finished(req, target, prev, now, done=True)
            plan = Plan(Step.TRACK, prev.attempt, prev.attempt_generation, prev.retries)
            new = lifecycle.unreachable(prev, plan, trouble.reason, trouble.message,
                                        backend=prev.backend)
            return self._finished(req, target, new, now, done=False)

    def _past_grace(self, req: HookRequest, now: datetime.datetime) -> bool:
        """Whether ``HPCBRIDGE_FINALIZE_GRACE`` has passed since the BatchJob was deleted."""
        deleted_at = response.parse_time(req.metadata.get("deletionTimestamp")) or now
        return (now - deleted_at).total_seconds() >= self.settings.finalize_grace

    def _cancel_and_clean(
        self, conn: Limited, req: HookRequest, target: Work, prev: Status,
        now: datetime.datetime, budget: Budget,
    ) -> dict[str, Any]:
        backend = target.backend
        active = backend.active_jobs(conn, req.uid,
                                     timeout=budget.take(self.settings.command_timeout))
        if active:
            backend.cancel(conn, active, timeout=budget.take(self.settings.command_timeout))
            log.info("cancelled %s for deleted %s/%s", ", ".join(active), req.namespace, req.name)
            new = lifecycle.cancelling(prev, active)
            return self._finished(req, target, new, now, done=False)
        root = job_root(req.namespace, req.name, req.uid)
        result = conn.run(guard.cleanup_command(root=root, stale_seconds=guard.STALE_SECONDS),
                          timeout=budget.take(self.settings.command_timeout))
        answer = result.out.strip()
        if answer == "busy":
            new = replace(prev, message="The BatchJob is being deleted; waiting for a "
                                        "submission in flight.").reached()
            return self._finished(req, target, new, now, done=False)
        if answer not in ("removed", "gone"):
            detail = (result.err.strip().splitlines() or ["no answer"])[-1][:200]
            raise Trouble(Reason.CLUSTER_UNREACHABLE,
                          f"Removing the BatchJob's remote directory failed: {detail}")
        self.cache.drop(conn.key, backend, attempt_key(req.uid, prev.attempt))
        new = lifecycle.deleted(prev)
        return self._finished(req, target, new, now, done=True)

    def _finished(
        self, req: HookRequest, target: Work | None, new: Status, now: datetime.datetime,
        *, done: bool,
    ) -> dict[str, Any]:
        answer = self._answer(req, target, new, now, finalized=done, resync=0 if done else 3.0)
        if done:
            metrics.record_phase(req.uid, None)
        return answer

    def _answer(
        self, req: HookRequest, target: Work | None, new: Status, now: datetime.datetime,
        *, finalized: bool | None = None, resync: float | None = None,
    ) -> dict[str, Any]:
        """The complete answer; a finalize call fixes ``finalized`` and its own resync."""
        pods = self._children(req, target, new)
        logs_pod = pods[0]["metadata"]["name"] if pods else None
        if new.logs_pod != logs_pod:
            new = replace(new, logs_pod=logs_pod)
        previous = req.parent.get("status")
        raw = status.to_raw(
            new, previous=previous, now=response.format_time(now),
            generation=req.generation if req.shape == "decorator" else None,
        )
        if resync is None:
            spec = target.spec if target else None
            next_due = spec is not None and new.finished and lifecycle.plan(
                new, generation=req.generation, backoff_limit=spec.backoff_limit
            ).step is Step.SUBMIT
            resync = response.resync_after(new, previous=previous, uid=req.uid, now=now,
                                           next_attempt_due=next_due)
        metrics.record_phase(req.uid, str(new.phase))
        return response.envelope(req.shape, status=raw, children=pods, resync=resync,
                                 finalized=finalized)

    def _children(
        self, req: HookRequest, target: Work | None, new: Status
    ) -> Sequence[dict[str, Any]]:
        spec = target.spec if target else None
        observed = req.pods.get(children.pod_name(req.name))
        if spec is not None and not spec.logs_pod:
            return []
        if spec is not None and children.pod_due(new, follow=spec.logs_follow):
            if new.cluster is not None:
                spec = replace(spec, backend=new.backend or spec.backend, cluster=new.cluster)
            job = JobRequest(req.namespace, req.name, req.uid, new.attempt, spec)
            return [children.log_pod(job, job_ids=new.job_ids, image=self.settings.log_image)]
        kept = children.carried_over(observed)
        return [kept] if kept else []


def _where_submitted(target: Work | None, prev: Status, req: HookRequest) -> Work | None:
    """The current attempt stays where it was submitted: an edit of the spec's backend or
    cluster applies to the next attempt."""
    if prev.cluster is None:
        return target
    if prev.backend in backends.BACKENDS:
        backend = backends.for_name(prev.backend)
    elif target is not None:
        backend = target.backend
    else:
        return None
    spec, error = (target.spec, target.spec_error) if target else (None, _spec_error(req))
    return Work(backend, prev.cluster, spec, error)


def _trouble(err: errors.SSHError) -> Trouble:
    reason = SSH_REASONS.get(type(err), Reason.CLUSTER_UNREACHABLE)
    return Trouble(reason, err.message[:1].upper() + err.message[1:] + ".")


def _spec_error(req: HookRequest) -> str:
    try:
        parse_target(req.parent.get("spec"))
    except SpecError as err:
        return str(err)
    return "The spec is invalid."


def _backend_name(req: HookRequest) -> str:
    spec = req.parent.get("spec")
    backend = spec.get("backend") if isinstance(spec, dict) else None
    return backend if isinstance(backend, str) else ""
