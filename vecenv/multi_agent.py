"""PettingZoo envs vectorized with one row per agent (parent side).

:class:`MultiAgentVecEnv` steps many PettingZoo ``ParallelEnv``\\ s (AEC envs
through PettingZoo's ``aec_to_parallel``) on vecenv's engine and hands out one
row per agent of ``possible_agents``: a batch is ``num_parallel_envs *
max_agents`` rows, env-major (env 0's agents in ``possible_agents`` order, then
env 1's, ...). In each worker a
:class:`~vecenv._pz_adapter.ParallelEnvAdapter` gives every PettingZoo env a
fixed layout (one Dict leaf per per-agent array), so observations, actions,
rewards, flags and the alive mask all live in the engine's shared memory and
the rows are reshaped views of it. Everything the engine does works unchanged:
envs per worker, partial batches (``send``/``recv`` by env), fault handling
and restarts, timeouts, and the Ray backend.

PettingZoo is imported in the workers (and by :func:`concat_vec_envs_v1`
only), never by ``import vecenv``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import cloudpickle
import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.vector.vector_env import AutoresetMode

from vecenv import _layout
from vecenv._engine import EngineVecEnv
from vecenv._episodes import EPISODE_KEY, batch_rows
from vecenv._options import check_env_fns
from vecenv._pz_adapter import (
    INFO_AGENTS,
    INFO_EPISODES,
    INFO_FINAL,
    RESET_WHEN,
    AdapterFactory,
)
from vecenv.base import Seeds
from vecenv.errors import ClosedError, InvalidArgumentError, SpaceError, StateError, WorkerError

__all__ = ["MultiAgentVecEnv", "concat_vec_envs_v1"]

BACKENDS = ("shmem", "ray")


def _rows_view(tree, k: int, a: int, copy: bool):
    """Leaves of ``tree`` (each (k, a, *shape)) as (k * a, *shape): views, or copies."""
    if isinstance(tree, dict):
        return {key: _rows_view(v, k, a, copy) for key, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_rows_view(v, k, a, copy) for v in tree)
    out = tree.reshape(k * a, *tree.shape[2:])
    return out.copy() if copy else out


class MultiAgentVecEnv(VectorEnv):
    """PettingZoo envs in vecenv's workers, as a gymnasium ``VectorEnv`` over agent rows.

    Parameters
    ----------
    env_fns : sequence of callables
        One factory per PettingZoo env, returning a ``ParallelEnv`` or an
        ``AECEnv`` (converted with ``aec_to_parallel``). Pickled with
        cloudpickle. All envs must have the same ``possible_agents`` and spaces.
    reset_when : {"all", "any"}
        An env resets in the step where all its agents are done ("all",
        default) or where any agent is done ("any"; the others are reported
        truncated).
    black_death : bool
        False (default): an agent's row reports the step where the agent
        terminates or truncates, then is absent (zero observation, reward 0,
        ``mask`` False, actions ignored) until the agent is alive again.
        True: agents that die before their env ends report nothing; their
        rows carry zeros until the env ends, when every row of the env is
        done (the flags the agent died with; ``terminated`` for rows that had
        no live agent).
    pad_spaces : bool
        Agents whose spaces differ raise :class:`~vecenv.SpaceError` unless
        this is True: Box spaces are then zero-padded to one Box (same rank),
        Discrete action spaces to the largest ``n`` (an action past an
        agent's own range becomes its last action).
    final_obs : bool
        Keep each row's last observation of an episode in shared memory
        (default True); ``infos["final_obs"]`` holds it.
    episode_statistics : bool
        False (default). True: in the step where a row's episode ends,
        ``infos["episode"]`` holds ``{"r": float64, "l": int, "t": float64}``
        arrays over rows (its return, the steps its agent acted in, its
        seconds) and ``infos["_episode"]`` the rows, as gymnasium's vector
        ``RecordEpisodeStatistics`` lays them out; counted per agent row in
        the workers (that wrapper, given this vec env, counts SAME_STEP
        episodes one step short after the first).
    copy : bool
        True (default): returned arrays are the caller's. False: observations,
        rewards, flags and ``mask`` are zero-copy views into shared memory,
        valid until the next ``step``/``send``/``reset``; copy to keep them.
    batch_size : int, optional
        With fewer than ``num_parallel_envs`` envs, use :meth:`send` and
        :meth:`recv` (partial batches, EnvPool-style); ``step`` then raises.
    backend : {"shmem", "ray"}
        The engine: :class:`~vecenv.ShmemVecEnv` (default) or
        :class:`~vecenv.ray.RayVecEnv` (Ray must be initialized).
    **engine_options
        Passed to the engine (``num_workers``, ``envs_per_worker``,
        ``timeout``, ``start_timeout``, ``spin``, ``context``,
        ``cpu_affinity``, ``on_worker_death``, ``max_restarts``,
        ``check_rewards``; for Ray ``num_actors``, ``actor_options``,
        ``vec_kwargs``, ...). Not ``autoreset_mode`` (the adapter resets).

    Attributes
    ----------
    num_envs : int
        Rows per batch: ``num_parallel_envs * max_agents`` (gymnasium's meaning).
    num_parallel_envs : int
        PettingZoo envs.
    max_agents : int
        ``len(possible_agents)``.
    possible_agents : list
    single_observation_space, single_action_space : gymnasium.spaces.Space
        One agent's (padded) spaces; ``observation_space`` and
        ``action_space`` are their batches over ``num_envs`` rows.
    row_env_ids, row_agent_ids : int64 arrays, shape (num_envs,)
        Which env, and which agent (index into ``possible_agents``), each row is.
    rows : list of (int, agent) tuples
        ``(env_id, agent)`` of each row.
    mask : bool array, shape (num_envs,)
        Set by every reset, step and recv: the rows whose agent is alive (acts
        in the next step). After :meth:`recv`, the rows of its batch.
    engine : ShmemVecEnv or RayVecEnv

    Raises
    ------
    InvalidArgumentError
        Bad arguments (before any process starts).
    SpaceError
        Agents (or envs) with different spaces.
    WorkerError
        An env factory or the adapter raised in a worker (names the env).

    Notes
    -----
    Autoreset is gymnasium's SAME_STEP: in the step where a row's episode
    ends, ``terminations``/``truncations`` say so, the observation is the
    next one to act on (the reset one when the env was reset, zero when the
    agent is gone) and ``infos["final_obs"]`` (rows with ``infos["_final_obs"]``)
    holds the last one. ``infos`` is batched the gymnasium way (a dict of
    arrays over rows and ``"_key"`` masks).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        *,
        reset_when: str = "all",
        black_death: bool = False,
        pad_spaces: bool = False,
        final_obs: bool = True,
        episode_statistics: bool = False,
        copy: bool = True,
        batch_size: Optional[int] = None,
        backend: str = "shmem",
        **engine_options: Any,
    ):
        self._engine = None
        from vecenv.shmem_vec_env import ShmemVecEnv

        fns = check_env_fns(env_fns)
        if reset_when not in RESET_WHEN:
            raise InvalidArgumentError(
                f"reset_when must be one of {RESET_WHEN}, got {reset_when!r}"
            )
        if backend not in BACKENDS:
            raise InvalidArgumentError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if "autoreset_mode" in engine_options:
            raise InvalidArgumentError(
                "MultiAgentVecEnv does not take autoreset_mode: the adapter resets each env in "
                "the step that ends it (gymnasium's SAME_STEP); choose reset_when instead"
            )
        given = engine_options.get("engine_options")
        if getattr(given, "episode_statistics", False):
            raise InvalidArgumentError(
                "MultiAgentVecEnv takes episode_statistics itself (per agent row), not in "
                "engine_options: pass MultiAgentVecEnv(..., episode_statistics=True)"
            )
        if not isinstance(episode_statistics, (bool, np.bool_)):
            raise InvalidArgumentError(
                f"episode_statistics must be a bool, got {episode_statistics!r}"
            )
        if backend == "shmem" and "copy" in engine_options:
            raise InvalidArgumentError("pass copy to MultiAgentVecEnv itself")
        options = {
            "reset_when": reset_when,
            "black_death": bool(black_death),
            "pad_spaces": bool(pad_spaces),
            "final_obs": bool(final_obs),
            "episode_statistics": bool(episode_statistics),
        }
        factories = [AdapterFactory(fn, options) for fn in fns]
        engine: EngineVecEnv
        try:
            if backend == "shmem":
                engine = ShmemVecEnv(
                    factories,
                    autoreset_mode="disabled",
                    copy=False,
                    batch_size=batch_size,
                    _default_layout="per_core",  # every env in a worker process
                    **engine_options,
                )
            else:
                from vecenv.ray import RayVecEnv

                engine = RayVecEnv(
                    factories, autoreset_mode="disabled", batch_size=batch_size, **engine_options
                )
        except WorkerError as exc:
            spaces_error = exc.exc_type in (
                "vecenv.errors.SpaceError",
                "vecenv.errors.InvalidArgumentError",
            )
            if spaces_error or "must share their spaces" in str(exc):  # the worker's check
                raise SpaceError(str(exc)) from exc
            raise
        self._engine = engine
        try:
            described = engine.env_method("describe")
            desc = described[0]
            for i, other in enumerate(described):
                if other != desc:
                    raise SpaceError(
                        f"env {i} has agents {other['possible_agents']} with spaces "
                        f"({other['agent_observation_space']}, {other['agent_action_space']}), "
                        f"env 0 has {desc['possible_agents']} with "
                        f"({desc['agent_observation_space']}, {desc['agent_action_space']}); "
                        "all envs must share their possible_agents and spaces"
                    )
        except BaseException:
            engine.close()
            raise
        self.reset_when = reset_when
        self.black_death = bool(black_death)
        self.copy = bool(copy)
        self.backend = backend
        self.batch_size = engine.batch_size
        self.possible_agents = list(desc["possible_agents"])
        self.max_agents = a = len(self.possible_agents)
        self.num_parallel_envs = n = engine.num_envs
        self.num_envs = n * a
        self.single_observation_space = desc["agent_observation_space"]
        self.single_action_space = desc["agent_action_space"]
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._final_obs = bool(desc["final_obs"])
        md = dict(getattr(engine, "metadata", {}) or {})
        self.render_mode = md.pop("render_mode", None)
        md.pop("env_spec_id", None)
        md["autoreset_mode"] = AutoresetMode.SAME_STEP
        self.metadata = md
        self.row_env_ids: np.ndarray = np.repeat(np.arange(n, dtype=np.int64), a)
        self.row_agent_ids = np.tile(np.arange(a, dtype=np.int64), n)
        self.rows: List[Tuple[int, Any]] = [
            (i, agent) for i in range(n) for agent in self.possible_agents
        ]
        self.mask: np.ndarray = np.zeros(self.num_envs, dtype=np.bool_)
        # The alive mask of every row as last collected (the parent's own copy:
        # with copy=False, self.mask is a shared row that the next step rewrites).
        self._alive: np.ndarray = np.zeros((n, a), dtype=np.bool_)
        # Batched agent action -> per-env batch (k, max_agents, ...) of each leaf.
        self._act_flatten = _layout.make_flattener(self.single_action_space)
        self._act_unflatten = _layout.make_unflattener(self.single_action_space)
        self._act_leaves = _layout.flatten_space(self.single_action_space, "action_space")
        self._discrete: Optional[Tuple[int, int]] = None  # [lo, hi) of Discrete agents
        if isinstance(self.single_action_space, spaces.Discrete):
            lo = int(self.single_action_space.start)
            self._discrete = (lo, lo + int(self.single_action_space.n))

    # ------------------------------------------------------------ helpers
    @property
    def engine(self):
        """The vec env that runs the adapters (one env per PettingZoo env)."""
        if self._engine is None:
            raise ClosedError("MultiAgentVecEnv was closed; create a new one")
        return self._engine

    def _env_actions(self, actions, k: int):
        """Agent-row actions (k * max_agents, ...) as the engine's (k, max_agents, ...)."""
        a = self.max_agents
        if self._discrete is not None:
            return self._discrete_actions(actions, k, self._discrete)
        try:
            leaves = self._act_flatten(actions)
        except ValueError as exc:
            raise InvalidArgumentError(
                f"actions do not match {self.single_action_space} batched over rows: {exc}"
            ) from None
        out = []
        for leaf, value in zip(self._act_leaves, leaves):
            arr = np.asarray(value)
            if arr.ndim == 0 or arr.shape[0] != k * a:
                raise InvalidArgumentError(
                    f"actions{leaf.name if leaf.path else ''}: shape {arr.shape}, expected "
                    f"({k * a}, ...): one action per row (num_parallel_envs x max_agents = "
                    f"{k} x {a}), env-major"
                )
            out.append(arr.reshape(k, a, *arr.shape[1:]))
        return self._act_unflatten(out)

    def _discrete_actions(self, actions, k: int, bounds: Tuple[int, int]) -> np.ndarray:
        """Discrete agents: (k * max_agents,) ints checked against the space
        (the engine's action leaf is an int64 Box that it only copies)."""
        lo, hi = bounds
        arr = np.asarray(actions)
        rows = k * self.max_agents
        if arr.shape != (rows,):
            raise InvalidArgumentError(
                f"actions: shape {arr.shape}, expected ({rows}, ...): one action per row "
                f"(num_parallel_envs x max_agents = {k} x {self.max_agents}), env-major"
            )
        if arr.dtype.kind not in "iu":
            if arr.dtype.kind not in "fb" or not (
                np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
            ):
                raise InvalidArgumentError(
                    f"actions: dtype {arr.dtype} with values that are not integers; "
                    f"{self.single_action_space} needs integers"
                )
            arr = arr.astype(np.int64)
        if rows and (arr.min() < lo or arr.max() >= hi):
            bad = int(np.flatnonzero((arr < lo) | (arr >= hi))[0])
            raise InvalidArgumentError(
                f"actions[{bad}]={arr[bad]} is outside {self.single_action_space} "
                f"(valid: {lo}..{hi - 1}); row {bad} is env {bad // self.max_agents}, agent "
                f"{self.possible_agents[bad % self.max_agents]!r}"
            )
        return arr.reshape(k, self.max_agents)

    def _unpack(self, out, k: int, env_dones, env_infos, ids=None):
        """The engine's Dict of (k, max_agents, ...) leaves as agent rows.

        Returns (obs, rewards, terminations, truncations, raw, final): ``raw``
        lists (row offset, adapter info, restarted) for the envs of the batch
        with something to report; ``final`` is the final_obs leaf (or None).
        A restarted env's rows have no last observation (zeros in final_obs).
        """
        a, copy = self.max_agents, self.copy
        obs = _rows_view(out["obs"], k, a, copy)
        rew = out["reward"].reshape(k * a)
        term = out["terminated"].reshape(k * a)
        trunc = out["truncated"].reshape(k * a)
        mask = out["mask"].reshape(k * a)
        raw = []
        restarted = np.flatnonzero(env_dones) if env_dones is not None and env_dones.any() else ()
        if len(restarted):
            # A worker died and was restarted: its envs were reset, and their
            # rows that were alive are reported truncated ("worker_restarted").
            term, trunc = term.copy(), trunc.copy()
            for pos in restarted:
                rows = slice(pos * a, (pos + 1) * a)
                term[rows] = False
                trunc[rows] = self._alive[pos if ids is None else ids[pos]]
        if copy or len(restarted):
            rew, term, trunc = rew.copy(), term.copy(), trunc.copy()
        if len(restarted) or any(env_infos):
            restarted_set = {int(p) for p in restarted}
            for j, info in enumerate(env_infos):
                if info or j in restarted_set:
                    raw.append((j * a, info, j in restarted_set))
        self.mask = mask.copy() if copy else mask
        if ids is None:
            self._alive.reshape(-1)[:] = mask
        else:
            self._alive[ids] = mask.reshape(k, a)
        final = None
        if self._final_obs:
            final = out["final_obs"]
        return obs, rew, term, trunc, raw, final

    def _batch_infos(self, raw, term, trunc, final, k: int) -> Dict[str, Any]:
        """Agent infos of the batch, gymnasium-style (dict of arrays over rows)."""
        infos: Dict[str, Any] = {}
        saved = self.num_envs
        self.num_envs = k * self.max_agents  # _add_info sizes its arrays by num_envs
        try:
            final_infos: Dict[str, Any] = {}
            episodes: Dict[int, Dict[str, Any]] = {}
            for base, info, restarted in raw:
                for j, agent_info in (info or {}).get(INFO_AGENTS, {}).items():
                    infos = self._add_info(infos, agent_info, base + j)
                for j, agent_info in (info or {}).get(INFO_FINAL, {}).items():
                    final_infos = self._add_info(final_infos, agent_info, base + j)
                if not restarted:  # a restarted env's episodes died with its worker
                    for j, episode in (info or {}).get(INFO_EPISODES, {}).items():
                        episodes[base + j] = episode
                if restarted:
                    for j in range(self.max_agents):
                        if trunc[base + j]:
                            infos = self._add_info(infos, {"worker_restarted": True}, base + j)
            ended = term | trunc
            if final is not None and ended.any():
                infos["final_obs"] = _rows_view(final, k, self.max_agents, self.copy)
                infos["_final_obs"] = ended
            if final_infos:
                infos["final_info"] = final_infos
                infos["_final_info"] = ended
            if episodes:
                infos[EPISODE_KEY], infos["_" + EPISODE_KEY] = batch_rows(episodes, self.num_envs)
        finally:
            self.num_envs = saved
        return infos

    # ------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: Seeds = None, options: Optional[Dict[str, Any]] = None):
        """Reset every env.

        Parameters
        ----------
        seed : int, sequence of int/None, or None
            ``seed + i`` for PettingZoo env ``i`` (an int), or one seed per
            PettingZoo env (``num_parallel_envs`` of them; None: unseeded).
        options : dict, optional
            Passed to every env's ``reset``.

        Returns
        -------
        observations : array (or dict/tuple of arrays), (num_envs, *agent_obs_shape)
            Rows in env-major order; zero for agents not alive.
        infos : dict
            Agent infos of the reset, batched over rows.

        Raises
        ------
        StateError
            With ``batch_size < num_parallel_envs``: use :meth:`async_reset` and :meth:`recv`.
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            As the engine's ``reset``.
        """
        engine = self.engine
        if self.batch_size < self.num_parallel_envs:
            raise StateError(
                f"reset() needs batch_size == num_parallel_envs={self.num_parallel_envs} (got "
                f"batch_size={self.batch_size}): call async_reset() then recv()"
            )
        engine.seed(seed)
        engine.set_options(options)
        out = engine.reset()
        n = self.num_parallel_envs
        obs, rew, term, trunc, raw, final = self._unpack(out, n, None, engine.reset_infos)
        return obs, self._batch_infos(raw, term, trunc, None, n)

    def step(self, actions):
        """Step every env with one action per row.

        Parameters
        ----------
        actions : array (or dict/tuple of arrays), shape (num_envs, *agent_action_shape)
            Row ``r`` is the action of agent ``rows[r]``; rows of absent agents
            are ignored (any valid action).

        Returns
        -------
        observations : array(s), (num_envs, *agent_obs_shape)
        rewards : float64 array, (num_envs,)
        terminations, truncations : bool arrays, (num_envs,)
        infos : dict
            Agent infos batched over rows; ``"final_obs"`` (rows with
            ``"_final_obs"``) and ``"final_info"`` for rows whose episode ended.

        Raises
        ------
        InvalidArgumentError
            Actions of the wrong shape or outside the action space (nothing sent).
        StateError
            Before reset(), or with ``batch_size < num_parallel_envs`` (use send/recv).
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            As the engine's ``step``: an env's error names the env; reset() recovers.
        """
        engine = self.engine
        n = self.num_parallel_envs
        engine.step_async(self._env_actions(actions, n))
        out, _, env_term, env_trunc, env_infos = engine.step_wait_gym()
        obs, rew, term, trunc, raw, final = self._unpack(out, n, env_term | env_trunc, env_infos)
        return obs, rew, term, trunc, self._batch_infos(raw, term, trunc, final, n)

    # ------------------------------------------------------------ partial batches
    def async_reset(self, seed: Union[int, Sequence[Optional[int]], None] = None) -> None:
        """Start resetting every env (seeds as :meth:`reset`); :meth:`recv` collects
        them, ``batch_size`` envs at a time.

        Raises
        ------
        StateError
            With ``batch_size == num_parallel_envs``: use :meth:`reset`.
        """
        engine = self.engine
        if self.batch_size == self.num_parallel_envs:
            raise StateError(
                "async_reset() is for partial batches (batch_size < num_parallel_envs); "
                "call reset()"
            )
        engine.seed(seed)
        engine.reset()

    def send(self, actions, env_ids=None) -> None:
        """Start a step of the envs ``env_ids`` (default all).

        Parameters
        ----------
        actions : array(s), shape (len(env_ids) * max_agents, *agent_action_shape)
            The rows of those envs, env-major in ``env_ids`` order.
        env_ids : array-like of int, optional
            Distinct env indices, none in flight (typically the last recv's).
        """
        engine = self.engine
        k = self.num_parallel_envs if env_ids is None else len(np.asarray(env_ids).reshape(-1))
        engine.send(self._env_actions(actions, k), env_ids)

    def recv(self):
        """Collect the first ``batch_size`` envs that finished.

        Returns
        -------
        observations, rewards, terminations, truncations, infos
            As :meth:`step`, over the ``batch_size * max_agents`` rows of the
            batch's envs (env-major, in ``env_ids`` order); ``mask`` holds them.
        env_ids : int64 array, (batch_size,)
        """
        engine = self.engine
        out, _, env_dones, env_infos, ids = engine.recv()
        k = len(ids)
        obs, rew, term, trunc, raw, final = self._unpack(out, k, env_dones, env_infos, ids)
        return obs, rew, term, trunc, self._batch_infos(raw, term, trunc, final, k), ids

    # ------------------------------------------------------------ the rest
    def call(self, name: str, *args: Any, **kwargs: Any) -> Tuple[Any, ...]:
        """``getattr(par_env, name)(*args, **kwargs)`` in each PettingZoo env (or
        the attribute itself when not callable); a tuple over envs."""
        return tuple(self.engine.env_method("call_par_env", name, args, kwargs))

    def get_attr(self, name: str) -> Tuple[Any, ...]:
        """Attribute ``name`` of each PettingZoo env."""
        return self.call(name)

    def render(self):
        """Each env's ``render()``, a tuple over envs."""
        return self.call("render")

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the workers and release shared memory (closing twice is a no-op)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    def __enter__(self) -> MultiAgentVecEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self):  # the engine's finalizer releases workers and memory
        pass

    def __repr__(self) -> str:
        return (
            f"MultiAgentVecEnv(num_parallel_envs={getattr(self, 'num_parallel_envs', '?')}, "
            f"max_agents={getattr(self, 'max_agents', '?')}, backend={getattr(self, 'backend', '?')})"
        )


class _CopyOf:
    """Picklable factory returning a fresh copy of one env instance."""

    def __init__(self, env):
        self.payload = cloudpickle.dumps(env)

    def __call__(self):
        import pickle

        return pickle.loads(self.payload)


def concat_vec_envs_v1(
    vec_env,
    num_vec_envs: int,
    num_cpus: int = 0,
    base_class: str = "gymnasium",
    **kwargs: Any,
):
    """SuperSuit's ``concat_vec_envs_v1`` on vecenv: ``num_vec_envs`` copies of a
    PettingZoo env, one row per agent.

    Parameters
    ----------
    vec_env : ParallelEnv, AECEnv, SuperSuit's ``pettingzoo_env_to_vec_env_v1`` result, or callable
        The env to copy into each worker (pickled), or a factory.
    num_vec_envs : int
        PettingZoo envs (rows = num_vec_envs * max_agents).
    num_cpus : int
        Worker processes (0 or 1: one worker).
    base_class : {"gymnasium", "stable_baselines3"}
        :class:`MultiAgentVecEnv`, or the stable-baselines3 ``VecEnv`` of
        :mod:`vecenv.sb3_multi_agent` (black death on by default there).
    **kwargs
        More :class:`MultiAgentVecEnv` options.

    Raises
    ------
    InvalidArgumentError
        Bad num_vec_envs, num_cpus or base_class.
    """
    if (
        not isinstance(num_vec_envs, (int, np.integer))
        or isinstance(num_vec_envs, bool)
        or num_vec_envs < 1
    ):
        raise InvalidArgumentError(f"num_vec_envs must be a positive int, got {num_vec_envs!r}")
    if not isinstance(num_cpus, (int, np.integer)) or isinstance(num_cpus, bool) or num_cpus < 0:
        raise InvalidArgumentError(f"num_cpus must be an int >= 0, got {num_cpus!r}")
    if base_class not in ("gymnasium", "stable_baselines3"):
        raise InvalidArgumentError(
            f"base_class must be 'gymnasium' or 'stable_baselines3', got {base_class!r}"
        )
    env = getattr(vec_env, "par_env", vec_env)  # SuperSuit's MarkovVectorEnv wraps it
    fn = env if callable(env) and not hasattr(env, "possible_agents") else _CopyOf(env)
    kwargs.setdefault("num_workers", max(1, int(num_cpus)))
    if base_class == "stable_baselines3":
        from vecenv.sb3_multi_agent import SB3MultiAgentVecEnv

        return SB3MultiAgentVecEnv([fn] * int(num_vec_envs), **kwargs)
    return MultiAgentVecEnv([fn] * int(num_vec_envs), **kwargs)
