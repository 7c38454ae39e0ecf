"""vecenv.AsyncVectorEnv behaves as gymnasium's AsyncVectorEnv by default.

Each case runs vecenv's class and, where it can, gymnasium's own one on the
same envs and compares what the envs and the caller see. vecenv's stricter
checks are opt-in (``check_actions=True``). The code here is ours; the cases
follow what gymnasium's own vector tests rely on.
"""

from __future__ import annotations

import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import Box, Dict, Discrete, Sequence, Text, Tuple
from gymnasium.vector import AutoresetMode
from helpers import WordSpace, describe

import vecenv
from vecenv import AsyncVectorEnv

ENGINE = {"num_workers": 2}
pytestmark = pytest.mark.timeout(120)


class TypeEnv(gym.Env):
    """Records the type and value of the last action it was given; its
    observation is the number of steps since reset."""

    def __init__(self, action_space=None):
        self.action_space = action_space if action_space is not None else Discrete(4)
        self.observation_space = Discrete(1000)
        self.t = 0
        self.seen = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        self.seen = describe(action)
        return self.t, 0.0, False, False, {}

    def last_action(self):
        return self.seen


def _seen_by_envs(vector_cls, action_space, actions, **kwargs):
    envs = vector_cls([lambda: TypeEnv(action_space)] * 3, **kwargs)
    try:
        envs.reset()
        envs.step(actions)
        return envs.call("last_action")
    finally:
        envs.close()


ACTION_CASES = [
    ("list of ints", Discrete(4), [0, 1, 3]),
    ("int64 array", Discrete(4), np.array([0, 1, 3])),
    ("int32 array", Discrete(4), np.array([0, 1, 3], np.int32)),
    ("out of range", Discrete(4), np.array([4, 0, 7])),  # gymnasium steps Discrete(4) with 4
    ("float64 to float32 Box()", Box(0.0, 1.0, (), np.float32), np.array([0.1, 0.2, 0.3])),
    ("float32 Box()", Box(0.0, 1.0, (), np.float32), np.array([0.1, 0.2, 0.3], np.float32)),
    ("Box(2) rows", Box(-1.0, 1.0, (2,), np.float32), np.zeros((3, 2))),
    (
        "Tuple batched",
        Tuple((Discrete(3), Box(0.0, 1.0, (2,), np.float32))),
        (np.array([0, 1, 2]), np.ones((3, 2), np.float32)),
    ),
    (
        "Dict batched, list leaf",
        Dict({"a": Discrete(3), "b": Box(0.0, 1.0, (), np.float64)}),
        {"a": [2, 1, 0], "b": np.array([0.5, 0.25, 0.0])},
    ),
]


@pytest.mark.parametrize("case", ACTION_CASES, ids=[c[0] for c in ACTION_CASES])
def test_actions_reach_envs_with_gymnasiums_values_and_types(case):
    _, space, actions = case
    theirs = _seen_by_envs(gym.vector.AsyncVectorEnv, space, actions, context="fork")
    ours = _seen_by_envs(AsyncVectorEnv, space, actions, **ENGINE)
    assert ours == theirs


def test_time_sleep_with_a_float64_action_on_a_float32_box():
    """The case a user hit: ``time.sleep(action)`` with np.float32 raised TypeError."""

    class Sleepy(gym.Env):
        observation_space = Discrete(2)
        action_space = Box(0.0, 1.0, (), np.float32)

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, action):
            import time

            time.sleep(action)  # TypeError for np.float32, fine for np.float64
            return 0, 0.0, False, False, {}

    envs = AsyncVectorEnv([Sleepy] * 2, **ENGINE)
    try:
        envs.reset()
        envs.step(np.array([0.0, 0.01]))
    finally:
        envs.close()


def test_check_actions_is_the_strict_opt_in():
    envs = AsyncVectorEnv([TypeEnv] * 3, check_actions=True, **ENGINE)
    try:
        envs.reset()
        with pytest.raises(vecenv.InvalidArgumentError, match=r"outside Discrete\(4\)"):
            envs.step(np.array([4, 0, 0]))
        envs.step([1, 2, 3])  # validated and cast into shared memory
        assert envs.call("last_action") == (("int64", 1), ("int64", 2), ("int64", 3))
    finally:
        envs.close()


def test_scalar_actions_raise_a_public_type_error():
    envs = AsyncVectorEnv([TypeEnv] * 2, **ENGINE)
    try:
        envs.reset()
        with pytest.raises(TypeError, match="one action per env") as info:
            envs.step(1)
        assert type(info.value) is vecenv.ActionTypeError
        assert isinstance(info.value, vecenv.InvalidArgumentError)
    finally:
        envs.close()


def test_step_before_the_first_reset_steps_the_envs():
    envs = AsyncVectorEnv([TypeEnv] * 2, **ENGINE)
    try:
        obs, *_ = envs.step([1, 2])
        assert obs.tolist() == [1, 1]
    finally:
        envs.close()


# ------------------------------------------------------------ spaces without a fixed layout


class WordEnv(gym.Env):
    """Custom observation and action spaces: observation "step(<action>)"."""

    def __init__(self, observation_space=None):
        self.observation_space = observation_space or WordSpace()
        self.action_space = WordSpace()
        self.t = 0

    def _obs(self, word):
        if isinstance(self.observation_space, Tuple):
            return (word, np.array(self.t, np.uint8))
        return word

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs("reset"), {}

    def step(self, action):
        self.t += 1
        return self._obs(f"step({action})"), 1.0, self.t == 2, False, {"t": self.t}


def test_custom_spaces_work_without_shared_memory():
    envs = AsyncVectorEnv([WordEnv] * 3, shared_memory=False, **ENGINE)
    try:
        assert isinstance(envs.single_observation_space, WordSpace)
        assert isinstance(envs.action_space, Tuple)
        obs, _ = envs.reset()
        assert obs == ("reset",) * 3
        obs, rewards, *_ = envs.step(("a", "b", "c"))
        assert obs == ("step(a)", "step(b)", "step(c)")
        assert rewards.tolist() == [1.0, 1.0, 1.0]
        obs, _, terminations, *_ = envs.step(("x", "y", "z"))
        assert terminations.all()
        obs, *_ = envs.step(("", "", ""))  # next-step autoreset
        assert obs == ("reset",) * 3
    finally:
        envs.close()


def test_pickled_leaves_next_to_shared_ones_match_gymnasium():
    space = Tuple((WordSpace(), Box(0, 255, (), np.uint8)))
    runs = []
    for cls, kw in ((gym.vector.AsyncVectorEnv, {"context": "fork"}), (AsyncVectorEnv, ENGINE)):
        envs = cls([lambda: WordEnv(space)] * 2, shared_memory=False, **kw)
        try:
            seen = [envs.reset()[0]]
            for _ in range(3):
                seen.append(envs.step(("p", "q"))[0])
            runs.append([(o[0], o[1].tolist(), o[1].dtype) for o in seen])
        finally:
            envs.close()
    assert runs[0] == runs[1]


@pytest.mark.parametrize("shared_memory", [True, False])
def test_text_observations_work_as_in_gymnasium(shared_memory):
    # gymnasium lays Text out in shared memory; vecenv pickles it either way.
    def make():
        class TextEnv(WordEnv):
            def __init__(self):
                super().__init__()
                self.observation_space = Text(8)

        return TextEnv()

    envs = AsyncVectorEnv([make] * 2, shared_memory=shared_memory, **ENGINE)
    try:
        assert envs.reset()[0] == ("reset", "reset")
        assert envs.step(("ab", "cd"))[0] == ("step(ab)", "step(cd)")
    finally:
        envs.close()


def test_sequence_observations_need_shared_memory_off():
    class SeqEnv(TypeEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = Sequence(Discrete(5))

        def reset(self, *, seed=None, options=None):
            return (1, 2), {}

        def step(self, action):
            return tuple(range(int(action))), 0.0, False, False, {}

    with pytest.raises(TypeError, match="dynamic shape"):
        AsyncVectorEnv([SeqEnv] * 2, **ENGINE)
    envs = AsyncVectorEnv([SeqEnv] * 2, shared_memory=False, **ENGINE)
    try:
        assert envs.reset()[0] == ((1, 2), (1, 2))
        assert envs.step([0, 3])[0] == ((), (0, 1, 2))
    finally:
        envs.close()


def test_custom_observation_space_with_shared_memory_is_gymnasiums_value_error():
    with pytest.raises(ValueError, match=re.escape("shared_memory=False")):
        AsyncVectorEnv([WordEnv] * 2, shared_memory=True, **ENGINE)


def test_partial_reset_keeps_the_other_envs_pickled_observations():
    envs = AsyncVectorEnv([WordEnv] * 3, shared_memory=False, autoreset_mode="disabled", **ENGINE)
    try:
        envs.reset()
        envs.step(("a", "b", "c"))
        obs, _ = envs.reset(options={"reset_mask": np.array([False, True, False])})
        assert obs == ("step(a)", "reset", "step(c)")
    finally:
        envs.close()


# ------------------------------------------------------------ observation modes
def _box_env(high):
    class BoxEnv(TypeEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = Box(0.0, high, (2,), np.float32)

        def reset(self, *, seed=None, options=None):
            return np.full(2, high, np.float32), {}

        def step(self, action):
            return np.full(2, high, np.float32), 0.0, False, False, {}

    return BoxEnv


def test_observation_mode_different_takes_envs_with_other_bounds():
    fns = [_box_env(h) for h in (1.0, 2.0, 3.0)]
    envs = AsyncVectorEnv(fns, observation_mode="different", **ENGINE)
    try:
        assert envs.observation_space.high[:, 0].tolist() == [1.0, 2.0, 3.0]
        assert envs.reset()[0][:, 0].tolist() == [1.0, 2.0, 3.0]
        assert envs.step([0, 0, 0])[0][:, 1].tolist() == [1.0, 2.0, 3.0]
    finally:
        envs.close()
    pair = (Box(0.0, 3.0, (3, 2), np.float32), Box(0.0, 1.0, (2,), np.float32))
    envs = AsyncVectorEnv(fns, observation_mode=pair, **ENGINE)
    try:
        assert envs.observation_space is pair[0] and envs.single_observation_space is pair[1]
        assert envs.reset()[0][:, 0].tolist() == [1.0, 2.0, 3.0]
    finally:
        envs.close()


def test_observation_mode_same_with_other_bounds_is_gymnasiums_runtime_error():
    fns = [_box_env(h) for h in (1.0, 2.0)]
    with pytest.raises(RuntimeError, match="use `observation_mode='different'` instead") as info:
        AsyncVectorEnv(fns, **ENGINE)
    assert "sub-environments observation spaces are not equivalent" in str(info.value)
    with pytest.raises(RuntimeError, match="action space different"):
        AsyncVectorEnv([TypeEnv, lambda: TypeEnv(Discrete(5))], **ENGINE)


# ------------------------------------------------------------ errors, autoreset names
class FailEnv(TypeEnv):
    def step(self, action):
        if action >= 1:
            raise ValueError(f"Error in step with {action}")
        return super().step(action)


def test_worker_errors_are_logged_with_gymnasiums_texts():
    envs = AsyncVectorEnv([FailEnv] * 3, **ENGINE)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="Error in step"):
                envs.step([0, 1, 2])
    finally:
        envs.close()
    texts = [str(w.message.args[0]) for w in caught]
    assert len(texts) == 5
    assert re.match(
        r"\x1b\[31mERROR: Received the following error from Worker-1 - Shutting", texts[0]
    )
    assert re.match(
        r"\x1b\[31mERROR: Traceback \(most recent call last\):(?s:.)*ValueError: Error in step with 1\n",
        texts[1],
    )
    assert "Worker-2" in texts[2] and "Error in step with 2" in texts[3]
    assert texts[4] == "\x1b[31mERROR: Raising the last exception back to the main process.\x1b[0m"


@pytest.mark.parametrize(
    "given, expected",
    [
        (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP),
        ("SameStep", AutoresetMode.SAME_STEP),
        ("same_step", AutoresetMode.SAME_STEP),
        ("next_step", AutoresetMode.NEXT_STEP),
        ("NEXT_STEP", AutoresetMode.NEXT_STEP),
        ("Disabled", AutoresetMode.DISABLED),
    ],
)
def test_autoreset_mode_spellings(given, expected):
    envs = AsyncVectorEnv([TypeEnv] * 2, autoreset_mode=given, **ENGINE)
    try:
        assert envs.autoreset_mode is expected
        assert envs.metadata["autoreset_mode"] is expected
    finally:
        envs.close()
    names = {AutoresetMode.SAME_STEP: "same_step", AutoresetMode.NEXT_STEP: "next_step"}
    with vecenv.ShmemVecEnv([TypeEnv] * 2, autoreset_mode=given, num_workers=1) as venv:
        assert venv.autoreset_mode == names.get(expected, "disabled")


def test_bad_autoreset_mode_is_a_value_error():
    with pytest.raises(ValueError, match="autoreset_mode"):
        AsyncVectorEnv([TypeEnv] * 2, autoreset_mode="sb3", **ENGINE)
    with pytest.raises(ValueError, match="autoreset_mode"):
        vecenv.ShmemVecEnv([TypeEnv] * 2, autoreset_mode="later")


def test_reset_mask_errors_are_gymnasiums():
    envs = AsyncVectorEnv([TypeEnv] * 3, autoreset_mode="disabled", **ENGINE)
    theirs = gym.vector.AsyncVectorEnv([TypeEnv] * 3, autoreset_mode="Disabled", context="fork")
    try:
        for mask in ([True, False, True], np.array([True]), np.array([1, 0, 1]), np.zeros(3, bool)):
            errors = []
            for e in (theirs, envs):
                with pytest.raises((TypeError, ValueError)) as info:
                    e.reset(options={"reset_mask": mask})
                errors.append((isinstance(info.value, TypeError), str(info.value)))
            assert errors[0] == errors[1]
    finally:
        envs.close()
        theirs.close()
