"""The imperative shell: runs one customize, sync or finalize call.

It parses the request into a ``Call``, lets the pure core decide (``hooks.core.sync``,
``hooks.core.finalize``), runs each remote step the decision asks for — over the pooled SSH
connection and the shared status, within one deadline for the whole call — and hands the
result back, until the core answers. Trouble on the way (a wrong host key, an unreachable
cluster, a scheduler that does not answer) comes back to the core as a typed ``Trouble``,
which the core turns into a 200 answer with the last known state, never an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from hooks.admission import route_of
from hooks.core import answer, finalize, request, sync
from hooks.core.model import Reason, SchedulerError
from hooks.core.steps import (
    Action,
    Answer,
    Cancel,
    Cleanup,
    Decision,
    Forget,
    Hold,
    ListActive,
    MarkEnded,
    Query,
    Release,
    Step,
    Submit,
    Track,
    Trouble,
)
from hooks.deadline import Deadline
from hooks.runtime import Runtime
from hooks.schedulers import guard
from hooks.schedulers.base import Scheduler
from hooks.ssh import errors
from hooks.ssh.client import OVERRUN, Jump, Remote, Target
from hooks.ssh.pool import pool_key

log = logging.getLogger(__name__)

SSH_REASONS: Mapping[type[errors.SSHError], Reason] = {
    errors.HostKeyMismatch: Reason.HOST_KEY_MISMATCH,
    errors.AuthenticationFailed: Reason.AUTHENTICATION_FAILED,
    errors.BadCredentials: Reason.INVALID_SECRET,
}
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
            return self._admitted(call, sync.decide(call)).body
        try:
            return self._admitted(call, finalize.decide(call)).body
        except Exception:
            # A bug must not keep a deleted BatchJob forever: past the grace, let it go.
            if not finalize.past_grace(call):
                raise
            log.exception("finalizing %s/%s failed; giving up after the grace period",
                          call.namespace, call.name)
            return self._noted(finalize.give_up(call)).body

    def _admitted(self, call: request.Call, decision: Decision) -> Answer:
        """The decision run within its route's and its namespace's share of the hook threads
        (``hooks.admission``), or, beyond either, answered at once with the status kept."""
        if not isinstance(decision, Step):
            return self._run(decision)
        route = route_of(decision.placement)
        with self.runtime.admission.slot(route, call.namespace) as admitted:
            return self._run(decision) if admitted else self._noted(answer.busy(call))

    def _run(self, decision: Decision) -> Answer:
        budget = Deadline.after(self.runtime.settings.sync_budget)
        while isinstance(decision, Step):
            decision = decision.then(self._act(decision, budget))
        return self._noted(decision)

    def _noted(self, answer: Answer) -> Answer:
        for note in answer.notes:
            (log.warning if answer.gave_up else log.info)("%s", note)
        if answer.gave_up:
            self.runtime.metrics.finalize_gave_up()
        return answer

    def _act(self, step: Step, budget: Deadline) -> object:
        """Run the step's action; what fails on the way comes back as ``Trouble``."""
        try:
            return self._perform(step, budget)
        except errors.SSHError as err:
            reason = SSH_REASONS.get(type(err), Reason.CLUSTER_UNREACHABLE)
            return Trouble(reason, err.message[:1].upper() + err.message[1:] + ".")
        except SchedulerError as err:
            return Trouble(Reason.CLUSTER_UNREACHABLE, f"The scheduler did not answer: {err}.")
        except TimeoutError:
            return Trouble(Reason.CLUSTER_UNREACHABLE, SLOW)

    def _perform(self, step: Step, budget: Deadline) -> object:
        rt = self.runtime
        scheduler = rt.schedulers[step.placement.backend]
        target = _target(step)
        key = pool_key(target, step.access.login)
        opener = self._opener(target, step)
        command = self._command_deadline(budget)
        match step.action:
            case Query(ref):
                return rt.cache.lookup(key, scheduler, opener, ref, deadline=command())
            case Track(ref):
                rt.cache.track(key, scheduler, ref)
                return None
            case Forget(attempt):
                rt.cache.drop(key, scheduler, attempt)
                return None
        with opener(budget) as conn:
            return self._on(conn, scheduler, step.action, command())

    def _on(self, conn: Remote, scheduler: Scheduler, action: Action,
            deadline: Deadline) -> object:
        """Run an action over the pooled connection ``conn``."""
        match action:
            case Submit(job):
                outcome = scheduler.submit(conn, job, deadline=deadline)
                self.runtime.metrics.submission(outcome.answer.value)
                return outcome
            case ListActive(uid):
                return tuple(scheduler.active_jobs(conn, uid, deadline=deadline))
            case Cleanup(root, stale):
                return _cleanup(conn, root, stale, deadline)
            case Hold(job_ids):
                scheduler.hold(conn, job_ids, deadline=deadline)
            case Release(job_ids):
                scheduler.release(conn, job_ids, deadline=deadline)
            case Cancel(job_ids):
                scheduler.cancel(conn, job_ids, deadline=deadline)
            case MarkEnded(remote_dir, phase):
                conn.run(guard.mark_ended_command(remote_dir=remote_dir, phase=phase),
                         deadline=deadline)
            case _:
                raise TypeError(f"unknown action {action!r}")
        return None

    def _opener(
        self, target: Target, step: Step
    ) -> Callable[[Deadline], AbstractContextManager[Remote]]:
        """Opens the pooled connection, connecting within the connect timeout if need be."""
        pool, connect_timeout = self.runtime.pool, self.runtime.settings.connect_timeout

        @contextmanager
        def opener(deadline: Deadline) -> Iterator[Remote]:
            deadline.require(1, "connecting")
            with pool.open(target, step.access.login,
                           deadline=deadline.within(connect_timeout)) as conn:
                yield conn

        return opener

    def _command_deadline(self, budget: Deadline) -> Callable[[], Deadline]:
        """The deadline of the next remote command: ``HPCBRIDGE_COMMAND_TIMEOUT`` plus what
        a command may overrun it, or less if the call's budget ends first."""
        timeout = self.runtime.settings.command_timeout

        def command() -> Deadline:
            budget.require(OVERRUN + 1, "a remote command")
            return budget.within(timeout + OVERRUN)

        return command


def _target(step: Step) -> Target:
    """The login node of the step's cluster, behind its jump hosts."""
    cluster = step.placement.cluster
    jump = tuple(Jump(hop.host, hop.port, hop.insecure_skip_host_key_check, credentials)
                 for hop, credentials in zip(cluster.jump, step.access.hops, strict=True))
    return Target(cluster.host, cluster.port, cluster.insecure_skip_host_key_check, jump)


def _cleanup(conn: Remote, root: str, stale: int, deadline: Deadline) -> str | Trouble:
    result = conn.run(guard.cleanup_command(root=root, stale_seconds=stale), deadline=deadline)
    word = result.out.strip()
    if word in ("removed", "gone", "busy"):
        return word
    detail = (result.err.strip().splitlines() or ["no answer"])[-1][:200]
    return Trouble(Reason.CLUSTER_UNREACHABLE,
                   f"Removing the BatchJob's remote directory failed: {detail}")
