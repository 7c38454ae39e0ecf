"""ShmemVecEnv keeps the contract of OpenAI baselines' ShmemVecEnv
(baselines/common/vec_env/shmem_vec_env.py and vec_env.py): reset()
cancels a pending step, Tuple/Dict actions come batched or per env, and
actions reach the envs as given. Also the engine options the drop-ins use:
``check_actions`` and ``pickled_leaves``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from dropin_envs import WordSpace, describe
from gymnasium import spaces

import vecenv

pytestmark = pytest.mark.timeout(120)

FORK = {"context": "fork", "num_workers": 2}
TUPLE = spaces.Tuple((spaces.Discrete(3), spaces.Box(0.0, 1.0, (2,), np.float32)))
DICT = spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0.0, 1.0, (), np.float64)})


class Env(gym.Env):
    """Observation: [steps since reset, last action's first leaf]; records
    the type and value of each action; fails on action 2 when ``fragile``."""

    def __init__(self, action_space=None, fragile=False):
        self.action_space = action_space if action_space is not None else spaces.Discrete(3)
        self.observation_space = spaces.Box(-100.0, 100.0, (2,), np.float64)
        self.fragile = fragile
        self.t = 0
        self.seen = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2), {}

    def step(self, action):
        self.t += 1
        self.seen = describe(action)
        first = action[0] if isinstance(action, tuple) else action
        first = action["a"] if isinstance(action, dict) else first
        if self.fragile and first == 2:
            raise ValueError("action 2")
        return np.array([self.t, float(first)]), 0.0, False, False, {}

    def last_action(self):
        return self.seen


def test_reset_while_a_step_is_pending_cancels_it():
    with vecenv.ShmemVecEnv([lambda: Env(fragile=True)] * 3, **FORK) as venv:
        venv.reset()
        venv.step_async(np.array([1, 1, 1]))
        obs = venv.reset()  # baselines' VecEnv.reset: "that work will be cancelled"
        assert obs[:, 0].tolist() == [0, 0, 0]
        with pytest.raises(vecenv.StateError, match="step_async"):
            venv.step_wait()
        venv.step_async(np.array([2, 0, 0]))  # env 0 raises; the error is dropped
        assert venv.reset()[:, 0].tolist() == [0, 0, 0]
        obs, *_ = venv.step(np.array([1, 1, 1]))
        assert obs[:, 0].tolist() == [1, 1, 1]


@pytest.mark.parametrize("check_actions", [False, True])
def test_tuple_actions_batched_or_per_env(check_actions):
    batched = (np.array([0, 1, 2]), np.full((3, 2), 0.5, np.float32))
    per_env = [(i, np.full(2, 0.5, np.float32)) for i in range(3)]
    with vecenv.ShmemVecEnv([lambda: Env(TUPLE)] * 3, check_actions=check_actions, **FORK) as venv:
        venv.reset()
        obs, *_ = venv.step(batched)
        assert obs[:, 1].tolist() == [0, 1, 2]
        from_batch = venv.env_method("last_action")
        obs, *_ = venv.step(per_env)
        assert obs[:, 1].tolist() == [0, 1, 2]
        from_list = venv.env_method("last_action")
        assert [a[0][1] for a in from_list] == [0, 1, 2]
        if check_actions:  # both cast into shared memory: the same types
            assert from_batch == from_list
        else:  # the envs get the caller's own elements
            assert from_list[1][0] == ("int", 1)
            assert from_batch[1][0] == ("int64", 1)


@pytest.mark.parametrize("check_actions", [False, True])
def test_dict_actions_batched_or_per_env(check_actions):
    batched = {"a": np.array([2, 1, 0]), "b": np.array([0.5, 0.25, 0.0])}
    per_env = [{"a": 2 - i, "b": 0.5 / (i + 1)} for i in range(3)]
    with vecenv.ShmemVecEnv([lambda: Env(DICT)] * 3, check_actions=check_actions, **FORK) as venv:
        venv.reset()
        for actions in (batched, per_env):
            obs, *_ = venv.step(actions)
            assert obs[:, 1].tolist() == [2, 1, 0]


def test_actions_reach_the_envs_unchecked_by_default():
    with vecenv.ShmemVecEnv([Env] * 3, **FORK) as venv:
        venv.reset()
        obs, *_ = venv.step(np.array([5, -1, 0]))  # outside Discrete(3): the env decides
        assert obs[:, 1].tolist() == [5, -1, 0]
        venv.step(np.array([0.5, 1.0, 2.0]))  # float64 elements, as given
        assert venv.env_method("last_action")[0] == ("float64", 0.5)
        with pytest.raises(vecenv.InvalidArgumentError, match="got 2 actions, expected 3"):
            venv.step_async([0, 1])
        with pytest.raises(vecenv.ActionTypeError, match="one action per env"):
            venv.step_async(np.int64(1))
    with vecenv.ShmemVecEnv([Env] * 3, check_actions=True, **FORK) as venv:
        venv.reset()
        with pytest.raises(vecenv.InvalidArgumentError, match="outside Discrete"):
            venv.step_async(np.array([5, -1, 0]))


def test_partial_batches_send_piped_actions():
    with vecenv.ShmemVecEnv([Env] * 4, batch_size=2, **FORK) as venv:
        venv.reset()
        steps = 0
        for _ in range(8):
            obs, _, _, _, ids = venv.recv()
            for i, o in zip(ids.tolist(), obs):
                if o[0] > 0:  # a step's observation echoes the action its env was sent
                    assert o[1] == i % 3
                    steps += 1
            venv.send([i % 3 for i in ids.tolist()], ids)  # a list: through the pipes
        assert steps >= 8


class WordEnv(gym.Env):
    """Observation (word, step count); action: a word; episodes of 2 steps."""

    def __init__(self):
        self.observation_space = spaces.Tuple((WordSpace(), spaces.Discrete(10)))
        self.action_space = WordSpace()
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return ("reset", 0), {}

    def step(self, action):
        self.t += 1
        return (f"step({action})", self.t), 1.0, self.t == 2, False, {}


def test_pickled_leaves_are_an_opt_in():
    with pytest.raises(vecenv.SpaceError, match="no fixed size"):
        vecenv.ShmemVecEnv([WordEnv] * 2, **FORK)


def test_pickled_leaves_with_sb3_autoreset():
    with vecenv.ShmemVecEnv([WordEnv] * 2, pickled_leaves=True, **FORK) as venv:
        words, counts = venv.reset()
        assert words == ("reset", "reset") and counts.tolist() == [0, 0]
        (words, counts), _, dones, _ = venv.step(["a", "b"])
        assert words == ("step(a)", "step(b)") and counts.tolist() == [1, 1]
        (words, counts), _, dones, infos = venv.step(("c", "d"))
        assert dones.all() and words == ("reset", "reset")
        assert [i["terminal_observation"][0] for i in infos] == ["step(c)", "step(d)"]
        assert [int(i["terminal_observation"][1]) for i in infos] == [2, 2]
