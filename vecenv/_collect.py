"""Collector: what a ShmemVecEnv reads back from its workers (parent side).

Waiting for published envs (the futex path, with the liveness checks and
the ``timeout`` watchdog), reading their infos and error reports from the
channels, turning error reports into exceptions, assembling the observation
batch, the per-env messages that go out before a step or reset (actions off
the fast path, reset seeds and options), and the remote calls
(``_call_start`` / ``_call_finish``). :class:`Collector` is a base of
:class:`~vecenv.ShmemVecEnv`; the state it uses is the vec env's own.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from gymnasium import spaces

from vecenv import _core, _layout
from vecenv import _protocol as msgs
from vecenv._channel import ChannelBroken, ChannelDead, ChannelTimeout
from vecenv._cpus import usable_cpus
from vecenv._engine import State
from vecenv._pool import _NONE, _SLICE_S, WorkerStartup
from vecenv._protocol import RESET_INFO_KEY
from vecenv.base import Indices
from vecenv.errors import (
    InvalidArgumentError,
    PendingTimeoutError,
    StateError,
    VecEnvTimeoutError,
    WatchdogTimeoutError,
    WorkerDiedError,
)


class Collector(WorkerStartup):
    """Base of ShmemVecEnv: results, errors, per-env messages and calls (see the module)."""

    def _wait(
        self, target: int, what: str, pending: Optional[State] = None, waited: float = 0.0
    ) -> None:
        """Wait until ``target`` envs are published. Every _SLICE_S seconds,
        check that the workers live (a dead one is restarted or raised, see
        :meth:`_on_deaths`) and that the time has not run out.

        Time runs out after ``_wait_timeout`` seconds when a caller set it
        (and passes the ``pending`` state to go back to: nothing is killed),
        else after the ``timeout`` watchdog (the late workers are killed).
        ``waited``: seconds of a first slice the caller already waited in vain
        (the compiled step, :class:`vecenv._core.ParentStep`); the wait goes
        on from there.
        """
        ctrl = self._ctrl
        first = _SLICE_S if self._wait_timeout is None else min(_SLICE_S, self._wait_timeout)
        if waited:
            first = waited
        elif ctrl.wait_ready(target, self.spin, first) >= 0:
            # With partial batches the other envs may keep meeting the target
            # while a dead worker's envs starve: check liveness now and then.
            now = time.monotonic()
            if now < self._next_check:
                return
            self._next_check = now + _SLICE_S
            dead = self._dead_workers()
            if not dead:
                return
            # A restart takes back the dead worker's published envs: wait again.
            self._on_deaths(dead, what)
            if ctrl.published() >= target:
                return
        keep = pending is not None and self._wait_timeout is not None
        limit = self._wait_timeout if keep else self.timeout
        deadline = None if limit is None else time.monotonic() + limit - first
        while True:
            dead = self._dead_workers()
            if dead:
                self._on_deaths(dead, what)
                if limit is not None:  # a restart takes its own time
                    deadline = time.monotonic() + limit
            left = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
            if left <= 0 and ctrl.published() < target:
                if keep and pending is not None:
                    ready = ctrl.arrays()[2].astype(bool)
                    late = [int(i) for i in np.flatnonzero(self._in_flight & ~ready)]
                    self._state = pending
                    raise PendingTimeoutError(
                        f"envs {late} did not finish {what} within {limit} s; still pending: "
                        "wait again, or close()",
                        env_indices=late,
                    )
                self._timed_out(what)
            if self._wait_ready(target, max(left, 0.0)) >= 0:
                return

    def _wait_ready(self, target: int, timeout: float) -> int:
        """``ctrl.wait_ready`` for at most ``timeout`` seconds, reading the
        pipes of workers that wait for room on them (a worker blocked sending
        a large info would never take its next op). -1 when the time ran out
        or a worker is gone (the caller checks liveness)."""
        ctrl = self._ctrl
        end = time.monotonic() + timeout
        while True:
            r = ctrl.wait_ready(target, 0.0, max(end - time.monotonic(), 0.0))
            if r != -2:
                return r
            chans = self._resources.chans
            for w in ctrl.tx_blocked_workers():
                if w not in self._dead and not chans[w].pump(0.002):
                    return -1
            if time.monotonic() >= end:
                return -1

    def _timed_out(self, what: str) -> None:
        """Kill the workers of the envs still running and raise WatchdogTimeoutError."""
        ready = self._ctrl.arrays()[2].astype(bool)
        late = [int(i) for i in np.flatnonzero(self._in_flight & ~ready)]
        workers = sorted({int(self._env_worker[i]) for i in late})
        for w in workers:
            self._bury(w)  # stopped: its slot now says where it was stuck
        self._state = State.NEEDS_RESET
        stuck = [env for w in workers for env, _ in [self._inside(w)] if env is not None]
        raise WatchdogTimeoutError(
            f"envs {late} did not finish {what} within timeout={self.timeout} s"
            f"{self._killed_hint(workers)}",
            env_indices=late,
            env_index=stuck[0] if stuck else None,
        )

    def _read_flagged(self, ids) -> Tuple[Dict[int, Any], Dict[int, Any]]:
        """Read the pipe messages of the flagged envs among ``ids``.

        A worker found dead here is restarted or raised (:meth:`_on_deaths`);
        a restart clears the status of its envs, whose results are then
        reported as restarted.
        """
        infos: Dict[int, Any] = {}
        errors: Dict[int, Any] = {}
        status, tickets = self._status, self._tickets
        chans = self._resources.chans
        what = "reading infos"
        for i in ids:
            i = int(i)
            while status[i]:
                w = int(self._env_worker[i])
                deadline = None if self.timeout is None else time.monotonic() + self.timeout
                try:
                    # The message of the publish this env was collected under.
                    kind, value = chans[w].round_entry(i, int(tickets[i]), deadline)
                except ChannelDead:
                    self._on_deaths([w], what)  # a restart clears the status
                    continue
                except ChannelTimeout:
                    raise self._timeout_error(w, what, False) from None
                except ChannelBroken:
                    raise self._broken_error(w, what) from None
                (infos if kind == "info" else errors)[i] = value
                break
        return infos, errors

    def _raise_errors(self, errors: Dict[int, Any]) -> None:
        first = min(errors)
        err = self._worker_error(errors[first])
        if len(errors) > 1:
            err.args = (f"{err.args[0]} (and envs {sorted(errors)[1:]} failed too)",)
        err.errors = {i: self._worker_error(p) for i, p in errors.items()}
        self._state = State.NEEDS_RESET
        raise err

    def _obs_batch(self):
        if self.copy:
            leaves = [b.copy() for b in self._obs_bufs]
        else:
            leaves = self._obs_bufs
        if self._obs_pickled:
            leaves = _layout.merge_leaves(
                leaves, [tuple(col) for col in self._pickled_obs], self._obs_pickled
            )
        return leaves[0] if self._single_obs else self._unflatten_obs(leaves)

    def _put_actions(self, actions, ids=None) -> None:
        """Hand the envs (all, or ``ids``: int64 array) their actions, before
        their step is dispatched. See the ``check_actions`` parameter.

        Raises
        ------
        InvalidArgumentError, ActionTypeError
            Nothing was sent.
        WorkerDiedError
            A worker died before its actions could be sent.
        KeyboardInterrupt
            Once a worker holds its actions: the state is NEEDS_RESET.
        """
        n = self.num_envs if ids is None else len(ids)
        space = self.action_space
        if self.check_actions and not self._layout.actions_pickled:
            if _layout.per_env_form(space, actions, n):
                actions = _layout.stack_actions(space, actions)
            self._write_actions(actions, self._act_bufs, ids)  # validates, casts
            return
        if self._write_exact(actions, self._act_bufs, ids):
            return  # the fast path: rows of the space's dtype in shared memory
        per_env = self._split_actions(actions, n)
        if self.check_actions:
            for j, a in enumerate(per_env):
                if not space.contains(a):
                    raise InvalidArgumentError(f"actions[{j}]={a!r} is outside {space}")
        env_ids = range(n) if ids is None else ids.tolist()
        by_worker: Dict[int, Dict[int, Any]] = {}
        for i, a in zip(env_ids, per_env):
            by_worker.setdefault(int(self._env_worker[i]), {})[int(i)] = a
        # Posted before the step is dispatched: the worker reads every message
        # posted before it takes the ops (see _worker._Loop.run).
        # From the first post until the caller dispatches the step: a worker
        # holding actions takes them in its next step, whatever that step is
        # sent, so a Ctrl-C (or an error) here needs the reset that drops them
        # (_Loop._reset). The callers set NEEDS_RESET before the dispatch anyway.
        prev, sent = self._state, 0
        self._state = State.NEEDS_RESET
        try:
            for w, acts in by_worker.items():
                try:
                    self._post(w, msgs.Actions(acts))
                except WorkerDiedError:  # restart (or raise), then send again
                    self._on_deaths([w], "step")
                    self._post(w, msgs.Actions(acts))
                sent += 1
        except BaseException:
            if not sent and not self._broken_workers():
                self._state = prev  # nothing was sent (say, an action that does not pickle)
            raise

    def _drop_held_actions(self) -> None:
        """Before a subset reset that follows an error or a Ctrl-C: an
        interrupted ``_put_actions`` may have left actions with workers whose
        envs this reset does not reach (a full reset drops them with each
        env's reset). A dead worker is restarted (with none held)."""
        for w in range(len(self._ranges)):
            if w in self._dead:
                continue
            try:
                self._post(w, msgs.Actions({}, replace=True))
            except WorkerDiedError:
                self._on_deaths([w], "reset")

    def _send_reset_kwargs(self, ids) -> None:
        per_worker: Dict[int, Dict[int, Dict[str, Any]]] = {}
        for i in ids:
            kw = {}
            if self._seeds[i] is not None:
                kw["seed"] = self._seeds[i]
            if i in self._options:
                kw["options"] = self._options[i]
            if kw:
                per_worker.setdefault(int(self._env_worker[i]), {})[int(i)] = kw
        for w, kws in per_worker.items():
            try:
                self._post(w, msgs.ResetKwargs(kws))
            except WorkerDiedError:  # died since the last check: restart, send again
                self._on_deaths([w], "reset")
                self._post(w, msgs.ResetKwargs(kws))
        self._pending_kwargs = {i: kw for kws in per_worker.values() for i, kw in kws.items()}
        self._seeds = [None] * self.num_envs
        self._options = {}

    def _add_terminal(self, ended, positions, infos: List[Dict[str, Any]]) -> None:
        """ "sb3" autoreset: give each env ``ended[j]`` (its episode ended in
        this step; its result is ``infos[positions[j]]``) the last observation
        from its shared row, a copy, and ``TimeLimit.truncated``."""
        for i, pos in zip(ended, positions):
            i = int(i)
            leaves = [buf[i].copy() for buf in self._final_bufs]
            if self._obs_pickled:
                leaves = _layout.merge_leaves(
                    leaves,
                    self._pickled_final.pop(i, [None] * len(self._obs_pickled)),
                    self._obs_pickled,
                )
            info = infos[pos]
            info["terminal_observation"] = (
                leaves[0] if self._single_obs else self._unflatten_obs(leaves)
            )
            info["TimeLimit.truncated"] = bool(self._trunc[i] and not self._term[i])

    def _complete(self, ids, infos: List[Dict[str, Any]], flagged: int) -> None:
        """The per-env Python part of a collected batch whose row ``j`` is env
        ``ids[j]`` (``ids`` None: every env, in order): with "sb3" autoreset
        the ended envs' reset infos and terminal observations, the infos
        (into ``infos``) and errors (raised, naming the env) of the
        ``flagged`` envs, and restarts to report."""
        if ids is None:
            envs: Any = range(self.num_envs)
            done = self._term | self._trunc if self._sb3_final else None
        else:
            envs = ids
            done = self._term[ids] | self._trunc[ids] if self._sb3_final else None
        ended_pos = _NONE if done is None else np.flatnonzero(done)
        ended = ended_pos if ids is None else ids[ended_pos]
        for i in ended:  # an automatic reset's info, unless a message brings one
            self.reset_infos[int(i)] = {}
        if flagged:
            got, errors = self._read_flagged(envs)
            if errors:
                self._raise_errors(errors)
            pos = None if ids is None else {int(e): j for j, e in enumerate(ids)}
            for i, info in got.items():
                info = self._split_reset_info(i, self._take_pickled(i, info))
                infos[i if pos is None else pos[i]] = info
        self._add_terminal(ended, ended_pos, infos)
        if self._restarted:
            self._report_restarts(envs, infos)

    def _make_parent_step(self) -> Optional[_core.ParentStep]:
        """The compiled step path (:class:`vecenv._core.ParentStep`) over this
        vec env's buffers, or None where the Python path must run every step:
        ``VECENV_PARENT_STEP=python`` in the environment, observation leaves
        without a fixed layout (pickled), or a transport other than the
        shared-memory Control. In process (``num_workers=0``) its dispatch
        goes through the in-process Control, which runs the round at once."""
        if os.environ.get("VECENV_PARENT_STEP", "compiled") == "python":
            return None
        ctrl_ok = type(self._ctrl) is _core.Control or self.in_process
        if not ctrl_ok or self._obs_pickled:
            return None
        space = self.action_space
        single = len(self._act_bufs) == 1 and not isinstance(space, (spaces.Tuple, spaces.Dict))
        single = single and not self._layout.actions_pickled
        return _core.ParentStep(
            self._ctrl,
            self._act_bufs[0] if single else None,
            list(self._obs_bufs),
            list(self._gather_out),
            self._rew,
            self._term,
            self._trunc,
            self._ids_out,
            self._final_bufs if self._sb3_final else None,
            None if self._single_obs else self._unflatten_obs,
            self.copy,
            usable_cpus(),
        )

    def _split_reset_info(self, i: int, info: Dict[str, Any]) -> Dict[str, Any]:
        """Move the info of env ``i``'s automatic reset ("sb3" autoreset) from
        its step info into ``reset_infos[i]``; return the step info."""
        if RESET_INFO_KEY in info:
            self.reset_infos[i] = info.pop(RESET_INFO_KEY)
        return info

    def _call_start(self, what: str, name: str, args, kwargs, indices: Indices):
        """Send a call to the envs ``indices``; :meth:`_call_finish` collects the
        replies. Nothing but other calls may be sent to the workers in between.

        The state is NEEDS_RESET while the frames are written (a Ctrl-C that
        cuts one leaves a state that needs the reset which restores the
        channel) and goes back to what it was once they are."""
        self._guard(what, State.IDLE, State.NEEDS_RESET)
        ids = self._indices(indices)
        by_worker: Dict[int, List[int]] = {}
        for i in ids:
            by_worker.setdefault(int(self._env_worker[i]), []).append(i)
        dead = sorted(w for w in by_worker if w in self._dead)
        if dead:
            raise StateError(
                f"{what}() cannot reach envs of dead worker(s) {dead}: call reset() first, "
                "which starts them again"
            )
        broken = [w for w in self._broken_workers() if w in by_worker]
        if broken:
            raise self._broken_error(broken[0], f"starting {what}()")
        prev = self._state
        if prev is State.NEEDS_RESET and self._in_flight.any():
            # After a death, a timeout or Ctrl-C envs may still be running; the
            # worker reads the call only after its round, so let them finish.
            self._drain(what)
        self._state = State.NEEDS_RESET  # until every frame is written
        refs: Dict[int, int] = {}
        try:
            for w, wids in by_worker.items():
                refs[w] = self._post(w, msgs.Call(what, name, args, kwargs, wids))
        except WorkerDiedError as exc:
            self._bury(int(self._env_worker[exc.env_indices[0]]))
            raise
        except BaseException:
            # An arg that does not pickle, or a Ctrl-C between two frames: the
            # channels are whole, and replies already asked for are only stale.
            if not self._broken_workers() and not self._dead.intersection(by_worker):
                self._state = prev
            raise
        self._state = prev
        return {
            "what": what,
            "name": name,
            "ids": ids,
            "by_worker": by_worker,
            "refs": refs,
            "results": {},
        }

    def _call_finish(self, pending) -> List[Any]:
        """Collect the replies of :meth:`_call_start` (each matched by its ref:
        a reply of an abandoned call is never taken for this one).

        After the timeout of a single wait (``_wait_timeout``), calling it
        again with the same ``pending`` waits for the workers not yet heard.
        After a death, the ``timeout`` watchdog (the late worker is killed) or
        Ctrl-C, the vec env needs a reset().
        """
        what, name, ids = pending["what"], pending["name"], pending["ids"]
        by_worker, results, refs = pending["by_worker"], pending["results"], pending["refs"]
        lost = sorted(w for w in by_worker if w in self._dead)
        if lost:
            raise StateError(
                f"{what}({name!r}) was abandoned: worker(s) {lost} were killed; call reset()"
            )
        keep = self._wait_timeout is not None
        limit = self._wait_timeout if keep else self.timeout
        deadline = None if limit is None else time.monotonic() + limit
        where = f"{what}({name!r})"
        prev = self._state
        self._state = State.NEEDS_RESET  # until every reply is read
        try:
            for w, wids in list(by_worker.items()):
                values = self._recv(w, deadline, where, keep=keep, ref=refs[w]).values
                del by_worker[w]  # answered: a retry after a timeout skips it
                for i, value in zip(wids, values):
                    results[i] = value
        except VecEnvTimeoutError:
            if keep:
                self._state = prev  # still pending: wait again
            raise
        except BaseException as exc:
            if isinstance(exc, WorkerDiedError):
                self._bury(int(self._env_worker[exc.env_indices[0]]))
            raise
        self._state = prev
        errors = {i: v for i, (kind, v) in results.items() if kind != "ok"}
        if errors:
            raise self._worker_error(errors[min(errors)])
        return [results[i][1] for i in ids]

    def _drain(self, what: str) -> None:
        """Wait for every env in flight and drop the results (before a reset).
        A worker that dies meanwhile is restarted (inside reset)."""
        n = int(self._in_flight.sum())
        if n:
            self._wait(n, what)
            # Their round messages are never read: a later read asks for the
            # ticket of a later publish, so these are stale and overwritten.
            self._ctrl.collect(n, self._ids_out)
