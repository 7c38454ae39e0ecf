"""Steps: the step of a ShmemVecEnv, compiled or by the fallback (parent side).

A part that :class:`~vecenv.ShmemVecEnv` holds (``venv._steps``) over its
:class:`~vecenv._collect.Collector` and :class:`~vecenv._collect.Recovery`.
For each verb (``step_async``, ``step``, ``step_wait``, ``send``, ``recv``,
``reset_async``, ``reset_wait``) it does the work, while the vec env keeps
the state machine: it guards, sets NEEDS_RESET before calling here, and sets
the state that follows once the call returns.

One step implementation: the compiled round in the workers and the compiled
parent step (:class:`vecenv._core.ParentStep`: action write, dispatch, the
first wait slice, collect, the batch) are the engine. What they cannot do
exactly goes to the fallback below, and it is chosen in two places only:

- :meth:`Steps.compiled`, for a wait: the fallback when there is no compiled
  step (observation leaves without a fixed layout, or a test's
  ``_fallback_for_testing``), when a caller's wait limit applies
  (``limit_waits``: the fallback's wait leaves the call pending), or when a
  restart is to be reported;
- ``exact_actions``, for actions: the compiled step writes one exact ndarray
  of the action leaf's dtype and shape (and says so when it is not); anything
  else, and every batch with ``check_actions=True``, is written by the
  collector (validated, cast, or sent through the pipes).

The compiled step hands over to the fallback in the state its own path would
be in (dispatched, or waited one slice in vain), so the two never disagree
about what was sent. ``tests/reference.py`` holds the plain-Python oracle both
are compared against.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from vecenv import _core, _stats
from vecenv._collect import SLICE_S, Collector, Recovery
from vecenv._protocol import Op
from vecenv.base import check_env_ids
from vecenv.errors import InvalidArgumentError, PendingTimeoutError

_OP_STEP, _OP_RESET = int(Op.STEP), int(Op.RESET)  # plain ints for the step path
_NOT_EXACT, _WAITING = _core.PARENT_NOT_EXACT, _core.PARENT_WAITING


class Steps:
    """The verbs' work over the collector (see the module docstring).

    ``sent`` says whether the call in progress may have handed work to a
    worker (dispatched an op, or posted actions): a verb whose call raised
    goes back to its state only when nothing was (:meth:`nothing_sent`).
    """

    def __init__(self, collector: Collector, recovery: Recovery, *, check_actions: bool):
        self.col = collector
        self.recovery = recovery
        self.num_envs = collector.num_envs
        self.batch_size = collector.batch_size
        fast = collector.fast
        self.fast = fast
        self.exact_actions = fast is not None and fast.exact_actions and not check_actions
        self.spin = collector.spin
        self.sent = False
        self.clock = _core.StepClock()  # the verbs' time and the caller's (stats())

    # ------------------------------------------------------------ timed verbs
    # Each verb is timed by the clock (stats()): enter, the work (in the
    # _-methods, but for step's, inlined: the hot path), then leave with the
    # env-steps of the batch it returns (0 when it returns none or raises).
    def start(self, actions) -> None:
        """``step_async``: write the actions and dispatch every env's step."""
        self.clock.enter()
        try:
            self._start(actions)
        finally:
            self.clock.leave(0)

    def step(self, actions, wait_timeout: Optional[float]):
        """``step``: :meth:`start` and :meth:`finish` in one call."""
        clock = self.clock
        clock.enter()
        got = 0
        try:
            fast = self.fast
            # The choice of :meth:`compiled`, inlined.
            if fast is None or wait_timeout is not None or self.recovery.restarted:
                self._start(actions)
                result = self._finish_fallback(wait_timeout)
            else:
                col = self.col
                if self.exact_actions:
                    self.sent = True
                else:
                    self.sent = False
                    col.put_actions(actions)
                    actions = None
                    self.sent = True
                r = fast.step(actions, self.spin, SLICE_S, col.reset_infos, col.next_check)
                if r == _NOT_EXACT:  # nothing was done: the collector writes them
                    self.sent = False
                    col.put_actions(actions)
                    self.sent = True
                    r = fast.step(None, self.spin, SLICE_S, col.reset_infos, col.next_check)
                result = self._result(r)
            got = self.num_envs
            return result
        finally:
            clock.leave(got)

    def finish(self, wait_timeout: Optional[float]):
        """``step_wait``: wait for every env, collect, the batch."""
        self.clock.enter()
        got = 0
        try:
            result = self._finish(wait_timeout)
            got = self.num_envs
            return result
        finally:
            self.clock.leave(got)

    def send(self, actions, env_ids) -> None:
        """``send`` (see :meth:`_send`)."""
        self.clock.enter()
        try:
            self._send(actions, env_ids)
        finally:
            self.clock.leave(0)

    def recv(self, wait_timeout: Optional[float]):
        """``recv`` (see :meth:`_recv`)."""
        self.clock.enter()
        got = 0
        try:
            result = self._recv(wait_timeout)
            got = 0 if result is None else len(result[0][4])
            return result
        finally:
            self.clock.leave(got)

    def stats(self) -> _stats.Stats:
        """Where the time went (:class:`vecenv.Stats`)."""
        busy = self.col.busy_ns
        pool = self.col.pool
        return _stats.stats_of(
            self.clock,
            [] if busy is None else busy.tolist(),
            bool(pool.in_process),
            bool(getattr(pool, "inline", False)),
        )

    def release(self) -> None:
        """At close: drop the compiled step (it holds views of the block)."""
        self.fast = None
        self.exact_actions = False

    def compiled(self, wait_timeout: Optional[float]) -> Optional[_core.ParentStep]:
        """The compiled step for a wait, or None where the fallback runs (see
        the module docstring): no compiled step, a caller's wait limit
        (``wait_timeout`` not None), or a restart to report."""
        if wait_timeout is None and not self.recovery.restarted:
            return self.fast
        return None

    def nothing_sent(self) -> bool:
        """After a call that raised: True when no worker got anything from it
        (no op dispatched, no actions posted, no pipe cut inside a frame)."""
        col = self.col
        return not self.sent and not col.actions_posted and not col.pool.broken_workers()

    # ------------------------------------------------------------ lockstep
    def _start(self, actions) -> None:
        """``step_async``: write the actions and dispatch every env's step."""
        self.sent = True  # put_actions counts its posts from 0 (actions_posted)
        fast = self.fast
        if self.exact_actions and fast is not None and fast.start(actions):
            return
        self.sent = False
        self.col.put_actions(actions)
        self.sent = True
        self.col.ctrl.dispatch_all(_OP_STEP)

    def _finish(self, wait_timeout: Optional[float]):
        """``step_wait``: wait for every env, collect, the batch."""
        fast = self.compiled(wait_timeout)
        if fast is None:
            return self._finish_fallback(wait_timeout)
        col = self.col
        return self._result(fast.finish(self.spin, SLICE_S, col.reset_infos, col.next_check))

    def _result(self, r):
        """The step's result from the compiled step's ``r`` (see ParentStep.finish)."""
        if type(r) is not tuple:  # the fallback's wait takes over (after a first slice)
            return self._finish_fallback(None, SLICE_S if r == _WAITING else 0.0)
        obs, rew, dones, infos, flagged, ended = r
        recovery = self.recovery
        # A worker restarted while step() sent its actions (put_actions) has
        # its restart reported in this step, as the fallback does.
        reported = bool(recovery.restarted)
        if flagged or ended or reported:  # the per-env Python part (see ParentStep.finish)
            col = self.col
            restarts = recovery.restart_count
            col.complete(None, infos, flagged, compiled=True)
            if reported or recovery.restart_count != restarts:
                # The report set its envs' flags; a worker that died before its
                # info was read (see read_flagged) has its rows and rewards reset too.
                obs, rew, dones = col.obs_batch(), col.rew.copy(), col.term | col.trunc
        return obs, rew, dones, infos

    def _finish_fallback(self, wait_timeout: Optional[float], waited: float = 0.0):
        col = self.col
        n = self.num_envs
        col.wait(n, "step", wait_timeout, keep=True, waited=waited)
        flagged = col.ctrl.collect_all()
        infos: List[Dict[str, Any]] = [{} for _ in range(n)]
        col.complete(None, infos, flagged)
        return col.obs_batch(), col.rew.copy(), col.term | col.trunc, infos

    # ------------------------------------------------------------ partial batches
    def _send(self, actions, env_ids) -> None:
        """``send``: write the actions of ``env_ids`` and dispatch their steps.

        Raises
        ------
        InvalidArgumentError
            Bad actions or env_ids, or an env still in flight (nothing sent).
        """
        self.col.actions_posted = 0
        self.sent = True
        fast = self.fast
        if self.exact_actions and fast is not None and fast.send(actions, env_ids):
            return
        self.sent = False  # not the plain case: nothing was sent
        col = self.col
        ids = check_env_ids(env_ids, self.num_envs)
        busy = ids[col.in_flight[ids]]
        if busy.size:
            raise InvalidArgumentError(
                f"env_ids {busy.tolist()} are still in flight: recv() them before sending again"
            )
        col.put_actions(actions, ids)
        self.sent = True
        col.ctrl.dispatch(ids, _OP_STEP)

    def _recv(self, wait_timeout: Optional[float]):
        """``recv``: the first ``batch_size`` envs that finished, and whether
        envs are still in flight; None when fewer than ``batch_size`` are in
        flight (nothing was done)."""
        k = self.batch_size
        col = self.col
        waited = 0.0
        fast = self.compiled(wait_timeout)
        if fast is not None:
            r = fast.recv(k, self.spin, SLICE_S, col.reset_infos, col.next_check)
            if type(r) is tuple:
                obs, rew, dones, infos, ids, flagged, ended, left = r
                if flagged or ended:
                    restarts = self.recovery.restart_count
                    col.complete(ids, infos, flagged, compiled=True)
                    if self.recovery.restart_count != restarts:
                        # A worker died before its info was read and was restarted
                        # (see read_flagged): its envs' rows, rewards and flags changed.
                        obs, rew = col.batch_obs(ids), col.rew[ids]
                        dones = col.term[ids] | col.trunc[ids]
                if col.pending_kwargs:
                    col.reset_collected(ids)
                return (obs, rew, dones, infos, ids), left
            if r == _WAITING:
                waited = SLICE_S
        if int(col.in_flight.sum()) < k:
            return None
        col.wait(k, "step", wait_timeout, keep=True, waited=waited)
        flagged = col.ctrl.collect(k, col.ids_out)
        ids = col.ids_out[:k].copy()
        if not col.copy:
            ids.sort()  # consecutive envs then come as views (see batch_obs)
        batch_infos: List[Dict[str, Any]] = [{} for _ in range(k)]
        col.complete(ids, batch_infos, flagged)
        obs = col.batch_obs(ids)
        if col.pending_kwargs:
            col.reset_collected(ids)
        batch = (obs, col.rew[ids], col.term[ids] | col.trunc[ids], batch_infos, ids)
        return batch, bool(col.in_flight.any())

    # ------------------------------------------------------------ reset
    def start_reset(
        self,
        ids: Optional[np.ndarray],
        after_error: bool,
        seeds: List[Optional[int]],
        options: Dict[int, Any],
    ) -> None:
        """``reset_async``: start dead, killed or cut-off workers again, drain
        the envs in flight, then send the seeds and options of the envs
        ``ids`` (None: all) and dispatch their resets. ``after_error``: the
        vec env needed a reset (actions an interrupted post left with
        workers that a subset reset does not reach are dropped)."""
        col, pool, recovery = self.col, self.col.pool, self.recovery
        # The reset's own time is inside the calls, as its rounds are in the
        # workers' busy time (stats()); the time before it and until the next
        # step is not the caller's.
        clock = self.clock
        clock.pause()
        clock.enter()
        recovery.reset_restarts = set()  # a worker may be restarted once per reset
        try:
            for w in pool.broken_workers():  # a new pipe and a new worker: exact
                pool.bury(w)
            dead = sorted(pool.dead.union(pool.dead_workers()))
            if dead:
                recovery.on_deaths(dead, "reset")
            if col.in_flight.any():
                col.drain("reset")
            pool.forget_stale()  # replies of abandoned calls, old infos
            if ids is not None and after_error:
                col.drop_held_actions()
            if ids is not None and recovery.reset_restarts:  # their envs are new: reset them too
                new = [i for w in recovery.reset_restarts for i in range(*pool.ranges[w])]
                ids = np.union1d(ids, np.asarray(new, dtype=np.int64))
            recovery.restarted.clear()
            recovery.restart_infos.clear()
            envs: Any = range(self.num_envs) if ids is None else ids
            col.send_reset_kwargs(envs, seeds, options)
            if ids is None:
                col.ctrl.dispatch_all(_OP_RESET)
            else:
                col.ctrl.dispatch(ids, _OP_RESET)
        except BaseException:
            recovery.reset_restarts = None
            raise
        finally:
            clock.leave(0)
            clock.pause()
        if self.batch_size < self.num_envs:
            recovery.reset_restarts = None  # recv() collects the resets like steps

    def finish_reset(self, wait_timeout: Optional[float]):
        """``reset_wait``: wait for the resets, collect them, every env's
        observation; ``reset_infos`` gets one dict per env ({} for envs not
        reset). A worker that dies meanwhile is started again (once per reset)."""
        col, recovery = self.col, self.recovery
        self.clock.enter()  # after start_reset's pause: no caller time before it
        try:
            ids = np.flatnonzero(col.in_flight)
            n = len(ids)
            col.wait(n, "reset", wait_timeout, keep=True)
            if n == self.num_envs:
                flagged = col.ctrl.collect_all()
            else:
                flagged = col.ctrl.collect(n, col.ids_out)
            infos: List[Dict[str, Any]] = [{} for _ in range(self.num_envs)]
            if flagged:
                got, errors = col.read_flagged(ids)
                if errors:
                    col.raise_errors(errors)
                for i, info in got.items():
                    infos[i] = col.take_pickled(i, info)
            for i, info in recovery.restart_infos.items():  # reset while restarting
                infos[i] = info
            recovery.restart_infos.clear()
        except PendingTimeoutError:
            raise  # still pending: this reset's restarts stay counted
        except BaseException:
            recovery.reset_restarts = None
            raise
        finally:
            self.clock.leave(0)
            self.clock.pause()
        recovery.reset_restarts = None
        col.reset_infos = infos
        col.pending_kwargs = {}
        return col.obs_batch()
