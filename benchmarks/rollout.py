#!/usr/bin/env python3
"""Rollout benchmark: vec envs timed inside CleanRL's PPO rollout loop, against their peers.

Runs in the parent process (the contenders start their own workers). Every
batch step does what CleanRL's ``ppo.py`` does: write the observations into a
rollout buffer (a torch tensor), run the policy forward in torch on one thread
(``torch.set_num_threads(1)``: a 64-64 MLP for CartPole and MuJoCo, the Nature
CNN for Pong), sample actions, step, store rewards and dones. Every 128 batch
steps a short update runs (one epoch of minibatch gradient steps on the
buffer); its time is measured apart and excluded from env-steps/s.

Cells: CartPole-v1 x16 and x64, ALE/Pong-v5 x16 (``AtariPreprocessing`` and
``FrameStackObservation(4)`` in the workers) and HalfCheetah-v5 x16 (skipped
with its reason where mujoco is missing). Contenders, all in the same run:
gymnasium ``SyncVectorEnv`` and ``AsyncVectorEnv``, SB3's ``SubprocVecEnv``,
envpool sync and async (its own C++ envs), ale-py's ``AtariVectorEnv`` (Pong),
PufferLib's ``Multiprocessing`` backend (one worker per core but one), and
vecenv: its default layout, in process (``num_workers=0``),
``num_workers="auto"`` and partial batches (``batch_size=num_envs//2``: the
policy acts on one half while the other half steps, with ``recv``/``send``),
the same with the caller's share that ``stats().caller_share`` sizes from a
calibration run (``inline_envs``), and ``inline=True`` (the caller steps one
share while the workers step the others). Opt-in variants (``--contenders``)
help find where the default layout loses time: ``spin=0``, ``spin`` of 1 ms,
one worker, workers pinned (``cpu_affinity=True``), partial batches with
``spin=0``. The peers that are not installed are skipped with a note.

Each cell reports the median env-steps/s of its rounds (the order rotates each
round) with their spread, and the 2-core bound measured in every round, just
before that round's contenders::

    bound = min(policy alone, cores / (env CPU time + policy CPU time) per env-step)

where the env CPU time is one raw env's (its wrappers included) in this
process and the policy's is the forward pass, the sampling and the buffer
write on a batch of num_envs observations. The bound treats the policy's time
as if it were spread over the env-steps; it is not: a call has a fixed cost
(on CartPole the MLP costs about as much at 16 envs as at 64). So each cell
also gives what the two schedules reach with a vec env that costs nothing
(:func:`schedule_limits`): lockstep, whose policy cannot overlap the envs,
and halves, whose policy overlaps but runs twice on num_envs/2. A
contender's fraction of the bound is the median over the rounds of its rate
over the bound of the same round: on a shared machine whose speed moves by
tens of percent within minutes, a bound timed once, at the start, set the
rounds against a faster or slower moment than their own. Per
contender it also records the learner's time in the policy and in the vec
env per batch step, and the parent's CPU time per batch step (a parent that
spins shows CPU time beyond the policy's). A conclusion line per cell says
which mode to use.

Usage::

    python benchmarks/rollout.py               # the default cells (it prints its estimate)
    python benchmarks/rollout.py --quick       # a smoke test: CartPole x8, 1 round (about 20 s)
    python benchmarks/rollout.py --cells cartpole:16,cartpole:64 --contenders vecenv,vecenv_spin0

Writes ``benchmarks/results/local/rollout-<UTC time>.json`` (git-ignored;
``--out`` to choose): the machine, the versions, the commit and every round.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the suite package (not there under python -P)
    sys.path.insert(0, str(HERE))
from suite.command import fill_defaults, parse_cells  # noqa: E402
from suite.console import fmt_duration  # noqa: E402
from suite.envs import make_env  # noqa: E402
from suite.machine import load_average, report_header  # noqa: E402
from suite.measure import quiet  # noqa: E402

from vecenv._cpus import usable_cpus  # noqa: E402

warnings.filterwarnings("ignore")
os.environ.setdefault("PYTHONWARNINGS", "ignore")  # workers started with spawn/forkserver
UPDATE_EVERY = 128  # batch steps between updates (CleanRL's num_steps)
LOCAL_OUT = HERE / "results" / "local"


# --------------------------------------------------------------------- envs
def make_pong():
    """ALE/Pong-v5 as CleanRL's Atari PPO sees it: frame skip 4 in the
    preprocessing, 84x84 grayscale, 4 frames stacked: (4, 84, 84) uint8."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    env = make_env("ALE/Pong-v5", {"frameskip": 1})
    env = AtariPreprocessing(env, frame_skip=4, screen_size=84, grayscale_obs=True)
    return FrameStackObservation(env, 4)


def make_gym(env_id: str) -> Callable[[], Any]:
    import functools

    return functools.partial(make_env, env_id, {})


CELL_ENVS: Dict[str, Dict[str, Any]] = {
    "cartpole": {
        "label": "CartPole-v1",
        "factory": make_gym("CartPole-v1"),
        "envpool": "CartPole-v1",
    },
    "pong": {
        "label": "Pong (84x84x4)",
        "factory": make_pong,
        "envpool": "Pong-v5",
        "envpool_kwargs": {
            "stack_num": 4,
            "img_height": 84,
            "img_width": 84,
            "gray_scale": True,
            "episodic_life": False,
            "reward_clip": False,
            "use_fire_reset": False,
            "repeat_action_probability": 0.25,
        },
        "ale_game": "pong",
    },
    "halfcheetah": {
        "label": "HalfCheetah-v5",
        "factory": make_gym("HalfCheetah-v5"),
        "envpool": "HalfCheetah-v4",
        "hint": 'pip install ".[mujoco]"',
    },
}
DEFAULT_CELLS = [("cartpole", 16), ("cartpole", 64), ("pong", 16), ("halfcheetah", 16)]


# --------------------------------------------------------------------- the policy
class Policy:
    """The agent of CleanRL's ppo.py (MLP) or ppo_atari.py (Nature CNN), with
    its action sampling, its buffers and a short update."""

    def __init__(self, obs_space, act_space, num_envs: int, seed: int):
        import torch
        from torch import nn

        torch.manual_seed(seed)
        self.torch = torch
        self.discrete = hasattr(act_space, "n")
        n_out = int(act_space.n) if self.discrete else int(np.prod(act_space.shape))
        self.image = len(obs_space.shape) == 3
        if self.image:  # Nature CNN on (4, 84, 84) uint8, scaled by 1/255
            self.body = nn.Sequential(
                nn.Conv2d(obs_space.shape[0], 32, 8, stride=4), nn.ReLU(),
                nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
                nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
            )  # fmt: skip
            width = 512
        else:
            d = int(np.prod(obs_space.shape))
            self.body = nn.Sequential(nn.Linear(d, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
            width = 64
        self.actor = nn.Linear(width, n_out)
        self.critic = nn.Linear(width, 1)
        self.logstd = nn.Parameter(torch.zeros(n_out))
        params = [*self.body.parameters(), *self.actor.parameters(), *self.critic.parameters()]
        self.opt = torch.optim.Adam([*params, self.logstd], lr=2.5e-4, eps=1e-5)
        self.num_envs = num_envs
        obs_dtype = torch.uint8 if self.image else torch.float32
        self.obs = torch.zeros((UPDATE_EVERY, num_envs, *obs_space.shape), dtype=obs_dtype)
        act_shape = () if self.discrete else act_space.shape
        self.actions = torch.zeros((UPDATE_EVERY, num_envs, *act_shape))
        self.logprobs = torch.zeros((UPDATE_EVERY, num_envs))
        self.values = torch.zeros((UPDATE_EVERY, num_envs))
        self.rewards = torch.zeros((UPDATE_EVERY, num_envs))
        self.dones = torch.zeros((UPDATE_EVERY, num_envs))
        self.low = getattr(act_space, "low", None)
        self.high = getattr(act_space, "high", None)

    def _features(self, x):
        if self.image:
            x = x.float() / 255.0
        return self.body(x)

    def _dist(self, h):
        torch = self.torch
        if self.discrete:
            return torch.distributions.Categorical(logits=self.actor(h))
        return torch.distributions.Normal(self.actor(h), self.logstd.exp())

    def act(self, t: int, obs, rows=slice(None)) -> np.ndarray:
        """Write ``obs`` into the buffer at step ``t`` (rows ``rows``), run the
        forward pass, sample, store; the actions as a NumPy array."""
        torch = self.torch
        x = torch.as_tensor(np.asarray(obs))
        if isinstance(rows, slice):  # a view of the buffer: write in place
            buf = self.obs[t, rows]
            buf.copy_(x)
        else:  # scattered rows: index_put (same dtypes), then act on the batch itself
            buf = x.to(self.obs.dtype)
            self.obs[t, rows] = buf
        with torch.no_grad():
            h = self._features(buf)
            dist = self._dist(h)
            a = dist.sample()
            lp = dist.log_prob(a)
            self.values[t, rows] = self.critic(h).squeeze(-1)
        self.actions[t, rows] = a.to(self.actions.dtype)
        self.logprobs[t, rows] = (lp if self.discrete else lp.sum(-1)).to(self.logprobs.dtype)
        out = a.numpy()
        if not self.discrete:
            out = np.clip(out, self.low, self.high).astype(np.float32)
        return out

    def store(self, t: int, rewards, dones, rows=slice(None)) -> None:
        torch = self.torch
        self.rewards[t, rows] = torch.as_tensor(np.asarray(rewards, dtype=np.float32))
        self.dones[t, rows] = torch.as_tensor(np.asarray(dones, dtype=np.float32))

    def update(self, minibatches: int = 4) -> None:
        """One epoch of PPO's clipped loss over the buffer (returns: rewards to go)."""
        torch = self.torch
        with torch.no_grad():
            ret = torch.zeros_like(self.rewards)
            nxt = torch.zeros(self.num_envs)
            for t in reversed(range(UPDATE_EVERY)):
                nxt = self.rewards[t] + 0.99 * nxt * (1.0 - self.dones[t])
                ret[t] = nxt
            adv = ret - self.values
        n = UPDATE_EVERY * self.num_envs
        obs = self.obs.reshape(n, *self.obs.shape[2:])
        acts = self.actions.reshape(n, *self.actions.shape[2:])
        old, adv, ret = self.logprobs.reshape(n), adv.reshape(n), ret.reshape(n)
        for idx in torch.randperm(n).chunk(minibatches):
            h = self._features(obs[idx])
            dist = self._dist(h)
            lp = dist.log_prob(acts[idx])
            lp = lp if self.discrete else lp.sum(-1)
            ratio = (lp - old[idx]).exp()
            a = adv[idx]
            pg = -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()
            v = ((self.critic(h).squeeze(-1) - ret[idx]) ** 2).mean()
            loss = pg + 0.5 * v - 0.01 * dist.entropy().mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


# --------------------------------------------------------------------- contenders
class Skip(Exception):
    """A contender cannot run this cell; the message says why."""


class Lockstep:
    """A vec env stepped whole: ``reset() -> obs``, ``step(a) -> (obs, rew, done)``."""

    partial = False

    def __init__(self, reset, step, close, layout=None):
        self.reset, self.step, self.close = reset, step, close
        self.layout = layout or {}


class Partial:
    """A vec env stepped in halves: ``start()``, ``recv() -> (obs, rew, done, ids)``, ``send(a, ids)``."""

    partial = True
    vec: Any = None  # vecenv's own vec env, for its stats()

    def __init__(self, start, recv, send, close, batch_size, layout=None):
        self.start, self.recv, self.send, self.close = start, recv, send, close
        self.batch_size = batch_size
        self.layout = layout or {}


def _gym_vector(venv, seed, layout=None):
    """A gymnasium vector env (gymnasium's or vecenv's drop-in) as a Lockstep."""

    def step(a):
        o, r, te, tr, _ = venv.step(a)
        return o, r, te | tr

    return Lockstep(lambda: venv.reset(seed=seed)[0], step, venv.close, layout)


def open_gym_sync(c):
    from gymnasium.vector import SyncVectorEnv

    return _gym_vector(SyncVectorEnv([c["factory"]] * c["n"]), c["seed"])


def open_gym_async(c):
    from gymnasium.vector import AsyncVectorEnv

    return _gym_vector(AsyncVectorEnv([c["factory"]] * c["n"], shared_memory=True), c["seed"])


def open_sb3(c):
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = SubprocVecEnv([c["factory"]] * c["n"])
    venv.seed(c["seed"])
    return Lockstep(venv.reset, lambda a: venv.step(a)[:3], venv.close)


def open_vecenv_gym(c, **kw):
    import vecenv

    venv = vecenv.AsyncVectorEnv([c["factory"]] * c["n"], **kw)
    return _gym_vector(venv, c["seed"], _vecenv_layout(venv))


def _vecenv_layout(venv) -> Dict[str, Any]:
    lay = venv.layout
    return {
        "num_workers": lay.num_workers,
        "inline": lay.inline,
        "envs_per_worker": lay.envs_per_worker,
        "spin_s": lay.spin,
        "why": getattr(lay, "why", None),
    }


def open_vecenv(c, **kw):
    import vecenv

    venv = vecenv.ShmemVecEnv([c["factory"]] * c["n"], copy=False, **kw)
    venv.seed(c["seed"])
    return Lockstep(venv.reset, lambda a: venv.step(a)[:3], venv.close, _vecenv_layout(venv))


def open_vecenv_partial(c, **kw):
    import vecenv

    bs = max(1, c["n"] // 2)
    venv = vecenv.ShmemVecEnv([c["factory"]] * c["n"], copy=False, batch_size=bs, **kw)
    venv.seed(c["seed"])

    def recv():
        o, r, d, _, ids = venv.recv()
        return o, r, d, ids

    part = Partial(venv.reset, recv, venv.send, venv.close, bs, _vecenv_layout(venv))
    part.vec = venv
    return part


def open_vecenv_share(c):
    """Partial batches with the caller's share that ``stats().caller_share``
    computes from a calibration run of the default partial layout (the
    policy in the loop, ``CALIBRATE_S`` twice: a warm-up, then the measure,
    with the parent's CPU time over it, PPO's updates left out), as a user
    would size it; the default partial layout where that is 0."""
    probe = open_vecenv_partial(c)
    try:
        vec = probe.vec
        run = Run(probe, Policy(vec.observation_space, vec.action_space, c["n"], c["seed"]), c["n"])
        run.go(CALIBRATE_S)
        before = vec.stats()
        res = run.go(CALIBRATE_S)
        # The parent's CPU over the rollout, PPO's updates left out (Run.go).
        k = vec.stats().since(before).caller_share(c["n"], caller_cpu_s=res["parent_cpu_s"])
    finally:
        probe.close()
    part = open_vecenv_partial(c, **({"inline": True, "inline_envs": k} if k else {}))
    part.layout["inline_envs"] = k
    return part


def _envpool(c, batch_size):
    import envpool

    if not c.get("envpool"):
        raise Skip(f"envpool has no {c['label']}")
    try:
        return envpool.make(
            c["envpool"],
            env_type="gymnasium",
            num_envs=c["n"],
            batch_size=batch_size,
            seed=c["seed"],
            **c.get("envpool_kwargs", {}),
        )
    except Exception as exc:
        raise Skip(f"envpool.make({c['envpool']!r}) failed: {exc}") from exc


def _np_action(pool, a):
    dtype = pool.action_space.dtype
    return np.ascontiguousarray(a.astype(np.int32 if dtype == np.int64 else dtype))


def open_envpool_sync(c):
    pool = _envpool(c, c["n"])

    def step(a):
        o, r, te, tr, _ = pool.step(_np_action(pool, a))
        return o, r, te | tr

    return Lockstep(lambda: pool.reset()[0], step, lambda: None, {"own_envs": True})


def open_envpool_async(c):
    bs = max(1, c["n"] // 2)
    pool = _envpool(c, bs)

    def recv():
        o, r, te, tr, info = pool.recv()
        return o, r, te | tr, info["env_id"]

    def send(a, ids):
        pool.send(_np_action(pool, a), ids)

    return Partial(pool.async_reset, recv, send, lambda: None, bs, {"own_envs": True})


def open_ale_vector(c):
    from ale_py.vector_env import AtariVectorEnv  # ImportError: an ale-py without it

    if not c.get("ale_game"):
        raise Skip(f"AtariVectorEnv runs Atari games only, not {c['label']}")
    venv = AtariVectorEnv(
        game=c["ale_game"], num_envs=c["n"], repeat_action_probability=0.25,
        reward_clipping=False, use_fire_reset=False, noop_max=0,
    )  # fmt: skip

    def step(a):
        o, r, te, tr, _ = venv.step(a)
        return o, r, te | tr

    return Lockstep(lambda: venv.reset(seed=c["seed"])[0], step, venv.close, {"own_envs": True})


def pufferlib_workers(n: int, cores: int) -> int:
    """PufferLib's ``num_workers`` for ``n`` envs: the most workers that
    divide ``n`` (PufferLib requires it) and leave the learner a core.

    PufferLib's ``recv()`` polls in Python until a worker is done, and its
    workers poll too, so a worker per core left three pollers and the policy
    on two cores (CartPole x16 in the loop, one run: 2.5k env-steps/s with 2
    workers, 20.9k with 1). Its async mode (``batch_size=num_envs//2``) needs
    2 workers: 3.6k in another run, so it is not a contender here."""
    workers = max(1, min(cores - 1, n))
    while n % workers:
        workers -= 1
    return workers


def open_pufferlib(c):
    import pufferlib.emulation
    import pufferlib.vector

    factory = c["factory"]

    def creator(buf=None, seed=0):
        return pufferlib.emulation.GymnasiumPufferEnv(env_creator=factory, buf=buf, seed=seed)

    workers = pufferlib_workers(c["n"], c["cores"])
    venv = pufferlib.vector.make(
        creator, backend=pufferlib.vector.Multiprocessing, num_envs=c["n"], num_workers=workers
    )

    def step(a):
        o, r, te, tr, _ = venv.step(a)
        return o, r, np.logical_or(te, tr)

    return Lockstep(
        lambda: venv.reset(seed=c["seed"])[0], step, venv.close, {"num_workers": workers}
    )


# name: (label, open, default, vecenv's own)
CONTENDERS: Dict[str, Tuple[str, Callable, bool, bool]] = {
    "gym_sync": ("gymnasium SyncVectorEnv", open_gym_sync, True, False),
    "gym_async": ("gymnasium AsyncVectorEnv (shm)", open_gym_async, True, False),
    "sb3": ("SB3 SubprocVecEnv", open_sb3, True, False),
    "envpool_sync": ("envpool sync (own envs)", open_envpool_sync, True, False),
    "envpool_async": ("envpool async n/2 (own envs)", open_envpool_async, True, False),
    "ale_vector": ("ale-py AtariVectorEnv (own preprocessing)", open_ale_vector, True, False),
    "pufferlib": ("PufferLib Multiprocessing (one core spared)", open_pufferlib, True, False),
    "vecenv": ("vecenv default layout", open_vecenv, True, True),
    "vecenv_gym": (
        "vecenv.AsyncVectorEnv (gymnasium drop-in), default layout",
        open_vecenv_gym,
        True,
        True,
    ),
    "vecenv_gym_1worker": (  # opt-in: what the drop-in's default is measured against
        "vecenv.AsyncVectorEnv, 1 worker",
        lambda c: open_vecenv_gym(c, num_workers=1),
        False,
        True,
    ),
    "vecenv_gym_2workers": (
        "vecenv.AsyncVectorEnv, 2 workers",
        lambda c: open_vecenv_gym(c, num_workers=2),
        False,
        True,
    ),
    "vecenv_gym_spin0": (
        "vecenv.AsyncVectorEnv, default layout, spin=0",
        lambda c: open_vecenv_gym(c, spin=0.0),
        False,
        True,
    ),
    "vecenv_gym_spin200us": (
        "vecenv.AsyncVectorEnv, default layout, spin=200 us (no follow)",
        lambda c: open_vecenv_gym(c, spin=2e-4),
        False,
        True,
    ),
    "vecenv_inprocess": (
        "vecenv in process (num_workers=0)",
        lambda c: open_vecenv(c, num_workers=0),
        True,
        True,
    ),
    "vecenv_inline": (
        "vecenv, the caller stepping a share (inline=True)",
        lambda c: open_vecenv(c, inline=True),
        True,
        True,
    ),
    "vecenv_auto": (  # opt-in: the default layout is "auto", as the vecenv contender runs it
        'vecenv num_workers="auto"',
        lambda c: open_vecenv(c, num_workers="auto"),
        False,
        True,
    ),
    "vecenv_percore": (  # opt-in: the default layout until 2026-12-05
        "vecenv one worker per core",
        lambda c: open_vecenv(c, num_workers=min(c["n"], usable_cpus())),
        False,
        True,
    ),
    "vecenv_async": ("vecenv send/recv (batch n/2)", open_vecenv_partial, True, True),
    "vecenv_async_share": (
        "vecenv send/recv n/2, the caller's share from stats().caller_share",
        open_vecenv_share,
        True,
        True,
    ),
    # Opt-in: what the default layout loses to.
    "vecenv_spin0": ("vecenv default, spin=0", lambda c: open_vecenv(c, spin=0.0), False, True),
    "vecenv_spin1ms": (
        "vecenv default, spin=1 ms",
        lambda c: open_vecenv(c, spin=1e-3),
        False,
        True,
    ),
    "vecenv_async_spin1ms": (
        "vecenv send/recv n/2, spin=1 ms",
        lambda c: open_vecenv_partial(c, spin=1e-3),
        False,
        True,
    ),
    "vecenv_pinned": (
        "vecenv default, cpu_affinity=True",
        lambda c: open_vecenv(c, cpu_affinity=True),
        False,
        True,
    ),
    "vecenv_1worker": ("vecenv 1 worker", lambda c: open_vecenv(c, num_workers=1), False, True),
    "vecenv_async_1worker": (
        "vecenv send/recv n/2, 1 worker",
        lambda c: open_vecenv_partial(c, num_workers=1),
        False,
        True,
    ),
    "vecenv_1worker_spin1ms": (
        "vecenv 1 worker, spin=1 ms",
        lambda c: open_vecenv(c, num_workers=1, spin=1e-3),
        False,
        True,
    ),
    "vecenv_async_1worker_spin1ms": (
        "vecenv send/recv n/2, 1 worker, spin=1 ms",
        lambda c: open_vecenv_partial(c, num_workers=1, spin=1e-3),
        False,
        True,
    ),
    "vecenv_async_spin0": (
        "vecenv send/recv n/2, spin=0",
        lambda c: open_vecenv_partial(c, spin=0.0),
        False,
        True,
    ),
}
CALIBRATE_S = 1.0  # seconds of each of vecenv_async_share's two calibration runs
BOUND_S = {False: 0.3, True: 0.1}  # seconds of each of the bound's 3 timings a round (--quick)
PEERS_PYTHON = ("gym_sync", "gym_async", "sb3", "pufferlib")  # Python envs, as vecenv's
QUICK_CONTENDERS = ["gym_sync", "vecenv", "vecenv_inprocess", "vecenv_async"]


# --------------------------------------------------------------------- the loop
def _process_cpu() -> float:
    return time.process_time()


class Run:
    """An open contender in its rollout loop, resumable across rounds."""

    def __init__(self, venv, policy: Policy, n: int):
        self.venv, self.policy, self.n = venv, policy, n
        self.t = 0
        if venv.partial:
            venv.start()
        else:
            self.obs = venv.reset()

    def go(self, seconds: float) -> Dict[str, float]:
        """Run the loop for ``seconds`` of rollout time (updates excluded):
        env-steps, rollout seconds, seconds in the policy and in the vec env,
        the parent's CPU seconds in the rollout, updates and their seconds."""
        pol, v = self.policy, self.venv
        steps = 0
        t_policy = t_env = t_update = 0.0
        updates = 0
        batches = 0
        cpu_update = 0.0
        clock = time.perf_counter
        cpu0 = _process_cpu()
        start = clock()
        elapsed = 0.0
        while elapsed < seconds:
            t = self.t
            if v.partial:
                a0 = clock()
                obs, rew, done, ids = v.recv()
                a1 = clock()
                ids = np.asarray(ids)
                lo = int(ids[0])
                if ids[-1] - lo + 1 == len(ids):  # consecutive: a slice
                    rows: Any = slice(lo, lo + len(ids))
                else:
                    rows = pol.torch.as_tensor(ids)
                pol.store(t, rew, done, rows)
                actions = pol.act(t, obs, rows)
                a2 = clock()
                v.send(actions, ids)
                a3 = clock()
                steps += len(ids)
                t_env += (a1 - a0) + (a3 - a2)
                t_policy += a2 - a1
                done_rows = steps // self.n > batches
            else:
                a0 = clock()
                actions = pol.act(t, self.obs)
                a1 = clock()
                self.obs, rew, done = v.step(actions)
                a2 = clock()
                pol.store(t, rew, done)
                steps += self.n
                t_policy += clock() - a2 + (a1 - a0)
                t_env += a2 - a1
                done_rows = True
            if done_rows:
                batches += 1
                self.t = t = (t + 1) % UPDATE_EVERY
                if t == 0:  # the update, timed apart
                    u0, c0 = clock(), _process_cpu()
                    pol.update()
                    t_update += clock() - u0
                    cpu_update += _process_cpu() - c0
                    updates += 1
            elapsed = clock() - start - t_update
        return {
            "env_steps": steps,
            "seconds": elapsed,
            "policy_s": t_policy,
            "env_s": t_env,
            "parent_cpu_s": _process_cpu() - cpu0 - cpu_update,
            "batches": batches,
            "updates": updates,
            "update_s": t_update,
        }

    def close(self) -> None:
        self.venv.close()


# --------------------------------------------------------------------- the bound
def raw_env_cpu_s(env, seed: int, seconds: float) -> float:
    """CPU seconds per step of ``env`` in this process (resets included)."""
    env.reset(seed=seed)
    env.action_space.seed(seed)
    acts = [env.action_space.sample() for _ in range(256)]
    n = 0
    c0, w0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - w0 < seconds or n < 20:
        _, _, te, tr, _ = env.step(acts[n % 256])
        if te or tr:
            env.reset()
        n += 1
    return (time.process_time() - c0) / n


def policy_alone(policy: Policy, obs_space, n: int, seconds: float) -> Tuple[float, float]:
    """(wall, CPU) seconds of one batch step of the policy alone (buffer write,
    forward, sampling, store) on ``n`` observations."""
    obs_space.seed(0)
    obs = np.stack([obs_space.sample() for _ in range(n)])
    rew, done = np.zeros(n), np.zeros(n, dtype=bool)
    k = 0
    c0, w0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - w0 < seconds or k < 5:
        policy.act(k % UPDATE_EVERY, obs)
        policy.store(k % UPDATE_EVERY, rew, done)
        k += 1
    return (time.perf_counter() - w0) / k, (time.process_time() - c0) / k


def schedule_limits(
    n: int, cores: int, env_cpu_s: float, full_wall_s: float, half_wall_s: float, half_cpu_s: float
) -> Dict[str, float]:
    """env-steps/s that each schedule of the loop reaches with a vec env that
    costs nothing, from the times measured alone (seconds).

    - ``lockstep``: the policy on all ``n`` observations (``full_wall_s``),
      then the ``n`` env steps spread over the cores; nothing overlaps the
      policy: ``n / (full_wall_s + n * env_cpu_s / min(cores, n))``.
    - ``halves``: partial batches of ``n // 2`` (``recv``/``send``): the policy
      runs twice (``half_wall_s``, ``half_cpu_s`` each) while the other half
      steps, so the cores share all the CPU time, and the policy's two calls
      run one after the other:
      ``n / max((2 * half_cpu_s + n * env_cpu_s) / cores, 2 * half_wall_s)``.

    Neither counts what sharing a core costs (caches, switches), so they are
    limits, not predictions.
    """
    lockstep = n / (full_wall_s + n * env_cpu_s / max(1, min(cores, n)))
    halves = n / max((2 * half_cpu_s + n * env_cpu_s) / max(1, cores), 2 * half_wall_s)
    return {"lockstep": lockstep, "halves": halves}


# --------------------------------------------------------------------- the command
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="env-steps/s of vec envs inside CleanRL's PPO rollout loop, with the 2-core bound",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="smoke test: CartPole x8, 1 round (~20 s)")
    p.add_argument(
        "--cells",
        help="comma-separated env:num_envs (envs: "
        + ", ".join(CELL_ENVS)
        + "); default "
        + ",".join(f"{e}:{n}" for e, n in DEFAULT_CELLS),
    )
    p.add_argument(
        "--contenders",
        help=f"comma-separated from {list(CONTENDERS)}, or 'all' (default: all but the opt-in "
        "vecenv variants)",
    )
    p.add_argument("--rounds", type=int, help="interleaved timed rounds (default 3; quick 1)")
    p.add_argument(
        "--seconds", type=float, help="rollout seconds per round (default 1.5; quick 0.5)"
    )
    p.add_argument("--warmup", type=float, help="warm-up seconds per contender (default 0.3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out", type=Path, help="JSON path (default: benchmarks/results/local/rollout-<time>.json)"
    )
    args = p.parse_args(argv)
    q = args.quick
    fill_defaults(args, rounds=(1, 3), seconds=(0.5, 1.5), warmup=(0.1, 0.3))
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0:
        p.error("--rounds and --seconds must be positive, --warmup >= 0")
    if args.cells:
        try:
            args.cells = parse_cells(args.cells, CELL_ENVS)
        except ValueError as exc:
            p.error(f"--cells: {exc}")
    else:
        args.cells = [("cartpole", 8)] if q else list(DEFAULT_CELLS)
    names = [x.strip() for x in (args.contenders or "").split(",") if x.strip()]
    if names == ["all"]:
        names = list(CONTENDERS)
    elif not names:
        names = QUICK_CONTENDERS if q else [k for k, v in CONTENDERS.items() if v[2]]
    bad = [x for x in names if x not in CONTENDERS]
    if bad:
        p.error(f"unknown contenders {bad}; choose from {list(CONTENDERS)}")
    args.contenders = names
    if args.out is None:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        args.out = LOCAL_OUT / f"rollout-{stamp}.json"
    return args


def fmt_rate(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def estimate_cell_s(args, key: str, n: int) -> float:
    """Seconds for one cell: warm-up and rounds per contender, opening (Pong
    and one process per env cost more), the bound's timings in every round."""
    update = 3.0 if key == "pong" else 1.3  # the excluded updates (Pong's CNN: seconds)
    per = args.warmup + args.rounds * args.seconds * update
    open_s = 0.5 + (0.05 * n if key == "cartpole" else 0.3 * n)  # one process per env for some
    return len(args.contenders) * (per + open_s) + 1.0 + args.rounds * 3 * BOUND_S[args.quick]


def estimate_s(argv=None) -> float:
    """Seconds of a whole run with these arguments: the estimate :func:`main`
    prints first (``scripts/bench.sh`` adds it to the whole job's)."""
    args = parse_args(argv)
    return sum(estimate_cell_s(args, k, n) for k, n in args.cells)


def run_cell(args, key: str, n: int, cores: int, report: Dict[str, Any], missing: Dict[str, str]):
    spec = CELL_ENVS[key]
    label = f"{spec['label']} x{n}"
    try:
        probe = spec["factory"]()
    except Exception as exc:
        hint = f" ({spec['hint']})" if spec.get("hint") else ""
        why = f"cannot make {spec['label']}: {type(exc).__name__}: {exc}{hint}"
        report["skipped"].append({"cell": label, "reason": why})
        print(f"skip {label}: {why}", flush=True)
        return
    obs_space, act_space = probe.observation_space, probe.action_space
    ctx = {**spec, "n": n, "seed": args.seed, "cores": cores}
    cell: Dict[str, Any] = {"env": spec["label"], "key": key, "num_envs": n, "contenders": {}}
    half = max(1, n // 2)  # the batch of partial batches (the halves' limit)
    policies = (
        Policy(obs_space, act_space, n, args.seed),
        Policy(obs_space, act_space, half, args.seed),
    )
    alone_s = BOUND_S[args.quick]  # each timing of the bound, every round
    bounds: List[Dict[str, float]] = []
    runs: Dict[str, Run] = {}
    try:
        for name in args.contenders:
            if name in missing:
                continue
            label_c, opener = CONTENDERS[name][0], CONTENDERS[name][1]
            try:
                venv = opener(ctx)
            except ImportError as exc:
                missing[name] = f"not installed ({exc})"
                report["skipped"].append({"contender": name, "reason": missing[name]})
                continue
            except Skip as exc:
                report["skipped"].append({"contender": name, "cell": label, "reason": str(exc)})
                continue
            except Exception as exc:
                report["skipped"].append(
                    {"contender": name, "cell": label, "reason": f"failed to start: {exc!r}",
                     "traceback": traceback.format_exc(limit=5)}
                )  # fmt: skip
                continue
            try:
                runs[name] = Run(venv, Policy(obs_space, act_space, n, args.seed), n)
                runs[name].go(args.warmup)
            except Exception as exc:
                venv.close()
                runs.pop(name, None)
                report["skipped"].append(
                    {"contender": name, "cell": label, "reason": f"failed in warm-up: {exc!r}"}
                )
                continue
            cell["contenders"][name] = {"label": label_c, "layout": venv.layout, "rounds": []}
        for r in range(args.rounds):
            # The bound first, before the round's contenders (open, between their turns).
            bounds.append(measure_bound(probe, obs_space, policies, cores, args.seed, alone_s))
            names = list(runs)
            k = r % max(1, len(names))
            for name in names[k:] + names[:k]:
                try:
                    res = {**runs[name].go(args.seconds), "round": r}
                except Exception as exc:
                    runs.pop(name).close()
                    report["skipped"].append(
                        {"contender": name, "cell": label, "reason": f"failed while timed: {exc!r}"}
                    )
                    continue
                cell["contenders"][name]["rounds"].append(res)
            print(f"  {label}: round {r + 1}/{args.rounds} done", flush=True)
    finally:
        for run in runs.values():
            try:
                run.close()
            except Exception:
                pass
        probe.close()
    cell["bound"] = {  # --rounds >= 1: every cell has a bound
        **{k: statistics.median(b[k] for b in bounds) for k in bounds[0]},
        "cores": cores,
        "rounds": bounds,
    }
    summarize(cell)
    report["cells"].append(cell)


def measure_bound(
    env, obs_space, policies, cores: int, seed: int, seconds: float
) -> Dict[str, float]:
    """The bound and the schedule limits of one moment: the raw ``env``'s CPU
    time per step, then the policy alone on ``policies`` (num_envs
    observations, then num_envs/2), ``seconds`` each."""
    full, half = policies
    env_cpu = raw_env_cpu_s(env, seed, seconds)
    n = full.num_envs
    pol_wall, pol_cpu = policy_alone(full, obs_space, n, seconds)
    half_wall, half_cpu = policy_alone(half, obs_space, half.num_envs, seconds)
    alone = n / pol_wall
    limits = schedule_limits(n, cores, env_cpu, pol_wall, half_wall, half_cpu)
    return {
        "env_cpu_us_per_step": env_cpu * 1e6,
        "policy_us_per_batch_step": pol_wall * 1e6,
        "policy_cpu_us_per_env_step": pol_cpu / n * 1e6,
        "policy_us_per_half_batch_step": half_wall * 1e6,
        "policy_alone_env_steps_per_s": alone,
        "bound_env_steps_per_s": min(alone, cores / (env_cpu + pol_cpu / n)),
        "lockstep_limit_env_steps_per_s": limits["lockstep"],
        "halves_limit_env_steps_per_s": limits["halves"],
        "better_limit_env_steps_per_s": max(limits.values()),
    }


def _paired(rounds: List[Dict[str, Any]], bounds: List[Dict[str, float]], key: str) -> float:
    """Median over ``rounds`` of a round's env-steps/s over ``key`` of the
    bound measured in the same round."""
    return statistics.median(
        x["env_steps"] / x["seconds"] / bounds[x["round"]][key] for x in rounds
    )


def summarize(cell: Dict[str, Any]) -> None:
    """Median env-steps/s and spread per contender, the fractions of the
    bound and of the better schedule's limit (each round against its own),
    ratios, the conclusion. The best vecenv mode is the one with the highest
    median env-steps/s; its fractions can then be lower than another mode's."""
    bounds = cell["bound"]["rounds"]
    for c in cell["contenders"].values():
        rounds = c["rounds"]
        if not rounds:
            continue
        rates = [x["env_steps"] / x["seconds"] for x in rounds]
        c["env_steps_per_s"] = statistics.median(rates)
        c["spread"] = [min(rates), max(rates)]
        c["of_bound"] = _paired(rounds, bounds, "bound_env_steps_per_s")
        c["of_limit"] = _paired(rounds, bounds, "better_limit_env_steps_per_s")
        batches = sum(x["batches"] for x in rounds) or 1
        c["per_batch_step_us"] = {
            "policy": sum(x["policy_s"] for x in rounds) / batches * 1e6,
            "env_wait": sum(x["env_s"] for x in rounds) / batches * 1e6,
            "parent_cpu": sum(x["parent_cpu_s"] for x in rounds) / batches * 1e6,
            "wall": sum(x["seconds"] for x in rounds) / batches * 1e6,
        }
    measured = {k: v for k, v in cell["contenders"].items() if "env_steps_per_s" in v}
    ours = {k: v for k, v in measured.items() if CONTENDERS[k][3]}
    peers = {k: v for k, v in measured.items() if k in PEERS_PYTHON}
    if not ours:
        cell["conclusion"] = "no vecenv contender ran"
        return
    best = max(ours, key=lambda k: ours[k]["env_steps_per_s"])
    b = ours[best]["env_steps_per_s"]
    text = (
        f"use {CONTENDERS[best][0]} ({fmt_rate(b)}, {ours[best]['of_bound']:.2f} of the bound, "
        f"{ours[best]['of_limit']:.2f} of the better schedule's limit"
    )
    if peers:
        p = max(peers, key=lambda k: peers[k]["env_steps_per_s"])
        text += f", {b / peers[p]['env_steps_per_s']:.2f}x {CONTENDERS[p][0]}"
    others = {k: v for k, v in measured.items() if not CONTENDERS[k][3] and k not in PEERS_PYTHON}
    if others:
        o = max(others, key=lambda k: others[k]["env_steps_per_s"])
        text += f", {b / others[o]['env_steps_per_s']:.2f}x {CONTENDERS[o][0]}"
    text += ")"
    if "gym_sync" in measured and "vecenv" in measured:
        r = measured["vecenv"]["env_steps_per_s"] / measured["gym_sync"]["env_steps_per_s"]
        text += f"; vecenv's default is {r:.2f}x gymnasium SyncVectorEnv"
    cell["best_vecenv"] = best
    cell["conclusion"] = text


def print_cell(cell: Dict[str, Any]) -> None:
    b = cell["bound"]
    per_round = [x["bound_env_steps_per_s"] for x in b["rounds"]]
    moved = (
        f", {fmt_rate(min(per_round))}-{fmt_rate(max(per_round))} over the rounds"
        if len(per_round) > 1
        else ""
    )
    print(
        f"\n{cell['env']} x{cell['num_envs']}: 2-core bound {fmt_rate(b['bound_env_steps_per_s'])}{moved} "
        f"(policy alone {fmt_rate(b['policy_alone_env_steps_per_s'])}; per env-step: env CPU "
        f"{b['env_cpu_us_per_step']:.1f} us, policy CPU {b['policy_cpu_us_per_env_step']:.1f} us)"
    )
    print(
        f"  with a vec env that costs nothing: lockstep {fmt_rate(b['lockstep_limit_env_steps_per_s'])} "
        f"(the policy {b['policy_us_per_batch_step']:.0f} us a call on x{cell['num_envs']}), halves "
        f"{fmt_rate(b['halves_limit_env_steps_per_s'])} ({b['policy_us_per_half_batch_step']:.0f} us a call "
        f"on x{max(1, cell['num_envs'] // 2)})"
    )
    print(
        f"  {'contender':<38} {'env-steps/s':>11} {'spread':>15} {'of bound':>8}"
        f" {'policy us':>9} {'env wait us':>11} {'parent CPU us':>13}"
    )
    rows = sorted(
        (v for v in cell["contenders"].values() if "env_steps_per_s" in v),
        key=lambda v: -v["env_steps_per_s"],
    )
    for v in rows:
        lo, hi = v["spread"]
        pb = v["per_batch_step_us"]
        print(
            f"  {v['label']:<38} {fmt_rate(v['env_steps_per_s']):>11} "
            f"{fmt_rate(lo) + '-' + fmt_rate(hi):>15} {v['of_bound']:>8.2f}"
            f" {pb['policy']:>9.0f} {pb['env_wait']:>11.0f} {pb['parent_cpu']:>13.0f}"
        )
    print(f"  conclusion: {cell['conclusion']}", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(1)
    cores = usable_cpus()
    started = time.time()
    report: Dict[str, Any] = {
        **report_header(args),
        "benchmark": "rollout",
        "method": {
            "loop": "CleanRL ppo.py rollout: buffer write, policy forward (torch, 1 thread), "
            f"sample, step, store; an update every {UPDATE_EVERY} batch steps, excluded",
            "bound": "min(policy alone, cores / (env CPU time + policy CPU time) per env-step)",
            "schedule_limits": "lockstep: n / (policy wall on n + n * env CPU / cores); halves: "
            "n / max((2 * policy CPU on n/2 + n * env CPU) / cores, 2 * policy wall on n/2)",
            "order": "interleaved rounds, order rotated each round",
            "vecenv": "copy=False (views into shared memory, copied into the rollout buffer)",
        },
        "cells": [],
        "skipped": [],
    }
    plan = [estimate_cell_s(args, k, n) for k, n in args.cells]
    print(
        f"rollout benchmark: {report['machine']['cpu_model']}, {cores} usable cores; cells "
        + ", ".join(f"{k} x{n}" for k, n in args.cells)
        + f"; {len(args.contenders)} contenders, {args.rounds} round(s) x {args.seconds} s: "
        f"about {fmt_duration(sum(plan))} (estimated)",
        flush=True,
    )
    missing: Dict[str, str] = {}
    done_plan = 0.0
    for i, (key, n) in enumerate(args.cells):
        t0 = time.time()
        run_cell(args, key, n, cores, report, missing)
        if (
            report["cells"]
            and report["cells"][-1]["key"] == key
            and report["cells"][-1]["num_envs"] == n
        ):
            print_cell(report["cells"][-1])
        done_plan += plan[i]
        elapsed = time.time() - started
        eta = sum(plan[i + 1 :]) * elapsed / max(done_plan, 1e-9)
        print(
            f"[{i + 1}/{len(args.cells)}] {key} x{n} took {time.time() - t0:.0f} s; "
            f"elapsed {fmt_duration(elapsed)}, ETA {fmt_duration(eta)}",
            flush=True,
        )
    for s in report["skipped"]:
        where = s.get("cell", "every cell")
        print(f"skipped {s.get('contender', '')} ({where}): {s['reason']}")
    report["quiet"] = quiet(
        {
            f"{c['env']} x{c['num_envs']}": [
                b["bound_env_steps_per_s"] for b in c["bound"]["rounds"]
            ]
            for c in report["cells"]
        }
    )
    if report["quiet"]["note"]:
        print(f"note: {report['quiet']['note']}")
    report["machine"]["load_average_end"] = load_average()
    report["elapsed_s"] = round(time.time() - started, 1)
    report["estimated_s"] = round(sum(plan), 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str))
    tmp.replace(args.out)
    print(f"took {fmt_duration(report['elapsed_s'])}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
