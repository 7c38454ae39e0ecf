#!/usr/bin/env python3
"""vecenv benchmark suite: real environments, vecenv against its peers, one run.

Runs in the parent process only (workers are the contenders' own). For every
environment and every ``num_envs`` it opens each installed contender, warms it
up, then measures all of them in several interleaved rounds (the order rotates
each round) so that noise on a shared machine hits every contender alike. It
reports medians with their spread, ratios against gymnasium's
``AsyncVectorEnv`` and against the ideal (usable cores x one raw env's
steps/s, measured in the same run), a per-batch-step latency for ``noop``
next to the wait/wake floor of a small C program, and the targets of issue 16
as pass/short from the run's own ratios. It ends with what to conclude for this machine:
per env, the fastest contender, the vecenv layout to use, and where
gymnasium's in-process ``SyncVectorEnv`` is as fast or faster.

Usage::

    python benchmarks/run.py                      # the default suite (it states its duration)
    python benchmarks/run.py --quick              # a smoke test (about 10-20 s)
    python benchmarks/run.py --envs noop,cartpole --num-envs 8,16 --contenders vecenv,gym_async
    python benchmarks/run.py --list               # contenders and environments, and what is installed

Writes ``benchmarks/results/local/run-<UTC time>.json``, ``.md`` (a summary) and ``.png`` (git-ignored;
``--out`` to choose, ``--publish`` for the committed ``results/latest.json``).
See ``benchmarks/README.md`` for the method.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import importlib
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from vecenv._autolayout import _nbytes
from vecenv.bench import fmt_rate  # the installed vecenv (benchmarks/ heads sys.path)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LOCAL_OUT = HERE / "results" / "local"  # a user's runs (git-ignored)
PUBLISHED_OUT = HERE / "results" / "latest.json"  # the committed run (--publish)
AS_FAST = 0.95  # "as fast or faster": within 5% of the other's median
ACTION_POOL = 64  # pre-sampled action batches per session, used in turn


# --------------------------------------------------------------------- machine
def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> Optional[int]:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine_info() -> Dict[str, Any]:
    physical = None
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:
        pass
    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": physical,
        "usable_cores": usable_cores(),
        "memory_bytes": memory_bytes(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "load_average_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


VERSION_PACKAGES = (
    "vecenv",
    "numpy",
    "gymnasium",
    "stable-baselines3",
    "envpool",
    "ale-py",
    "mujoco",
    "torch",
    "ray",
    "cloudpickle",
)


def versions() -> Dict[str, Optional[str]]:
    out = {}
    for name in VERSION_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    try:
        import vecenv

        out["vecenv_path"] = os.path.dirname(vecenv.__file__)
    except ImportError as exc:
        out["vecenv_path"] = f"not importable: {exc}"
    cc = shutil.which("cc")
    if cc:
        try:
            out["cc"] = subprocess.run(
                [cc, "--version"], capture_output=True, text=True, timeout=10
            ).stdout.splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            out["cc"] = None
    return out


def git_info() -> Dict[str, Any]:
    def git(*args):
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10
        )

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return {"commit": None}
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return {"commit": head.stdout.strip(), "dirty": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}


# --------------------------------------------------------------------- environments
def make_env(env_id: str, kwargs: Dict[str, Any]):
    """Build one env; a module-level function so every engine can pickle the
    factory (cloudpickle copies it by value from ``__main__``)."""
    import gymnasium

    # The envs' own warnings (MuJoCo deprecations...) would bury the progress
    # lines; this runs in every contender's workers too.
    warnings.filterwarnings("ignore")
    if env_id.startswith("ALE/"):
        import ale_py

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner per env
        gymnasium.register_envs(ale_py)
    elif env_id.startswith("vecenv/"):
        import vecenv.envs  # noqa: F401  (registers the vecenv/ ids)
    return gymnasium.make(env_id, **kwargs)


@dataclasses.dataclass
class EnvSpec:
    key: str  # the name on the command line
    label: str  # the name in tables
    gym_id: str
    gym_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    envpool_id: Optional[str] = None
    envpool_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
    envpool_note: str = ""
    install_hint: str = ""
    # The default suite's sizes above this are left out for this env (the
    # large sizes cost a minute per cell with costly envs); --num-envs runs
    # whatever it names.
    max_default_num_envs: int = 16

    def factory(self) -> Callable[[], Any]:
        return functools.partial(make_env, self.gym_id, dict(self.gym_kwargs))


# Gymnasium's ALE/Pong-v5: frameskip 4, sticky actions p=0.25, RGB 210x160x3,
# no noop starts, no fire reset, last frame only, 108000 frames (27000 steps) per
# episode. EnvPool's Pong-v5 is set as close to that as it allows; what differs
# is listed in ENVPOOL_PONG_NOTE and in benchmarks/README.md.
ENVPOOL_PONG_KWARGS = {
    "frame_skip": 4,
    "repeat_action_probability": 0.25,
    "stack_num": 1,
    "gray_scale": False,
    "img_height": 210,
    "img_width": 160,
    "noop_max": 1,  # envpool's minimum (0 crashes it); it then takes exactly 1 no-op at reset
    "use_fire_reset": False,
    "episodic_life": False,
    "reward_clip": False,
    "max_episode_steps": 27000,
}
ENVPOOL_PONG_NOTE = (
    "envpool Pong-v5 set close to ALE/Pong-v5 (frame_skip 4, sticky actions 0.25, RGB 210x160, "
    "no stacking, no fire reset, no reward clip, 27000 steps per episode); still different: "
    "it max-pools the last two frames of each skip, passes the frame through its resize at the "
    "same size, returns channels-first (3, 210, 160), and takes 1 no-op step at reset"
)

ENVS: Dict[str, EnvSpec] = {
    "noop": EnvSpec("noop", "noop", "vecenv/Noop-v0", max_default_num_envs=256),
    "cartpole": EnvSpec(
        "cartpole",
        "CartPole-v1",
        "CartPole-v1",
        envpool_id="CartPole-v1",
        envpool_note="envpool CartPole-v1: same dynamics, its own C++ implementation",
        max_default_num_envs=256,
    ),
    "bigobs": EnvSpec("bigobs", "bigobs", "vecenv/BigObs-v0"),
    "pong": EnvSpec(
        "pong",
        "ALE/Pong-v5",
        "ALE/Pong-v5",
        envpool_id="Pong-v5",
        envpool_kwargs=ENVPOOL_PONG_KWARGS,
        envpool_note=ENVPOOL_PONG_NOTE,
        install_hint='pip install ".[atari]"',
    ),
    # Heavy-tailed step time (issue 5): 50 us of work, one step in twenty 2 ms.
    # Lockstep waits for the slowest env of every batch; partial batches
    # (vecenv_async, envpool_async) do not.
    "heavytail": EnvSpec("heavytail", "heavytail", "vecenv/Sleep-v0"),
    "halfcheetah": EnvSpec(
        "halfcheetah",
        "HalfCheetah-v5",
        "HalfCheetah-v5",
        install_hint='pip install ".[mujoco]"',
    ),
}
ENV_ALIASES = {spec.gym_id.lower(): key for key, spec in ENVS.items()}
ENV_ALIASES.update({spec.label.lower(): key for key, spec in ENVS.items()})


def probe_env(spec: EnvSpec):
    """Make one env in this process: its spaces, or the reason it cannot run."""
    try:
        env = spec.factory()()
    except Exception as exc:
        hint = f" ({spec.install_hint})" if spec.install_hint else ""
        return None, f"cannot make {spec.gym_id}: {type(exc).__name__}: {exc}{hint}"
    spaces = (env.observation_space, env.action_space)
    env.close()
    return spaces, None


def time_one_env(spec: EnvSpec) -> float:
    """Seconds to build, reset and close one env (imports already done)."""
    t0 = time.perf_counter()
    env = spec.factory()()
    env.reset(seed=0)
    env.close()
    return time.perf_counter() - t0


def sample_actions(space, shape_prefix: Tuple[int, ...], seed: int) -> np.ndarray:
    """Pre-sample actions: an array of shape ``shape_prefix + space.shape``."""
    space.seed(seed)
    n = int(np.prod(shape_prefix))
    flat = [space.sample() for _ in range(n)]
    return np.asarray(flat).reshape(*shape_prefix, *space.shape)


# --------------------------------------------------------------------- sessions
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


# --------------------------------------------------------------------- contenders
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


def _layout_candidates(num_envs: int, cores: int) -> List[int]:
    """Worker counts worth trying: one worker (parent + 1 may both spin), one
    fewer than the cores, one per core, two per core, one per env (up to 64
    envs: beyond, that many processes only measure the machine's memory)."""
    cands = {1, max(1, cores - 1), cores, 2 * cores}
    if num_envs <= 64:
        cands.add(num_envs)
    return sorted(c for c in cands if 1 <= c <= num_envs)


def _open_vecenv_best(ctx: Ctx) -> Session:
    """Try each candidate layout for ctx.trial_seconds and keep the fastest."""
    trials = {}
    for w in _layout_candidates(ctx.num_envs, ctx.cores):
        s = _open_vecenv(ctx, num_workers=w)
        try:
            measure(s, ctx.trial_seconds / 2, warmup_calls=3)  # warm-up
            steps, elapsed, _ = measure(s, ctx.trial_seconds, warmup_calls=0)
            trials[w] = steps / elapsed
        finally:
            s.close()
    best = max(trials, key=trials.get)
    s = _open_vecenv(ctx, num_workers=best)
    s.layout["trials_env_steps_per_s"] = {str(k): round(v, 1) for k, v in trials.items()}
    return s


def _open_vecenv_auto(ctx: Ctx) -> Session:
    """``num_workers="auto"``: the vec env times one env and picks its layout;
    the choice (``venv.layout``) goes into the JSON."""
    return _open_vecenv(ctx, num_workers="auto")


def _open_vecenv_async(ctx: Ctx) -> Session:
    import vecenv

    bs = max(1, ctx.num_envs // 2)
    venv = vecenv.ShmemVecEnv([ctx.spec.factory()] * ctx.num_envs, batch_size=bs)
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
    from vecenv import AsyncVectorEnv  # built by another issue; ImportError until then

    return _lockstep(ctx, AsyncVectorEnv, "gym", shared_memory=True)


def _open_vecenv_sb3(ctx: Ctx) -> Session:
    from vecenv.sb3 import SubprocVecEnv  # built by another issue; ImportError until then

    return _lockstep(ctx, SubprocVecEnv, "sb3")


def _open_vecenv_ray(ctx: Ctx) -> Session:
    import ray

    from vecenv.ray import RayVecEnv  # built by another issue; ImportError until then

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
            note="ShmemVecEnv with its default worker layout (one worker per usable core)",
        ),
        Contender(
            "vecenv_best",
            "vecenv lockstep (best layout)",
            _open_vecenv_best,
            vecenv=True,
            note="ShmemVecEnv with the fastest num_workers among 1, cores-1, cores, 2*cores, "
            "num_envs, picked by a short trial before the rounds",
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


# --------------------------------------------------------------------- measuring
def measure(session: Session, seconds: float, warmup_calls: int = 3):
    """Call ``session.call()`` for ``seconds`` after ``warmup_calls`` untimed calls.

    Returns (env_steps, elapsed_s, per_call_latencies_s: list of float).
    """
    call = session.call
    for _ in range(warmup_calls):
        call()
    perf = time.perf_counter
    lat = []
    append = lat.append
    t0 = t = perf()
    deadline = t0 + seconds
    while t < deadline:
        call()
        t1 = perf()
        append(t1 - t)
        t = t1
    return len(lat) * session.env_steps_per_call, t - t0, lat


def summarize(values: List[float]) -> Dict[str, float]:
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {
        "median": med,
        "min": lo,
        "max": hi,
        "spread_pct": 100.0 * (hi - lo) / (2 * med) if med > 0 else 0.0,
        "rounds": values,
    }


# --------------------------------------------------------------------- wait/wake floor
class Floor:
    """The C wait/wake round trip (benchmarks/wakeup_floor.c), compiled once."""

    def __init__(self, iterations: int):
        self.iterations = iterations
        self.binary: Optional[str] = None
        self.note: Optional[str] = None
        self._tmp = None

    def build(self) -> None:
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            self.note = "no C compiler (cc): wait/wake floor skipped"
            return
        if not sys.platform.startswith("linux"):
            self.note = "the wait/wake floor uses Linux futexes: skipped on this platform"
            return
        self._tmp = tempfile.TemporaryDirectory(prefix="vecenv-bench-")
        out = os.path.join(self._tmp.name, "wakeup_floor")
        r = subprocess.run(
            [cc, "-O2", "-o", out, str(HERE / "wakeup_floor.c")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode != 0:
            self.note = f"compiling wakeup_floor.c failed: {r.stderr.strip()[:300]}"
            return
        self.binary = out

    def measure(self, workers: int, spin_s: float) -> Optional[Dict[str, Any]]:
        """One run of ``iterations`` round trips with ``workers`` processes that
        spin ``spin_s`` seconds before they sleep; None when unavailable."""
        if self.binary is None:
            return None
        try:
            r = subprocess.run(
                [self.binary, str(workers), str(self.iterations), f"{spin_s * 1e6:.3f}"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if r.returncode != 0:
                raise subprocess.SubprocessError(r.stderr.strip()[:300])
            return json.loads(r.stdout)
        except (subprocess.SubprocessError, ValueError) as exc:
            self.note = f"wakeup_floor failed: {exc}"
            return None

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


# --------------------------------------------------------------------- output
class Console:
    """rich when installed, plain lines otherwise."""

    def __init__(self):
        try:
            import rich.console

            # Not a terminal (a log file): wide lines instead of wrapped tables.
            self.rich = rich.console.Console(width=None if sys.stdout.isatty() else 140)
        except ImportError:
            self.rich = None

    def print(self, *args) -> None:
        if self.rich is not None:
            self.rich.print(*args)
        else:
            print(*[_plain(a) for a in args])

    def progress(self, total: int):
        if self.rich is not None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            p = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.rich,
                transient=False,
            )
            return _RichProgress(p, total)
        return _PlainProgress(total)

    def table(self, title: str, columns: List[str], rows: List[List[str]]) -> None:
        if self.rich is not None:
            from rich.table import Table

            t = Table(title=title, show_lines=False)
            for i, c in enumerate(columns):
                t.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
            for r in rows:
                t.add_row(*r)
            self.rich.print(t)
        else:
            print(f"\n{title}")
            print(" | ".join(columns))
            for r in rows:
                print(" | ".join(_plain(x).replace("\n", " ") for x in r))


def _plain(x) -> str:
    import re

    return re.sub(r"\[/?[a-z ]+\]", "", str(x))


class _RichProgress:
    def __init__(self, progress, total):
        self.p = progress
        self.p.start()
        self.task = self.p.add_task("starting", total=total)

    def describe(self, text: str) -> None:
        self.p.update(self.task, description=text)

    def advance(self, n: int = 1) -> None:
        self.p.advance(self.task, n)

    def close(self) -> None:
        self.p.stop()


class _PlainProgress:
    def __init__(self, total):
        self.total, self.done = total, 0

    def describe(self, text: str) -> None:
        pass  # without rich: only the line after each cell (run())

    def advance(self, n: int = 1) -> None:
        self.done += n

    def close(self) -> None:
        pass


def fmt_ratio(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


# --------------------------------------------------------------------- the run
def parse_list(text: Optional[str], kind=str) -> Optional[List[Any]]:
    if text is None:
        return None
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="vecenv benchmark suite: env-steps/s of vecenv and its peers on real envs.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: cartpole x8, 4 contenders, 1 round of 0.2 s (about 10-20 s)",
    )
    p.add_argument(
        "--envs",
        help=f"comma-separated envs from {sorted(ENVS)} (default: all)",
    )
    p.add_argument(
        "--num-envs",
        help="comma-separated num_envs values (default 2,4,8,16,64,256; 64 and 256 only for the "
        "cheap envs noop and cartpole)",
    )
    p.add_argument(
        "--contenders",
        help=f"comma-separated contenders from {list(CONTENDERS)}, or 'all' "
        "(default: every contender but the opt-in ones)",
    )
    p.add_argument("--rounds", type=int, help="interleaved timed rounds (default 3; quick 1)")
    p.add_argument(
        "--seconds", type=float, help="seconds per timed round per contender (default 0.5)"
    )
    p.add_argument(
        "--warmup", type=float, help="seconds of warm-up per contender before the rounds"
    )
    p.add_argument(
        "--floor-iterations", type=int, help="round trips of the C wait/wake floor (default 3000)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out",
        type=Path,
        help="JSON path; the PNGs go next to it (default: a new file in "
        "benchmarks/results/local/, which git ignores)",
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="write the committed benchmarks/results/latest.json and latest.png",
    )
    p.add_argument(
        "--targets",
        action="store_true",
        help="print the project's targets as pass/short even when the run measured none "
        "(they are printed whenever it measured one, and are always in the JSON and the .md)",
    )
    p.add_argument("--no-plot", action="store_true", help="skip the PNGs")
    p.add_argument(
        "--multi-agent",
        choices=("auto", "on", "off"),
        default="auto",
        help="also run benchmarks/multi_agent.py (simple_spread and a cheap env, agent-steps/s, "
        "vs SuperSuit and PufferLib); auto: in the default suite when pettingzoo is installed",
    )
    p.add_argument("--list", action="store_true", help="list envs and contenders, then exit")
    args = p.parse_args(argv)
    q = args.quick
    if args.rounds is None:
        args.rounds = 1 if q else 3
    if args.seconds is None:
        args.seconds = 0.2 if q else 0.5
    if args.warmup is None:
        args.warmup = 0.05 if q else 0.2
    if args.floor_iterations is None:
        args.floor_iterations = 300 if q else 3000
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0 or args.floor_iterations < 1:
        p.error("--rounds, --seconds and --floor-iterations must be positive, --warmup >= 0")
    if args.out is not None and args.publish:
        p.error("--out and --publish both name the output: pick one")
    if args.publish:
        args.out = PUBLISHED_OUT
    elif args.out is None:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        args.out = LOCAL_OUT / f"run-{stamp}.json"
    envs = parse_list(args.envs) or (["cartpole"] if q else list(ENVS))
    keys = []
    for e in envs:
        k = e if e in ENVS else ENV_ALIASES.get(e.lower())
        if k is None:
            p.error(f"unknown env {e!r}; choose from {sorted(ENVS)}")
        keys.append(k)
    args.envs = keys
    args.num_envs_given = args.num_envs is not None
    try:
        args.num_envs = parse_list(args.num_envs, int) or ([8] if q else list(DEFAULT_NUM_ENVS))
    except ValueError:
        p.error("--num-envs takes comma-separated integers")
    if any(n < 1 for n in args.num_envs):
        p.error("--num-envs values must be >= 1")
    names = parse_list(args.contenders)
    if names == ["all"]:
        names = list(CONTENDERS)
    elif not names:
        names = QUICK_CONTENDERS if q else [c.name for c in CONTENDERS.values() if c.default]
    bad = [n for n in names if n not in CONTENDERS]
    if bad:
        p.error(f"unknown contenders {bad}; choose from {list(CONTENDERS)}")
    args.contenders = names
    return args


DEFAULT_NUM_ENVS = (2, 4, 8, 16, 64, 256)


def suite_cells(args) -> List[Tuple[str, int]]:
    """(env key, num_envs) of every cell the run measures: every env at every
    size, except that the default sizes stop at each env's
    ``max_default_num_envs`` (sizes given with --num-envs are all run)."""
    given = getattr(args, "num_envs_given", True)
    return [
        (k, n)
        for k in args.envs
        for n in args.num_envs
        if given or n <= ENVS[k].max_default_num_envs
    ]


def contender_fits(name: str, n: int) -> Optional[str]:
    """None when contender ``name`` runs ``n`` envs, else why it does not."""
    cap = CONTENDERS[name].max_num_envs
    if cap is not None and n > cap:
        return f"one process per env: run up to {cap} envs, not {n}"
    return None


def list_everything(console: Console) -> None:
    rows = []
    for key, spec in ENVS.items():
        _, why = probe_env(spec)
        rows.append([key, spec.gym_id, "yes" if why is None else f"no: {why}"])
    console.table("environments", ["name", "gymnasium id", "available"], rows)
    rows = []
    for c in CONTENDERS.values():
        rows.append([c.name, c.label, "yes" if c.default else "opt-in", c.note])
    console.table("contenders", ["name", "what", "default", "note"], rows)


# Seconds to open and close a contender with n envs, for the up-front estimate
# (a 2-core VM; the ETA after each cell rescales by what the run measured).
OPEN_CLOSE_S: Dict[str, Callable[[int], float]] = {
    "gym_sync": lambda n: 0.01,
    "gym_async": lambda n: 0.1 + 0.02 * n,  # one process per env (fork)
    "sb3": lambda n: 0.3 + 0.05 * n,  # one process per env (forkserver, SB3 preloaded)
    "vecenv_sb3": lambda n: 0.3,
    "vecenv_ray": lambda n: 8.0,
}


IN_PROCESS = ("gym_sync", "envpool_sync", "envpool_async")


def estimate_cell_s(args, key: str, n: int, cores: int, make_s: float = 0.0) -> float:
    """Predicted seconds for one cell: every session's warm-up and rounds, the
    layout trials of vecenv_best, opening and closing, and building the envs
    (``make_s`` seconds each, as the probe measured; in parallel on the cores
    for multiprocess contenders)."""
    per_session = args.warmup + args.rounds * (args.seconds + 0.01)
    total = per_session + make_s  # the raw env
    build = n * make_s / cores
    for name in args.contenders:
        if contender_fits(name, n) is not None:
            continue
        total += per_session + OPEN_CLOSE_S.get(name, lambda n: 0.15)(n)
        total += n * make_s if name in IN_PROCESS else build
        if name == "vecenv_auto":  # its probe: one env built and stepped
            total += make_s + 0.1
        if name == "vecenv_best":
            trial = max(args.seconds / 2, 0.05)
            total += len(_layout_candidates(n, cores)) * (1.5 * trial + 0.15 + build)
    if key == "noop":
        total += args.rounds * 0.1  # the C floor
    return total


def fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"


def _preload_sb3_in_forkserver(contenders: List[str]) -> None:
    """SB3's SubprocVecEnv starts one forkserver process per env, and each
    imported SB3 (and PyTorch) again: 16 envs took 30 s to open on 2 cores.
    Preloaded in the forkserver, each child starts with it (0.7 s for 16);
    the stepping is the same."""
    if any(c in ("sb3", "vecenv_sb3") for c in contenders):
        import multiprocessing

        if importlib.util.find_spec("stable_baselines3") is not None:
            multiprocessing.set_forkserver_preload(
                ["__main__", "stable_baselines3.common.vec_env.subproc_vec_env"]
            )


def run(args) -> Dict[str, Any]:
    # The envs' warnings, here and in workers started with spawn or forkserver.
    warnings.filterwarnings("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"
    _preload_sb3_in_forkserver(args.contenders)
    console = Console()
    cores = usable_cores()
    started = time.time()
    report: Dict[str, Any] = {
        "schema": 1,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [sys.executable, *sys.argv],
        "args": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "list"
        },
        "machine": machine_info(),
        "versions": versions(),
        "git": git_info(),
        "method": {
            "seconds_per_round": args.seconds,
            "rounds": args.rounds,
            "warmup_s": args.warmup,
            "order": "interleaved: every round measures every contender of a cell, order rotated",
            "ideal": "min(usable cores, num_envs) x one raw env's steps/s in the same cell",
            "reference": REFERENCE,
            "action_pool": ACTION_POOL,
        },
        "contenders": {
            n: {"label": CONTENDERS[n].label, "note": CONTENDERS[n].note} for n in args.contenders
        },
        "envs": {},
        "results": [],
        "cells": [],
        "floor": [],
        "skipped": [],
        "notes": [],
    }
    console.print(
        f"[bold]vecenv benchmark[/bold]: {report['machine']['cpu_model']}, {cores} usable cores, "
        f"envs {args.envs}, num_envs {args.num_envs}, {args.rounds} round(s) x {args.seconds}s"
    )

    # Which envs and contenders can run at all.
    env_specs = []
    make_s: Dict[str, float] = {}  # seconds to build, reset and close one env
    for key in args.envs:
        spec = ENVS[key]
        spaces, why = probe_env(spec)
        if why is None:
            make_s[key] = time_one_env(spec)
        if why is not None:
            report["skipped"].append({"env": spec.label, "reason": why})
            console.print(f"[yellow]skip env {spec.label}[/yellow]: {why}")
            continue
        env_specs.append((spec, spaces))
        report["envs"][spec.label] = {
            "gym_id": spec.gym_id,
            "observation_space": str(spaces[0]),
            "action_space": str(spaces[1]),
            "envpool": spec.envpool_id,
            "envpool_kwargs": spec.envpool_kwargs,
            "envpool_note": spec.envpool_note,
        }

    floor = Floor(args.floor_iterations)
    floor.build()
    if floor.note:
        report["notes"].append(floor.note)
        console.print(f"[yellow]{floor.note}[/yellow]")

    wanted = set(suite_cells(args))
    cells = [
        (spec, spaces, n)
        for spec, spaces in env_specs
        for n in args.num_envs
        if (spec.key, n) in wanted
    ]
    plan = [estimate_cell_s(args, spec.key, n, cores, make_s[spec.key]) for spec, _, n in cells]
    report["estimated_s"] = round(sum(plan), 1)
    console.print(
        f"{len(cells)} cells ({len(env_specs)} envs x up to {len(args.num_envs)} sizes), "
        f"{len(args.contenders)} contenders each: about {fmt_duration(sum(plan))} "
        "(estimated; each finished cell prints a line with the ETA)"
    )
    per_cell = (len(args.contenders) + 1) * (args.rounds + 1)
    progress = console.progress(len(cells) * per_cell)
    missing: Dict[Any, str] = {}  # contender, or (contender, env), that cannot run
    planned_done = 0.0
    try:
        for k, (spec, spaces, n) in enumerate(cells):
            t0 = time.time()
            run_cell(args, spec, spaces, n, cores, report, progress, missing, floor)
            planned_done += plan[k]
            elapsed = time.time() - started
            eta = sum(plan[k + 1 :]) * elapsed / max(planned_done, 1e-9)
            console.print(
                f"[{k + 1}/{len(cells)}] {spec.label} x{n} ({time.time() - t0:.0f} s): "
                f"{cell_summary(report, spec.label, n)}; elapsed {fmt_duration(elapsed)}, "
                f"ETA {fmt_duration(eta)}"
            )
    finally:
        progress.close()
        floor.close()
    if floor.note and floor.note not in report["notes"]:
        report["notes"].append(floor.note)
    report["machine"]["load_average_end"] = (
        list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    )
    report["elapsed_s"] = round(time.time() - started, 1)
    report["targets"] = evaluate_targets(report)
    report["conclusion"] = conclude(report)
    return report


def run_cell(args, spec, spaces, n, cores, report, progress, missing, floor) -> None:
    """Open every contender for (env, num_envs), warm up, measure in rounds."""
    actions = sample_actions(spaces[1], (ACTION_POOL, n), args.seed)
    ctx = Ctx(spec, n, actions, cores, trial_seconds=max(args.seconds / 2, 0.05), seed=args.seed)
    where = f"{spec.label} x{n}"
    sessions: Dict[str, Session] = {}
    per_cell = (len(args.contenders) + 1) * (args.rounds + 1)
    done = 0
    try:
        progress.describe(f"{where}: raw env")
        sessions["raw"] = RawSession(spec, args.seed)
        for name in args.contenders:
            c = CONTENDERS[name]
            progress.describe(f"{where}: open {name}")
            done += 1
            progress.advance()
            if name in missing or (name, spec.key) in missing:
                continue
            too_many = contender_fits(name, n)
            if too_many is not None:
                report["skipped"].append(
                    {"contender": name, "env": spec.label, "num_envs": n, "reason": too_many}
                )
                continue
            try:
                sessions[name] = c.open(ctx)
            except ImportError as exc:
                missing[name] = f"not installed ({exc})"
                report["skipped"].append({"contender": name, "reason": missing[name]})
            except Skip as exc:
                # The same for every num_envs: report it once.
                missing[(name, spec.key)] = str(exc)
                report["skipped"].append({"contender": name, "env": spec.label, "reason": str(exc)})
            except Exception as exc:
                report["skipped"].append(
                    {
                        "contender": name,
                        "env": spec.label,
                        "num_envs": n,
                        "reason": f"failed to start: {type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc(limit=5),
                    }
                )
        # Warm-up (excluded): every session alone for args.warmup seconds.
        progress.describe(f"{where}: warm-up")
        for name, s in list(sessions.items()):
            try:
                measure(s, args.warmup, warmup_calls=3)
            except Exception as exc:
                _drop(sessions, name, spec, n, report, f"failed in warm-up: {exc!r}")
        done += 1
        progress.advance()
        # Interleaved rounds, the order rotated each round.
        rates: Dict[str, List[float]] = {k: [] for k in sessions}
        lats: Dict[str, List[float]] = {k: [] for k in sessions}
        # The C wait/wake floor for each vecenv worker layout, on noop only,
        # measured once per round next to the contenders.
        floor_keys = set()
        if spec.key == "noop":
            for name, s in sessions.items():
                if _lockstep_vecenv(name, s):
                    floor_keys.add((s.layout["num_workers"], s.layout.get("spin_s") or 0.0))
        floors: Dict[Tuple[int, float], List[Dict[str, Any]]] = {k: [] for k in floor_keys}
        for r in range(args.rounds):
            names = list(sessions)
            k = r % len(names)
            for name in names[k:] + names[:k]:
                if name not in sessions:
                    continue
                progress.describe(f"{where}: round {r + 1}/{args.rounds} {name}")
                try:
                    steps, elapsed, lat = measure(sessions[name], args.seconds)
                except Exception as exc:
                    _drop(sessions, name, spec, n, report, f"failed while timed: {exc!r}")
                    continue
                rates[name].append(steps / elapsed)
                lats[name].extend(lat)
            for key in sorted(floor_keys):
                progress.describe(f"{where}: round {r + 1}/{args.rounds} wait/wake floor {key[0]}")
                fl = floor.measure(*key)
                if fl is not None:
                    floors[key].append(fl)
            done += len(args.contenders) + 1
            progress.advance(len(args.contenders) + 1)
        record_cell(spec, n, cores, sessions, rates, lats, floors, report)
    finally:
        progress.describe(f"{where}: closing")
        for s in sessions.values():
            try:
                s.close()
            except Exception:
                pass
        progress.advance(max(0, per_cell - done))


def _lockstep_vecenv(name: str, s: Optional[Session]) -> bool:
    """A vecenv contender that steps all envs per call with a known layout:
    the wait/wake floor for its worker count is its overhead's floor."""
    return (
        s is not None
        and name in CONTENDERS
        and CONTENDERS[name].vecenv
        and "num_workers" in s.layout
        and "batch_size" not in s.layout
    )


def _drop(sessions, name, spec, n, report, why) -> None:
    s = sessions.pop(name)
    try:
        s.close()
    except Exception:
        pass
    report["skipped"].append({"contender": name, "env": spec.label, "num_envs": n, "reason": why})


def batch_copy_floor_us(obs_bytes: int, num_envs: int, reps: int = 51) -> Optional[float]:
    """The copy floor of one batch: median microseconds of one memcpy of
    ``num_envs`` observations of ``obs_bytes`` bytes (from a warm source into a
    warm buffer, as the parent's copy of the shared rows is), or None for an
    observation without an array form."""
    if obs_bytes <= 0:
        return None
    src = np.ones(obs_bytes * num_envs, np.uint8)
    dst = np.empty_like(src)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def record_cell(spec, n, cores, sessions, rates, lats, floors, report) -> None:
    raw = rates.get("raw") or []
    raw_med = statistics.median(raw) if raw else None
    ideal = raw_med * min(cores, n) if raw_med else None
    ref = rates.get(REFERENCE) or []
    ref_med = statistics.median(ref) if ref else None
    cell = {
        "env": spec.label,
        "num_envs": n,
        "raw_env_steps_per_s": summarize(raw) if raw else None,
        "ideal_env_steps_per_s": ideal,
    }
    raw_env = getattr(sessions.get("raw"), "env", None)
    if raw_env is not None:  # the floors of one batch: its copy (the wake's is report["floor"])
        obs_bytes = _nbytes(raw_env.observation_space.sample())
        cell["obs_bytes"] = obs_bytes
        cell["batch_copy_floor_us"] = batch_copy_floor_us(obs_bytes, n)
    report["cells"].append(cell)
    floor_p50 = {}
    for (workers, spin_s), runs in floors.items():
        if runs:
            floor_p50[(workers, spin_s)] = statistics.median(f["p50_us"] for f in runs)
            report["floor"].append(
                {
                    "env": spec.label,
                    "num_envs": n,
                    "workers": workers,
                    "spin_us": spin_s * 1e6,
                    "p50_us": floor_p50[(workers, spin_s)],
                    "rounds": runs,
                }
            )
    for name, values in rates.items():
        if name == "raw" or not values:
            continue
        s = sessions.get(name)
        med = statistics.median(values)
        lat = np.asarray(lats[name]) * 1e6 if lats[name] else None
        entry = {
            "env": spec.label,
            "num_envs": n,
            "contender": name,
            "env_steps_per_s": summarize(values),
            "env_steps_per_call": s.env_steps_per_call if s else None,
            "latency_us_per_call": None
            if lat is None
            else {
                "p50": float(np.percentile(lat, 50)),
                "p90": float(np.percentile(lat, 90)),
                "p99": float(np.percentile(lat, 99)),
            },
            "layout": s.layout if s else {},
            "vs_reference": med / ref_med if ref_med else None,
            "vs_ideal": med / ideal if ideal else None,
        }
        key = (
            (s.layout["num_workers"], s.layout.get("spin_s") or 0.0)
            if _lockstep_vecenv(name, s)
            else None
        )
        fl = floor_p50.get(key)
        if fl and entry["latency_us_per_call"] is not None and raw_med:
            # Env work on the critical path: the busiest worker steps its envs in turn.
            work_us = s.layout.get("envs_per_worker", 1) * 1e6 / raw_med
            overhead = entry["latency_us_per_call"]["p50"] - work_us
            entry["floor"] = {
                "workers": key[0],
                "spin_us": key[1] * 1e6,
                "floor_p50_us": fl,
                "env_work_us": work_us,
                "overhead_p50_us": overhead,
                "overhead_vs_floor": overhead / fl,
            }
        report["results"].append(entry)


# --------------------------------------------------------------------- conclusion
def _cell_entries(report, env, n) -> List[Dict[str, Any]]:
    return [e for e in report["results"] if e["env"] == env and e["num_envs"] == n]


def _rate(e) -> float:
    return e["env_steps_per_s"]["median"]


def layout_text(e: Dict[str, Any]) -> str:
    """How to build this vecenv contender, in words a user can copy."""
    lay = e.get("layout") or {}
    name = e["contender"]
    if name == "vecenv_async":
        return f"ShmemVecEnv(batch_size={lay.get('batch_size')}), recv/send"
    if name == "vecenv_gym":
        return "vecenv.AsyncVectorEnv"
    if name == "vecenv_sb3":
        return "vecenv.sb3.SubprocVecEnv"
    if name == "vecenv_ray":
        return "vecenv.ray.RayVecEnv"
    w, per = lay.get("num_workers"), lay.get("envs_per_worker")
    if w is None:
        return "ShmemVecEnv()"
    how = "default layout: " if name == "vecenv" else ""
    return f"ShmemVecEnv({how}num_workers={w}, {per} env{'s' if per != 1 else ''} each)"


def conclude(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per env and num_envs: the fastest contender, vecenv's fastest way, and
    gymnasium's in-process SyncVectorEnv against it."""
    out = []
    for env in report["envs"]:
        for n in sorted({c["num_envs"] for c in report["cells"] if c["env"] == env}):
            entries = _cell_entries(report, env, n)
            if not entries:
                continue
            best = max(entries, key=_rate)
            ours = [e for e in entries if CONTENDERS[e["contender"]].vecenv]
            peers = [e for e in entries if not CONTENDERS[e["contender"]].vecenv]
            v = max(ours, key=_rate) if ours else None
            peer = max(peers, key=_rate) if peers else None
            sync = next((e for e in entries if e["contender"] == "gym_sync"), None)
            out.append(
                {
                    "env": env,
                    "num_envs": n,
                    "fastest": best["contender"],
                    "fastest_env_steps_per_s": _rate(best),
                    "vecenv_best": v and v["contender"],
                    "vecenv_layout": v and layout_text(v),
                    "vecenv_env_steps_per_s": v and _rate(v),
                    "best_peer": peer and peer["contender"],
                    "best_peer_env_steps_per_s": peer and _rate(peer),
                    "gym_sync_vs_vecenv": _rate(sync) / _rate(v) if sync and v else None,
                }
            )
    return out


def cell_summary(report, env, n) -> str:
    """One line on a finished cell: the fastest and vecenv's fastest."""
    entries = _cell_entries(report, env, n)
    if not entries:
        return "nothing measured"
    best = max(entries, key=_rate)
    text = f"fastest {best['contender']} {fmt_rate(_rate(best))}"
    ours = [e for e in entries if CONTENDERS[e["contender"]].vecenv]
    if ours and not CONTENDERS[best["contender"]].vecenv:
        v = max(ours, key=_rate)
        text += f", vecenv's best {v['contender']} {fmt_rate(_rate(v))}"
    return text


def _sizes(ns: List[int]) -> str:
    return ", ".join(str(n) for n in ns)


def print_conclusion(report: Dict[str, Any], console: Console) -> None:
    rows = report.get("conclusion") or []
    if not rows:
        return
    cores = report["machine"]["usable_cores"]
    table = []
    for r in rows:
        v = r["vecenv_env_steps_per_s"]
        ratio = r["gym_sync_vs_vecenv"]
        table.append(
            [
                f"{r['env']} x{r['num_envs']}",
                f"{r['fastest']} {fmt_rate(r['fastest_env_steps_per_s'])}",
                "-" if v is None else f"{r['vecenv_layout']} {fmt_rate(v)}",
                "-"
                if ratio is None
                else f"{ratio:.2f}x" + (" (as fast or faster)" if ratio >= AS_FAST else ""),
            ]
        )
    console.table(
        f"What to use on this machine ({cores} usable cores): env-steps/s, medians",
        ["env, num_envs", "fastest", "vecenv's fastest way", "gym SyncVectorEnv / that"],
        table,
    )
    console.print("[bold]Conclusion for this machine[/bold]")
    for env in report["envs"]:
        mine = [r for r in rows if r["env"] == env]
        if not mine:
            continue
        fastest: Dict[str, List[int]] = {}
        layouts: Dict[str, List[int]] = {}
        for r in mine:
            fastest.setdefault(r["fastest"], []).append(r["num_envs"])
            if r["vecenv_layout"]:
                layouts.setdefault(r["vecenv_layout"], []).append(r["num_envs"])
        parts = [
            "Fastest: " + "; ".join(f"{c} at num_envs {_sizes(ns)}" for c, ns in fastest.items())
        ]
        if layouts:
            parts.append(
                "With vecenv use "
                + "; ".join(f"{lay} at num_envs {_sizes(ns)}" for lay, ns in layouts.items())
            )
        ratios = {r["num_envs"]: r["gym_sync_vs_vecenv"] for r in mine}
        faster = [n for n, x in ratios.items() if x is not None and x >= 2 - AS_FAST]
        level = [n for n, x in ratios.items() if x is not None and AS_FAST <= x < 2 - AS_FAST]
        if faster:
            parts.append(
                f"gymnasium's in-process SyncVectorEnv is faster at num_envs {_sizes(faster)}: "
                "a step of this env is too cheap there for worker processes to pay off"
            )
        if level:
            parts.append(
                f"gymnasium's in-process SyncVectorEnv is as fast (within 5%) at num_envs "
                f"{_sizes(level)}"
            )
        if not faster and not level and any(x is not None for x in ratios.values()):
            parts.append("gymnasium's in-process SyncVectorEnv is slower at every size")
        console.print(f"  {env}: " + ". ".join(parts) + ".")


# --------------------------------------------------------------------- targets
@dataclasses.dataclass(frozen=True)
class Target:
    """One row of the targets table (issue 16), a ratio (or microseconds) from
    this run's own medians.

    kind: "best_vs" (vecenv's fastest contender / ``other``), "best_vs_ideal",
    "async_vs_lockstep" (vecenv_async / vecenv's fastest lockstep layout),
    "auto_vs_best" (vecenv_auto / the fastest of every other vecenv lockstep
    layout and gym_sync, in every cell that has vecenv_auto; the value is the
    lowest) and "worker_overhead" (microseconds per env-step beyond env.step
    with 1 worker: 1/vecenv rate - 1/raw rate; at most ``threshold``).
    """

    kind: str
    env: Optional[str] = None
    num_envs: Optional[int] = None
    other: Optional[str] = None
    threshold: float = 1.0

    def text(self) -> str:
        where = f"{self.env} x{self.num_envs}"
        t = self.threshold
        if self.kind == "best_vs":
            return f"{where}: best vecenv / {self.other} >= {t:g}x"
        if self.kind == "best_vs_ideal":
            return f"{where}: best vecenv / ideal >= {t:g}"
        if self.kind == "async_vs_lockstep":
            return f"{where}: vecenv async (batch n/2) / best vecenv lockstep >= {t:g}x"
        if self.kind == "auto_vs_best":
            return f"every cell: vecenv_auto / best of (every vecenv layout, gym_sync) >= {t:g}x"
        if self.kind == "worker_overhead":
            return f"{where}: worker overhead per env-step beyond env.step (1 worker) <= {t:g} us"
        raise ValueError(f"unknown target kind {self.kind!r}")


TARGETS = [
    Target("best_vs", "noop", 16, "gym_sync", 2.0),
    Target("best_vs", "noop", 256, "gym_sync", 3.0),
    Target("best_vs", "bigobs", 16, "gym_sync", 1.5),
    Target("best_vs_ideal", "CartPole-v1", 16, threshold=0.75),
    Target("best_vs_ideal", "CartPole-v1", 256, threshold=0.85),
    Target("best_vs_ideal", "ALE/Pong-v5", 16, threshold=0.9),
    Target("best_vs", "ALE/Pong-v5", 16, "envpool_async", 1.1),
    Target("async_vs_lockstep", "CartPole-v1", 16, threshold=1.0),
    Target("async_vs_lockstep", "ALE/Pong-v5", 16, threshold=1.05),
    Target("async_vs_lockstep", "heavytail", 16, threshold=1.3),
    Target("auto_vs_best", threshold=0.95),
    Target("worker_overhead", "noop", 256, threshold=0.5),
]
AUTO = "vecenv_auto"


def _find(report, env, n, contender):
    for e in report["results"]:
        if e["env"] == env and e["num_envs"] == n and e["contender"] == contender:
            return e
    return None


def _is_vecenv(name: str) -> bool:
    c = CONTENDERS.get(name)
    return c.vecenv if c is not None else name.startswith("vecenv")


def _is_lockstep_layout(e: Dict[str, Any]) -> bool:
    """A vecenv contender stepping the whole batch per call (not send/recv)."""
    return _is_vecenv(e["contender"]) and "batch_size" not in (e.get("layout") or {})


def _fastest(entries) -> Optional[Dict[str, Any]]:
    return max(entries, key=_rate) if entries else None


def _cell(report, env, n) -> Optional[Dict[str, Any]]:
    return next((c for c in report["cells"] if c["env"] == env and c["num_envs"] == n), None)


def _raw_rate(report, env, n) -> Optional[float]:
    c = _cell(report, env, n)
    raw = c and c.get("raw_env_steps_per_s")
    return raw["median"] if raw else None


def _one_worker_rate(entries) -> Tuple[Optional[float], str]:
    """env-steps/s of a 1-worker vecenv lockstep layout in a cell: a measured
    contender with 1 worker, else vecenv_best's short trial of 1 worker."""
    ones = [
        e
        for e in entries
        if _is_lockstep_layout(e) and (e.get("layout") or {}).get("num_workers") == 1
    ]
    if ones:
        e = _fastest(ones)
        return _rate(e), f"{e['contender']} (1 worker)"
    for e in entries:
        trials = (e.get("layout") or {}).get("trials_env_steps_per_s") or {}
        if "1" in trials:
            return float(trials["1"]), f"{e['contender']}'s trial of 1 worker"
    return None, ""


def evaluate_target(report, t: Target) -> Dict[str, Any]:
    """One target against the run: value, status ("pass", "short" or
    "missing", when the run lacks what it needs) and where the value comes from."""
    value: Optional[float] = None
    who = ""
    extra: Dict[str, Any] = {}
    if t.kind == "auto_vs_best":
        cells = []
        for c in report["cells"]:
            entries = _cell_entries(report, c["env"], c["num_envs"])
            auto = next((e for e in entries if e["contender"] == AUTO), None)
            others = [
                e
                for e in entries
                if e["contender"] != AUTO
                and (_is_lockstep_layout(e) or e["contender"] == "gym_sync")
            ]
            best = _fastest(others)
            if auto is None or best is None:
                continue
            cells.append(
                {
                    "env": c["env"],
                    "num_envs": c["num_envs"],
                    "value": _rate(auto) / _rate(best),
                    "best": best["contender"],
                    "auto_layout": (auto.get("layout") or {}).get("num_workers"),
                }
            )
        extra["cells"] = cells
        if cells:
            worst = min(cells, key=lambda x: x["value"])
            value = worst["value"]
            below = sum(x["value"] < t.threshold for x in cells)
            who = (
                f"lowest at {worst['env']} x{worst['num_envs']} (against {worst['best']}); "
                f"{below} of {len(cells)} cells below"
            )
    else:
        entries = _cell_entries(report, t.env, t.num_envs)
        ours = [e for e in entries if _is_vecenv(e["contender"])]
        best = _fastest(ours)
        if t.kind == "best_vs" and best is not None:
            other = _find(report, t.env, t.num_envs, t.other)
            if other is not None:
                value = _rate(best) / _rate(other)
                who = best["contender"]
        elif t.kind == "best_vs_ideal" and best is not None:
            cell = _cell(report, t.env, t.num_envs)
            ideal = cell and cell.get("ideal_env_steps_per_s")
            if ideal:
                value = _rate(best) / ideal
                who = best["contender"]
        elif t.kind == "async_vs_lockstep":
            lock = _fastest([e for e in ours if _is_lockstep_layout(e)])
            asyn = _find(report, t.env, t.num_envs, "vecenv_async")
            if lock is not None and asyn is not None:
                value = _rate(asyn) / _rate(lock)
                who = f"vecenv_async / {lock['contender']}"
        elif t.kind == "worker_overhead":
            rate, who = _one_worker_rate(entries)
            raw = _raw_rate(report, t.env, t.num_envs)
            if rate and raw:
                value = 1e6 / rate - 1e6 / raw
    if value is None:
        status = "missing"
    elif t.kind == "worker_overhead":
        status = "pass" if value <= t.threshold else "short"
    else:
        status = "pass" if value >= t.threshold else "short"
    return {
        "target": t.text(),
        "kind": t.kind,
        "env": t.env,
        "num_envs": t.num_envs,
        "value": value,
        "unit": "us" if t.kind == "worker_overhead" else "x",
        "threshold": t.threshold,
        "status": status,
        "who": who,
        **extra,
    }


def evaluate_targets(report) -> List[Dict[str, Any]]:
    """Every target of :data:`TARGETS` against this run."""
    return [evaluate_target(report, t) for t in TARGETS]


def fmt_target_value(t: Dict[str, Any]) -> str:
    v = t["value"]
    if v is None:
        return "-"
    return f"{v:.2f} us" if t["unit"] == "us" else f"{v:.2f}x"


def markdown_summary(report: Dict[str, Any]) -> str:
    """The run in Markdown: env-steps/s per env (contenders x num_envs,
    medians), vecenv_auto's choices, and the targets as pass/short."""
    m = report["machine"]
    lines = [
        f"# vecenv benchmark, {report.get('created_utc', '?')}",
        "",
        f"{m.get('cpu_model', '?')}, {m.get('usable_cores', '?')} usable cores; vecenv "
        f"{report.get('versions', {}).get('vecenv', '?')} at "
        f"{(report.get('git', {}).get('commit') or '?')[:8]}. env-steps/s, medians.",
    ]
    ns = sorted({c["num_envs"] for c in report["cells"]})
    for env in report["envs"]:
        mine = [n for n in ns if _cell(report, env, n)]
        names = [
            name
            for name in report["contenders"]
            if any(e["env"] == env and e["contender"] == name for e in report["results"])
        ]
        if not mine or not names:
            continue
        lines += ["", f"## {env}", ""]
        lines.append("| contender | " + " | ".join(f"x{n}" for n in mine) + " |")
        lines.append("|---" * (len(mine) + 1) + "|")
        for name in names:
            row = []
            for n in mine:
                e = _find(report, env, n, name)
                row.append(fmt_rate(_rate(e)) if e else "-")
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        ideal = []
        for n in mine:
            c = _cell(report, env, n)
            ideal.append(
                fmt_rate(c["ideal_env_steps_per_s"])
                if c and c.get("ideal_env_steps_per_s")
                else "-"
            )
        lines.append("| ideal | " + " | ".join(ideal) + " |")
    autos = [e for e in report["results"] if e["contender"] == AUTO]
    if autos:
        lines += ["", '## num_workers="auto": its choices', ""]
        lines += ["| env, num_envs | workers x envs | env.step (us) | why |", "|---|---|---|---|"]
        for e in autos:
            lay = e.get("layout") or {}
            step = lay.get("step_us")
            lines.append(
                f"| {e['env']} x{e['num_envs']} | {lay.get('num_workers')} x "
                f"{lay.get('envs_per_worker')} | {'-' if step is None else f'{step:.1f}'} | "
                f"{lay.get('why', '')} |"
            )
    targets = report.get("targets") or []
    if targets:
        lines += ["", "## Targets (issue 16)", ""]
        lines += ["| target | value | status | from |", "|---|---|---|---|"]
        for t in targets:
            lines.append(
                f"| {t['target']} | {fmt_target_value(t)} | {t['status']} | {t.get('who', '')} |"
            )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------- report
def print_report(report: Dict[str, Any], console: Console, targets: bool = False) -> None:
    """The tables, the targets (when the run measured any of them, or always
    with ``targets``), skips and notes, then what to conclude (last)."""
    ns = sorted({c["num_envs"] for c in report["cells"]})
    for env in report["envs"]:
        cells = {c["num_envs"]: c for c in report["cells"] if c["env"] == env}
        if not cells:
            continue
        names = [
            n
            for n in report["contenders"]
            if any(e["env"] == env and e["contender"] == n for e in report["results"])
        ]
        rows = []
        for name in names:
            row = [name]
            for n in ns:
                e = _find(report, env, n, name)
                if e is None:
                    row.append("-")
                    continue
                s = e["env_steps_per_s"]
                row.append(
                    f"{fmt_rate(s['median'])} ±{s['spread_pct']:.0f}%\n"
                    f"{fmt_ratio(e['vs_reference'])} ref, {fmt_ratio(e['vs_ideal'])} ideal"
                )
            rows.append(row)
        raw_row, ideal_row = ["one raw env"], ["ideal"]
        for n in ns:
            c = cells.get(n)
            raw = c and c["raw_env_steps_per_s"]
            raw_row.append(fmt_rate(raw["median"]) if raw else "-")
            ideal_row.append(fmt_rate(c["ideal_env_steps_per_s"]) if c else "-")
        rows += [raw_row, ideal_row]
        console.table(
            f"{env}: env-steps/s, median ±half-range over rounds (ratio to {REFERENCE}, to ideal)",
            ["contender"] + [f"num_envs={n}" for n in ns],
            rows,
        )
    lat_rows = []
    for e in report["results"]:
        if e["env"] != "noop" or e["latency_us_per_call"] is None:
            continue
        lat = e["latency_us_per_call"]
        lat_rows.append(
            [
                f"{e['contender']} x{e['num_envs']}",
                f"{lat['p50']:.1f}",
                f"{lat['p90']:.1f}",
                str(e["layout"].get("num_workers", "-")),
            ]
        )
    if lat_rows:
        # The C wait/wake floor (benchmarks/wakeup_floor.c) is not in this
        # table: it times the futex round trip alone, without the Python that
        # every contender runs per batch, so it is no floor of theirs. It is in
        # the JSON ("floor") and behind --targets.
        console.table(
            "noop: latency per batch step (us; async contenders: per recv+send)",
            ["contender", "p50", "p90", "workers"],
            lat_rows,
        )
    measured = any(t["status"] != "missing" for t in report.get("targets") or [])
    if report.get("targets") and (targets or measured):
        rows = []
        for t in report["targets"]:
            color = {"pass": "green", "short": "red"}.get(t["status"], "yellow")
            rows.append(
                [
                    t["target"],
                    fmt_target_value(t),
                    f"[{color}]{t['status']}[/{color}]",
                    t.get("who", ""),
                ]
            )
        console.table(
            "targets (issue 16; ratios measured in this run)",
            ["target", "value", "status", "from"],
            rows,
        )
    for s in report["skipped"]:
        where = " ".join(str(s[k]) for k in ("contender", "env", "num_envs") if k in s)
        console.print(f"[yellow]skipped[/yellow] {where}: {s['reason']}")
    for note in report["notes"]:
        console.print(f"[yellow]note[/yellow]: {note}")
    print_conclusion(report, console)


def plot_summary(report: Dict[str, Any], path: Path) -> Optional[str]:
    """Per env: vecenv's fastest way, the fastest peer and the ideal against
    num_envs (each point of the peer's line names the peer)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullLocator
    except ImportError:
        return "matplotlib is not installed: no plot"
    rows = report.get("conclusion") or []
    envs = [e for e in report["envs"] if any(r["env"] == e for r in rows)]
    if not envs:
        return "nothing measured: no plot"
    cols = min(3, len(envs))
    nrows = (len(envs) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 4.0 * nrows), squeeze=False)
    ns = sorted({c["num_envs"] for c in report["cells"]})
    for ax, env in zip(axes.flat, envs):
        mine = [r for r in rows if r["env"] == env]
        ours = [(r["num_envs"], r["vecenv_env_steps_per_s"]) for r in mine if r["vecenv_best"]]
        peer = [
            (r["num_envs"], r["best_peer_env_steps_per_s"], r["best_peer"])
            for r in mine
            if r["best_peer"]
        ]
        if ours:
            ax.plot(
                *zip(*ours),
                marker="o",
                linewidth=2,
                color="tab:blue",
                label="vecenv (its fastest way)",
            )
        if peer:
            x, y, who = zip(*peer)
            ax.plot(x, y, marker="s", color="tab:orange", label="fastest peer (named)")
            for xi, yi, w in peer:
                ax.annotate(
                    w,
                    (xi, yi),
                    textcoords="offset points",
                    xytext=(0, -12),
                    fontsize=7,
                    ha="center",
                )
        ideal = sorted(
            (c["num_envs"], c["ideal_env_steps_per_s"])
            for c in report["cells"]
            if c["env"] == env and c["ideal_env_steps_per_s"]
        )
        if ideal:
            ax.plot(*zip(*ideal), "k--", marker="x", label="ideal (cores x one raw env)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("num_envs")
        ax.set_ylabel("env-steps/s")
        ax.set_title(env)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(envs) :]:
        ax.set_visible(False)
    m = report["machine"]
    fig.suptitle(
        f"vecenv against the fastest peer; {m['cpu_model']}, {m['usable_cores']} usable cores\n"
        f"(every contender: {path.stem}-all.png)",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def plot_all(report: Dict[str, Any], path: Path) -> Optional[str]:
    """env-steps/s against num_envs, one panel per env, one line per contender."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullLocator
    except ImportError:
        return "matplotlib is not installed: no plot"
    envs = [e for e in report["envs"] if any(c["env"] == e for c in report["cells"])]
    if not envs:
        return "nothing measured: no plot"
    has_latency = any(e["env"] == "noop" and e["latency_us_per_call"] for e in report["results"])
    panels = len(envs) + int(has_latency)
    cols = min(3, panels)
    rows = (panels + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    # vecenv's contenders solid and thick, the peers dashed, each set in its
    # own distinct colours (tab10), so no two lines look alike.
    palette = plt.get_cmap("tab10").colors
    ours = [n for n in report["contenders"] if CONTENDERS[n].vecenv]
    peers = [n for n in report["contenders"] if not CONTENDERS[n].vecenv]
    color = {n: palette[i % 10] for group in (ours, peers) for i, n in enumerate(group)}

    def lines(ax, env, value):
        for name in report["contenders"]:
            pts = sorted(
                (e["num_envs"], value(e))
                for e in report["results"]
                if e["env"] == env and e["contender"] == name and value(e)
            )
            if pts:
                x, y = zip(*pts)
                mine = CONTENDERS[name].vecenv
                ax.plot(
                    x,
                    y,
                    marker="o" if mine else "s",
                    linestyle="-" if mine else "--",
                    linewidth=2 if mine else 1.2,
                    label=name,
                    color=color[name],
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ns = sorted({c["num_envs"] for c in report["cells"]})
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("num_envs")
        ax.grid(True, which="both", alpha=0.3)

    for ax, env in zip(axes.flat, envs):
        lines(ax, env, lambda e: e["env_steps_per_s"]["median"])
        ideal = sorted(
            (c["num_envs"], c["ideal_env_steps_per_s"])
            for c in report["cells"]
            if c["env"] == env and c["ideal_env_steps_per_s"]
        )
        if ideal:
            x, y = zip(*ideal)
            ax.plot(x, y, "k--", label="ideal (cores x raw env)")
        ax.set_title(env)
        ax.set_ylabel("env-steps/s")
    if has_latency:
        ax = axes.flat[len(envs)]
        lines(ax, "noop", lambda e: (e["latency_us_per_call"] or {}).get("p50"))
        ax.set_title("noop: latency per batch step (p50)")
        ax.set_ylabel("microseconds")
    handles = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    for ax in list(axes.flat)[panels:]:
        ax.set_visible(False)
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="lower center",
        ncol=min(6, len(handles)),
        fontsize=8,
        frameon=False,
    )
    m = report["machine"]
    fig.suptitle(
        f"{m['cpu_model']}, {m['usable_cores']} usable cores; vecenv {report['versions'].get('vecenv')}"
        f" @ {(report['git'].get('commit') or '?')[:8]}",
        fontsize=9,
    )
    legend_rows = (len(handles) + 5) // 6
    fig.tight_layout(rect=(0, (0.25 + 0.2 * legend_rows) / (4.2 * rows), 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console()
    if args.list:
        list_everything(console)
        return 0
    report = run(args)
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    pngs = [out.with_suffix(".png"), out.with_name(out.stem + "-all.png")]
    if not args.no_plot:
        for draw, png in zip((plot_summary, plot_all), pngs):
            why = draw(report, png)
            if why:
                report["notes"].append(why)
                break
            report.setdefault("plots", []).append(str(png))
    print_report(report, console, targets=args.targets)
    with open(out, "w") as f:
        json.dump(report, f, indent=1, default=str)
        f.write("\n")
    md = out.with_suffix(".md")
    md.write_text(markdown_summary(report))
    console.print(
        f"took {fmt_duration(report['elapsed_s'])} (estimated {fmt_duration(report['estimated_s'])})"
        f"; wrote {out}, {md}" + "".join(f", {p}" for p in report.get("plots", []))
    )
    if _want_multi_agent(args, argv):
        import multi_agent

        console.print("\nmulti-agent cells (benchmarks/multi_agent.py, agent-steps/s):")
        ma_out = out.with_name(out.stem + "-multi-agent.json")
        return multi_agent.main(["--out", str(ma_out), *(["--quick"] if args.quick else [])])
    return 0


def _want_multi_agent(args, argv) -> bool:
    """``--multi-agent``: on, off, or (auto) in the default suite when
    PettingZoo and mpe2 can be imported."""
    if args.multi_agent != "auto":
        return args.multi_agent == "on"
    given = sys.argv[1:] if argv is None else list(argv)
    if args.quick or any(a.startswith(("--envs", "--num-envs", "--contenders")) for a in given):
        return False
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("pettingzoo", "mpe2"))


if __name__ == "__main__":
    sys.exit(main())
