"""Rollouts that overlap the policy with the envs, written as a lockstep loop.

Runs in the parent process only. :class:`Rollout` drives a vec env with partial
batches (``batch_size < num_envs``): the envs are split into groups of
``batch_size`` consecutive envs; while the policy computes the actions of one
group, the other groups step in the workers. The loop reads like CleanRL's
lockstep loop::

    import numpy as np

    import vecenv
    from vecenv.rollout import Rollout

    if __name__ == "__main__":
        with vecenv.make("CartPole-v1", 16, num_workers=2, batch_size=8) as venv:
            rollout = Rollout(venv)
            obs, infos, env_ids = rollout.reset(seed=0)
            for _ in range(100):
                actions = np.random.randint(0, 2, size=len(obs))  # the policy
                obs, rewards, dones, infos, env_ids = rollout.step(actions)

The pattern is EnvPool's asynchronous one (``envpool/core/async_envpool.h``,
``send``/``recv``), which gives each batch to the caller as soon as it is ready.
With ``order="fixed"`` (the default) the groups come in a fixed order instead
(0, 1, ..., 0, 1, ...): a group that finishes early is held until its turn, so
the policy sees the same sequence of batches, and draws the same random numbers
in the same order, as a lockstep loop over the same envs: with the same seeds a
seeded policy gives the same trajectories as lockstep. ``order="ready"`` takes
whichever group is ready first (the fastest; order depends on timing).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from vecenv.errors import InvalidArgumentError, StateError

__all__ = ["Rollout"]


def _rows(space: Any, batch: Any, positions: List[int]) -> Any:
    """The rows ``positions`` of an observation batch shaped like ``space``
    (a single env's space): fresh arrays, or tuples of per-env values for
    leaves without a fixed layout."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return {k: _rows(s, batch[k], positions) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_rows(s, b, positions) for s, b in zip(space.spaces, batch))
    if isinstance(batch, np.ndarray):
        return batch[positions]  # fancy indexing: a copy
    return tuple(batch[p] for p in positions)


def _stack(space: Any, parts: List[Tuple[Any, int]]) -> Any:
    """One batch from ``(batch, position)`` pairs, row ``j`` from ``parts[j]``."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return {k: _stack(s, [(b[k], p) for b, p in parts]) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_stack(s, [(b[i], p) for b, p in parts]) for i, s in enumerate(space.spaces))
    if isinstance(parts[0][0], np.ndarray):
        return np.stack([b[p] for b, p in parts])
    return tuple(b[p] for b, p in parts)


class Rollout:
    """Step ``venv``'s envs in groups, the policy on one while the others step.

    Parameters
    ----------
    venv : vecenv.ShmemVecEnv
        Built with ``batch_size`` < ``num_envs`` dividing ``num_envs``
        (``num_envs // 2`` overlaps one group with the policy). Groups are
        envs ``[g * batch_size, (g + 1) * batch_size)``: with
        ``envs_per_worker`` dividing ``batch_size``, each is whole workers, and
        a group's observations are its shared rows, no gather.
    order : {"fixed", "ready"}
        "fixed" (default): groups 0, 1, ..., 0, 1, ...; reproducible (the same
        batches in the same order as lockstep). "ready": whichever group is
        ready first (``recv``'s FIFO order).

    Raises
    ------
    InvalidArgumentError
        ``venv`` is not a vec env with partial batches (``send``/``recv``),
        ``batch_size`` does not divide ``num_envs``, or ``order`` is unknown.
    """

    def __init__(self, venv: Any, order: str = "fixed"):
        for name in ("send", "recv", "batch_size", "num_envs"):
            if not hasattr(venv, name):
                raise InvalidArgumentError(
                    f"Rollout(venv): venv must have send/recv (a vecenv.ShmemVecEnv with "
                    f"batch_size < num_envs), got {type(venv).__name__}"
                )
        n, k = int(venv.num_envs), int(venv.batch_size)
        if k >= n or n % k:
            raise InvalidArgumentError(
                f"Rollout(venv): venv.batch_size={k} must be below and divide num_envs={n} "
                f"(e.g. batch_size={n // 2} for two groups)"
            )
        if order not in ("fixed", "ready"):
            raise InvalidArgumentError(f"order must be 'fixed' or 'ready', got {order!r}")
        self.venv = venv
        self.order = order
        self.batch_size = k
        self.num_groups = n // k
        self._space = venv.observation_space
        self._env_ids: Optional[np.ndarray] = None  # the group the caller acts on
        self._next = 0  # fixed order: the group to return next
        # Fixed order: envs received before their group's turn, per env:
        # (observation batch, position in it, reward, done, info).
        self._held: Dict[int, Tuple[Any, int, float, bool, Dict[str, Any]]] = {}

    def reset(self, seed: Optional[int] = None):
        """Reset every env (seeded from ``seed`` when given: env ``i`` gets
        ``seed + i``) and return the first group's observations.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (batch_size, *shape)
            The group's rows: arrays the caller owns, or with the vec env's
            ``copy=False`` views valid until the next :meth:`step`.
        infos : list of batch_size dicts
            The envs' reset infos.
        env_ids : int64 array, (batch_size,)
            The group's envs (consecutive).
        """
        if seed is not None:
            self.venv.seed(seed)
        self.venv.reset()
        self._held.clear()
        self._next = 0
        obs, _, _, infos, env_ids = self._take()
        return obs, infos, env_ids

    def step(self, actions):
        """Send ``actions`` to the group of the last batch, then return the
        next group's batch.

        Parameters
        ----------
        actions : array-like, shape (batch_size, *action_space.shape)
            Row ``j`` is the action of ``env_ids[j]`` of the last batch.

        Returns
        -------
        observations, rewards, dones, infos, env_ids
            As :meth:`vecenv.ShmemVecEnv.recv`, for the next group.

        Raises
        ------
        StateError
            Before :meth:`reset`.
        InvalidArgumentError
            Bad ``actions`` (as :meth:`vecenv.ShmemVecEnv.send`): nothing is
            sent, and the Rollout is unchanged.
        """
        if self._env_ids is None:
            raise StateError("Rollout.step() before Rollout.reset()")
        # send() refuses bad actions with nothing sent: the group stays the
        # caller's, and a corrected step() goes on from it.
        self.venv.send(actions, self._env_ids)
        self._env_ids = None
        return self._take()

    def _take(self):
        if self.order == "ready":
            batch = self.venv.recv()
            self._env_ids = batch[4]
            return batch
        k, g = self.batch_size, self._next
        lo, hi = g * k, (g + 1) * k
        while not all(i in self._held for i in range(lo, hi)):
            obs, rew, dones, infos, ids = self.venv.recv()
            if len(ids) == k and int(ids.min()) == lo and int(ids.max()) == hi - 1:
                # The group itself (recv gives distinct envs): no envs to hold.
                if bool((np.diff(ids) == 1).all()):
                    return self._give(g, (obs, rew, dones, infos, ids))
                order = np.argsort(ids)
                batch = (
                    _rows(self._space, obs, order.tolist()),
                    rew[order],
                    dones[order],
                    [infos[j] for j in order],
                    ids[order],
                )
                return self._give(g, batch)
            if not getattr(self.venv, "copy", True):
                obs = _rows(self._space, obs, list(range(len(ids))))  # recv reuses it
            for j, i in enumerate(ids.tolist()):
                self._held[i] = (obs, j, rew[j], dones[j], infos[j])
        parts = [self._held.pop(i) for i in range(lo, hi)]
        obs = _stack(self._space, [(b, p) for b, p, _, _, _ in parts])
        rew = np.array([x[2] for x in parts], dtype=np.float64)
        dones = np.array([x[3] for x in parts], dtype=bool)
        infos = [x[4] for x in parts]
        return self._give(g, (obs, rew, dones, infos, np.arange(lo, hi, dtype=np.int64)))

    def _give(self, g: int, batch):
        self._next = (g + 1) % self.num_groups
        self._env_ids = batch[4]
        return batch
