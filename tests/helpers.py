"""Helpers and test envs that more than one test module uses.

Test modules import from here, never from each other (under pytest's
importlib mode a test module imported by another one is loaded twice). This
module is on ``sys.path`` through ``pythonpath = ["tests"]`` (pyproject.toml),
and worker processes inherit the parent's ``sys.path``, so cloudpickle sends
the envs and factories defined here by reference and the workers import them
from here. Runs in the parent (the helpers) and in the workers (the envs).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import signal
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import psutil
from reference import assert_tree_equal, rollout_loop

from vecenv import _core

KB = 1000
MB = 1000 * 1000

# A child Python that must import the installed vecenv, never the source tree:
# `-P` (3.11+) keeps the script's folder and the working directory off
# sys.path. Python 3.9 and 3.10 lack `-P`; their `-I` keeps both off too, and
# also ignores PYTHON* variables and the user's site-packages, which no such
# child needs.
SAFE_PYTHON = (sys.executable, "-P" if sys.version_info >= (3, 11) else "-I")


def load_script(path):
    """The module of the script at ``path`` (one of scripts/, not a package)."""
    spec = importlib.util.spec_from_file_location(f"_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------ processes
# Ray's node processes (gcs_server, raylet, agents, idle workers) come and go
# as Ray pleases; the Ray fixtures check that none outlives ray.shutdown().
# Actor processes ("ray::_EnvActor...") and their vec-env workers still count.
_RAY_NODE_PROCS = ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")

_RAY_PACKAGE = re.compile(r"[/\\](site|dist)-packages[/\\]ray[/\\]")


def is_ours(p, ray_test=False):
    """Whether psutil process ``p`` counts as one a test started and must
    stop: not multiprocessing's own, nor (in a Ray test) Ray's node processes."""
    # The forkserver and the resource tracker are multiprocessing's own and
    # live for the whole session.
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return False
    if ray_test and (cmd.startswith(_RAY_NODE_PROCS) or _RAY_PACKAGE.search(cmd)):
        return False
    return "forkserver" not in cmd and "resource_tracker" not in cmd


# ------------------------------------------------------------ actions and spaces
def describe(x):
    """Type and value of an action as an env received it, recursively (tuple
    and dict structure kept), comparable across processes."""
    if isinstance(x, tuple):
        return tuple(describe(v) for v in x)
    if isinstance(x, dict):
        return {k: describe(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.tolist())
    return (type(x).__name__, x.item() if isinstance(x, np.generic) else x)


class WordSpace(gym.Space):
    """A custom space of strings: no fixed layout, so its values travel pickled."""

    def sample(self, mask=None, probability=None):
        return "w"

    def contains(self, x):
        return isinstance(x, str)

    def __eq__(self, other):
        return isinstance(other, WordSpace)


# ------------------------------------------------------------ trajectories
def compare_rollout(venv, env_fns, actions, seed):
    """Step ``venv`` (the SB3-style API) and a plain loop over ``env_fns`` with
    the same seed and ``actions`` (one row per step) and assert every
    observation, reward, done and terminal observation equal. Returns the
    number of episode ends seen."""
    first, steps = rollout_loop(env_fns, actions, seed)
    venv.seed(seed)
    assert_tree_equal(venv.reset(), first)
    ends = 0
    for acts, (obs, rews, dones, terminal) in zip(actions, steps):
        v_obs, v_rews, v_dones, v_infos = venv.step(acts)
        assert_tree_equal(v_obs, obs)
        np.testing.assert_array_equal(v_rews, rews)
        assert v_rews.dtype == np.float64
        np.testing.assert_array_equal(v_dones, dones)
        assert isinstance(v_infos, list) and len(v_infos) == venv.num_envs
        for i, info in enumerate(v_infos):
            if i in terminal:
                ends += 1
                assert_tree_equal(
                    info["terminal_observation"], terminal[i][0], f"terminal obs of env {i}"
                )
                assert info["TimeLimit.truncated"] == terminal[i][1]
            else:
                assert "terminal_observation" not in info
    return ends


# ------------------------------------------------------------ Ctrl-C
def sigint_after(go, delay):
    """Start and return a thread that sends SIGINT to this process ``delay``
    seconds after ``go`` is set (nothing if it is not set within 60 s).

    Set ``go`` inside the ``pytest.raises(KeyboardInterrupt)`` block: the
    delay then starts there. A ``threading.Timer`` started before the block
    does not do that: ``Thread.start()`` waits for the new thread, and under
    load a short timer fires while the parent is still in ``start()``, so the
    interrupt escapes from the test instead of landing in the vec env.
    """

    def run():
        if go.wait(60):
            time.sleep(delay)
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class InfoEnv(gym.Env):
    """Observation ``[env_id, t]``; every step sends an info ``{"env", "t"}``
    over the pipe; episodes terminate at t = 5."""

    def __init__(self, env_id):
        self.env_id = env_id
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([self.env_id, 0], np.float32), {"env": self.env_id, "t": 0}

    def step(self, action):
        self.t += 1
        obs = np.array([self.env_id, self.t], np.float32)
        return obs, 1.0, self.t >= 5, False, {"env": self.env_id, "t": self.t}

    def pid(self):
        return os.getpid()


class ReusedInfoEnv(gym.Env):
    """Returns one info dict, holding one array, from every reset and step and
    changes both in place: ``t`` (and every element of ``arr``) is the step
    count, 0 after a reset. Episodes terminate every ``length`` steps. The
    case where an info taken after the automatic reset shows the reset's
    values (gymnasium PR #1680)."""

    def __init__(self, length=2):
        self.observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.length = length
        self.t = 0
        self.info = {"t": 0, "arr": np.zeros(2)}

    def _now(self):
        self.info["t"] = self.t
        self.info["arr"][:] = self.t
        return np.array([self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._now(), self.info

    def step(self, action):
        self.t += 1
        return self._now(), 1.0, self.t == self.length, False, self.info


LAYOUTS = {  # the layouts every front end runs in, by test id
    "2-workers": {"num_workers": 2},
    "in-process": {"num_workers": 0},
    "inline": {"num_workers": 1, "inline": True},
}


# ------------------------------------------------------------ payloads of any size
_PATTERN = (np.arange(256, dtype=np.int64) * 7 % 256).astype(np.uint8)


def blob_of(n: int, seed: int) -> np.ndarray:
    """``n`` bytes (uint8) that depend on ``seed`` (mod 256)."""
    out = np.resize(_PATTERN, n)
    out += np.uint8(seed % 256)
    return out


def digest_of(x) -> str:
    """SHA-1 of the bytes of ``x`` as an array."""
    return hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest()


class PayloadEnv(gym.Env):
    """Observation ``[env_id, t, last_action]`` (float64); action Discrete(5).

    ``info_bytes`` > 0: every step's info holds ``blob``, ``info_bytes`` bytes
    that encode env id and step. ``reset(options={"blob": x})`` answers with
    the digest of ``x`` in its info.
    """

    def __init__(self, env_id=0, info_bytes=0):
        self.env_id = env_id
        self.info_bytes = info_bytes
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (3,), np.float64)
        self.action_space = gym.spaces.Discrete(5)
        self.t = 0
        self.a = -1

    def _obs(self):
        return np.array([self.env_id, self.t, self.a], np.float64)

    def reset(self, *, seed=None, options=None):
        self.t, self.a = 0, -1
        info = {"env": self.env_id, "t": 0}
        if options and "blob" in options:
            info["digest"] = digest_of(options["blob"])
        return self._obs(), info

    def step(self, action):
        self.t += 1
        self.a = int(action)
        info = {"env": self.env_id, "t": self.t, "a": self.a}
        if self.info_bytes:
            info["blob"] = blob_of(self.info_bytes, self.env_id * 1000 + self.t)
        return self._obs(), 1.0, False, False, info

    def digest(self, x):
        return self.env_id, digest_of(x)

    def echo(self, x):
        return x

    def make_blob(self, n):
        return blob_of(n, self.env_id)

    def describe(self, x):
        return self.env_id, self.t, self.a, x


def payload_fns(num_envs, info_bytes=0):
    """Factories of ``num_envs`` PayloadEnvs, env ids 0..num_envs-1."""
    return [functools.partial(PayloadEnv, i, info_bytes) for i in range(num_envs)]


def make_control(num_envs, num_workers, env_worker):
    """A control block in a memfd and its two views: ``(block, Control,
    WorkerControl)``; ``env_worker[i]`` is env i's worker."""
    nbytes = _core.control_nbytes(num_envs, num_workers)
    fd = os.memfd_create("vecenv-test")
    try:
        os.ftruncate(fd, nbytes)
        block = _core.SharedBlock(fd, nbytes)
    finally:
        os.close(fd)
    ctrl = _core.Control(block, num_envs, num_workers, env_worker, init=True)
    return block, ctrl, _core.WorkerControl(block, num_envs, num_workers)


class Alarm:
    """SIGALRM raising KeyboardInterrupt, only while armed (the test's own
    bookkeeping is never interrupted)."""

    def __init__(self):
        self.armed = False
        self.fired = 0
        self.old = None

    def _handler(self, signum, frame):
        if self.armed:
            self.armed = False
            self.fired += 1
            raise KeyboardInterrupt

    def __enter__(self):
        self.old = signal.signal(signal.SIGALRM, self._handler)
        return self

    def __exit__(self, *exc):
        self.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.old)

    def run(self, delay_s, op, *args):
        """Run ``op(*args)`` with an interrupt after ``delay_s``. Returns
        ``(interrupted, result)``."""
        result = None
        try:
            self.armed = True
            signal.setitimer(signal.ITIMER_REAL, delay_s)
            result = op(*args)
            self.armed = False
        except KeyboardInterrupt:
            return True, None
        finally:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        return False, result


def _recover(venv, stats):
    """reset() after an interrupt: it always succeeds, also when the interrupt
    left a step pending (landed after step_async returned), which reset()
    finishes and drops."""
    stats["broken"] += len(venv._pool.broken_workers())  # cut inside a frame: restarted
    if venv._state.name == "STEP_PENDING":
        stats["pending_step"] += 1
    return venv.reset()


def fuzz_lockstep(venv, alarm, rng, trials, stats):
    """``trials`` random lockstep calls on PayloadEnvs, each with a
    KeyboardInterrupt ``alarm`` after a random delay; every call that is not
    interrupted must return exactly what the envs did, and after every
    interrupt reset() must recover. Counts into ``stats``."""
    n = venv.num_envs
    t = np.zeros(n, np.int64)
    venv.reset()
    big = blob_of(300 * KB, 1)
    for _ in range(trials):
        op = rng.integers(7)
        actions = rng.integers(0, 5, n)
        delay = float(10 ** rng.uniform(-6, -3.3))  # 1 us .. 0.5 ms
        if op == 0:
            hit, res = alarm.run(delay, venv.step, actions)
        elif op == 1:
            hit, res = alarm.run(delay, venv.step_async, actions)
            if not hit:
                hit, res = alarm.run(delay, venv.step_wait)
        elif op == 2:
            hit, res = alarm.run(delay, venv.get_attr, "t")
        elif op == 3:
            hit, res = alarm.run(delay, venv.env_method, "describe", 3)
        elif op == 4:
            hit, res = alarm.run(
                delay, functools.partial(venv.env_method, "digest", big, indices=[0])
            )
        elif op == 5:
            hit, res = alarm.run(delay, venv.reset)
        else:
            hit, res = alarm.run(delay, venv.step, actions)
        if hit:
            stats["interrupts"] += 1
            obs = _recover(venv, stats)
            t[:] = 0
            assert obs[:, 0].tolist() == list(range(n)) and not obs[:, 1].any()
            assert [(i["env"], i["t"]) for i in venv.reset_infos] == [(i, 0) for i in range(n)]
            continue
        if op in (0, 1, 6):
            obs, _, _, infos = res
            t += 1
            assert obs[:, 0].tolist() == list(range(n))
            assert obs[:, 1].tolist() == t.tolist()
            assert obs[:, 2].tolist() == actions.tolist()
            assert infos == [{"env": i, "t": int(t[i]), "a": int(actions[i])} for i in range(n)]
        elif op == 2:
            assert res == t.tolist()
        elif op == 3:
            assert [r[:2] for r in res] == [(i, int(t[i])) for i in range(n)]
            assert all(r[3] == 3 for r in res)
        elif op == 4:
            assert res == [(0, digest_of(big))]
        elif op == 5:
            t[:] = 0
            assert not res[:, 1].any()


def fuzz_partial(venv, alarm, rng, trials, stats):
    """As fuzz_lockstep with partial batches (send/recv, ``venv.batch_size``)."""
    n, k = venv.num_envs, venv.batch_size
    t = np.zeros(n, np.int64)
    last = np.full(n, -1, np.int64)
    in_flight = np.ones(n, bool)  # after reset(): every env's reset is in flight
    venv.reset()
    for _ in range(trials):
        held = np.flatnonzero(~in_flight)
        choices = ["recv"] if in_flight.sum() >= k else []
        if held.size:
            choices.append("send")
        choices += ["get_attr", "reset"] if not in_flight.any() else ["reset"]
        op = choices[rng.integers(len(choices))]
        delay = float(10 ** rng.uniform(-6, -3.3))  # 1 us .. 0.5 ms
        if op == "send":
            ids = rng.permutation(held)[: rng.integers(1, held.size + 1)]
            acts = rng.integers(0, 5, ids.size)
            hit, res = alarm.run(delay, venv.send, acts, ids)
        elif op == "recv":
            hit, res = alarm.run(delay, venv.recv)
        elif op == "get_attr":
            hit, res = alarm.run(delay, venv.get_attr, "t")
        else:
            hit, res = alarm.run(delay, venv.reset)
        if hit:
            stats["interrupts"] += 1
            assert _recover(venv, stats) is None
            t[:] = 0
            last[:] = -1
            in_flight[:] = True
            continue
        if op == "send":
            in_flight[ids] = True
            t[ids] += 1
            last[ids] = acts
        elif op == "recv":
            obs, _, _, infos, ids = res
            assert in_flight[ids].all()
            in_flight[ids] = False
            for j, e in enumerate(ids):
                e = int(e)
                assert obs[j].tolist() == [e, t[e], last[e]]
                want = {"env": e, "t": int(t[e])}
                if t[e]:
                    want["a"] = int(last[e])
                assert infos[j] == want
        elif op == "get_attr":
            assert res == t.tolist()
        else:
            t[:] = 0
            last[:] = -1
            in_flight[:] = True
