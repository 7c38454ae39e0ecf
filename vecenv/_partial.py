"""Partial batches: ShmemVecEnv's EnvPool-style ``send`` / ``recv`` (parent side).

``send(actions, env_ids)`` starts a step of some envs; ``recv()`` collects the
first ``batch_size`` that finished, FIFO, with their ``env_ids``, so that a
learner can act on half the envs while the other half still steps (EnvPool's
async mode, ``envpool/core/async_envpool.h``). Both take the compiled path of
:class:`vecenv._core.ParentStep` when they can (exact actions, no caller's
wait limit, nothing to report), else the Python one below, which shares
:meth:`Collector._complete` and :meth:`Collector._wait` with lockstep steps.
:class:`PartialBatches` is a base of :class:`~vecenv.ShmemVecEnv`; the state
it uses is the vec env's own.
"""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from vecenv import _core, _layout
from vecenv._collect import Collector
from vecenv._engine import State
from vecenv._pool import _SLICE_S
from vecenv._protocol import Op
from vecenv.base import check_env_ids
from vecenv.errors import InvalidArgumentError, StateError

_OP_STEP = int(Op.STEP)
_IDLE, _NEEDS_RESET, _RUNNING = State.IDLE, State.NEEDS_RESET, State.RUNNING


class PartialBatches(Collector):
    """``send`` / ``recv`` of :class:`~vecenv.ShmemVecEnv` (see the module)."""

    _fast: Any  # the compiled step path (vecenv._core.ParentStep), or None

    def send(self, actions, env_ids=None) -> None:
        """Start a step of the envs ``env_ids`` (EnvPool-style async API).

        Parameters
        ----------
        actions : array-like, shape (len(env_ids), *action_space.shape)
            Row ``j`` is the action of env ``env_ids[j]``.
        env_ids : array-like of int, optional
            Distinct env indices, none in flight; default all envs (typically
            the ``env_ids`` returned by the previous :meth:`recv`).

        Raises
        ------
        InvalidArgumentError
            Bad actions or env_ids, or an env that is still in flight.
        """
        self._guard("send", State.IDLE, State.RUNNING)
        fast = self._fast
        if fast is not None and fast.exact_actions and not self.check_actions:
            prev = self._state
            self._state = _NEEDS_RESET  # before the dispatch: a Ctrl-C between is safe
            if fast.send(actions, env_ids):
                self._state = _RUNNING
                return
            self._state = prev  # not the plain case: nothing was sent
        ids = check_env_ids(env_ids, self.num_envs)
        busy = ids[self._in_flight[ids]]
        if busy.size:
            raise InvalidArgumentError(
                f"env_ids {busy.tolist()} are still in flight: recv() them before sending again"
            )
        self._put_actions(actions, ids)
        self._state = State.NEEDS_RESET  # before the dispatch: a Ctrl-C between is safe
        self._ctrl.dispatch(ids, _OP_STEP)
        self._state = State.RUNNING

    def recv(self):
        """Collect the first ``batch_size`` envs that finished (FIFO order).

        Returns
        -------
        observations : array, tuple or dict of arrays, each (batch_size, *shape)
            Rows for ``env_ids``: arrays the caller owns (one block copy when
            the envs are consecutive, as the whole envs of a worker are); with
            ``copy=False`` zero-copy views of their shared rows when the envs
            are consecutive (valid until they are sent again), else a buffer
            reused by the next recv. With batch_size == envs_per_worker each
            batch is one worker's envs, consecutive (a worker publishes the
            envs it was sent together, and the oldest come first).
        rewards : float64 array, (batch_size,)
        dones : bool array, (batch_size,)
        infos : list of batch_size dicts
        env_ids : int64 array, (batch_size,)
            Which env each row belongs to.

        Raises
        ------
        StateError
            Fewer than batch_size envs are in flight (nothing could complete
            the batch).
        """
        self._guard("recv", State.RUNNING, State.IDLE)
        k = self.batch_size
        fast = self._fast
        waited = 0.0
        if fast is not None and self._wait_timeout is None and not self._restarted:  # see step
            prev = self._state
            self._state = _NEEDS_RESET  # until this batch is collected (see step_wait)
            r = fast.recv(k, self.spin, _SLICE_S, self.reset_infos, self._next_check)
            if type(r) is tuple:
                obs, rew, dones, infos, ids, flagged, ended, left = r
                if flagged or ended:
                    restarts = self.restart_count
                    self._complete(ids, infos, flagged)
                    if self.restart_count != restarts:
                        # A worker died before its info was read and was restarted
                        # (see _read_flagged): its envs' rows, rewards and flags changed.
                        obs, rew = self._batch_obs(ids), self._rew[ids]
                        dones = self._term[ids] | self._trunc[ids]
                if self._pending_kwargs:
                    self._reset_collected(ids)
                self._state = _RUNNING if left else _IDLE
                return obs, rew, dones, infos, ids
            self._state = prev
            if r == _core.PARENT_WAITING:
                waited = _SLICE_S
        pending = int(self._in_flight.sum())
        if pending < k:
            raise StateError(
                f"recv() needs batch_size={k} envs in flight but only {pending} are: "
                "send() actions for the env_ids of the last recv() first"
            )
        self._state = State.NEEDS_RESET  # until this batch is collected (see step_wait)
        self._wait(k, "step", State.RUNNING, waited)
        flagged = self._ctrl.collect(k, self._ids_out)
        ids = self._ids_out[:k].copy()
        if not self.copy:
            ids.sort()  # consecutive envs then come as views (see _batch_obs)
        infos: List[Dict[str, Any]] = [{} for _ in range(k)]
        self._complete(ids, infos, flagged)
        obs = self._batch_obs(ids)
        if self._pending_kwargs:
            self._reset_collected(ids)
        self._state = State.RUNNING if self._in_flight.any() else State.IDLE
        return obs, self._rew[ids], self._term[ids] | self._trunc[ids], infos, ids

    def _reset_collected(self, ids) -> None:
        """The envs ``ids`` (int64 array) were collected: a reset among them is
        over, so a later restart of their worker must not reset them with
        its seeds and options again (``_pending_kwargs``, as reset_wait
        forgets them in lockstep)."""
        for i in ids.tolist():
            self._pending_kwargs.pop(i, None)

    def _batch_obs(self, ids):
        """The observations of the envs ``ids`` (int64 array, row ``j`` is env
        ``ids[j]``): with ``copy=False`` and consecutive ascending envs, views
        of their shared rows; else gathered (into a fresh array with
        ``copy=True``, into the reused buffer without)."""
        k = len(ids)
        lo = int(ids[0])
        if not self.copy and int(ids[-1]) - lo == k - 1 and bool((np.diff(ids) == 1).all()):
            leaves = [buf[lo : lo + k] for buf in self._obs_bufs]
        else:
            leaves = []
            for src, out in zip(self._obs_rows, self._gather_out):
                # copy=True gathers straight into a fresh array the caller owns.
                dst = np.empty_like(out) if self.copy else out
                _core.gather_rows(src, ids, _layout._bytes2d(dst))
                leaves.append(dst)
        if self._obs_pickled:
            values = [tuple(col[int(i)] for i in ids) for col in self._pickled_obs]
            leaves = _layout.merge_leaves(leaves, values, self._obs_pickled)
        return leaves[0] if self._single_obs else self._unflatten_obs(leaves)
