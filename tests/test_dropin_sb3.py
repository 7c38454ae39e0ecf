"""vecenv.sb3.SubprocVecEnv behaves as SB3's SubprocVecEnv by default.

Each case runs vecenv's class and SB3's own on the same envs where it can,
and compares what the envs and the caller see; SB3's wrappers run on top of
both. The code here is ours.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from helpers import describe

import vecenv

pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecCheckNan,
    VecExtractDictObs,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
    VecTransposeImage,
)
from stable_baselines3.common.vec_env import SubprocVecEnv as SB3SubprocVecEnv

from vecenv.sb3 import SubprocVecEnv

FORK = {"start_method": "fork"}
pytestmark = pytest.mark.timeout(120)


class ActionEnv(gym.Env):
    """Records the type and value of each action; its observation is a
    (4, 4, 3) uint8 image and a position, in a Dict; episodes of 3 steps."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, action_space=None, render_mode=None, frame=True):
        self.action_space = action_space if action_space is not None else spaces.Discrete(3)
        self.observation_space = spaces.Dict(
            {
                "img": spaces.Box(0, 255, (4, 4, 3), np.uint8),
                "pos": spaces.Box(-10.0, 10.0, (2,), np.float32),
            }
        )
        self.render_mode = render_mode
        self.frame = frame
        self.t = 0
        self.seen = None

    def _obs(self):
        return {
            "img": np.full((4, 4, 3), self.t, np.uint8),
            "pos": np.full(2, self.t, np.float32),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.seen = describe(action)
        return self._obs(), float(self.t), self.t == 3, False, {}

    def last_action(self):
        return self.seen

    def render(self):
        return np.zeros((2, 2, 3), np.uint8) if self.frame else None


TUPLE = spaces.Tuple((spaces.Discrete(3), spaces.Box(0.0, 1.0, (2,), np.float32)))
CASES = [
    ("int64 array", None, np.array([0, 1, 2])),
    ("list of ints", None, [2, 1, 0]),
    ("int32 array", None, np.array([0, 1, 2], np.int32)),
    ("out of range", None, np.array([3, 0, 9])),
    ("float32 Box", spaces.Box(-1.0, 1.0, (2,), np.float32), np.zeros((3, 2), np.float32)),
    ("float64 to float32 Box", spaces.Box(-1.0, 1.0, (2,), np.float32), np.ones((3, 2))),
    ("Tuple per env", TUPLE, [(i, np.full(2, 0.5, np.float32)) for i in range(3)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_actions_reach_envs_as_with_sb3s_class(case):
    _, space, actions = case
    seen = []
    for cls in (SB3SubprocVecEnv, SubprocVecEnv):
        venv = cls([lambda: ActionEnv(space)] * 3, **FORK)
        try:
            venv.reset()
            venv.step(actions)
            seen.append(venv.env_method("last_action"))
        finally:
            venv.close()
    assert seen[0] == seen[1]


def test_check_actions_is_the_strict_opt_in():
    with SubprocVecEnv([ActionEnv] * 2, check_actions=True, **FORK) as venv:
        venv.reset()
        with pytest.raises(vecenv.InvalidArgumentError, match="outside"):
            venv.step(np.array([0, 3]))
        venv.step([1, 2])  # validated and cast into shared memory
        assert venv.env_method("last_action") == [("int64", 1), ("int64", 2)]


def test_step_before_reset_reaches_the_envs():
    with SubprocVecEnv([ActionEnv] * 2, **FORK) as venv:
        obs, rewards, *_ = venv.step(np.array([0, 0]))
        assert rewards.tolist() == [1.0, 1.0]


def _run(venv, steps=7, actions=None):
    """Observations, rewards, dones and infos' terminal observations of a run."""
    out = [venv.reset()]
    for t in range(steps):
        obs, rew, done, infos = venv.step(np.array([t % 3, (t + 1) % 3]))
        term = [i.get("terminal_observation") for i in infos]
        out.append((obs, rew, done, term))
    return out


def _assert_same(a, b):
    if isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif a is None or b is None:
        assert a is b
    else:
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64))


WRAPPERS = {
    "VecNormalize": lambda v: VecNormalize(VecExtractDictObs(v, "pos"), gamma=0.9),
    "VecFrameStack": lambda v: VecFrameStack(v, n_stack=2),
    "VecMonitor": VecMonitor,
    "VecCheckNan": lambda v: VecCheckNan(v, raise_exception=True),
    "VecExtractDictObs": lambda v: VecExtractDictObs(v, "img"),
    "VecTransposeImage": lambda v: VecTransposeImage(VecExtractDictObs(v, "img")),
}


@pytest.mark.parametrize("name", list(WRAPPERS))
def test_sb3_wrappers_on_top_match_dummy_vec_env(name):
    wrap = WRAPPERS[name]
    fns = [ActionEnv] * 2
    ref = wrap(DummyVecEnv(fns))
    ours = wrap(SubprocVecEnv(fns, **FORK))
    try:
        _assert_same(_run(ref), _run(ours))
    finally:
        ours.close()
        ref.close()


def test_render_with_an_env_returning_none_names_it():
    fns = [
        lambda: ActionEnv(render_mode="rgb_array"),
        lambda: ActionEnv(render_mode="rgb_array", frame=False),
    ]
    with SubprocVecEnv(fns, **FORK) as venv:
        venv.reset()
        with pytest.raises(ValueError, match=r"env\(s\) \[1\] returned None from render\(\)"):
            venv.render()


def test_mixed_render_modes_are_refused_at_construction_as_sb3():
    fns = [lambda: ActionEnv(render_mode="rgb_array"), lambda: ActionEnv(render_mode=None)]
    with pytest.raises(AssertionError, match="render_mode mode should be the same") as theirs:
        DummyVecEnv(fns)
    with pytest.raises(AssertionError) as ours:
        SubprocVecEnv(fns, **FORK)
    assert str(ours.value) == str(theirs.value)
