"""The imperative shell: runs one customize, sync or finalize call.

It parses the request into a ``Call``, lets the pure core decide (``hooks.core.decide.sync``,
``hooks.core.decide.finalize``), runs each effect the decision yields — over the transport the
effect's scheduler names (the pooled SSH connection) and the shared status, within one
deadline for the whole call — and sends the result back, until the core returns its answer.
Trouble on the way (the transport's ``TransportError``, a scheduler that does not answer)
comes back to the core as a typed ``Trouble``, which the core turns into a 200 answer with the
last known state, never an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from hooks.admission import route_of
from hooks.core.decide import answer, finalize, sync
from hooks.core.decide.effects import (
    Action,
    Answer,
    Cancel,
    Cleanup,
    Decision,
    Effect,
    Forget,
    Hold,
    ListActive,
    MarkEnded,
    PrepareImage,
    ProbeContainers,
    Query,
    Release,
    ResolveImage,
    Submit,
    Track,
    Trouble,
)
from hooks.core.values.image import ImageRef, ResolvedImage
from hooks.core.values.reasons import Reason
from hooks.core.values.sdk import SchedulerError
from hooks.core.wire import request
from hooks.deadline import Deadline
from hooks.registry import resolve as registry
from hooks.registry.answers import RegistryError
from hooks.runtime import Runtime
from hooks.schedulers.base import Scheduler, TransportError

log = logging.getLogger(__name__)

SLOW = "The cluster answered too slowly."


class Executor:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def customize(self, body: object) -> dict[str, Any]:
        return request.customize(body)

    def sync(self, body: object) -> dict[str, Any]:
        """Answer a sync or finalize request (Metacontroller sends both shapes to either)."""
        rt = self.runtime
        rt.sweep_if_due()
        call = request.parse_call(body, rules=rt.schedulers, policy=rt.policy, now=rt.clock())
        if not call.finalizing:
            return self._run(call, sync.decide(call)).body
        try:
            return self._run(call, finalize.decide(call)).body
        except Exception:
            # A bug must not keep a deleted BatchJob forever: past the grace, let it go.
            if not finalize.past_grace(call):
                raise
            log.exception("finalizing %s/%s failed; giving up after the grace period",
                          call.namespace, call.name)
            return self._noted(finalize.give_up(call)).body

    def _run(self, call: request.Call, decision: Decision) -> Answer:
        """Drive the decision: run each effect it yields and send it the result, until it
        returns its answer. The first effect that reaches a cluster takes its route's and its
        namespace's share of the hook threads (``hooks.admission``) for the rest of the call;
        beyond either share the call is answered at once with the status kept."""
        budget = Deadline.after(self.runtime.settings.sync_budget)
        with ExitStack() as shares:
            result: object = None
            admitted = False
            while True:
                try:
                    effect = decision.send(result)
                except StopIteration as done:
                    return self._noted(done.value)
                if not admitted:
                    slot = self.runtime.admission.slot(route_of(effect.placement), call.namespace)
                    if not shares.enter_context(slot):
                        decision.close()
                        return self._noted(answer.busy(call))
                    admitted = True
                result = self._act(effect, budget)

    def _noted(self, answer: Answer) -> Answer:
        for note in answer.notes:
            (log.warning if answer.gave_up else log.info)("%s", note)
        if answer.gave_up:
            self.runtime.metrics.finalize_gave_up()
        return answer

    def _act(self, effect: Effect, budget: Deadline) -> object:
        """Run the effect's action; what fails on the way comes back as ``Trouble``."""
        try:
            return self._perform(effect, budget)
        except TransportError as err:
            return Trouble(err.reason, err.sentence)
        except SchedulerError as err:
            return Trouble(Reason.CLUSTER_UNREACHABLE, f"The scheduler did not answer: {err}.")
        except TimeoutError:
            return Trouble(Reason.CLUSTER_UNREACHABLE, SLOW)

    def _perform(self, effect: Effect, budget: Deadline) -> object:
        rt = self.runtime
        scheduler = rt.schedulers[effect.placement.backend]
        transport = rt.transport(scheduler)
        cluster, access = effect.placement.cluster, effect.access
        key = transport.key(cluster, access)
        command = self._command_deadline(budget, transport.overrun)

        def opener(deadline: Deadline) -> AbstractContextManager[Any]:
            return transport.open(cluster, access, deadline=deadline)

        match effect.action:
            case ResolveImage(image, credentials, allowed):
                return self._resolve(image, credentials, allowed, budget)
            case Query(ref):
                return rt.cache.lookup(key, scheduler, opener, ref, deadline=command())
            case Track(ref):
                rt.cache.track(key, scheduler, ref)
                return None
            case Forget(attempt):
                rt.cache.drop(key, scheduler, attempt)
                return None
        with opener(budget) as conn:
            return self._on(conn, scheduler, effect.action, command())

    def _on(self, conn: object, scheduler: Scheduler[Any], action: Action,
            deadline: Deadline) -> object:
        """Run an action over ``conn``, the open connection of the scheduler's transport."""
        match action:
            case Submit(job):
                outcome = scheduler.submit(conn, job, deadline=deadline)
                self.runtime.metrics.submission(outcome.answer.value)
                return outcome
            case ListActive(uid):
                return tuple(scheduler.active_jobs(conn, uid, deadline=deadline))
            case Cleanup(root, stale):
                return scheduler.remove_directory(conn, root, stale, deadline=deadline)
            case Hold(job_ids):
                scheduler.hold(conn, job_ids, deadline=deadline)
            case Release(job_ids):
                scheduler.release(conn, job_ids, deadline=deadline)
            case Cancel(job_ids):
                scheduler.cancel(conn, job_ids, deadline=deadline)
            case MarkEnded(remote_dir, phase):
                scheduler.mark_ended(conn, remote_dir, phase, deadline=deadline)
            case PrepareImage(pull):
                return scheduler.prepare_image(conn, pull, deadline=deadline)
            case ProbeContainers():
                return scheduler.container_support(conn, deadline=deadline)
            case _:
                raise TypeError(f"unknown action {action!r}")
        return None

    def _resolve(self, image: ImageRef, credentials: tuple[str, str] | None,
                 allowed: tuple[str, ...], budget: Deadline) -> ResolvedImage | Trouble:
        """The registry's digest and config of ``image``; what it answered instead, as the
        ``ImagePullBackOff`` sentence."""
        settings = self.runtime.settings
        budget.require(1, "asking the image registry")
        try:
            found = registry.resolve(image, credentials, allowed=allowed,
                                     timeout=min(settings.registry_timeout, budget.left()),
                                     ca_bundle=settings.registry_ca or None)
        except RegistryError as err:
            # A registry out of reach may be stood in for by the cache; a refusal may not.
            return Trouble(Reason.CLUSTER_UNREACHABLE if err.retryable
                           else Reason.IMAGE_PULL_BACKOFF, err.sentence)
        return ResolvedImage(found.digest, found.config)

    def _command_deadline(self, budget: Deadline, overrun: float) -> Callable[[], Deadline]:
        """The deadline of the next remote command: ``HPCBRIDGE_COMMAND_TIMEOUT`` plus what
        a command may ``overrun`` it over its transport, or less if the call's budget ends
        first."""
        timeout = self.runtime.settings.command_timeout

        def command() -> Deadline:
            budget.require(overrun + 1, "a remote command")
            return budget.within(timeout + overrun)

        return command

