"""Small environments for benchmarks and tests (importable in workers).

* :class:`NoopEnv` (``"vecenv/Noop-v0"``): a 4-float observation and no work;
  measures pure vectorization overhead.
* :class:`BigObsEnv` (``"vecenv/BigObs-v0"``): 84x84x4 uint8 observations
  (28 KiB) and no work; measures observation transport.
* :class:`CounterEnv` (``"vecenv/Counter-v0"``): deterministic Dict/Tuple
  observations that encode the env's id, step count and last action; episodes
  end after ``episode_length`` steps. Used to check ordering and correctness.
* :class:`InfoEnv` (``"vecenv/Info-v0"``): about ``work_s`` (10 us) of busy
  work a step and, with ``infos=True`` (default), MuJoCo's locomotion info
  keys as four NumPy float64 scalars every step (HalfCheetah-v5's
  ``x_position``, ``x_velocity``, ``reward_forward``, ``reward_ctrl``);
  ``infos=False`` returns ``{}``: the cost of per-step infos, alone.
* :class:`SleepEnv` (``"vecenv/Sleep-v0"``): each step sleeps a random time
  from a heavy-tailed distribution (most steps ``fast_s``, one in
  ``1 / slow_prob`` steps ``slow_s``); for partial-batch benchmarks.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class NoopEnv(gym.Env):
    """Observation Box(4,) float32, action Discrete(2); reward 1.0; episodes of
    ``episode_length`` steps (truncated)."""

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 1000):
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.episode_length = episode_length
        self._obs = np.zeros(4, np.float32)
        self._t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs, {}

    def step(self, action):
        self._t += 1
        return self._obs, 1.0, False, self._t >= self.episode_length, {}


class BigObsEnv(gym.Env):
    """Observation Box(0, 255, (84, 84, 4), uint8), action Discrete(6); no work."""

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 1000):
        self.observation_space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = spaces.Discrete(6)
        self.episode_length = episode_length
        self._obs = np.zeros((84, 84, 4), np.uint8)
        self._t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs, {}

    def step(self, action):
        self._t += 1
        self._obs[0, 0, 0] = self._t & 0xFF
        return self._obs, 0.0, False, self._t >= self.episode_length, {}


class CounterEnv(gym.Env):
    """Deterministic env whose observation records what happened.

    Observation: Dict(``"count"``: Box(int64, ()) step count in the episode,
    ``"pair"``: Tuple(Discrete(1000) env_id, Box(float32, (2,)) [last action,
    reward])); action: Discrete(n_actions). Reward is ``action + 0.5``; the
    episode terminates after ``episode_length`` steps. ``seed`` shifts the
    reward by ``seed``'s value modulo 7 so seeding is visible.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(
        self, env_id: int = 0, episode_length: int = 5, n_actions: int = 3, render_mode=None
    ):
        self.env_id = env_id
        self.episode_length = episode_length
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(
            {
                "count": spaces.Box(0, 2**31, (), np.int64),
                "pair": spaces.Tuple(
                    (spaces.Discrete(1000), spaces.Box(-1e6, 1e6, (2,), np.float32))
                ),
            }
        )
        self.action_space = spaces.Discrete(n_actions)
        self._t = 0
        self._shift = 0

    def _obs(self, action, reward):
        return {
            "count": np.asarray(self._t, dtype=np.int64),
            "pair": (self.env_id, np.array([action, reward], np.float32)),
        }

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        if seed is not None:
            self._shift = seed % 7
        self._t = 0
        return self._obs(-1, 0.0), {"reset": True}

    def step(self, action):
        self._t += 1
        reward = float(action) + 0.5 + self._shift
        terminated = self._t >= self.episode_length
        return self._obs(int(action), reward), reward, terminated, False, {}

    def render(self):
        frame = np.zeros((4, 6, 3), np.uint8)
        frame[..., 0] = self.env_id
        frame[..., 1] = self._t
        return frame


class InfoEnv(gym.Env):
    """Observation Box(17,) float64 (HalfCheetah-v5's size), action Box(6,)
    float32; ``work_s`` seconds of busy work a step (default 10 us); reward
    ``reward_forward + reward_ctrl``; episodes of ``episode_length`` steps
    (truncated). With ``infos=True`` every step's and reset's info holds the
    four float64 scalars HalfCheetah-v5 reports (reset: ``x_position`` and
    ``x_velocity`` only, as MuJoCo's reset info is smaller)."""

    metadata = {"render_modes": []}

    def __init__(self, work_s: float = 10e-6, infos: bool = True, episode_length: int = 1000):
        self.observation_space = spaces.Box(-np.inf, np.inf, (17,), np.float64)
        self.action_space = spaces.Box(-1.0, 1.0, (6,), np.float32)
        self.work_s, self.infos, self.episode_length = work_s, infos, episode_length
        self._obs: np.ndarray = np.zeros(17, np.float64)
        self._t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        self._t = 0
        self._obs[:] = 0.0
        if not self.infos:
            return self._obs, {}
        return self._obs, {"x_position": np.float64(0.0), "x_velocity": np.float64(0.0)}

    def step(self, action):
        end = time.perf_counter() + self.work_s
        while time.perf_counter() < end:
            pass
        self._t += 1
        x_velocity = float(np.clip(action[0], -1.0, 1.0))
        self._obs[0] += 0.05 * x_velocity
        forward, ctrl = np.float64(x_velocity), np.float64(-0.1 * float(np.square(action).sum()))
        info = {}
        if self.infos:
            info = {
                "x_position": np.float64(self._obs[0]),
                "x_velocity": np.float64(x_velocity),
                "reward_forward": forward,
                "reward_ctrl": ctrl,
            }
        return self._obs, float(forward + ctrl), False, self._t >= self.episode_length, info


class SleepEnv(gym.Env):
    """Heavy-tailed step time: ``fast_s`` seconds of busy work, or ``slow_s``
    with probability ``slow_prob`` (defaults: 50 us, one step in twenty 2 ms).
    Observation Box(2,) float64 [env_id, step]; ``seed`` (with ``env_id``)
    makes the delays reproducible."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        env_id: int = 0,
        fast_s: float = 50e-6,
        slow_s: float = 2e-3,
        slow_prob: float = 0.05,
        episode_length: int = 200,
        seed: Optional[int] = None,
    ):
        self.env_id = env_id
        self.fast_s, self.slow_s, self.slow_prob = fast_s, slow_s, slow_prob
        self.episode_length = episode_length
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = spaces.Discrete(2)
        # Without a seed every copy draws its own delays (OS entropy), so the
        # slow steps of different envs do not line up.
        self._rng = np.random.default_rng(None if seed is None else seed + env_id)
        self._t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([self.env_id, 0.0]), {}

    def step(self, action):
        delay = self.slow_s if self._rng.random() < self.slow_prob else self.fast_s
        end = time.perf_counter() + delay
        while time.perf_counter() < end:
            pass
        self._t += 1
        return (
            np.array([self.env_id, self._t], np.float64),
            1.0,
            False,
            self._t >= self.episode_length,
            {},
        )


def register() -> None:
    """Register the ``vecenv/...`` ids with gymnasium (idempotent)."""
    for name, cls in (
        ("Noop-v0", NoopEnv),
        ("BigObs-v0", BigObsEnv),
        ("Counter-v0", CounterEnv),
        ("Sleep-v0", SleepEnv),
        ("Info-v0", InfoEnv),
    ):
        env_id = f"vecenv/{name}"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"{__name__}:{cls.__name__}", disable_env_checker=True)


register()
