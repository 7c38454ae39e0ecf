"""RayVecEnv: vectorized envs spread over the nodes of a Ray cluster.

Runs in the parent (the learner's process, a Ray driver) and, for
:class:`_EnvActor`, inside Ray actor processes. Each actor hosts a local
:class:`~vecenv.ShmemVecEnv` of its contiguous share of the envs, so within a
node the shared-memory engine does the stepping and only one batch of arrays
per actor crosses the network per step. The parent submits one task per actor
and then waits for all of them (lockstep) or for the first ones that finish
(``send``/``recv``), so actors on different nodes step concurrently.

Ray is an optional dependency (``pip install vecenv[ray]``); this is the only
vecenv module that imports it. The idea of one vectorized env per remote worker
comes from RLlib's ``EnvRunner`` groups and tianshou's ``RayVectorEnv`` (which
hosts one env per actor); here the unit is an actor running a whole
``ShmemVecEnv``, and Ray's actor restart is used to replace a dead actor.

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

import os
import time
import traceback
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import ray
    import ray.exceptions as ray_exc
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"vecenv.ray needs Ray ({_exc}): install it with `pip install vecenv[ray]`"
    ) from _exc

from vecenv import errors as _errors
from vecenv._engine import EngineVecEnv, State
from vecenv._layout import flatten_space, make_action_writer, make_flattener, make_unflattener
from vecenv._options import check_seconds
from vecenv._protocol import AUTORESET_MODES, Autoreset
from vecenv.base import Indices, check_batch_size, check_env_ids
from vecenv.errors import (
    InvalidArgumentError,
    RemoteTraceback,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WorkerDiedError,
    WorkerError,
)
from vecenv.shmem_vec_env import ShmemVecEnv, plan_workers

__all__ = ["RayVecEnv"]

_PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# Keys the RayVecEnv sets itself on every actor.
_RESERVED_ACTOR_KEYS = ("max_restarts", "max_task_retries")
# ShmemVecEnv arguments the actor sets itself.
_RESERVED_VEC_KEYS = ("batch_size", "copy", "autoreset_mode")  # of _options.ENGINE_OPTIONS


# ---------------------------------------------------------------- actor side
def _error_payload(exc: BaseException) -> Dict[str, Any]:
    """A picklable description of ``exc`` raised in an actor (indices local)."""
    cls = type(exc).__name__
    if not isinstance(exc, _errors.VecEnvError) or not hasattr(_errors, cls):
        cls = "WorkerError"
    return {
        "cls": cls,
        "message": str(exc),
        "env_index": getattr(exc, "env_index", None),
        "env_indices": tuple(getattr(exc, "env_indices", ()) or ()),
        "exc_type": getattr(exc, "exc_type", "")
        or f"{type(exc).__module__}.{type(exc).__qualname__}",
        "traceback": getattr(exc, "worker_traceback", "")
        or "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        "exitcode": getattr(exc, "exitcode", None),
    }


class _EnvActor:
    """Runs inside a Ray actor: hosts a :class:`ShmemVecEnv` of some envs.

    Every method returns ``(tag, value)``: ``("ok", value)``, ``("error",
    payload)`` for an exception raised by the envs or the local engine, and
    :meth:`step` may return ``("restarted", reset_result)`` when it finds a
    fresh actor (Ray restarted it after a crash): its envs were reset instead.
    Observations go back as the list of leaf arrays of the observation space
    (see :func:`vecenv._layout.flatten_space`); indices are local (0-based).
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], vec_kwargs: Dict[str, Any]):
        self._venv: Any = None  # the local ShmemVecEnv; None if it failed to start
        self._error: Optional[Dict[str, Any]] = None
        self._fresh = True  # not reset since (re)start
        try:
            # copy=False: the arrays are serialized by Ray when the method
            # returns, before the next task of this actor can step again.
            self._venv = ShmemVecEnv(list(env_fns), copy=False, **vec_kwargs)
            # Resolved once: no string comparison per step.
            self._sb3 = Autoreset(self._venv.autoreset_mode) is Autoreset.SB3
            self._flatten = make_flattener(self._venv.observation_space)
            self._unflatten_actions = make_unflattener(self._venv.action_space)
        except Exception as exc:
            self._error = _error_payload(exc)

    def describe(self):
        if self._error is not None:
            return ("error", self._error)
        venv = self._venv
        ctx = ray.get_runtime_context()
        with warnings.catch_warnings():  # Ray's own use of a deprecated property
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = bool(ctx.was_current_actor_reconstructed)
        return (
            "ok",
            {
                "node_id": ctx.get_node_id(),
                "node_ip": ray.util.get_node_ip_address(),
                "pid": os.getpid(),
                "worker_pids": [p.pid for p in venv._resources.procs],
                "num_envs": venv.num_envs,
                "observation_space": venv.observation_space,
                "action_space": venv.action_space,
                "metadata": getattr(venv, "metadata", {}),
                "restarted": restarted,
            },
        )

    def _do_reset(self, seeds, options, local_ids=None):
        venv = self._venv
        if seeds is not None:
            venv.seed(seeds)
        if options is not None:
            venv.set_options(options)
        venv.reset_async(local_ids)
        obs = venv.reset_wait()  # all rows: envs not reset keep their observation
        if local_ids is None:
            self._fresh = False
        return self._flatten(obs), venv.reset_infos

    def reset(self, seeds=None, options=None, local_ids=None):
        if self._error is not None:
            return ("error", self._error)
        try:
            return ("ok", self._do_reset(seeds, options, local_ids))
        except Exception as exc:
            return ("error", _error_payload(exc))

    def step(self, action_leaves: List[np.ndarray]):
        if self._error is not None:
            return ("error", self._error)
        try:
            if self._fresh:
                return ("restarted", self._do_reset(None, None))
            venv = self._venv
            venv.step_async(self._unflatten_actions(action_leaves))
            obs, rew, term, trunc, infos = venv.step_wait_gym()
            sparse = {i: info for i, info in enumerate(infos) if info}
            resets = {}
            if self._sb3:  # reset in this step: the info of that reset
                resets = {int(i): venv.reset_infos[i] for i in np.flatnonzero(term | trunc)}
            return ("ok", (self._flatten(obs), rew, term, trunc, sparse, resets))
        except Exception as exc:
            return ("error", _error_payload(exc))

    def call(self, what: str, name: str, args, kwargs, local_ids: List[int]):
        """Any call kind of the local engine (get_attr, set_attr, env_method,
        call, render, is_wrapped) on the local envs ``local_ids``."""
        if self._error is not None:
            return ("error", self._error)
        try:
            return ("ok", self._venv._call(what, name, args, kwargs, local_ids))
        except Exception as exc:
            return ("error", _error_payload(exc))

    def close(self):
        if self._venv is not None:
            self._venv.close()
        return ("ok", None)


_RemoteEnvActor = ray.remote(_EnvActor)


# ---------------------------------------------------------------- loopback only
def _loopback_namespace() -> bool:
    """For tests and benchmarks: True when this process is in a network
    namespace whose only interface is ``lo`` (``unshare -n``), after bringing
    ``lo`` up (a fresh namespace has it down; needs CAP_NET_ADMIN there).

    Ray binds to the machine's network address; in such a namespace it can
    only use 127.0.0.1. False (and nothing touched) anywhere else.
    """
    import fcntl
    import socket
    import struct

    try:
        if [name for _, name in socket.if_nameindex()] != ["lo"]:
            return False
        get_flags, set_flags, up = 0x8913, 0x8914, 0x1  # SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            ifreq = fcntl.ioctl(s, get_flags, struct.pack("16sH22x", b"lo", 0))
            flags = struct.unpack("16sH22x", ifreq)[1]
            if not flags & up:
                fcntl.ioctl(s, set_flags, struct.pack("16sH22x", b"lo", flags | up))
    except OSError:
        return False
    return True


# ---------------------------------------------------------------- parent side
class _Resources:
    """The actors and placement group to release; apart from the RayVecEnv so
    a weakref finalizer can release them (close, GC and exit end here)."""

    def __init__(self):
        self.actors: list = []
        self.pg = None

    def shutdown(self, timeout: float) -> None:
        if not ray.is_initialized():  # Ray already shut down: nothing to release
            self.actors, self.pg = [], None
            return
        if self.actors:
            refs = []
            for actor in self.actors:
                try:
                    refs.append(actor.close.remote())
                except Exception:
                    pass
            try:  # polite: each actor closes its ShmemVecEnv (joins its workers)
                ray.wait(refs, num_returns=len(refs), timeout=max(timeout, 0.0))
            except Exception:
                pass
            for actor in self.actors:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:
                    pass
        if self.pg is not None:
            try:
                remove_placement_group(self.pg)
            except Exception:
                pass
        self.actors, self.pg = [], None


def _release(resources: _Resources) -> None:
    resources.shutdown(timeout=2.0)


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
    vec_kwargs : dict, optional
        Further :class:`~vecenv.ShmemVecEnv` arguments for each actor's local
        vec env (``num_workers``, ``envs_per_worker``, ``context``, ``spin``,
        ``timeout``, ``cpu_affinity``...); not ``batch_size``, ``copy`` or
        ``autoreset_mode``.
    timeout : float, optional
        Seconds to wait for a step, reset or call before raising
        :class:`~vecenv.errors.VecEnvTimeoutError` (default: no limit); the
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
        env_fns: Sequence[Callable[[], Any]],
        spaces: Optional[Tuple[Any, Any]] = None,
        *,
        num_actors: Optional[int] = None,
        envs_per_actor: Optional[int] = None,
        actor_options: Union[Dict[str, Any], Sequence[Dict[str, Any]], None] = None,
        placement_strategy: Optional[str] = "SPREAD",
        batch_size: Optional[int] = None,
        max_restarts: int = 0,
        autoreset_mode: str = "sb3",
        vec_kwargs: Optional[Dict[str, Any]] = None,
        timeout: Optional[float] = None,
        start_timeout: float = 300.0,
        restart_timeout: float = 300.0,
    ):
        self._state = State.CLOSED  # until construction succeeds
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, _release, self._resources)
        env_fns = ShmemVecEnv._check_env_fns(env_fns)
        num_envs = len(env_fns)
        if not ray.is_initialized():
            raise StateError(
                "RayVecEnv needs a running Ray: call ray.init(address=...) with your "
                "cluster's address first (RayVecEnv never starts or joins a cluster)"
            )
        if num_actors is None and envs_per_actor is None:
            num_actors = max(
                1,
                sum(
                    1
                    for n in ray.nodes()
                    if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0
                ),
            )
        self._ranges = self._plan(num_envs, num_actors, envs_per_actor)
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
        if autoreset_mode not in AUTORESET_MODES:
            raise InvalidArgumentError(
                f"autoreset_mode must be one of {AUTORESET_MODES}, got {autoreset_mode!r}"
            )
        check_seconds("timeout", timeout)
        check_seconds("start_timeout", start_timeout, allow_none=False)
        check_seconds("restart_timeout", restart_timeout, allow_none=False)
        if spaces is not None and (not isinstance(spaces, (tuple, list)) or len(spaces) != 2):
            raise InvalidArgumentError("spaces must be a pair (observation_space, action_space)")
        vec_kwargs = dict(vec_kwargs or {})
        bad = sorted(set(vec_kwargs) & set(_RESERVED_VEC_KEYS))
        if bad:
            raise InvalidArgumentError(
                f"vec_kwargs must not set {bad}: RayVecEnv sets them (pass batch_size and "
                "autoreset_mode to RayVecEnv itself)"
            )
        opts = self._actor_options(actor_options, n_act, placement_strategy)

        self.batch_size = int(batch_size)
        self.timeout = timeout
        self.max_restarts = int(max_restarts)
        self.restart_timeout = float(restart_timeout)
        self.autoreset_mode = autoreset_mode
        self.placement_strategy = placement_strategy
        self.restarts = [0] * n_act
        self._actor_size = max(sizes)
        self._env_actor = np.repeat(np.arange(n_act), [hi - lo for lo, hi in self._ranges])
        self._dead: Dict[int, str] = {}  # actor -> why, for actors that cannot come back
        self._pending: Dict[int, Tuple[str, Any]] = {}  # actor -> (kind, ObjectRef)
        self._seeds: List[Optional[int]] = [None] * num_envs
        self._options: Dict[int, Any] = {}
        self._reset_refs: Dict[int, Any] = {}  # actor -> ref of a reset_async
        self._last_leaves: Dict[int, List[np.ndarray]] = {}  # actor -> last observation leaves
        self.reset_infos: List[Dict[str, Any]] = [{} for _ in range(num_envs)]
        try:
            self._start(
                env_fns, opts, vec_kwargs, autoreset_mode, placement_strategy, start_timeout
            )
        except BaseException:
            self._resources.shutdown(timeout=1.0)
            self._finalizer.detach()
            raise
        obs_space, act_space = (
            self.actor_info[0]["observation_space"],
            self.actor_info[0]["action_space"],
        )
        for a, info in enumerate(self.actor_info):
            if (info["observation_space"], info["action_space"]) != (obs_space, act_space):
                self.close()
                raise SpaceError(
                    f"envs of actor {a} (envs {self._ranges[a][0]}..{self._ranges[a][1] - 1}) have "
                    f"spaces ({info['observation_space']}, {info['action_space']}), actor 0's have "
                    f"({obs_space}, {act_space}); all envs must share their spaces"
                )
        if spaces is not None and (spaces[0] != obs_space or spaces[1] != act_space):
            self.close()
            raise SpaceError(
                f"spaces=({spaces[0]}, {spaces[1]}) differ from the envs' own "
                f"({obs_space}, {act_space})"
            )
        super().__init__(num_envs, obs_space, act_space)
        self.metadata = self.actor_info[0]["metadata"]
        leaves = flatten_space(act_space, "action_space")
        self._act_bufs = [np.empty((num_envs, *leaf.shape), leaf.dtype) for leaf in leaves]
        self._write_actions = make_action_writer(leaves, act_space)
        self._unflatten_obs = make_unflattener(obs_space)
        self._state = State.NEEDS_RESET

    # ------------------------------------------------------------ construction
    @staticmethod
    def _plan(num_envs, num_actors, envs_per_actor) -> List[Tuple[int, int]]:
        try:
            return plan_workers(num_envs, num_actors, envs_per_actor)
        except InvalidArgumentError as exc:
            msg = str(exc).replace("num_workers", "num_actors")
            msg = msg.replace("envs_per_worker", "envs_per_actor").replace("worker", "actor")
            raise InvalidArgumentError(msg) from None

    def _actor_options(self, actor_options, n_act, placement_strategy) -> List[Dict[str, Any]]:
        if actor_options is None:
            per: List[Dict[str, Any]] = [{} for _ in range(n_act)]
        elif isinstance(actor_options, dict):
            per = [dict(actor_options) for _ in range(n_act)]
        else:
            try:
                per = [dict(o) for o in actor_options]
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    "actor_options must be a dict or a sequence of dicts, one per actor"
                ) from None
            if len(per) != n_act:
                raise InvalidArgumentError(
                    f"actor_options has {len(per)} dicts, expected one per actor ({n_act})"
                )
        for a, o in enumerate(per):
            bad = sorted(set(o) & set(_RESERVED_ACTOR_KEYS))
            if bad:
                raise InvalidArgumentError(
                    f"actor_options[{a}] must not set {bad}: use RayVecEnv(max_restarts=...); "
                    "steps are never retried"
                )
            if placement_strategy is not None and "scheduling_strategy" in o:
                raise InvalidArgumentError(
                    f"actor_options[{a}] sets scheduling_strategy and placement_strategy="
                    f"{placement_strategy!r} places the actors too: pass placement_strategy=None"
                )
            o.setdefault("num_cpus", 1)
            try:  # Ray validates the options here, without starting anything
                _RemoteEnvActor.options(**o)
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError(
                    f"actor_options[{a}] is not valid for Ray: {exc}"
                ) from None
            if placement_strategy is not None and not self._bundle(o):
                raise InvalidArgumentError(
                    f"actor_options[{a}] asks for no resources, so a placement group cannot "
                    "reserve a bundle for it: give num_cpus > 0 or pass placement_strategy=None"
                )
        return per

    @staticmethod
    def _bundle(o: Dict[str, Any]) -> Dict[str, float]:
        bundle = {"CPU": float(o.get("num_cpus") or 0), "GPU": float(o.get("num_gpus") or 0)}
        if o.get("memory"):
            bundle["memory"] = float(o["memory"])
        bundle.update({k: float(v) for k, v in (o.get("resources") or {}).items()})
        return {k: v for k, v in bundle.items() if v > 0}

    @staticmethod
    def _check_fits(bundles: List[Dict[str, float]], strategy: str) -> None:
        """Refuse a placement group the cluster, as it is now, can never hold
        (rather than wait start_timeout for it)."""
        total = ray.cluster_resources()
        for key in sorted({k for b in bundles for k in b}):
            need = sum(b.get(key, 0.0) for b in bundles)
            if need > total.get(key, 0.0) + 1e-9:
                raise InvalidArgumentError(
                    f"the actors need {need:g} {key} in all (actor_options) but the cluster has "
                    f"{total.get(key, 0.0):g}: use fewer actors or fewer resources per actor, or "
                    "pass placement_strategy=None to let Ray queue the actors (autoscaling)"
                )
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        if strategy == "STRICT_SPREAD" and len(bundles) > nodes:
            raise InvalidArgumentError(
                f"placement_strategy='STRICT_SPREAD' puts each of the {len(bundles)} actors on "
                f"its own node but the cluster has {nodes} alive: use 'SPREAD' or fewer actors"
            )

    def _start(self, env_fns, opts, vec_kwargs, autoreset_mode, placement_strategy, start_timeout):
        res = self._resources
        deadline = time.monotonic() + start_timeout
        if placement_strategy is not None:
            bundles = [self._bundle(o) for o in opts]
            self._check_fits(bundles, placement_strategy)
            res.pg = placement_group(bundles, strategy=placement_strategy)
            ready, _ = ray.wait([res.pg.ready()], timeout=start_timeout)
            if not ready:
                raise VecEnvTimeoutError(
                    f"the placement group {bundles} (strategy {placement_strategy}) was not placed "
                    f"within start_timeout={start_timeout} s; the cluster has "
                    f"{ray.available_resources()} available: add nodes, ask for fewer resources "
                    "per actor, or use strategy SPREAD/PACK instead of a STRICT one",
                    env_indices=range(len(env_fns)),
                )
        for a, (lo, hi) in enumerate(self._ranges):
            o = dict(opts[a])
            o["max_restarts"] = self.max_restarts
            o["max_task_retries"] = 0  # a step is not idempotent: never run it twice
            if res.pg is not None:
                o["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    placement_group=res.pg, placement_group_bundle_index=a
                )
            kw = dict(vec_kwargs)
            if "num_workers" not in kw and "envs_per_worker" not in kw:
                kw["num_workers"] = max(1, int(o.get("num_cpus") or 1))
            kw["autoreset_mode"] = autoreset_mode
            res.actors.append(_RemoteEnvActor.options(**o).remote(env_fns[lo:hi], kw))
        refs = [actor.describe.remote() for actor in res.actors]
        infos = []
        for a, ref in enumerate(refs):
            left = max(0.0, deadline - time.monotonic())
            try:
                tag, value = ray.get(ref, timeout=left)
            except ray_exc.GetTimeoutError:
                lo, hi = self._ranges[a]
                raise VecEnvTimeoutError(
                    f"Ray actor {a} (envs {lo}..{hi - 1}) did not start within "
                    f"start_timeout={start_timeout} s (cluster resources available: "
                    f"{ray.available_resources()})",
                    env_indices=range(lo, hi),
                ) from None
            except ray_exc.RayError as exc:
                raise self._died([a], "starting", exc) from None
            if tag == "error":
                raise self._translate(a, value, "building the envs")
            infos.append(dict(value, actor=a, envs=self._ranges[a]))
        self.actor_info: List[Dict[str, Any]] = infos

    # ------------------------------------------------------------ errors
    def _translate(self, a: int, payload: Dict[str, Any], what: str) -> Exception:
        """An actor's error payload as a vecenv exception with global env indices."""
        lo, hi = self._ranges[a]
        where = (
            f"Ray actor {a} (envs {lo}..{hi - 1}; env numbers in this message are local, add {lo})"
        )
        msg = f"{where} while {what}: {payload['message']}"
        cls: Any = getattr(_errors, payload["cls"], WorkerError)
        env_index = payload["env_index"]
        g_index = None if env_index is None else lo + int(env_index)
        g_indices = tuple(lo + int(i) for i in payload["env_indices"])
        if issubclass(cls, WorkerDiedError):
            err = cls(msg, env_indices=g_indices, exitcode=payload["exitcode"], env_index=g_index)
        elif issubclass(cls, WorkerError):
            err = cls(
                msg,
                env_index=g_index,
                exc_type=payload["exc_type"],
                worker_traceback=payload["traceback"],
            )
        elif issubclass(cls, VecEnvTimeoutError):
            err = cls(msg, env_indices=g_indices, env_index=g_index)
        else:
            err = cls(msg)
        if payload["traceback"]:
            err.__cause__ = RemoteTraceback(payload["traceback"])
        return err

    def _died(self, actors: Sequence[int], what: str, exc: BaseException) -> WorkerDiedError:
        """A WorkerDiedError naming the envs of ``actors`` (which cannot come back)."""
        env_ids: List[int] = []
        parts = []
        for a in sorted(actors):
            lo, hi = self._ranges[a]
            env_ids.extend(range(lo, hi))
            info = self.actor_info[a] if a < len(getattr(self, "actor_info", ())) else {}
            parts.append(f"actor {a} (envs {list(range(lo, hi))}, node {info.get('node_ip', '?')})")
            self._dead[a] = f"{type(exc).__name__}"
        self._state = State.NEEDS_RESET
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        err = WorkerDiedError(
            f"Ray {'; '.join(parts)} died while {what} ({type(exc).__name__}: {first_line}); "
            "its envs are gone: close() this vec env and build a new one, or pass max_restarts > 0",
            env_indices=env_ids,
        )
        err.__cause__ = exc
        return err

    def _check_alive(self, actors: Sequence[int], what: str) -> None:
        dead = [a for a in actors if a in self._dead]
        if dead:
            env_ids = [i for a in dead for i in range(*self._ranges[a])]
            raise WorkerDiedError(
                f"{what}: Ray actors {dead} (envs {env_ids}) died earlier and cannot be "
                "restarted: close() this vec env and build a new one",
                env_indices=env_ids,
            )

    # ------------------------------------------------------------ plumbing
    def _fetch(self, refs: Dict[int, Any], what: str):
        """Wait for every ref (at most ``timeout`` seconds) and get its result:
        ``({actor: (tag, value)}, {actor: Ray error})``.

        Raises VecEnvTimeoutError (naming the late envs) when the deadline
        passes; the refs stay valid, so the caller's call stays pending.
        """
        if not refs:
            return {}, {}
        lst = list(refs.values())
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:  # the common case: one call for all actors
            return dict(zip(refs, ray.get(lst, timeout=self.timeout))), {}
        except ray_exc.GetTimeoutError:
            late = lst
        except ray_exc.RayError:
            # An actor failed: wait for the others, then sort them out one by one.
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            _, late = ray.wait(lst, num_returns=len(lst), timeout=left, fetch_local=False)
        if late:
            _, late = ray.wait(lst, num_returns=len(lst), timeout=0, fetch_local=False)
            late_set = set(late)
            late_actors = [a for a, r in refs.items() if r in late_set]
            env_ids = [i for a in late_actors for i in range(*self._ranges[a])]
            # The call stays pending: waiting again picks up the same results.
            raise VecEnvTimeoutError(
                f"envs {env_ids} (Ray actors {late_actors}) did not finish {what} within "
                f"timeout={self.timeout} s; the call stays pending (wait again, or reset())",
                env_indices=env_ids,
            )
        out: Dict[int, Tuple[str, Any]] = {}
        failed: Dict[int, BaseException] = {}
        for a, ref in refs.items():
            try:
                out[a] = ray.get(ref)
            except ray_exc.RayTaskError as exc:  # the actor method itself raised
                out[a] = ("error", _error_payload(exc))
            except ray_exc.RayError as exc:  # actor, worker or node failure
                failed[a] = exc
        return out, failed

    def _get(self, refs: Dict[int, Any], what: str) -> Dict[int, Tuple[str, Any]]:
        """Results ``(tag, value)`` of ready refs. An actor that failed is
        reset after Ray restarted it (when max_restarts allows) and answers
        ``("restarted", reset_result)``; otherwise raise WorkerDiedError."""
        out, failed = self._fetch(refs, what)
        dead: Dict[int, BaseException] = {}
        for a, exc in failed.items():
            if self.max_restarts == 0 or isinstance(exc, ray_exc.ActorDiedError):
                dead[a] = exc  # ActorDiedError: Ray will not restart it (any more)
                continue
            got = self._recover(a)
            if isinstance(got, BaseException):
                dead[a] = got
            else:
                out[a] = got
        if dead:
            raise self._died(list(dead), what, next(iter(dead.values())))
        for a, (tag, _) in out.items():
            if tag == "restarted":
                self._restarted(a)
        return out

    def _recover(self, a: int):
        """Reset the envs of actor ``a`` after a Ray error (Ray restarts a
        dead actor meanwhile). Returns ``("restarted", reset_result)``, an
        env error ``("error", payload)``, or the exception that ended it."""
        deadline = time.monotonic() + self.restart_timeout
        actor = self._resources.actors[a]
        while True:
            try:
                tag, value = ray.get(
                    actor.reset.remote(None, None),
                    timeout=max(0.0, deadline - time.monotonic()),
                )
            except ray_exc.ActorUnavailableError as exc:
                if time.monotonic() >= deadline:
                    return exc
                time.sleep(0.1)  # still restarting: ask again
                continue
            except ray_exc.GetTimeoutError:
                lo, hi = self._ranges[a]
                return VecEnvTimeoutError(
                    f"actor {a} (envs {lo}..{hi - 1}) did not come back within "
                    f"restart_timeout={self.restart_timeout} s",
                    env_indices=range(lo, hi),
                )
            except ray_exc.RayError as exc:
                return exc
            return ("restarted", value) if tag == "ok" else (tag, value)

    def _restarted(self, a: int) -> None:
        """Count a restart of actor ``a`` and refresh its actor_info."""
        self.restarts[a] += 1
        try:
            tag, info = ray.get(
                self._resources.actors[a].describe.remote(), timeout=self.restart_timeout
            )
        except ray_exc.RayError:
            return
        if tag == "ok":
            self.actor_info[a] = dict(info, actor=a, envs=self._ranges[a])

    def _raise_env_errors(self, results: Dict[int, Tuple[str, Any]], what: str) -> None:
        errs = [a for a in sorted(results) if results[a][0] == "error"]
        if errs:
            self._state = State.NEEDS_RESET
            err = self._translate(errs[0], results[errs[0]][1], what)
            if len(errs) > 1:
                err.args = (f"{err.args[0]} (and actors {errs[1:]} failed too)",)
            raise err

    def _assemble(self, actors: Sequence[int], results: Dict[int, Tuple[str, Any]]):
        """Concatenate the results of ``actors`` (in that order) into one batch.

        Tags: ``"step"`` (a step result), ``"reset"`` (reward 0, not done) or
        ``"restarted"`` (a reset after a restart: truncated, flagged in infos).
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
                    self.reset_infos[lo + i] = info
                rews.append(rew)
                terms.append(term)
                truncs.append(trunc)
                infos.extend(sparse.get(i, {}) for i in range(n))
            else:
                leaves, reset_infos = value
                rews.append(np.zeros(n, np.float64))
                terms.append(np.zeros(n, bool))
                truncs.append(np.full(n, tag == "restarted"))
                if tag == "restarted":
                    infos.extend(dict(info, actor_restarted=True) for info in reset_infos)
                else:
                    infos.extend(reset_infos)
            leaves_per.append(leaves)
            self._last_leaves[a] = leaves  # for subset resets, which return every row
        obs = self._unflatten_obs([np.concatenate(parts) for parts in zip(*leaves_per)])
        rew = np.concatenate(rews).astype(np.float64, copy=False)
        term = np.concatenate(terms).astype(bool, copy=False)
        trunc = np.concatenate(truncs).astype(bool, copy=False)
        return obs, rew, term, trunc, infos

    @staticmethod
    def _tagged(results: Dict[int, Tuple[str, Any]], kinds) -> Dict[int, Tuple[str, Any]]:
        """Replace the ``"ok"`` tags by the kind of task each actor ran."""
        return {
            a: ((kinds[a] if isinstance(kinds, dict) else kinds), v) if tag == "ok" else (tag, v)
            for a, (tag, v) in results.items()
        }

    def _drain(self) -> None:
        """Wait for the tasks in flight and drop their results (before a reset)."""
        refs = {a: ref for a, (_, ref) in self._pending.items()}
        self._pending.clear()
        if refs:
            self._get(refs, "a step (draining before reset)")

    def reset(self):
        """Reset every env and return the first observations.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            Arrays the caller owns, in env order, shaped like
            ``observation_space`` with a leading num_envs axis. When
            ``batch_size < num_envs`` the resets are only started and None is
            returned: collect them with :meth:`recv`.

        Reset infos are kept in ``self.reset_infos`` (a list of dicts); with
        ``autoreset_mode="sb3"`` a step that resets env ``i`` replaces
        ``reset_infos[i]`` with the info of that reset.

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError
        """
        self.reset_async()
        if self.batch_size < self.num_envs:
            return None
        return self.reset_wait()

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
                a = int(self._env_actor[i])
                local_ids.setdefault(a, []).append(i - self._ranges[a][0])
            by_actor = {a: local for a, local in local_ids.items()}
            if self._state is State.NEEDS_RESET and len(by_actor) < len(self._ranges):
                raise StateError(
                    "reset_async(env_ids=...) needs every env reset once: call reset() first"
                )
        self._check_alive(list(by_actor), "reset_async()")
        if self._state is State.RUNNING:
            self._drain()
        refs = {}
        for a, local in by_actor.items():
            lo, hi = self._ranges[a]
            seeds: Optional[List[Optional[int]]] = self._seeds[lo:hi]
            if all(x is None for x in self._seeds[lo:hi]):
                seeds = None
            opts = [self._options.get(i) for i in range(lo, hi)] if self._options else None
            refs[a] = self._resources.actors[a].reset.remote(seeds, opts, local)
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
            results = self._tagged(self._get(refs, "reset"), "reset")
        except VecEnvTimeoutError:
            raise
        except BaseException:
            self._reset_refs = {}
            self._state = State.NEEDS_RESET
            raise
        self._reset_refs = {}
        self._raise_env_errors(results, "resetting")
        for a, (lo, hi) in enumerate(self._ranges):
            if a not in results:  # not reset: its last observation, no reset info
                results[a] = ("reset", (self._last_leaves[a], [{} for _ in range(hi - lo)]))
        obs, _, _, _, infos = self._assemble(range(len(self._ranges)), results)
        self.reset_infos = infos
        self._state = State.IDLE
        return obs

    def _submit_steps(self, actors: Sequence[int]) -> None:
        """Send each actor in ``actors`` its rows of the action buffers."""
        for a in actors:
            lo, hi = self._ranges[a]
            # Ray serializes the arguments here, so the buffers can be reused.
            ref = self._resources.actors[a].step.remote([buf[lo:hi] for buf in self._act_bufs])
            self._pending[a] = ("step", ref)

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
        self._write_actions(actions, self._act_bufs)
        self._submit_steps(range(len(self._ranges)))
        self._state = State.STEP_PENDING

    def _step_results(self):
        refs = {a: ref for a, (_, ref) in self._pending.items()}
        try:
            results = self._tagged(self._get(refs, "step"), "step")
        except VecEnvTimeoutError:
            raise  # the step stays pending: step_wait() again waits for it
        except BaseException:
            self._pending.clear()
            self._state = State.NEEDS_RESET
            raise
        self._pending.clear()
        self._raise_env_errors(results, "stepping")
        out = self._assemble(range(len(self._ranges)), results)
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
        actors = sorted({int(a) for a in self._env_actor[ids]})
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
        self._check_alive(actors, "send()")
        self._write_actions(actions, self._act_bufs, ids)
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
        k = self.batch_size // self._actor_size
        if len(self._pending) < k:
            raise StateError(
                f"recv() needs batch_size={self.batch_size} envs in flight but only "
                f"{len(self._pending) * self._actor_size} are: send() actions for the env_ids "
                "of the last recv() first"
            )
        order = list(self._pending)  # submission order: the oldest first
        refs = [self._pending[a][1] for a in order]
        ready, _ = ray.wait(refs, num_returns=k, timeout=self.timeout, fetch_local=True)
        if len(ready) < k:
            ready_set = set(ready)
            late = [
                i
                for a in order
                if self._pending[a][1] not in ready_set
                for i in range(*self._ranges[a])
            ]
            raise VecEnvTimeoutError(
                f"fewer than batch_size={self.batch_size} envs finished within "
                f"timeout={self.timeout} s; envs still running: {late} (they stay in "
                "flight: recv() again, or reset())",
                env_indices=late,
            )
        ready_set = set(ready)
        actors = [a for a in order if self._pending[a][1] in ready_set]
        kinds = {a: self._pending[a][0] for a in actors}
        refs_ready = {a: self._pending.pop(a)[1] for a in actors}
        if not self._pending:
            self._state = State.IDLE
        results = self._tagged(self._get(refs_ready, "step"), kinds)
        self._raise_env_errors(results, "stepping")
        obs, rew, term, trunc, infos = self._assemble(actors, results)
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
            by_actor.setdefault(int(self._env_actor[i]), []).append(i)
        self._check_alive(list(by_actor), f"{what}({name!r})")
        refs = {}
        for a, aids in by_actor.items():
            lo = self._ranges[a][0]
            local = [i - lo for i in aids]
            refs[a] = self._resources.actors[a].call.remote(what, name, args, kwargs, local)
        return {"what": f"{what}({name!r})", "ids": ids, "by_actor": by_actor, "refs": refs}

    def _call_finish(self, pending) -> List[Any]:
        """Collect the replies of :meth:`_call_start`, in the order of its
        indices. After a timeout, calling it again with the same ``pending``
        waits again."""
        what, by_actor = pending["what"], pending["by_actor"]
        out, failed = self._fetch(pending["refs"], what)
        if failed:
            # A restarted actor has fresh envs: the caller must reset.
            err = self._died(list(failed), what, next(iter(failed.values())))
            for a, exc in failed.items():
                if self.max_restarts != 0 and not isinstance(exc, ray_exc.ActorDiedError):
                    self._dead.pop(a, None)  # Ray brings it back: reset() resets its envs
            raise err
        errs = [a for a in sorted(out) if out[a][0] == "error"]
        if errs:
            raise self._translate(errs[0], out[errs[0]][1], what)
        results: Dict[int, Any] = {}
        for a, aids in by_actor.items():
            for i, value in zip(aids, out[a][1]):
                results[i] = value
        return [results[i] for i in pending["ids"]]

    # ------------------------------------------------------------ state, close
    def close(self, timeout: float = 5.0) -> None:
        """Close every actor's local vec env, kill the actors and remove the
        placement group. Idempotent; never waits more than about ``timeout``
        seconds for the actors."""
        if not self._finalizer.alive:
            self._state = State.CLOSED
            return
        self._state = State.CLOSED
        self._finalizer.detach()
        self._pending.clear()
        self._resources.shutdown(timeout=timeout)

    def __repr__(self) -> str:
        return (
            f"RayVecEnv(num_envs={getattr(self, 'num_envs', '?')}, num_actors="
            f"{len(getattr(self, '_ranges', ()))}, batch_size={getattr(self, 'batch_size', '?')}, "
            f"state={self._state.value})"
        )
