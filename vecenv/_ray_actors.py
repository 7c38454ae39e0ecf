"""The Ray actors of a RayVecEnv and the parent's pool of them.

Actor side: :class:`_EnvActor` runs inside a Ray actor process and hosts a
local :class:`~vecenv.ShmemVecEnv` of its share of the envs; its methods
never raise for env errors but return ``("ok", value)`` or ``("error",
payload)``. Parent side: :class:`_Resources` (the actors and the placement
group, released by a ``weakref.finalize``) and :class:`ActorPool`, a part
that :class:`~vecenv.RayVecEnv` holds as a member: it plans the actors,
starts them, submits their tasks, fetches task results with deadlines,
turns Ray failures and error payloads into vecenv exceptions, and brings
restarted actors back. The pool knows nothing of the vec env's state
machine: RayVecEnv keeps the state and the tasks in flight, and hands the
pool refs to fetch and the time limit of each wait. Every Ray call of the
parent is made here; this is the only module that imports Ray.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import ray
    import ray.exceptions as ray_exc
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    # ModuleNotFoundError where the package is missing (what pytest.importorskip
    # and `except ImportError` both expect); ImportError where it is broken.
    _missing = ModuleNotFoundError if isinstance(_exc, ModuleNotFoundError) else ImportError
    raise _missing(
        f"vecenv.ray needs Ray ({_exc}): install it with `pip install vecenv[ray]`",
        name=_exc.name,
    ) from _exc

from vecenv._layout import make_flattener, make_unflattener
from vecenv._pool import plan_workers
from vecenv._protocol import Autoreset, ErrorReport
from vecenv.errors import (
    InvalidArgumentError,
    PendingTimeoutError,
    WatchdogTimeoutError,
    WorkerDiedError,
)
from vecenv.shmem_vec_env import ShmemVecEnv

_PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# Keys the RayVecEnv sets itself on every actor.
_RESERVED_ACTOR_KEYS = ("max_restarts", "max_task_retries")


# ---------------------------------------------------------------- actor side
_error_payload = ErrorReport.of_exception  # an actor's exception, its indices local


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
        self._error: Optional[ErrorReport] = None
        self._fresh = True  # not reset since (re)start
        try:
            # copy=False: the arrays are serialized by Ray when the method
            # returns, before the next task of this actor can step again.
            self._venv = ShmemVecEnv(list(env_fns), copy=False, **vec_kwargs)
            # Resolved once: no string comparison per step.
            self._sb3 = Autoreset.named(self._venv.autoreset_mode) is Autoreset.SB3
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
                "worker_pids": [p.pid for p in venv._resources.procs if p.pid != os.getpid()],
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


class _Resources:
    """The actors and placement group to release; apart from the RayVecEnv so
    a weakref finalizer can release them (close, GC and exit end here)."""

    def __init__(self) -> None:
        self.actors: List[Any] = []  # Ray actor handles, in actor order
        self.pg: Any = None  # the placement group, if one was reserved

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


#: A task's result as the actor returns it: ``(tag, value)`` (see :class:`_EnvActor`).
Result = Tuple[str, Any]


class ActorPool:
    """The parent's pool of Ray actors: actor ``a`` hosts the envs
    ``ranges[a] = (lo, hi)``, a contiguous range, in actor order.

    Owns the actor layout (``ranges``, ``env_actor``, ``actor_size``), what
    is known of each actor (``actor_info``, ``restarts``, the actors that
    cannot come back) and the restart policy (``max_restarts``,
    ``restart_timeout``). The actors and the placement group themselves live
    in ``resources``, which the caller creates (its finalizer releases them)
    and hands over; :meth:`start` fills it.

    The pool submits tasks and returns their ``ObjectRef``; the caller keeps
    them (what is in flight is the state machine's data) and hands them back
    to :meth:`get`, :meth:`wait_first` or :meth:`get_calls` with the
    seconds that wait may take.

    Parameters
    ----------
    resources : _Resources
        Where the actors and the placement group go (empty; filled by :meth:`start`).
    ranges : list of (lo, hi)
        The env range of each actor, from :meth:`plan`.
    max_restarts : int
        Ray's ``max_restarts`` for every actor (0: a dead actor is an error;
        -1: no limit).
    restart_timeout : float
        Seconds to wait for a restarted actor to reset its envs.
    """

    def __init__(
        self,
        resources: _Resources,
        ranges: List[Tuple[int, int]],
        max_restarts: int,
        restart_timeout: float,
    ) -> None:
        self.resources = resources
        self.ranges = ranges
        self.max_restarts = max_restarts
        self.restart_timeout = restart_timeout
        sizes = [hi - lo for lo, hi in ranges]
        self.actor_size = max(sizes)
        # env index -> the actor that hosts it
        self.env_actor: np.ndarray = np.repeat(np.arange(len(ranges)), sizes)
        self.restarts = [0] * len(ranges)  # restarts seen per actor
        # One per actor once started (see RayVecEnv.actor_info); refreshed after a restart.
        self.actor_info: List[Dict[str, Any]] = []
        self._dead: Dict[int, str] = {}  # actor -> why, for actors that cannot come back

    # ------------------------------------------------------------ plan and options
    @staticmethod
    def ray_is_running() -> bool:
        """Whether Ray is initialized in this process (the pool never starts it)."""
        return bool(ray.is_initialized())

    @staticmethod
    def default_num_actors() -> int:
        """One actor per alive node that has CPUs (at least 1)."""
        return max(
            1,
            sum(
                1
                for n in ray.nodes()
                if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0
            ),
        )

    @staticmethod
    def plan(
        num_envs: int, num_actors: Optional[int], envs_per_actor: Optional[int]
    ) -> List[Tuple[int, int]]:
        """The env range of each actor; raises InvalidArgumentError naming the actor options."""
        try:
            return plan_workers(num_envs, num_actors, envs_per_actor)
        except InvalidArgumentError as exc:
            msg = str(exc).replace("num_workers", "num_actors")
            msg = msg.replace("envs_per_worker", "envs_per_actor").replace("worker", "actor")
            raise InvalidArgumentError(msg) from None

    @staticmethod
    def actor_options(
        actor_options: Union[Dict[str, Any], Sequence[Dict[str, Any]], None],
        n_act: int,
        placement_strategy: Optional[str],
    ) -> List[Dict[str, Any]]:
        """``actor_options`` checked (by Ray too, starting nothing): one dict per actor.

        Raises InvalidArgumentError naming the actor and the option.
        """
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
            if placement_strategy is not None and not ActorPool._bundle(o):
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

    # ------------------------------------------------------------ start
    def start(
        self,
        env_fns: Sequence[Callable[[], Any]],
        opts: List[Dict[str, Any]],
        vec_kwargs: Dict[str, Any],
        autoreset_mode: str,
        placement_strategy: Optional[str],
        start_timeout: float,
    ) -> None:
        """Reserve the placement group, start the actors (into ``resources``)
        and wait for each to build its envs; sets ``actor_info``.

        On an error the caller shuts ``resources`` down.

        Raises
        ------
        InvalidArgumentError
            The cluster can never hold the placement group.
        WatchdogTimeoutError
            The placement group or an actor did not start within ``start_timeout`` s.
        WorkerDiedError
            An actor died while starting.
        WorkerError
            An env factory or the actor's local engine raised.
        """
        res = self.resources
        deadline = time.monotonic() + start_timeout
        if placement_strategy is not None:
            bundles = [self._bundle(o) for o in opts]
            self._check_fits(bundles, placement_strategy)
            res.pg = placement_group(bundles, strategy=placement_strategy)
            ready, _ = ray.wait([res.pg.ready()], timeout=start_timeout)
            if not ready:
                raise WatchdogTimeoutError(
                    f"the placement group {bundles} (strategy {placement_strategy}) was not placed "
                    f"within start_timeout={start_timeout} s; the cluster has "
                    f"{ray.available_resources()} available: add nodes, ask for fewer resources "
                    "per actor, or use strategy SPREAD/PACK instead of a STRICT one",
                    env_indices=range(len(env_fns)),
                )
        for a, (lo, hi) in enumerate(self.ranges):
            o = dict(opts[a])
            o["max_restarts"] = self.max_restarts
            o["max_task_retries"] = 0  # a step is not idempotent: never run it twice
            if res.pg is not None:
                o["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    placement_group=res.pg, placement_group_bundle_index=a
                )
            kw = dict(vec_kwargs)
            if "num_workers" not in kw and "envs_per_worker" not in kw:
                # The actor's CPUs; with inline=True the actor steps one share itself.
                cpus = max(1, int(o.get("num_cpus") or 1))
                kw["num_workers"] = cpus - 1 if kw.get("inline") else cpus
            kw["autoreset_mode"] = autoreset_mode
            res.actors.append(_RemoteEnvActor.options(**o).remote(env_fns[lo:hi], kw))
        refs = [actor.describe.remote() for actor in res.actors]
        infos = []
        for a, ref in enumerate(refs):
            left = max(0.0, deadline - time.monotonic())
            try:
                tag, value = ray.get(ref, timeout=left)
            except ray_exc.GetTimeoutError:
                lo, hi = self.ranges[a]
                raise WatchdogTimeoutError(
                    f"Ray actor {a} (envs {lo}..{hi - 1}) did not start within "
                    f"start_timeout={start_timeout} s (cluster resources available: "
                    f"{ray.available_resources()})",
                    env_indices=range(lo, hi),
                ) from None
            except ray_exc.RayError as exc:
                raise self._died([a], "starting", exc) from None
            if tag == "error":
                raise self.translate(a, value, "building the envs")
            infos.append(dict(value, actor=a, envs=self.ranges[a]))
        self.actor_info = infos

    # ------------------------------------------------------------ tasks
    def submit_reset(
        self,
        a: int,
        seeds: Optional[List[Optional[int]]],
        options: Optional[List[Any]],
        local_ids: Optional[List[int]],
    ) -> Any:
        """Start a reset of actor ``a``'s envs ``local_ids`` (None: all); its ObjectRef."""
        return self.resources.actors[a].reset.remote(seeds, options, local_ids)

    def submit_step(self, a: int, action_leaves: List[np.ndarray]) -> Any:
        """Start a step of actor ``a``'s envs with its rows of each action
        leaf; its ObjectRef. Ray serializes the arrays here, so the caller
        may reuse its buffers at once."""
        return self.resources.actors[a].step.remote(action_leaves)

    def submit_call(
        self, a: int, what: str, name: str, args: Any, kwargs: Any, local_ids: List[int]
    ) -> Any:
        """Start the call ``what`` of ``name`` on actor ``a``'s envs ``local_ids``; its ObjectRef."""
        return self.resources.actors[a].call.remote(what, name, args, kwargs, local_ids)

    # ------------------------------------------------------------ errors
    def translate(self, a: int, payload: ErrorReport, what: str) -> Exception:
        """An actor's error report as a vecenv exception with global env indices."""
        lo, hi = self.ranges[a]
        where = (
            f"Ray actor {a} (envs {lo}..{hi - 1}; env numbers in this message are local, add {lo})"
        )
        return payload.to_exception(prefix=f"{where} while {what}: ", offset=lo)

    def _died(self, actors: Sequence[int], what: str, exc: BaseException) -> WorkerDiedError:
        """A WorkerDiedError naming the envs of ``actors``, which are marked
        as unable to come back."""
        env_ids: List[int] = []
        parts = []
        for a in sorted(actors):
            lo, hi = self.ranges[a]
            env_ids.extend(range(lo, hi))
            info = self.actor_info[a] if a < len(self.actor_info) else {}
            parts.append(f"actor {a} (envs {list(range(lo, hi))}, node {info.get('node_ip', '?')})")
            self._dead[a] = f"{type(exc).__name__}"
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        err = WorkerDiedError(
            f"Ray {'; '.join(parts)} died while {what} ({type(exc).__name__}: {first_line}); "
            "its envs are gone: close() this vec env and build a new one, or pass max_restarts > 0",
            env_indices=env_ids,
        )
        err.__cause__ = exc
        return err

    def check_alive(self, actors: Sequence[int], what: str) -> None:
        """Raise WorkerDiedError (naming ``what``) if one of ``actors`` died
        earlier and cannot come back."""
        dead = [a for a in actors if a in self._dead]
        if dead:
            env_ids = [i for a in dead for i in range(*self.ranges[a])]
            raise WorkerDiedError(
                f"{what}: Ray actors {dead} (envs {env_ids}) died earlier and cannot be "
                "restarted: close() this vec env and build a new one",
                env_indices=env_ids,
            )

    # ------------------------------------------------------------ results
    def _fetch(
        self, refs: Dict[int, Any], what: str, limit: Optional[float]
    ) -> Tuple[Dict[int, Result], Dict[int, BaseException]]:
        """Wait for every ref (at most ``limit`` seconds; None: no limit) and
        get its result: ``({actor: (tag, value)}, {actor: Ray error})``.

        Raises PendingTimeoutError (naming the late envs) when the deadline
        passes; the refs stay valid, so the caller's call stays pending.
        """
        if not refs:
            return {}, {}
        lst = list(refs.values())
        deadline = None if limit is None else time.monotonic() + limit
        try:  # the common case: one call for all actors
            return dict(zip(refs, ray.get(lst, timeout=limit))), {}
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
            env_ids = [i for a in late_actors for i in range(*self.ranges[a])]
            # The call stays pending: waiting again picks up the same results.
            raise PendingTimeoutError(
                f"envs {env_ids} (Ray actors {late_actors}) did not finish {what} within "
                f"{limit} s; the call stays pending (wait again, or reset())",
                env_indices=env_ids,
            )
        out: Dict[int, Result] = {}
        failed: Dict[int, BaseException] = {}
        for a, ref in refs.items():
            try:
                out[a] = ray.get(ref)
            except ray_exc.RayTaskError as exc:  # the actor method itself raised
                out[a] = ("error", _error_payload(exc))
            except ray_exc.RayError as exc:  # actor, worker or node failure
                failed[a] = exc
        return out, failed

    def get(self, refs: Dict[int, Any], what: str, limit: Optional[float]) -> Dict[int, Result]:
        """Results ``(tag, value)`` of the step or reset tasks ``refs``
        (actor -> ObjectRef), waiting at most ``limit`` seconds.

        An actor that failed is reset after Ray restarted it (when
        max_restarts allows) and answers ``("restarted", reset_result)``.

        Raises
        ------
        PendingTimeoutError
            ``limit`` passed; the refs stay valid (wait for them again).
        WorkerDiedError
            An actor failed and cannot come back (max_restarts 0 or used up,
            or it did not come back within restart_timeout).
        """
        out, failed = self._fetch(refs, what, limit)
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

    def get_calls(
        self, refs: Dict[int, Any], what: str, limit: Optional[float]
    ) -> Dict[int, Result]:
        """Results ``(tag, value)`` of the call tasks ``refs`` (actor ->
        ObjectRef), waiting at most ``limit`` seconds: ``("ok", replies)``
        with one reply per local index, or ``("error", payload)``.

        Raises
        ------
        PendingTimeoutError
            ``limit`` passed; the refs stay valid (wait for them again).
        WorkerDiedError
            An actor failed. One that Ray restarts is not marked dead: its
            envs are fresh, so the caller must reset.
        """
        out, failed = self._fetch(refs, what, limit)
        if failed:
            err = self._died(list(failed), what, next(iter(failed.values())))
            for a, exc in failed.items():
                if self.max_restarts != 0 and not isinstance(exc, ray_exc.ActorDiedError):
                    self._dead.pop(a, None)  # Ray brings it back: reset() resets its envs
            raise err
        return out

    def wait_first(self, refs: List[Any], k: int, limit: Optional[float]) -> List[Any]:
        """The first ``k`` of ``refs`` to finish (fewer if ``limit`` seconds
        pass first), their results fetched to this node."""
        ready, _ = ray.wait(refs, num_returns=k, timeout=limit, fetch_local=True)
        return list(ready)

    # ------------------------------------------------------------ restarts
    def _recover(self, a: int) -> Union[Result, BaseException]:
        """Reset the envs of actor ``a`` after a Ray error (Ray restarts a
        dead actor meanwhile). Returns ``("restarted", reset_result)``, an
        env error ``("error", payload)``, or the exception that ended it."""
        deadline = time.monotonic() + self.restart_timeout
        actor = self.resources.actors[a]
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
                lo, hi = self.ranges[a]
                return WatchdogTimeoutError(
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
                self.resources.actors[a].describe.remote(), timeout=self.restart_timeout
            )
        except ray_exc.RayError:
            return
        if tag == "ok":
            self.actor_info[a] = dict(info, actor=a, envs=self.ranges[a])
