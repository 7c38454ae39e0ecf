"""Collector and Recovery: what a ShmemVecEnv reads back from its envs (parent side).

Two parts that :class:`~vecenv.ShmemVecEnv` holds as members:

- :class:`Collector` (``venv._collector``) owns the shared block as the parent
  sees it: the segment, the :class:`~vecenv._layout.BlockLayout` and its views
  (actions, observations, rewards, flags, final observations), the Control
  block, what is in flight, the gather buffers, the pickled leaves' last
  values, ``reset_infos``, the episode statistics' report
  (:class:`vecenv._episodes.EpisodeReport`), and the compiled step
  (:class:`vecenv._core.ParentStep`). It puts actions (shared rows, or the pipes), sends reset seeds and options,
  waits for published envs (the futex path, with liveness checks and the
  ``timeout`` watchdog), reads their infos and errors, and assembles the
  batch. :mod:`vecenv._step` drives it for each verb.
- :class:`Recovery` (``venv._recovery``) is the fault policy: a dead worker is
  started again (inside ``reset()``, or with ``on_worker_death="restart"``)
  or buried and raised as :class:`~vecenv.errors.WorkerDiedError`; a restart's
  envs report it in their next result.

Neither touches the vec env's state: the verb set NEEDS_RESET before the side
effect, and an error propagates to it (a caller's wait limit raises
:class:`~vecenv.errors.PendingTimeoutError`, after which the verb restores its
pending state).
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from gymnasium import spaces

from vecenv import _core, _episodes, _layout, _shm, _stats
from vecenv import _protocol as msgs
from vecenv._calls import unpicklable_error
from vecenv._channel import ChannelDead
from vecenv._cpus import usable_cpus
from vecenv._infos import INFO_ROW_BYTES, InfoRows
from vecenv._protocol import PICKLED_FINAL_KEY, PICKLED_OBS_KEY, RESET_INFO_KEY
from vecenv.errors import (
    InvalidArgumentError,
    PendingTimeoutError,
    WatchdogTimeoutError,
    WorkerDiedError,
)

# Wait in slices this long (seconds) so dead workers and Ctrl-C are noticed.
SLICE_S = 0.1

_NONE: np.ndarray = np.empty(0, dtype=np.intp)  # no env indices
_SHARED_INFO = int(msgs.Status.SHARED_INFO)


class Collector:
    """The parent's side of the shared block (see the module docstring).

    Parameters
    ----------
    resources : vecenv._pool._Resources
        Where the segment, block and Control are recorded for the finalizer.
    pool : WorkerPool or InprocPool
        The workers (attached here).
    observation_space, action_space : gymnasium.Space
        The envs' spaces.
    batch_size : int
        Envs per :meth:`recv` batch (``num_envs``: lockstep).
    copy, spin, timeout, autoreset_mode, check_actions, pickled_leaves, episode_statistics
        The engine options of the same names (see ShmemVecEnv).
    compiled : bool
        False: no compiled step (every step takes the fallback; tests only).
    """

    def __init__(
        self,
        resources: Any,
        pool: Any,
        observation_space: Any,
        action_space: Any,
        *,
        num_envs: int,
        batch_size: int,
        copy: bool,
        spin: float,
        timeout: Optional[float],
        autoreset_mode: str,
        check_actions: bool,
        pickled_leaves: bool,
        episode_statistics: bool = False,
        compiled: bool = True,
    ):
        self.pool = pool
        self.num_envs = num_envs
        self.batch_size = batch_size
        self.copy = copy
        self.spin = spin
        self.timeout = timeout
        self.check_actions = check_actions
        self.action_space = action_space
        self.env_worker = pool.env_worker
        self.sb3_final = autoreset_mode == "sb3"
        self.recovery: Any = None  # the Recovery part (bind_recovery)
        self.reset_infos: List[Dict[str, Any]] = [{} for _ in range(num_envs)]
        self.pending_kwargs: Dict[int, Dict[str, Any]] = {}  # this reset's seeds/options
        self.next_check = 0.0  # time.monotonic() of the next liveness check on the fast path
        self.actions_posted = 0  # pipe posts of the last put_actions (see put_actions)
        layout = _layout.BlockLayout.build(
            observation_space,
            action_space,
            num_envs,
            pool.num_workers,
            final_obs=self.sb3_final,
            pickled=pickled_leaves,
            episodes=episode_statistics,
            infos=True,
        )
        self.layout = layout
        resources.segment = segment = _shm.Segment(layout.nbytes)
        resources.block = block = segment.map()
        block.touch(write=True)  # fault every page in now, never in a step
        resources.ctrl = self.ctrl = ctrl = pool.make_control(block, num_envs)
        acts, obs, rew, term, trunc = layout.views(block)
        self.act_bufs, self.obs_bufs = acts, obs
        self.rew, self.term, self.trunc = rew, term, trunc
        self.final_bufs = layout.final_views(block)  # "sb3" autoreset: last observations
        finals = layout.episode_views(block)  # episode_statistics: the workers' finals
        self.episodes = _episodes.EpisodeReport(finals) if finals else None
        info_rows = InfoRows.attach(layout, block, 0, num_envs)
        assert info_rows is not None  # the layout always has them
        self.info_rows = info_rows  # infos of numbers (vecenv._infos)
        self.busy_ns: Any = _stats.busy_view(block, 0, pool.num_workers)  # workers' BUSY_NS
        arrays = ctrl.arrays()
        self.status = arrays[1]
        self.tickets = arrays[3]  # a round message carries its env's ticket
        self.write_actions = _layout.make_action_writer(layout.action_leaves, action_space)
        self.write_exact = _layout.make_exact_writer(layout.action_leaves, action_space)
        self.split_actions = _layout.make_action_splitter(action_space)
        # Leaves without a fixed layout: the last value of each env, per leaf,
        # and the last observation of an ended episode ("sb3" autoreset).
        self.obs_pickled = layout.obs_pickled
        self.pickled_obs = [[None] * num_envs for _ in layout.obs_pickled]
        self.pickled_final: Dict[int, List[Any]] = {}
        self.unflatten_obs = _layout.make_unflattener(observation_space)
        self.single_obs = not isinstance(observation_space, (spaces.Tuple, spaces.Dict))
        # Dispatched and not yet collected; kept by the Control's own calls.
        self.in_flight: np.ndarray = np.zeros(num_envs, dtype=bool)
        ctrl.track_in_flight(self.in_flight)
        self.ids_out: np.ndarray = np.empty(num_envs, dtype=np.int64)
        self.gather_out = [
            np.empty((batch_size, *leaf.shape), leaf.dtype) for leaf in layout.obs_leaves
        ]
        self.obs_rows = [_layout._bytes2d(b) for b in obs]  # (num_envs, row_bytes) u8
        try:
            pool.attach(segment, layout, ctrl)
        except BaseException:
            self.release()  # no view of the block outlives a failed start
            raise
        self.ctrl = resources.ctrl = pool.control(ctrl, self.in_flight)
        segment.unlink()  # no name left once everyone is attached (macOS)
        self.fast = self._make_parent_step() if compiled else None

    def bind_recovery(self, recovery: Recovery) -> None:
        self.recovery = recovery

    def _make_parent_step(self) -> Optional[_core.ParentStep]:
        """The compiled step (:class:`vecenv._core.ParentStep`) over these
        buffers, or None where the fallback must run every step: observation
        leaves without a fixed layout (pickled). In process (``num_workers=0``)
        its dispatch goes through the in-process Control, which runs the
        round at once."""
        if self.obs_pickled:
            return None
        space = self.action_space
        single = len(self.act_bufs) == 1 and not isinstance(space, (spaces.Tuple, spaces.Dict))
        single = single and not self.layout.actions_pickled
        fast = _core.ParentStep(
            self.ctrl,
            self.act_bufs[0] if single else None,
            list(self.obs_bufs),
            list(self.gather_out),
            self.rew,
            self.term,
            self.trunc,
            self.ids_out,
            self.final_bufs if self.sb3_final else None,
            None if self.single_obs else self.unflatten_obs,
            self.copy,
            usable_cpus(),
            ends_in_python=self.episodes is not None,  # complete() adds their episodes
        )
        rows = self.info_rows  # infos of numbers in known layouts: read in the compiled step
        fast.use_info_rows(rows.rows, INFO_ROW_BYTES, rows.forms)
        return fast

    def release(self) -> None:
        """At close, before the block is unmapped: drop every view of it."""
        self.obs_bufs, self.act_bufs, self.gather_out, self.obs_rows = [], [], [], []
        self.final_bufs = []
        self.episodes = None
        self.info_rows.close()
        self.busy_ns = None
        self.rew = self.term = self.trunc = self.status = self.tickets = None
        self.ctrl = None
        self.fast = None
        self.write_actions = self.write_exact = None

    # ------------------------------------------------------------ waiting
    def wait(
        self,
        target: int,
        what: str,
        wait_timeout: Optional[float] = None,
        keep: bool = False,
        waited: float = 0.0,
    ) -> None:
        """Wait until ``target`` envs are published. Every SLICE_S seconds,
        check that the workers live (a dead one is restarted or raised, see
        :meth:`Recovery.on_deaths`) and that the time has not run out.

        Time runs out after ``wait_timeout`` seconds when the caller set one
        and ``keep`` (the call may stay pending: PendingTimeoutError, nothing
        is killed), else after the ``timeout`` watchdog (the late workers are
        killed: WatchdogTimeoutError). ``waited``: seconds of a first slice
        the caller already waited in vain (the compiled step); the wait goes
        on from there.
        """
        ctrl = self.ctrl
        first = SLICE_S if wait_timeout is None else min(SLICE_S, wait_timeout)
        if waited:
            first = waited
        elif ctrl.wait_ready(target, self.spin, first) >= 0:
            # With partial batches the other envs may keep meeting the target
            # while a dead worker's envs starve: check liveness now and then.
            now = time.monotonic()
            if now < self.next_check:
                return
            self.next_check = now + SLICE_S
            dead = self.pool.dead_workers()
            if not dead:
                return
            # A restart takes back the dead worker's published envs: wait again.
            self.recovery.on_deaths(dead, what)
            if ctrl.published() >= target:
                return
        keep = keep and wait_timeout is not None
        limit = wait_timeout if keep else self.timeout
        deadline = None if limit is None else time.monotonic() + limit - first
        while True:
            dead = self.pool.dead_workers()
            if dead:
                self.recovery.on_deaths(dead, what)
                if limit is not None:  # a restart takes its own time
                    deadline = time.monotonic() + limit
            left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
            if left <= 0 and ctrl.published() < target:
                late = self.late_envs()
                if keep:
                    raise PendingTimeoutError(
                        f"envs {late} did not finish {what} within {limit} s; still pending: "
                        "wait again, or close()",
                        env_indices=late,
                    )
                self.timed_out(what, late)
            if self._wait_ready(target, max(left, 0.0)) >= 0:
                return

    def _wait_ready(self, target: int, timeout: float) -> int:
        """``ctrl.wait_ready`` for at most ``timeout`` seconds, reading the
        pipes of workers that wait for room on them. -1 when the time ran out
        or a worker is gone (the caller checks liveness)."""
        ctrl = self.ctrl
        end = time.monotonic() + timeout
        while True:
            r = ctrl.wait_ready(target, 0.0, max(end - time.monotonic(), 0.0))
            if r != -2:
                return r
            if not self.pool.pump_blocked(0.002):
                return -1
            if time.monotonic() >= end:
                return -1

    def late_envs(self) -> List[int]:
        """The envs in flight that have not published."""
        ready = self.ctrl.arrays()[2].astype(bool)
        return [int(i) for i in np.flatnonzero(self.in_flight & ~ready)]

    def timed_out(self, what: str, late: List[int]) -> None:
        """Kill the workers of the envs ``late`` and raise WatchdogTimeoutError."""
        pool = self.pool
        workers = sorted({int(self.env_worker[i]) for i in late})
        for w in workers:
            pool.bury(w)  # stopped: its slot now says where it was stuck
        stuck = [env for w in workers for env, _ in [pool.inside(w)] if env is not None]
        raise WatchdogTimeoutError(
            f"envs {late} did not finish {what} within timeout={self.timeout} s"
            f"{pool.killed_hint(workers)}",
            env_indices=late,
            env_index=stuck[0] if stuck else None,
        )

    def drain(self, what: str) -> None:
        """Wait for every env in flight and drop the results (before a reset
        or a call). A worker that dies meanwhile is restarted (inside reset)."""
        n = int(self.in_flight.sum())
        if n:
            self.wait(n, what)
            # Their round messages are never read: a later read asks for the
            # ticket of a later publish, so these are stale and overwritten.
            self.ctrl.collect(n, self.ids_out)

    # ------------------------------------------------------------ results
    def read_flagged(self, ids) -> Tuple[Dict[int, Any], Dict[int, Any]]:
        """Read the pipe messages of the flagged envs among ``ids``.

        A worker found dead here is restarted or raised (:meth:`Recovery.on_deaths`);
        a restart clears the status of its envs, whose results are then
        reported as restarted.
        """
        infos: Dict[int, Any] = {}
        errors: Dict[int, Any] = {}
        status, tickets = self.status, self.tickets
        every = isinstance(ids, range)  # range(num_envs)
        flags = status[: self.num_envs] if every else status[ids]
        shared = flags == _SHARED_INFO
        if not np.count_nonzero(flags) - np.count_nonzero(shared):  # no pipe to read
            at = np.flatnonzero(shared)
            return self.info_rows.read_many((at if every else np.asarray(ids)[at]).tolist()), errors
        for i in ids:
            i = int(i)
            while status[i]:
                if status[i] == _SHARED_INFO:  # written into the block, not pickled
                    infos[i] = self.info_rows.read(i)
                    break
                w = int(self.env_worker[i])
                try:
                    # The message of the publish this env was collected under.
                    kind, value = self.pool.round_entry(w, i, int(tickets[i]))
                except ChannelDead:
                    self.recovery.on_deaths([w], "reading infos")  # a restart clears the status
                    continue
                (infos if kind == "info" else errors)[i] = value
                break
        return infos, errors

    def raise_errors(self, errors: Dict[int, Any]) -> None:
        """Raise the WorkerError of the lowest env among ``errors`` (env ->
        report); the others are named in its message and kept in ``errors``."""
        worker_error = self.pool.worker_error
        first = min(errors)
        err = worker_error(errors[first])
        if len(errors) > 1:
            err.args = (f"{err.args[0]} (and envs {sorted(errors)[1:]} failed too)",)
        err.errors = {i: worker_error(p) for i, p in errors.items()}
        raise err

    def obs_batch(self):
        """Every env's observation: copies, or with ``copy=False`` the shared views."""
        if self.copy:
            leaves = [b.copy() for b in self.obs_bufs]
        else:
            leaves = self.obs_bufs
        if self.obs_pickled:
            leaves = _layout.merge_leaves(
                leaves, [tuple(col) for col in self.pickled_obs], self.obs_pickled
            )
        return leaves[0] if self.single_obs else self.unflatten_obs(leaves)

    def batch_obs(self, ids):
        """The observations of the envs ``ids`` (int64 array, row ``j`` is env
        ``ids[j]``): with ``copy=False`` and consecutive ascending envs, views
        of their shared rows; else gathered (into a fresh array with
        ``copy=True``, into the reused buffer without)."""
        k = len(ids)
        lo = int(ids[0])
        if not self.copy and int(ids[-1]) - lo == k - 1 and bool((np.diff(ids) == 1).all()):
            leaves = [buf[lo : lo + k] for buf in self.obs_bufs]
        else:
            leaves = []
            for src, out in zip(self.obs_rows, self.gather_out):
                # copy=True gathers straight into a fresh array the caller owns.
                dst = np.empty_like(out) if self.copy else out
                _core.gather_rows(src, ids, _layout._bytes2d(dst))
                leaves.append(dst)
        if self.obs_pickled:
            values = [tuple(col[int(i)] for i in ids) for col in self.pickled_obs]
            leaves = _layout.merge_leaves(leaves, values, self.obs_pickled)
        return leaves[0] if self.single_obs else self.unflatten_obs(leaves)

    def take_pickled(self, i: int, info: Dict[str, Any]) -> Dict[str, Any]:
        """Move env ``i``'s pickled observation leaves out of ``info`` (see
        ``PICKLED_OBS_KEY``) into the parent's copies; return ``info``."""
        if self.obs_pickled and info:
            values = info.pop(PICKLED_OBS_KEY, None)
            if values is not None:
                for col, v in zip(self.pickled_obs, values):
                    col[i] = v
            final = info.pop(PICKLED_FINAL_KEY, None)
            if final is not None:
                self.pickled_final[i] = final
        return info

    def _add_terminal(self, ended, positions, infos: List[Dict[str, Any]]) -> None:
        """ "sb3" autoreset: give each env ``ended[j]`` (its episode ended in
        this step; its result is ``infos[positions[j]]``) the last observation
        from its shared row, a copy, and ``TimeLimit.truncated``."""
        for i, pos in zip(ended, positions):
            i = int(i)
            leaves = [buf[i].copy() for buf in self.final_bufs]
            if self.obs_pickled:
                leaves = _layout.merge_leaves(
                    leaves,
                    self.pickled_final.pop(i, [None] * len(self.obs_pickled)),
                    self.obs_pickled,
                )
            info = infos[pos]
            info["terminal_observation"] = (
                leaves[0] if self.single_obs else self.unflatten_obs(leaves)
            )
            info["TimeLimit.truncated"] = bool(self.trunc[i] and not self.term[i])

    def complete(
        self, ids, infos: List[Dict[str, Any]], flagged: int, compiled: bool = False
    ) -> None:
        """The per-env Python part of a collected batch whose row ``j`` is env
        ``ids[j]`` (``ids`` None: every env, in order): with "sb3" autoreset
        the ended envs' reset infos and terminal observations (unless the
        compiled step, ``compiled``, added them: it does when no env is
        flagged), the infos
        (into ``infos``) and errors (raised, naming the env) of the
        ``flagged`` envs, the ended envs' episode statistics (but a
        restarted env's: its episode died with its worker), and restarts
        to report."""
        ends = self.sb3_final or self.episodes is not None
        if ids is None:
            envs: Any = range(self.num_envs)
            done = self.term | self.trunc if ends else None
        else:
            envs = ids
            done = self.term[ids] | self.trunc[ids] if ends else None
        ended_pos = _NONE if done is None else np.flatnonzero(done)
        ended = ended_pos if ids is None else ids[ended_pos]
        terminals = self.sb3_final and (flagged or not compiled)
        if terminals:
            for i in ended:  # an automatic reset's info, unless a message brings one
                self.reset_infos[int(i)] = {}
        if flagged:
            got, errors = self.read_flagged(envs)
            if errors:
                self.raise_errors(errors)
            pos = None if ids is None else {int(e): j for j, e in enumerate(ids)}
            for i, info in got.items():
                info = self.take_pickled(i, info)
                if RESET_INFO_KEY in info:  # "sb3": the automatic reset's info
                    self.reset_infos[i] = info.pop(RESET_INFO_KEY)
                infos[i if pos is None else pos[i]] = info
        if terminals:
            self._add_terminal(ended, ended_pos, infos)
        if self.episodes is not None:
            self.episodes.add(ended, ended_pos, infos, self.recovery.restarted)
        if self.recovery.restarted:
            self.recovery.report_restarts(envs, infos)

    # ------------------------------------------------------------ messages out
    def put_actions(self, actions, ids=None) -> None:
        """Hand the envs (all, or ``ids``: int64 array) their actions, before
        their step is dispatched. See the ``check_actions`` parameter.
        ``actions_posted`` counts the workers that got actions through
        their pipe (0: none holds any, if this raised).

        Raises
        ------
        InvalidArgumentError, ActionTypeError
            Nothing was sent.
        ArgumentNotPicklableError
            An action for the pipe does not pickle (names the envs); the
            workers before it hold theirs (``actions_posted``).
        WorkerDiedError
            A worker died before its actions could be sent.
        """
        self.actions_posted = 0
        n = self.num_envs if ids is None else len(ids)
        space = self.action_space
        if self.check_actions and not self.layout.actions_pickled:
            if _layout.per_env_form(space, actions, n):
                actions = _layout.stack_actions(space, actions)
            self.write_actions(actions, self.act_bufs, ids)  # validates, casts
            return
        if self.write_exact(actions, self.act_bufs, ids):
            return  # the fast path: rows of the space's dtype in shared memory
        per_env = self.split_actions(actions, n)
        if self.check_actions:
            for j, a in enumerate(per_env):
                if not space.contains(a):
                    raise InvalidArgumentError(f"actions[{j}]={a!r} is outside {space}")
        env_ids = range(n) if ids is None else ids.tolist()
        by_worker: Dict[int, Dict[int, Any]] = {}
        for i, a in zip(env_ids, per_env):
            by_worker.setdefault(int(self.env_worker[i]), {})[int(i)] = a
        # Posted before the step is dispatched: the worker reads every message
        # posted before it takes the ops (see _worker._Loop.run). A worker
        # holding actions takes them in its next step, whatever that step is
        # sent, so from the first post a Ctrl-C (or an error) needs the reset
        # that drops them (_Loop._reset).
        for w, acts in by_worker.items():
            try:
                self._post(w, msgs.Actions(acts), "step")
            except Exception as exc:  # an action that does not pickle
                err = unpicklable_error("actions", acts, exc)
                if err is None:
                    raise
                raise err from exc
            self.actions_posted += 1

    def _post(self, w: int, msg: Any, what: str) -> None:
        """Post ``msg`` to worker ``w``; a worker found dead is restarted (or
        raised, :meth:`Recovery.on_deaths`) and the message posted again."""
        try:
            self.pool.post(w, msg)
        except WorkerDiedError:
            self.recovery.on_deaths([w], what)
            self.pool.post(w, msg)

    def drop_held_actions(self) -> None:
        """Before a subset reset that follows an error or a Ctrl-C: an
        interrupted ``put_actions`` may have left actions with workers whose
        envs this reset does not reach (a full reset drops them with each
        env's reset). A dead worker is restarted (with none held)."""
        for w in range(self.pool.num_workers):
            if w in self.pool.dead:
                continue
            try:
                self.pool.post(w, msgs.Actions({}, replace=True))
            except WorkerDiedError:
                self.recovery.on_deaths([w], "reset")

    def send_reset_kwargs(
        self, ids: Sequence[int], seeds: List[Optional[int]], options: Dict[int, Any]
    ) -> None:
        """Post the seeds and options of the envs ``ids`` (from ``seeds``, one
        per env, and ``options``, env -> options) to their workers, before
        their reset op. They are kept as ``pending_kwargs`` until the reset
        is collected (a restart meanwhile resets with them again)."""
        per_worker: Dict[int, Dict[int, Dict[str, Any]]] = {}
        for i in ids:
            kw = {}
            if seeds[i] is not None:
                kw["seed"] = seeds[i]
            if i in options:
                kw["options"] = options[i]
            if kw:
                per_worker.setdefault(int(self.env_worker[i]), {})[int(i)] = kw
        for w, kws in per_worker.items():
            self._post(w, msgs.ResetKwargs(kws), "reset")
        self.pending_kwargs = {i: kw for kws in per_worker.values() for i, kw in kws.items()}

    def reset_collected(self, ids) -> None:
        """The envs ``ids`` (int64 array) were collected: a reset among them is
        over, so a later restart of their worker must not reset them with
        its seeds and options again."""
        for i in ids.tolist():
            self.pending_kwargs.pop(i, None)


class Recovery:
    """The fault policy of a ShmemVecEnv (see the module docstring).

    Parameters
    ----------
    pool : WorkerPool or InprocPool
    collector : Collector
    spaces : (observation_space, action_space)
        What a restarted worker's envs must have.
    on_worker_death : {"raise", "restart"}
    max_restarts : int
    autoreset_mode : str
    """

    def __init__(
        self,
        pool: Any,
        collector: Collector,
        spaces: Tuple[Any, Any],
        *,
        on_worker_death: str,
        max_restarts: int,
        autoreset_mode: str,
    ):
        self.pool = pool
        self.collector = collector
        self.spaces = spaces
        self.on_worker_death = on_worker_death
        self.max_restarts = max_restarts
        self.sb3 = autoreset_mode == "sb3"
        self.restart_count = 0  # automatic restarts so far
        self.restarted: set[int] = set()  # envs whose next result reports a restart
        self.restart_infos: Dict[int, Any] = {}  # their reset infos
        self.reset_restarts: Optional[set[int]] = None  # workers restarted by this reset()

    def on_deaths(self, dead: List[int], what: str) -> None:
        """Workers ``dead`` died during ``what``: restart them, or bury them
        and raise WorkerDiedError.

        Inside reset() (:attr:`reset_restarts` is a set) each worker may be
        restarted once (its envs are about to be reset anyway); elsewhere only
        with ``on_worker_death="restart"`` and while ``restart_count`` stays
        within ``max_restarts``.
        """
        pool = self.pool
        in_reset = self.reset_restarts is not None
        if self.reset_restarts is not None:
            restart = not set(dead) & self.reset_restarts
        else:
            restart = (
                self.on_worker_death == "restart"
                and self.restart_count + len(dead) <= self.max_restarts
            )
        if not restart:
            errors = [pool.died(w, what) for w in dead]
            for w in dead:
                pool.bury(w)
            msg = "; ".join(str(e) for e in errors)
            if not in_reset and self.on_worker_death == "restart":
                msg += f" (max_restarts={self.max_restarts} reached)"
            raise WorkerDiedError(
                msg,
                env_indices=[i for e in errors for i in e.env_indices],
                exitcode=errors[0].exitcode,
                env_index=next((e.env_index for e in errors if e.env_index is not None), None),
            )
        for w in dead:
            self.restart(w, report=not in_reset)
            if self.reset_restarts is not None:
                self.reset_restarts.add(w)
            else:
                self.restart_count += 1

    def restart(self, w: int, *, report: bool) -> None:
        """Start worker ``w`` again, with new envs built by its factories.

        Its envs in flight get a reset op (their results complete the wait in
        progress, with this reset's seeds and options if there are any); the
        others (collected, held by the caller) are reset while the worker
        starts, their infos kept in ``restart_infos``. With ``report``, each
        env of the worker reports the restart in its next result.

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            The new worker failed to start; it is buried and reset() may try again.
        """
        col = self.collector
        lo, hi = self.pool.ranges[w]
        lost = [i for i in range(lo, hi) if col.in_flight[i]]
        held = [i for i in range(lo, hi) if not col.in_flight[i]]
        while True:
            try:
                infos = self.pool.respawn(w, held, self.spaces)
            except WorkerDiedError:
                # The new worker died while starting: one more restart if allowed.
                if report and self.restart_count < self.max_restarts:
                    self.restart_count += 1
                    continue
                raise
            break
        if lost:
            # Dispatched even if the worker dies at once: the next wait then
            # sees them in flight and restarts it again.
            kws = {i: col.pending_kwargs[i] for i in lost if i in col.pending_kwargs}
            if kws:
                try:
                    self.pool.post(w, msgs.ResetKwargs(kws))
                except WorkerDiedError:
                    pass
            col.ctrl.dispatch(np.asarray(lost, dtype=np.int64), int(msgs.Op.RESET))
        self.restart_infos.update({i: col.take_pickled(i, inf) for i, inf in infos.items()})
        if report:
            self.restarted.update(range(lo, hi))

    def report_restarts(self, ids, infos: List[Dict[str, Any]]) -> None:
        """Mark the results of restarted envs among ``ids`` (row ``pos`` of
        the batch is env ``ids[pos]``): done by truncation, with info flags."""
        col = self.collector
        for pos, i in enumerate(ids):
            i = int(i)
            if i not in self.restarted:
                continue
            self.restarted.discard(i)
            extra = self.restart_infos.pop(i, None)
            if extra is None:  # this result is the reset the restart gave it
                reset_info, info = infos[pos], {}
            else:  # reset while the worker started; this result came after
                reset_info, info = extra, dict(infos[pos])
            if self.sb3:  # as an automatic reset's info
                col.reset_infos[i] = reset_info
            else:
                info = {**reset_info, **info}
            info["TimeLimit.truncated"] = True
            info["worker_restarted"] = True
            infos[pos] = info
            col.term[i] = False
            col.trunc[i] = True
