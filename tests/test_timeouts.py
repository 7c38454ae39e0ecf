"""The two timeout errors (vecenv.errors) and the engine's public waits
(``limit_waits``, ``call_async`` / ``call_wait``, ``waiting``).

PendingTimeoutError: a wait ran out of time, nothing was killed, the call is
still pending. WatchdogTimeoutError: the vec env's own time limit passed and
the late workers were killed. Both are VecEnvTimeoutError (and TimeoutError).
"""

import time

import gymnasium as gym
import numpy as np
import psutil
import pytest

import vecenv
from vecenv.gymnasium_vector import AsyncVectorEnv, WaitTimeoutError


class NapEnv(gym.Env):
    """Each step sleeps ``action[0]`` seconds; the observation counts steps."""

    observation_space = gym.spaces.Box(0, 1e6, (1,), np.float64)
    action_space = gym.spaces.Box(0, 100, (1,), np.float64)

    def __init__(self, start_delay: float = 0.0):
        time.sleep(start_delay)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0]), {}

    def step(self, action):
        time.sleep(float(action[0]))
        self.t += 1
        return np.array([float(self.t)]), 0.0, False, False, {}

    def nap(self, seconds):
        time.sleep(seconds)
        return seconds


def _fns(n=2, **kwargs):
    return [lambda: NapEnv(**kwargs) for _ in range(n)]


def _naps(*seconds):
    return np.array([[s] for s in seconds], np.float64)


def test_both_are_timeout_errors_and_exported():
    for cls in (vecenv.PendingTimeoutError, vecenv.WatchdogTimeoutError):
        assert issubclass(cls, vecenv.VecEnvTimeoutError)
        assert issubclass(cls, TimeoutError) and issubclass(cls, vecenv.VecEnvError)
        assert cls.__name__ in vecenv.__all__
    assert not issubclass(vecenv.PendingTimeoutError, vecenv.WatchdogTimeoutError)
    assert not issubclass(vecenv.WatchdogTimeoutError, vecenv.PendingTimeoutError)


@pytest.mark.timeout(60)
def test_limit_waits_leaves_the_step_pending_and_kills_nothing():
    with vecenv.ShmemVecEnv(_fns(), num_workers=2) as venv:
        venv.reset()
        pids = venv.env_method("nap", 0)  # every worker answers
        workers = [p.pid for p in psutil.Process().children()]
        venv.step_async(_naps(0.0, 1.5))
        t0 = time.monotonic()
        with pytest.raises(vecenv.PendingTimeoutError) as info:
            with venv.limit_waits(0.2):
                venv.step_wait()
        assert time.monotonic() - t0 < 1.2
        err = info.value
        assert isinstance(err, vecenv.VecEnvTimeoutError)
        assert not isinstance(err, vecenv.WatchdogTimeoutError)
        assert err.env_indices == (1,) and "still pending" in str(err)
        assert venv.waiting
        with pytest.raises(vecenv.StateError, match="step_wait"):
            venv.step_async(_naps(0.0, 0.0))
        obs, _, _, _ = venv.step_wait()  # the same step, collected
        assert obs[:, 0].tolist() == [1.0, 1.0]
        assert not venv.waiting
        assert all(psutil.pid_exists(p) for p in workers) and pids == [0, 0]
        assert venv._wait_timeout is None  # the limit ended with the block


@pytest.mark.timeout(60)
def test_watchdog_kills_the_late_worker_and_needs_a_reset():
    with vecenv.ShmemVecEnv(_fns(), num_workers=2, timeout=0.5) as venv:
        venv.reset()
        venv.step_async(_naps(0.0, 30.0))
        with pytest.raises(vecenv.WatchdogTimeoutError) as info:
            venv.step_wait()
        err = info.value
        assert not isinstance(err, vecenv.PendingTimeoutError)
        assert err.env_indices == (1,) and "killed" in str(err)
        assert not venv.waiting
        with pytest.raises(vecenv.StateError, match=r"reset\(\)"):
            venv.step_async(_naps(0.0, 0.0))
        obs = venv.reset()  # starts the killed worker again
        assert obs[:, 0].tolist() == [0.0, 0.0]


@pytest.mark.timeout(60)
def test_call_wait_with_a_timeout_keeps_the_call_pending():
    with vecenv.ShmemVecEnv(_fns(), num_workers=2) as venv:
        venv.reset()
        handle = venv.call_async("env_method", "nap", (1.0,), indices=[1])
        with pytest.raises(vecenv.PendingTimeoutError):
            venv.call_wait(handle, timeout=0.1)
        assert venv.call_wait(handle) == [1.0]
        # Several calls in flight at once, each collected by its handle.
        a = venv.call_async("get_attr", "t", indices=[0])
        b = venv.call_async("set_attr", "t", (7,), indices=[1])
        c = venv.call_async("call", "nap", (0.0,), {})
        assert venv.call_wait(c) == [0.0, 0.0]
        assert venv.call_wait(b) == [None]
        assert venv.call_wait(a) == [0]
        assert venv.get_attr("t") == [0, 7]


def test_call_async_and_limit_waits_check_their_arguments():
    with vecenv.ShmemVecEnv(_fns(1), num_workers=1) as venv:
        with pytest.raises(vecenv.InvalidArgumentError, match="kind must be one of"):
            venv.call_async("nap", "nap")
        with pytest.raises(vecenv.InvalidArgumentError, match="timeout"):
            with venv.limit_waits(-1):
                pass
        with pytest.raises(vecenv.InvalidArgumentError, match="indices"):
            venv.call_async("get_attr", "t", indices=[5])


@pytest.mark.timeout(60)
def test_start_timeout_is_a_watchdog_timeout():
    with pytest.raises(vecenv.WatchdogTimeoutError, match="start_timeout"):
        vecenv.ShmemVecEnv(_fns(1, start_delay=30.0), num_workers=1, start_timeout=0.5)


@pytest.mark.timeout(60)
def test_gymnasium_wait_timeouts_say_which_kind():
    envs = AsyncVectorEnv(_fns(), timeout=1.0, num_workers=2)
    try:
        envs.reset()
        envs.step_async(_naps(0.0, 0.6))
        with pytest.raises(WaitTimeoutError) as info:
            envs.step_wait(timeout=0.1)  # this wait only: still pending
        assert isinstance(info.value, vecenv.PendingTimeoutError)
        obs, *_ = envs.step_wait()
        assert obs[:, 0].tolist() == [1.0, 1.0]
        envs.step_async(_naps(0.0, 30.0))
        with pytest.raises(WaitTimeoutError) as info:
            envs.step_wait()  # the engine's timeout: the late worker is killed
        assert isinstance(info.value, vecenv.WatchdogTimeoutError)
        assert not isinstance(info.value, vecenv.PendingTimeoutError)
    finally:
        envs.close()
