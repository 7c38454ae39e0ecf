"""The contenders: vecenv's layouts and drop-ins and the peers, how each is built and stepped (parent).

A :class:`Contender` opens a :class:`Session` for one cell (env x num_envs):
an open vectorized env and its pre-sampled actions, advanced one batch step
per ``call()``. Adding a contender is one entry in :data:`CONTENDERS` and an
``open`` function (usually :func:`_lockstep`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from vecenv._autolayout import workers_to_time

from .envs import ACTION_POOL, EnvSpec, sample_actions
from .measure import measure


class Skip(Exception):
    """A contender cannot run this cell; the message says why."""


class Session:
    """One open vectorized env and a pre-sampled action pool.

    ``call()`` advances it by one batch step and moves ``env_steps_per_call``
    env-steps. ``layout`` describes the worker layout for the JSON.
    """

    env_steps_per_call: int = 1
    layout: Dict[str, Any]

    def __init__(self):
        self.layout = {}
        self._i = 0

    def call(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass


class LockstepSession(Session):
    """``step(actions)`` on the whole batch (gymnasium, SB3, vecenv, envpool sync)."""

    def __init__(self, venv, actions: np.ndarray, num_envs: int, close=None):
        super().__init__()
        self.venv = venv
        self._step = venv.step
        self._actions = list(actions)
        self.env_steps_per_call = num_envs
        self._close = close or venv.close

    def call(self) -> None:
        i = self._i
        self._i = (i + 1) % ACTION_POOL
        self._step(self._actions[i])

    def close(self) -> None:
        self._close()


class VecenvAsyncSession(Session):
    """vecenv's ``recv()`` then ``send(actions, env_ids)``: batch_size envs per call."""

    def __init__(self, venv, actions: np.ndarray):
        super().__init__()
        self.venv = venv
        self.batch_size = venv.batch_size
        self._actions = [a[: self.batch_size] for a in actions]
        self.env_steps_per_call = self.batch_size
        venv.reset()  # starts every reset; recv collects them

    def call(self) -> None:
        i = self._i
        self._i = (i + 1) % ACTION_POOL
        ids = self.venv.recv()[4]
        self.venv.send(self._actions[i], ids)

    def close(self) -> None:
        self.venv.close()


class EnvpoolAsyncSession(Session):
    """envpool's ``recv()`` then ``send(actions, env_id)``."""

    def __init__(self, pool, actions: np.ndarray, batch_size: int):
        super().__init__()
        self.pool = pool
        self._actions = [np.ascontiguousarray(a[:batch_size]) for a in actions]
        self.env_steps_per_call = batch_size
        pool.async_reset()

    def call(self) -> None:
        i = self._i
        self._i = (i + 1) % ACTION_POOL
        info = self.pool.recv()[-1]
        self.pool.send(self._actions[i], info["env_id"])

    def close(self) -> None:
        close = getattr(self.pool, "close", None)
        if close is not None:
            close()


class RawSession(Session):
    """One env in this process, reset by hand: the ideal's unit."""

    def __init__(self, spec: EnvSpec, seed: int):
        super().__init__()
        self.env = spec.factory()()
        self.env.reset(seed=seed)
        self._actions = list(sample_actions(self.env.action_space, (1024,), seed))
        self._step = self.env.step
        self._reset = self.env.reset

    def call(self) -> None:
        i = self._i
        self._i = (i + 1) % 1024
        _, _, terminated, truncated, _ = self._step(self._actions[i])
        if terminated or truncated:
            self._reset()

    def close(self) -> None:
        self.env.close()


@dataclasses.dataclass
class Ctx:
    spec: EnvSpec
    num_envs: int
    actions: np.ndarray  # (ACTION_POOL, num_envs, *action_shape)
    cores: int
    trial_seconds: float
    seed: int = 0


@dataclasses.dataclass
class Contender:
    """One way of stepping ``num_envs`` envs. ``open`` raises ImportError when its
    package is missing and Skip when it cannot run this env."""

    name: str
    label: str
    open: Callable[[Ctx], Session]
    default: bool = True
    note: str = ""
    vecenv: bool = False  # one of ours (not a peer)
    max_num_envs: Optional[int] = None  # skipped above (one process per env)


def _vecenv_layout(venv) -> Dict[str, Any]:
    ranges = getattr(venv, "_ranges", None)
    out = {"spin_s": getattr(venv, "spin", None)}
    if ranges:
        out["num_workers"] = 0 if getattr(venv, "in_process", False) else len(ranges)
        out["envs_per_worker"] = max(hi - lo for lo, hi in ranges)
    layout = getattr(venv, "layout", None)  # ShmemVecEnv.layout: how it was chosen
    if getattr(layout, "inline", False):  # the caller steps the first share
        out["num_workers"] = layout.num_workers
        out["inline"] = True
    if layout is not None and getattr(layout, "step_us", None) is not None:
        out["num_workers"] = layout.num_workers
        out["envs_per_worker"] = layout.envs_per_worker
        out["step_us"] = layout.step_us
        out["predicted_batch_us"] = layout.predicted_batch_us
        out["why"] = layout.why
    return out


def _open_vecenv(ctx: Ctx, **layout) -> Session:
    import vecenv

    venv = vecenv.ShmemVecEnv([ctx.spec.factory()] * ctx.num_envs, **layout)
    try:
        venv.seed(ctx.seed)
        venv.reset()
    except BaseException:
        venv.close()
        raise
    s = LockstepSession(venv, ctx.actions, ctx.num_envs)
    s.layout = _vecenv_layout(venv)
    return s


def best_layout_candidates(num_envs: int, cores: int) -> List[int]:
    """Worker counts that ``vecenv_best`` (and the multi-agent cells) try: those
    that the auto layout's model would time for any env
    (:func:`vecenv._autolayout.workers_to_time` with ``cpu_fraction`` 0: 1, the
    powers of two, cores-1, cores, up to 4 workers per core for an env that
    waits). ``vecenv_best`` is what the ``auto_vs_best`` target holds
    ``vecenv_auto`` against, so it covers every count the model may choose."""
    return workers_to_time(num_envs, cores, cpu_fraction=0.0)


def _open_vecenv_best(ctx: Ctx) -> Session:
    """Try each candidate layout for ctx.trial_seconds and keep the fastest."""
    trials = {}
    for w in best_layout_candidates(ctx.num_envs, ctx.cores):
        s = _open_vecenv(ctx, num_workers=w)
        try:
            measure(s, ctx.trial_seconds / 2, warmup_calls=3)  # warm-up
            steps, elapsed, _ = measure(s, ctx.trial_seconds, warmup_calls=0)
            trials[w] = steps / elapsed
        finally:
            s.close()
    best = max(trials, key=lambda w: trials[w])
    s = _open_vecenv(ctx, num_workers=best)
    s.layout["trials_env_steps_per_s"] = {str(k): round(v, 1) for k, v in trials.items()}
    return s


def _open_vecenv_auto(ctx: Ctx) -> Session:
    """``num_workers="auto"``: the vec env times one env and picks its layout;
    the choice (``venv.layout``) goes into the JSON."""
    return _open_vecenv(ctx, num_workers="auto")


def _open_vecenv_async(ctx: Ctx) -> Session:
    import vecenv
    from vecenv._cpus import usable_cpus

    bs = max(1, ctx.num_envs // 2)
    # The env alone, no policy between the calls: one worker per core (the
    # default for partial batches leaves a core to a policy; rollout.py times that).
    workers = min(ctx.num_envs, usable_cpus())
    venv = vecenv.ShmemVecEnv(
        [ctx.spec.factory()] * ctx.num_envs, batch_size=bs, num_workers=workers
    )
    try:
        venv.seed(ctx.seed)
        s = VecenvAsyncSession(venv, ctx.actions)
    except BaseException:
        venv.close()
        raise
    s.layout = {**_vecenv_layout(venv), "batch_size": bs}
    return s


def _lockstep(ctx: Ctx, cls, api: str, **kwargs) -> Session:
    """Build ``cls(env_fns, **kwargs)`` and reset it through its API: "gym"
    (``reset(seed=)``) or "sb3" (``seed()`` then ``reset()``)."""
    venv = cls([ctx.spec.factory()] * ctx.num_envs, **kwargs)
    try:
        if api == "gym":
            venv.reset(seed=ctx.seed)
        else:
            venv.seed(ctx.seed)
            venv.reset()
    except BaseException:
        venv.close()
        raise
    return LockstepSession(venv, ctx.actions, ctx.num_envs)


def _open_vecenv_gym(ctx: Ctx) -> Session:
    from vecenv import AsyncVectorEnv

    return _lockstep(ctx, AsyncVectorEnv, "gym", shared_memory=True)


def _open_vecenv_sb3(ctx: Ctx) -> Session:
    from vecenv.sb3 import SubprocVecEnv

    return _lockstep(ctx, SubprocVecEnv, "sb3")


def _open_vecenv_ray(ctx: Ctx) -> Session:
    import ray

    from vecenv.ray import RayVecEnv

    # Keep Ray on loopback (see benchmarks/README.md: run inside a loopback-only
    # network namespace); this only starts a local single-node instance.
    if not ray.is_initialized():
        # address="local" always starts a new instance: a stale
        # ray_current_cluster file would make a bare init join a dead cluster.
        ray.init(
            address="local",
            num_cpus=ctx.cores,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
        )
    # One actor holding every core, so its ShmemVecEnv gets its default workers.
    return _lockstep(ctx, RayVecEnv, "sb3", num_actors=1, actor_options={"num_cpus": ctx.cores})


def _open_gym_sync(ctx: Ctx) -> Session:
    from gymnasium.vector import SyncVectorEnv

    return _lockstep(ctx, SyncVectorEnv, "gym")


def _open_gym_async(ctx: Ctx) -> Session:
    from gymnasium.vector import AsyncVectorEnv

    return _lockstep(ctx, AsyncVectorEnv, "gym", shared_memory=True)


def _open_sb3(ctx: Ctx) -> Session:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    return _lockstep(ctx, SubprocVecEnv, "sb3")


def _envpool_make(ctx: Ctx, batch_size: int):
    import envpool

    if ctx.spec.envpool_id is None:
        raise Skip(f"envpool has no {ctx.spec.label}")
    return envpool.make(
        ctx.spec.envpool_id,
        env_type="gymnasium",
        num_envs=ctx.num_envs,
        batch_size=batch_size,
        seed=ctx.seed,
        **ctx.spec.envpool_kwargs,
    )


def _envpool_actions(pool, actions: np.ndarray) -> np.ndarray:
    dtype = pool.action_space.dtype
    return np.ascontiguousarray(actions.astype(dtype if dtype != np.int64 else np.int32))


def _open_envpool_sync(ctx: Ctx) -> Session:
    pool = _envpool_make(ctx, ctx.num_envs)
    pool.reset()
    s = LockstepSession(pool, _envpool_actions(pool, ctx.actions), ctx.num_envs, close=lambda: None)
    s.layout = {"config": _envpool_config(pool)}
    return s


def _open_envpool_async(ctx: Ctx) -> Session:
    bs = max(1, ctx.num_envs // 2)
    pool = _envpool_make(ctx, bs)
    s = EnvpoolAsyncSession(pool, _envpool_actions(pool, ctx.actions), bs)
    s.layout = {"config": _envpool_config(pool), "batch_size": bs}
    return s


def _envpool_config(pool) -> Dict[str, Any]:
    try:
        cfg = dict(pool.spec.config._asdict())
    except AttributeError:
        return {}
    cfg.pop("base_path", None)
    return {k: v for k, v in cfg.items() if isinstance(v, (int, float, str, bool))}


# Contenders with one process per env run up to this many envs (256 processes
# on 2 cores take longer to start than to measure).
PROCESS_PER_ENV_MAX = 64

CONTENDERS: Dict[str, Contender] = {
    c.name: c
    for c in [
        Contender(
            "vecenv",
            "vecenv lockstep (default layout)",
            functools.partial(_open_vecenv),
            vecenv=True,
            note='ShmemVecEnv with its default layout (num_workers="auto" in lockstep)',
        ),
        Contender(
            "vecenv_best",
            "vecenv lockstep (best layout)",
            _open_vecenv_best,
            vecenv=True,
            note="ShmemVecEnv with the fastest num_workers among those the auto layout's model "
            "would time for any env (1, powers of two, cores-1, cores, up to 4 per core), "
            "picked by a short trial before the rounds",
        ),
        Contender(
            "vecenv_auto",
            'vecenv lockstep (num_workers="auto")',
            _open_vecenv_auto,
            vecenv=True,
            note='ShmemVecEnv(num_workers="auto"): it times one env and chooses its layout',
        ),
        Contender(
            "vecenv_inprocess",
            "vecenv lockstep in-process (num_workers=0)",
            functools.partial(_open_vecenv, num_workers=0),
            vecenv=True,
            note="ShmemVecEnv(num_workers=0): the same engine, envs stepped in the calling process",
        ),
        Contender(
            "vecenv_inline",
            "vecenv lockstep, the caller stepping a share (inline=True)",
            functools.partial(_open_vecenv, inline=True),
            vecenv=True,
            note="ShmemVecEnv(inline=True): the caller steps one share of the envs while one "
            "worker per other usable core steps the rest",
        ),
        Contender(
            "vecenv_async",
            "vecenv send/recv (batch num_envs/2)",
            _open_vecenv_async,
            vecenv=True,
            note="ShmemVecEnv(batch_size=num_envs//2): recv() then send(actions, env_ids)",
        ),
        Contender(
            "vecenv_gym",
            "vecenv.AsyncVectorEnv",
            _open_vecenv_gym,
            vecenv=True,
            note="vecenv's gymnasium drop-in",
        ),
        Contender(
            "vecenv_sb3",
            "vecenv.sb3.SubprocVecEnv",
            _open_vecenv_sb3,
            vecenv=True,
            note="vecenv's stable-baselines3 drop-in",
        ),
        Contender(
            "vecenv_ray",
            "vecenv.ray.RayVecEnv (1 actor)",
            _open_vecenv_ray,
            default=False,
            vecenv=True,
            note="opt-in: starts a local Ray instance; run in a loopback-only network namespace",
        ),
        Contender("gym_sync", "gymnasium SyncVectorEnv", _open_gym_sync),
        Contender(
            "gym_async",
            "gymnasium AsyncVectorEnv (shm)",
            _open_gym_async,
            note="AsyncVectorEnv(shared_memory=True); the reference of the ratios",
            max_num_envs=PROCESS_PER_ENV_MAX,
        ),
        Contender("sb3", "SB3 SubprocVecEnv", _open_sb3, max_num_envs=PROCESS_PER_ENV_MAX),
        Contender(
            "envpool_sync",
            "envpool sync",
            _open_envpool_sync,
            note="envpool.make(num_envs=n, batch_size=n), its default threads",
        ),
        Contender(
            "envpool_async",
            "envpool async (batch num_envs/2)",
            _open_envpool_async,
            note="envpool.make(num_envs=n, batch_size=n//2): recv() then send()",
        ),
    ]
}
REFERENCE = "gym_async"
QUICK_CONTENDERS = ["vecenv", "vecenv_best", "gym_sync", "gym_async"]


def contender_fits(name: str, n: int) -> Optional[str]:
    """None when contender ``name`` runs ``n`` envs, else why it does not."""
    cap = CONTENDERS[name].max_num_envs
    if cap is not None and n > cap:
        return f"one process per env: run up to {cap} envs, not {n}"
    return None


def is_vecenv(name: str) -> bool:
    """One of vecenv's contenders (a name a report has but this run lacks: by its prefix)."""
    c = CONTENDERS.get(name)
    return c.vecenv if c is not None else name.startswith("vecenv")


def lockstep_vecenv(name: str, s: Optional[Session]) -> bool:
    """A vecenv contender that steps all envs per call in worker processes
    with a known layout: the wait/wake floor for its worker count is its
    overhead's floor (in process, ``num_workers=0``, nothing waits or wakes)."""
    return (
        s is not None
        and name in CONTENDERS
        and CONTENDERS[name].vecenv
        and (s.layout.get("num_workers") or 0) >= 1
        and "batch_size" not in s.layout
    )
