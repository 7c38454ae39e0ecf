"""RayVecEnv: vectorized envs spread over the nodes of a Ray cluster.

Runs in the parent (the learner's process, a Ray driver); the actor side,
:class:`vecenv._ray_actors._EnvActor`, runs inside Ray actor processes. Each actor hosts a local
:class:`~vecenv.ShmemVecEnv` of its contiguous share of the envs, so within a
node the shared-memory engine does the stepping and only one batch of arrays
per actor crosses the network per step. The parent submits one task per actor
and then waits for all of them (lockstep) or for the first ones that finish
(``send``/``recv``), so actors on different nodes step concurrently.

Ray is an optional dependency (``pip install vecenv[ray]``); only
:mod:`vecenv._ray_actors` imports it, and importing this module without Ray
raises the ImportError that says how to get it.

RayVecEnv, like ShmemVecEnv, is an :class:`vecenv._engine.EngineVecEnv`: it
keeps the state machine, the public verbs and the tasks in flight, and holds
two parts as members, each owning its state:

* ``self._actors``, an :class:`~vecenv._ray_actors.ActorPool`: plans and
  starts the actors, submits their tasks, fetches results within the wait
  limit it is given, turns Ray failures and error reports into vecenv
  errors, and brings restarted actors back;
* ``self._batch``, a :class:`_Batch`: the action buffers the steps are sent
  from, and the batch assembled from the actors' results.

The idea of one vectorized env per remote worker comes from RLlib's
``EnvRunner`` groups and tianshou's ``RayVectorEnv`` (which hosts one env
per actor); here the unit is an actor running a whole ``ShmemVecEnv``, and
Ray's actor restart is used to replace a dead actor.

Protocol invariants:

* Actor ``a`` hosts envs ``[lo_a, hi_a)``; ranges are contiguous, in actor
  order, and never change, so observations are concatenated in env order.
* An actor runs one task at a time, in submission order (Ray's ordering for
  an actor's tasks from one caller); the parent has at most one step or reset
  task in flight per actor.
* Actor methods never raise for env errors: they return ``("ok", value)`` or
  ``("error", payload)``; a Ray error from a task therefore means the actor
  (or its node) failed, not an env.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from vecenv._engine import EngineVecEnv, State
from vecenv._layout import flatten_space, make_action_writer, make_unflattener
from vecenv._options import (
    ENGINE_OPTIONS,
    EngineOptions,
    autoreset_mode_name,
    check_env_fns,
    check_seconds,
)

# Without Ray installed, this import raises the ImportError that says how to get it.
from vecenv._ray_actors import _PLACEMENT_STRATEGIES, ActorPool, Result, _release, _Resources
from vecenv.base import EnvFactory, Indices, check_batch_size, check_env_ids
from vecenv.errors import (
    InvalidArgumentError,
    PendingTimeoutError,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WorkerDiedError,
)

__all__ = ["RayVecEnv"]

# ShmemVecEnv arguments the actor sets itself.
_RESERVED_VEC_KEYS = ("batch_size", "copy", "autoreset_mode")  # of _options.ENGINE_OPTIONS
_LOCAL_KEYS = tuple(k for k in ENGINE_OPTIONS if k not in _RESERVED_VEC_KEYS)


# ---------------------------------------------------------------- the batch
def _tagged(results: Dict[int, Result], kinds: Union[str, Dict[int, str]]) -> Dict[int, Result]:
    """Replace the ``"ok"`` tags by the kind of task each actor ran."""
    return {
        a: ((kinds[a] if isinstance(kinds, dict) else kinds), v) if tag == "ok" else (tag, v)
        for a, (tag, v) in results.items()
    }


class _Batch:
    """RayVecEnv's arrays (parent side): the action buffers that each
    actor's step is sent from, and the batch built from the actors' results.

    Parameters
    ----------
    ranges : list of (lo, hi)
        The env range of each actor.
    observation_space, action_space : gymnasium spaces
        The envs' spaces.
    """

    def __init__(
        self, ranges: List[Tuple[int, int]], observation_space: Any, action_space: Any
    ) -> None:
        self._ranges = ranges
        num_envs = ranges[-1][1]
        leaves = flatten_space(action_space, "action_space")
        # One (num_envs, *shape) buffer per action leaf; Ray copies an actor's rows at submit.
        self._act_bufs = [np.empty((num_envs, *leaf.shape), leaf.dtype) for leaf in leaves]
        self._write_actions = make_action_writer(leaves, action_space)
        self._unflatten_obs = make_unflattener(observation_space)
        self._last_leaves: Dict[int, List[np.ndarray]] = {}  # actor -> last observation leaves

    def write_actions(self, actions: Any, ids: Optional[np.ndarray] = None) -> None:
        """Validate ``actions`` and copy them into the rows ``ids`` (None: all
        num_envs rows). Raises InvalidArgumentError, writing nothing."""
        self._write_actions(actions, self._act_bufs, ids)

    def actions_of(self, a: int) -> List[np.ndarray]:
        """Actor ``a``'s rows of each action buffer (views: Ray copies them at submit)."""
        lo, hi = self._ranges[a]
        return [buf[lo:hi] for buf in self._act_bufs]

    def reset_batch(self, results: Dict[int, Result]) -> Tuple[Any, List[Dict[str, Any]]]:
        """All num_envs rows after a reset of the actors in ``results``:
        ``(observations, reset_infos)``. Actors not in ``results`` keep their
        last observation, with ``{}`` as reset info."""
        full = dict(results)
        for a, (lo, hi) in enumerate(self._ranges):
            if a not in full:
                full[a] = ("reset", (self._last_leaves[a], [{} for _ in range(hi - lo)]))
        # A reset has no step results, so no reset_infos to update: [].
        obs, _, _, _, infos = self.assemble(range(len(self._ranges)), full, [])
        return obs, infos

    def assemble(
        self,
        actors: Sequence[int],
        results: Dict[int, Result],
        reset_infos: List[Dict[str, Any]],
    ) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, List[Dict[str, Any]]]:
        """Concatenate the results of ``actors`` (in that order) into one batch:
        ``(observations, rewards, terminated, truncated, infos)``, new arrays
        the caller owns.

        Tags: ``"step"`` (a step result; for the envs it reset, sb3 autoreset,
        it replaces their entry of ``reset_infos``, num_envs dicts), ``"reset"``
        (reward 0, not done) or ``"restarted"`` (a reset after a restart:
        truncated, flagged in infos).
        """
        leaves_per, rews, terms, truncs = [], [], [], []
        infos: List[Dict[str, Any]] = []
        for a in actors:
            tag, value = results[a]
            lo, hi = self._ranges[a]
            n = hi - lo
            if tag == "step":
                leaves, rew, term, trunc, sparse, resets = value
                for i, info in resets.items():
                    reset_infos[lo + i] = info
                rews.append(rew)
                terms.append(term)
                truncs.append(trunc)
                infos.extend(sparse.get(i, {}) for i in range(n))
            else:
                leaves, env_reset_infos = value
                rews.append(np.zeros(n, np.float64))
                terms.append(np.zeros(n, bool))
                truncs.append(np.full(n, tag == "restarted"))
                if tag == "restarted":
                    infos.extend(dict(info, actor_restarted=True) for info in env_reset_infos)
                else:
                    infos.extend(env_reset_infos)
            leaves_per.append(leaves)
            self._last_leaves[a] = leaves  # for subset resets, which return every row
        obs = self._unflatten_obs([np.concatenate(parts) for parts in zip(*leaves_per)])
        rew = np.concatenate(rews).astype(np.float64, copy=False)
        term = np.concatenate(terms).astype(bool, copy=False)
        trunc = np.concatenate(truncs).astype(bool, copy=False)
        return obs, rew, term, trunc, infos


# ---------------------------------------------------------------- parent side
class RayVecEnv(EngineVecEnv):
    """Step ``num_envs`` gymnasium envs in Ray actors, each hosting a
    :class:`~vecenv.ShmemVecEnv` of its share of the envs.

    The API is :class:`~vecenv.ShmemVecEnv`'s (``reset``, ``reset_async``,
    ``reset_wait``, ``step_async``, ``step_wait``, ``step``,
    ``step_wait_gym``, ``close``, ``render``,
    ``get_images``, ``seed``, ``set_options``, ``env_method``, ``get_attr``,
    ``set_attr``, ``env_is_wrapped``, and ``send``/``recv`` when
    ``batch_size < num_envs``). Ray must be initialized by the caller
    (``ray.init(address=...)``); RayVecEnv never starts or joins a cluster.

    Parameters
    ----------
    env_fns : sequence of callables
        One factory per env, returning a ``gymnasium.Env``. Serialized by Ray
        (cloudpickle), so lambdas and closures work; they run on the actor's
        node, so what they import must be installed there.
    spaces : (observation_space, action_space), optional
        The spaces every env must have; checked against the envs' own.
    num_actors, envs_per_actor : int, optional
        Actor layout (give one or neither): actor ``a`` gets a contiguous range
        of envs. Default: one actor per alive node that has CPUs.
    actor_options : dict or sequence of dicts, optional
        Ray actor options (``num_cpus``, ``num_gpus``, ``memory``,
        ``resources``, ``runtime_env``, ``scheduling_strategy``, ...) for every
        actor, or one dict per actor. Default ``{"num_cpus": 1}``. Without a
        ``num_workers``/``envs_per_worker`` in ``vec_kwargs``, an actor with
        ``num_cpus=k`` runs ``k`` worker processes (at least 1).
    placement_strategy : {"SPREAD", "PACK", "STRICT_SPREAD", "STRICT_PACK"} or None
        Reserve one placement-group bundle per actor (the actor's CPUs, GPUs
        and custom resources) with this strategy, and place actor ``a`` in
        bundle ``a``. Default "SPREAD": actors go to different nodes where
        resources allow. None: no placement group; Ray places the actors by
        ``actor_options`` alone.
    batch_size : int, optional
        Envs returned by :meth:`recv` (default num_envs: lockstep). Must be a
        multiple of the actor size, and all actors must host the same number
        of envs: ``recv`` returns whole actors.
    max_restarts : int
        0 (default): a dead actor or node raises
        :class:`~vecenv.errors.WorkerDiedError`. ``n > 0`` (-1: no limit): Ray
        restarts a dead actor up to ``n`` times (Ray's ``max_restarts``); the step that lost
        it returns, for its envs, freshly reset observations with reward 0,
        ``terminated`` False, ``truncated`` True (done) and
        ``infos[i]["actor_restarted"] = True`` (there is no terminal
        observation). Restarted envs are not re-seeded.
    autoreset_mode : {"sb3", "next_step", "same_step", "disabled"}
        As in :class:`~vecenv.ShmemVecEnv`.
    vec_kwargs : dict or EngineOptions, optional
        Further :class:`~vecenv.ShmemVecEnv` options for each actor's local
        vec env (``num_workers``, ``envs_per_worker``, ``context``, ``spin``,
        ``timeout``, ``cpu_affinity``...); not ``batch_size``, ``copy`` or
        ``autoreset_mode``. Checked here, as ShmemVecEnv checks them.
    timeout : float, optional
        Seconds to wait for a step, reset or call before raising
        :class:`~vecenv.errors.PendingTimeoutError` (default: no limit); the
        call stays pending, so waiting again collects it. Settable.
    start_timeout : float
        Seconds to wait for the placement group and the actors to start and
        build their envs (default 300).
    restart_timeout : float
        Seconds to wait for a restarted actor to reset its envs (default 300).

    Attributes
    ----------
    actor_info : list of dict
        One per actor, in actor order: ``actor``, ``envs`` (the env range
        ``(lo, hi)``), ``node_id``, ``node_ip``, ``pid`` (of the actor
        process), ``worker_pids`` (its local workers), ``restarted``.
        Refreshed after a restart.
    restarts : list of int
        Restarts seen per actor.
    reset_infos : list of num_envs dicts
        As :class:`~vecenv.ShmemVecEnv`'s.

    Raises
    ------
    InvalidArgumentError
        Bad arguments (checked before any actor or placement group exists).
    StateError
        Ray is not initialized.
    SpaceError
        Envs whose spaces differ from ``spaces`` or between actors.
    WorkerError
        An env factory raised (names the env; the traceback is chained).
    VecEnvTimeoutError
        The placement group or the actors did not start within start_timeout.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFactory],
        spaces: Optional[Tuple[Any, Any]] = None,
        *,
        num_actors: Optional[int] = None,
        envs_per_actor: Optional[int] = None,
        actor_options: Union[Dict[str, Any], Sequence[Dict[str, Any]], None] = None,
        placement_strategy: Optional[str] = "SPREAD",
        batch_size: Optional[int] = None,
        max_restarts: int = 0,
        autoreset_mode: str = "sb3",
        vec_kwargs: Union[Dict[str, Any], EngineOptions, None] = None,
        timeout: Optional[float] = None,
        start_timeout: float = 300.0,
        restart_timeout: float = 300.0,
    ):
        self._state = State.CLOSED  # until construction succeeds
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, _release, self._resources)
        env_fns = check_env_fns(env_fns)
        num_envs = len(env_fns)
        if not ActorPool.ray_is_running():
            raise StateError(
                "RayVecEnv needs a running Ray: call ray.init(address=...) with your "
                "cluster's address first (RayVecEnv never starts or joins a cluster)"
            )
        if num_actors is None and envs_per_actor is None:
            num_actors = ActorPool.default_num_actors()
        # Also the pool's: the ranges never change.
        self._ranges = ActorPool.plan(num_envs, num_actors, envs_per_actor)
        n_act = len(self._ranges)
        sizes = {hi - lo for lo, hi in self._ranges}
        batch_size = check_batch_size(batch_size, num_envs)
        if batch_size < num_envs and (len(sizes) != 1 or batch_size % next(iter(sizes))):
            raise InvalidArgumentError(
                f"batch_size={batch_size} needs actors of equal size and a multiple of it "
                f"(recv returns whole actors); actor sizes are {sorted(sizes)}: choose "
                "num_envs, envs_per_actor and batch_size so that they divide evenly"
            )
        if (
            not isinstance(max_restarts, (int, np.integer))
            or isinstance(max_restarts, bool)
            or max_restarts < -1
        ):
            raise InvalidArgumentError(
                f"max_restarts must be an int >= 0 (or -1: unlimited), got {max_restarts!r}"
            )
        if placement_strategy is not None and placement_strategy not in _PLACEMENT_STRATEGIES:
            raise InvalidArgumentError(
                f"placement_strategy must be one of {_PLACEMENT_STRATEGIES} or None, "
                f"got {placement_strategy!r}"
            )
        autoreset_mode = autoreset_mode_name(autoreset_mode)
        check_seconds("timeout", timeout)
        check_seconds("start_timeout", start_timeout, allow_none=False)
        check_seconds("restart_timeout", restart_timeout, allow_none=False)
        if spaces is not None and (not isinstance(spaces, (tuple, list)) or len(spaces) != 2):
            raise InvalidArgumentError("spaces must be a pair (observation_space, action_space)")
        if isinstance(vec_kwargs, EngineOptions):
            vec_kwargs = vec_kwargs.changed()
        vec_kwargs = dict(vec_kwargs or {})
        bad = sorted(set(vec_kwargs) & set(_RESERVED_VEC_KEYS))
        if bad:
            raise InvalidArgumentError(
                f"vec_kwargs must not set {bad}: RayVecEnv sets them (pass batch_size and "
                "autoreset_mode to RayVecEnv itself)"
            )
        # Checked here as each actor's ShmemVecEnv would, before any actor exists.
        local = EngineOptions.from_kwargs(
            vec_kwargs, caller="RayVecEnv(vec_kwargs=...)", allowed=_LOCAL_KEYS
        )
        vec_kwargs = local.changed()
        #: The options of each actor's local ShmemVecEnv (the attribute ShmemVecEnv has).
        self.engine_options = local
        opts = ActorPool.actor_options(actor_options, n_act, placement_strategy)

        self.batch_size = int(batch_size)
        self.timeout = timeout
        self.autoreset_mode = autoreset_mode
        self.placement_strategy = placement_strategy
        self._actors = ActorPool(
            self._resources, self._ranges, int(max_restarts), float(restart_timeout)
        )
        # The state machine's data: the tasks in flight and what a reset returns.
        self._pending: Dict[int, Tuple[str, Any]] = {}  # actor -> (kind, ObjectRef)
        self._reset_refs: Dict[int, Any] = {}  # actor -> ref of a reset_async
        self._seeds: List[Optional[int]] = [None] * num_envs
        self._options: Dict[int, Any] = {}
        self.reset_infos: List[Dict[str, Any]] = [{} for _ in range(num_envs)]
        try:
            self._actors.start(
                env_fns, opts, vec_kwargs, autoreset_mode, placement_strategy, start_timeout
            )
        except BaseException:
            self._resources.shutdown(timeout=1.0)
            self._finalizer.detach()
            raise
        actor_info = self._actors.actor_info
        obs_space, act_space = actor_info[0]["observation_space"], actor_info[0]["action_space"]
        for a, info in enumerate(actor_info):
            if (info["observation_space"], info["action_space"]) != (obs_space, act_space):
                self.close()
                raise SpaceError(
                    f"envs of actor {a} (envs {self._ranges[a][0]}..{self._ranges[a][1] - 1}) have "
                    f"spaces ({info['observation_space']}, {info['action_space']}), actor 0's have "
                    f"({obs_space}, {act_space}); all envs must share their spaces"
                )
        self._check_given_spaces(spaces, obs_space, act_space)
        super().__init__(num_envs, obs_space, act_space)
        self.metadata = actor_info[0]["metadata"]
        self._batch = _Batch(self._ranges, obs_space, act_space)
        self._state = State.NEEDS_RESET

    # ------------------------------------------------------------ the pool's state
    @property
    def actor_info(self) -> List[Dict[str, Any]]:
        """One dict per actor, in actor order: ``actor``, ``envs`` (the env
        range ``(lo, hi)``), ``node_id``, ``node_ip``, ``pid``,
        ``worker_pids``, ``restarted``; refreshed after a restart."""
        return self._actors.actor_info

    @property
    def restarts(self) -> List[int]:
        """Restarts seen per actor."""
        return self._actors.restarts

    @property
    def max_restarts(self) -> int:
        """Ray's ``max_restarts`` of every actor (0: a dead actor is an error; -1: no limit)."""
        return self._actors.max_restarts

    @property
    def restart_timeout(self) -> float:
        """Seconds to wait for a restarted actor to reset its envs. Settable."""
        return self._actors.restart_timeout

    @restart_timeout.setter
    def restart_timeout(self, seconds: float) -> None:
        check_seconds("restart_timeout", seconds, allow_none=False)
        self._actors.restart_timeout = float(seconds)

    # ------------------------------------------------------------ waits
    def _wait_limit(self) -> Optional[float]:
        """Seconds the next wait may take: limit_waits()'s, else ``timeout``."""
        return self.timeout if self._wait_timeout is None else self._wait_timeout

    def _get(self, refs: Dict[int, Any], what: str) -> Dict[int, Result]:
        """The pool's :meth:`~vecenv._ray_actors.ActorPool.get` within the
        wait limit; a dead actor leaves the vec env needing a reset."""
        try:
            return self._actors.get(refs, what, self._wait_limit())
        except WorkerDiedError:
            self._state = State.NEEDS_RESET
            raise

    def _drain(self) -> None:
        """Wait for the tasks in flight and drop their results (before a reset)."""
        refs = {a: ref for a, (_, ref) in self._pending.items()}
        self._pending.clear()
        if refs:
            self._get(refs, "a step (draining before reset)")

    # ------------------------------------------------------------ results
    def _raise_env_errors(self, results: Dict[int, Result], what: str) -> None:
        """Raise the first actor's env error in ``results`` (naming the others
        that failed too), leaving the vec env needing a reset."""
        errs = [a for a in sorted(results) if results[a][0] == "error"]
        if errs:
            self._state = State.NEEDS_RESET
            err = self._actors.translate(errs[0], results[errs[0]][1], what)
            if len(errs) > 1:
                err.args = (f"{err.args[0]} (and actors {errs[1:]} failed too)",)
            raise err

    def reset_async(self, env_ids=None) -> None:
        """:meth:`ShmemVecEnv.reset_async <vecenv.ShmemVecEnv.reset_async>` over
        the actors: each actor hosting some of ``env_ids`` (default: all envs)
        gets one reset task, all submitted before any is waited for. Envs not in
        ``env_ids`` keep their state; subsets need ``batch_size == num_envs``
        and every env reset once before.

        Raises StateError (a step or reset pending, or a subset where not
        allowed), InvalidArgumentError (bad ``env_ids``) or WorkerDiedError (an
        actor died earlier and cannot come back).
        """
        self._guard("reset_async", State.NEEDS_RESET, State.IDLE, State.RUNNING)
        by_actor: Dict[int, Optional[List[int]]]
        ids = self._reset_ids(env_ids)
        if ids is None:
            by_actor = dict.fromkeys(range(len(self._ranges)))
        else:
            local_ids: Dict[int, List[int]] = {}
            for i in ids.tolist():
                a = int(self._actors.env_actor[i])
                local_ids.setdefault(a, []).append(i - self._ranges[a][0])
            by_actor = {a: local for a, local in local_ids.items()}
            if self._state is State.NEEDS_RESET and len(by_actor) < len(self._ranges):
                raise StateError(
                    "reset_async(env_ids=...) needs every env reset once: call reset() first"
                )
        self._actors.check_alive(list(by_actor), "reset_async()")
        if self._state is State.RUNNING:
            self._drain()
        refs = {}
        for a, local in by_actor.items():
            lo, hi = self._ranges[a]
            seeds: Optional[List[Optional[int]]] = self._seeds[lo:hi]
            if all(x is None for x in self._seeds[lo:hi]):
                seeds = None
            opts = [self._options.get(i) for i in range(lo, hi)] if self._options else None
            refs[a] = self._actors.submit_reset(a, seeds, opts, local)
        self._seeds = [None] * self.num_envs
        self._options = {}
        self._pending.clear()
        if self.batch_size < self.num_envs:
            self._pending = {a: ("reset", ref) for a, ref in refs.items()}
            self._state = State.RUNNING
        else:
            self._reset_refs = refs
            self._state = State.RESET_PENDING

    def reset_wait(self):
        """Wait for the resets started by :meth:`reset_async`.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            All num_envs rows, in env order (arrays the caller owns): envs that
            were not reset keep their last observation.

        ``self.reset_infos`` gets one dict per env ({} for envs not reset).

        Raises
        ------
        StateError
            No reset_async() is pending.
        WorkerError, WorkerDiedError
        VecEnvTimeoutError
            The reset stays pending: call reset_wait() again.
        """
        if self._state is not State.RESET_PENDING:
            self._guard("reset_wait", State.RESET_PENDING)
        refs = self._reset_refs
        try:
            results = _tagged(self._get(refs, "reset"), "reset")
        except VecEnvTimeoutError:
            raise
        except BaseException:
            self._reset_refs = {}
            self._state = State.NEEDS_RESET
            raise
        self._reset_refs = {}
        self._raise_env_errors(results, "resetting")
        obs, self.reset_infos = self._batch.reset_batch(results)
        self._state = State.IDLE
        return obs

    def _submit_steps(self, actors: Sequence[int]) -> None:
        """Send each actor in ``actors`` its rows of the action buffers."""
        for a in actors:
            # Ray serializes the arguments here, so the buffers can be reused.
            self._pending[a] = ("step", self._actors.submit_step(a, self._batch.actions_of(a)))

    def step_async(self, actions) -> None:
        """Start a step of every env: one task per actor, all submitted before
        any is waited for.

        Parameters
        ----------
        actions : array-like, shape (num_envs, *action_space.shape)
            One action per env; a tuple/dict of such arrays for Tuple/Dict
            action spaces. Validated and copied before this returns.

        Raises
        ------
        InvalidArgumentError
            Wrong number of actions, shape, dtype, or a value outside the
            action space (nothing is sent).
        StateError
            A step is already pending, reset() was not called, or the vec env
            uses batch_size < num_envs (use send/recv).
        """
        self._check_step_async()
        self._batch.write_actions(actions)
        self._submit_steps(range(len(self._ranges)))
        self._state = State.STEP_PENDING

    def _step_results(self):
        refs = {a: ref for a, (_, ref) in self._pending.items()}
        try:
            results = _tagged(self._get(refs, "step"), "step")
        except VecEnvTimeoutError:
            raise  # the step stays pending: step_wait() again waits for it
        except BaseException:
            self._pending.clear()
            self._state = State.NEEDS_RESET
            raise
        self._pending.clear()
        self._raise_env_errors(results, "stepping")
        out = self._batch.assemble(range(len(self._ranges)), results, self.reset_infos)
        self._state = State.IDLE
        return out

    def step_wait(self):
        """Wait for the step started by :meth:`step_async`.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            Arrays the caller owns, in env order.
        rewards : float64 array, shape (num_envs,)
        dones : bool array, shape (num_envs,)
            ``terminated | truncated``.
        infos : list of num_envs dicts
            As :class:`~vecenv.ShmemVecEnv`'s; envs of a restarted actor have
            ``"actor_restarted": True``.

        Raises
        ------
        StateError
            No step_async() is pending.
        WorkerError
            An env raised (names the env; the traceback is chained).
        WorkerDiedError
            An actor or its node died (names its envs), and max_restarts is 0
            or used up.
        VecEnvTimeoutError
        """
        if self._state is not State.STEP_PENDING:
            self._guard("step_wait", State.STEP_PENDING)
        obs, rew, term, trunc, infos = self._step_results()
        return obs, rew, term | trunc, infos

    def step_wait_gym(self):
        """:meth:`step_wait` returning gymnasium's split flags:
        ``(observations, rewards, terminated, truncated, infos)``."""
        if self._state is not State.STEP_PENDING:
            self._guard("step_wait", State.STEP_PENDING)
        return self._step_results()

    # ------------------------------------------------------------ partial batches
    def send(self, actions, env_ids=None) -> None:
        """Start a step of the envs ``env_ids``, which must be the whole env
        ranges of some actors (typically the ``env_ids`` of the last :meth:`recv`).

        Parameters
        ----------
        actions : array-like, shape (len(env_ids), *action_space.shape)
            Row ``j`` is the action of env ``env_ids[j]``.
        env_ids : array-like of int, optional
            Distinct env indices, none in flight; default all envs.

        Raises
        ------
        InvalidArgumentError
            Bad actions or env_ids, env_ids that cover only part of an actor,
            or an env that is still in flight.
        """
        self._guard("send", State.IDLE, State.RUNNING)
        ids = check_env_ids(env_ids, self.num_envs)
        actors = sorted({int(a) for a in self._actors.env_actor[ids]})
        for a in actors:
            lo, hi = self._ranges[a]
            if int(np.count_nonzero((ids >= lo) & (ids < hi))) != hi - lo:
                raise InvalidArgumentError(
                    f"env_ids must cover whole actors: actor {a} hosts envs {list(range(lo, hi))} "
                    f"but env_ids has only {sorted(int(i) for i in ids if lo <= i < hi)}; send the "
                    "env_ids returned by recv()"
                )
        busy = [a for a in actors if a in self._pending]
        if busy:
            env_busy = [i for a in busy for i in range(*self._ranges[a])]
            raise InvalidArgumentError(
                f"env_ids {env_busy} are still in flight: recv() them before sending again"
            )
        self._actors.check_alive(actors, "send()")
        self._batch.write_actions(actions, ids)
        self._submit_steps(actors)
        self._state = State.RUNNING

    def recv(self):
        """Collect the envs of the first actors that finished, ``batch_size`` envs.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (batch_size, *shape)
            Rows for ``env_ids``; arrays the caller owns.
        rewards : float64 array, (batch_size,)
        dones : bool array, (batch_size,)
        infos : list of batch_size dicts
        env_ids : int64 array, (batch_size,)
            Which env each row belongs to (whole actors, each in env order).

        Raises
        ------
        StateError
            Fewer than batch_size envs are in flight.
        WorkerError, WorkerDiedError, VecEnvTimeoutError
        """
        self._guard("recv", State.RUNNING)
        actor_size = self._actors.actor_size
        k = self.batch_size // actor_size
        if len(self._pending) < k:
            raise StateError(
                f"recv() needs batch_size={self.batch_size} envs in flight but only "
                f"{len(self._pending) * actor_size} are: send() actions for the env_ids "
                "of the last recv() first"
            )
        order = list(self._pending)  # submission order: the oldest first
        refs = [self._pending[a][1] for a in order]
        limit = self._wait_limit()
        ready = self._actors.wait_first(refs, k, limit)
        if len(ready) < k:
            ready_set = set(ready)
            late = [
                i
                for a in order
                if self._pending[a][1] not in ready_set
                for i in range(*self._ranges[a])
            ]
            raise PendingTimeoutError(
                f"fewer than batch_size={self.batch_size} envs finished within "
                f"{limit} s; envs still running: {late} (they stay in "
                "flight: recv() again, or reset())",
                env_indices=late,
            )
        ready_set = set(ready)
        actors = [a for a in order if self._pending[a][1] in ready_set]
        kinds = {a: self._pending[a][0] for a in actors}
        refs_ready = {a: self._pending.pop(a)[1] for a in actors}
        if not self._pending:
            self._state = State.IDLE
        results = _tagged(self._get(refs_ready, "step"), kinds)
        self._raise_env_errors(results, "stepping")
        obs, rew, term, trunc, infos = self._batch.assemble(actors, results, self.reset_infos)
        ids = np.concatenate([np.arange(*self._ranges[a], dtype=np.int64) for a in actors])
        return obs, rew, term | trunc, infos, ids

    # ------------------------------------------------------------ slow path
    def _call_start(self, what: str, name: str, args, kwargs, indices: Indices):
        """Send a call to the envs ``indices`` (one task per actor involved);
        :meth:`_call_finish` collects the replies."""
        self._guard(what, State.IDLE, State.NEEDS_RESET)
        ids = self._indices(indices)
        by_actor: Dict[int, List[int]] = {}
        for i in ids:
            by_actor.setdefault(int(self._actors.env_actor[i]), []).append(i)
        self._actors.check_alive(list(by_actor), f"{what}({name!r})")
        refs = {}
        for a, aids in by_actor.items():
            lo = self._ranges[a][0]
            local = [i - lo for i in aids]
            refs[a] = self._actors.submit_call(a, what, name, args, kwargs, local)
        return {"what": f"{what}({name!r})", "ids": ids, "by_actor": by_actor, "refs": refs}

    def _call_finish(self, pending) -> List[Any]:
        """Collect the replies of :meth:`_call_start`, in the order of its
        indices. After a timeout, calling it again with the same ``pending``
        waits again."""
        what, by_actor = pending["what"], pending["by_actor"]
        try:
            out = self._actors.get_calls(pending["refs"], what, self._wait_limit())
        except WorkerDiedError:
            # A restarted actor has fresh envs: the caller must reset.
            self._state = State.NEEDS_RESET
            raise
        errs = [a for a in sorted(out) if out[a][0] == "error"]
        if errs:  # an env's call raised (the state does not change)
            raise self._actors.translate(errs[0], out[errs[0]][1], what)
        results: Dict[int, Any] = {}
        for a, aids in by_actor.items():
            for i, value in zip(aids, out[a][1]):
                results[i] = value
        return [results[i] for i in pending["ids"]]

    # ------------------------------------------------------------ close
    _WORKERS = "num_actors"  # for repr()
    #: No worker layout of its own (each actor's ShmemVecEnv has one); the
    #: drop-ins built on this engine report None.
    layout = None

    def _forget_views(self) -> None:
        """At close: forget the tasks in flight (the actors are killed next)."""
        self._pending.clear()
        self._reset_refs = {}
