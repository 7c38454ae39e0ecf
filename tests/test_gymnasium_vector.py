"""vecenv.AsyncVectorEnv (vecenv/gymnasium_vector.py) against
gymnasium.vector.AsyncVectorEnv's contract.

It behaves as gymnasium's AsyncVectorEnv by default: where it can, a case runs
vecenv's class and gymnasium's own one on the same envs and compares what the
envs and the caller see. vecenv's stricter checks are opt-in
(``check_actions=True``). The cases follow the ideas of gymnasium's own vector
tests (tests/vector/test_async_vector_env.py, test_autoreset_mode.py,
test_vector_env_info.py); the code here is ours.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Sequence, Text, Tuple
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from helpers import LAYOUTS, ReusedInfoEnv, WordSpace, describe

import vecenv
from vecenv import AsyncVectorEnv

ENGINE = {"num_workers": 2}  # two workers whatever num_envs: small on a busy 2-core machine
pytestmark = pytest.mark.timeout(120)


def cartpole(seed=None, **kwargs):
    def make():
        env = gym.make("CartPole-v1", disable_env_checker=True, **kwargs)
        if seed is not None:
            env.action_space.seed(seed)
        return env

    return make


class CountEnv(gym.Env):
    """Observation = steps since reset (or the reset seed); reward = action;
    terminated when the count reaches ``max_count``."""

    def __init__(self, max_count=3):
        self.observation_space = Discrete(100)
        self.action_space = Discrete(5)
        self.max_count = max_count
        self.count = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = seed if seed is not None else 0
        self.last_options = options
        return self.count, {}

    def step(self, action):
        self.count += 1
        return self.count, int(action), self.count == self.max_count, False, {}

    def pid(self):
        return os.getpid()


class SlowEnv(gym.Env):
    """Sleeps ``slow_reset`` seconds in reset and ``action`` seconds in step."""

    def __init__(self, slow_reset=0.0):
        self.slow_reset = slow_reset
        self.observation_space = Box(0, 255, (8, 8, 3), np.uint8)
        self.action_space = Box(0.0, 1.0, (), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        time.sleep(self.slow_reset)
        return self.observation_space.sample(), {}

    def step(self, action):
        time.sleep(float(action))
        return self.observation_space.sample(), 0.0, False, False, {}


class FailEnv(gym.Env):
    """Raises ValueError in reset when seed == 1, in step when action >= 1."""

    observation_space = Box(-1.0, 1.0, (2,), np.float32)
    action_space = Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed == 1:
            raise ValueError("Error in reset")
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if action >= 1:
            raise ValueError(f"Error in step with {action}")
        return np.zeros(2, np.float32), 0.0, False, False, {}


class InfoEnv(gym.Env):
    """Returns ``infos[0]`` from reset and ``infos[1]`` from step; always terminates."""

    def __init__(self, infos):
        self.observation_space = Box(0, 1, (1,), np.float32)
        self.action_space = Box(0, 1, (1,), np.float32)
        self.infos = infos

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), dict(self.infos[0])

    def step(self, action):
        return np.ones(1, np.float32), 0.0, True, False, dict(self.infos[1])


class BufferEnv(gym.Env):
    """Returns the same array object every time; reset overwrites it in place
    (the case where taking the final observation after reset goes wrong)."""

    def __init__(self, space=None):
        self.observation_space = Box(-10.0, 10.0, (3,), np.float32)
        self.action_space = Discrete(2)
        self.buf = np.zeros(3, np.float32)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.buf[:] = -1.0
        return self.buf, {}

    def step(self, action):
        self.t += 1
        self.buf[:] = self.t
        return self.buf, 1.0, self.t == 2, False, {}


class SampleEnv(gym.Env):
    """Samples its observation space; terminates every ``max_count`` steps."""

    def __init__(self, space, max_count=2):
        self.observation_space = space
        self.action_space = Discrete(2)
        self.max_count = max_count

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.count = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.count += 1
        return self.observation_space.sample(), 0.0, self.count == self.max_count, False, {}


class OddSpace(gym.Space):
    """A space vecenv cannot lay out in shared memory."""

    def sample(self, mask=None, probability=None):
        return "x"

    def contains(self, x):
        return isinstance(x, str)

    def __eq__(self, other):
        return isinstance(other, OddSpace)


class OddEnv(gym.Env):
    observation_space = OddSpace()
    action_space = Discrete(2)

    def reset(self, *, seed=None, options=None):
        return "reset", {}

    def step(self, action):
        return "step", 0.0, False, False, {}


def counters(n=3, **kwargs):
    return AsyncVectorEnv([CountEnv] * n, **ENGINE, **kwargs)


# ---------------------------------------------------------------- basics
def test_is_a_gymnasium_vector_env_with_batched_spaces():
    envs = AsyncVectorEnv([cartpole(i) for i in range(4)], **ENGINE)
    try:
        assert isinstance(envs, VectorEnv)
        assert envs.num_envs == 4
        assert envs.single_observation_space == gym.make("CartPole-v1").observation_space
        assert envs.observation_space == gym.vector.utils.batch_space(
            envs.single_observation_space, 4
        )
        assert isinstance(envs.single_action_space, Discrete)
        assert envs.action_space == MultiDiscrete([2, 2, 2, 2])
        assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        assert envs.metadata["render_fps"] == 50
        assert envs.render_mode is None
        assert not envs.closed
    finally:
        envs.close()
    assert envs.closed


@pytest.mark.parametrize("shared_memory", [True, False])
@pytest.mark.parametrize("single_actions", [True, False])
def test_reset_and_step_types(shared_memory, single_actions):
    envs = AsyncVectorEnv([cartpole(i) for i in range(4)], shared_memory=shared_memory, **ENGINE)
    try:
        obs, infos = envs.reset()
        assert isinstance(obs, np.ndarray) and obs.dtype == np.float32
        assert obs.shape == envs.observation_space.shape == (4, 4)
        assert infos == {}
        if single_actions:
            actions = [envs.single_action_space.sample() for _ in range(4)]
        else:
            actions = envs.action_space.sample()
        obs, rewards, terminations, truncations, infos = envs.step(actions)
        assert obs.shape == (4, 4) and obs in envs.observation_space
        assert rewards.dtype == np.float64 and rewards.shape == (4,)
        assert terminations.dtype == np.bool_ and terminations.shape == (4,)
        assert truncations.dtype == np.bool_ and truncations.shape == (4,)
        assert isinstance(infos, dict)
    finally:
        envs.close()


def test_dict_and_tuple_observations_are_batched_the_gymnasium_way():
    space = Dict({"pos": Discrete(7), "vel": Tuple((Box(0, 1, (2,)), MultiBinary(3)))})
    envs = AsyncVectorEnv([lambda: SampleEnv(space)] * 3, **ENGINE)
    try:
        obs, _ = envs.reset(seed=0)
        assert envs.observation_space == gym.vector.utils.batch_space(space, 3)
        assert obs in envs.observation_space
        assert obs["pos"].shape == (3,) and obs["pos"].dtype == np.int64
        assert isinstance(obs["vel"], tuple) and obs["vel"][1].shape == (3, 3)
        obs, *_ = envs.step([0, 1, 0])
        assert obs in envs.observation_space
    finally:
        envs.close()


class FrameEnv(CountEnv):
    """CountEnv with an rgb_array render (pygame-free)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 7}

    def __init__(self, render_mode=None):
        super().__init__()
        self.render_mode = render_mode

    def render(self):
        return np.full((4, 6, 3), self.count, np.uint8)


class EchoEnv(gym.Env):
    """Observes the action it was given; Tuple/Dict spaces for both."""

    def __init__(self):
        self.action_space = Tuple((Discrete(5), Dict({"v": Box(0, 1, (2,), np.float64)})))
        self.observation_space = self.action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.action_space.sample(), {}

    def step(self, action):
        assert action in self.action_space
        return action, 0.0, False, False, {}


def test_tuple_and_dict_actions_reach_the_envs():
    envs = AsyncVectorEnv([EchoEnv] * 3, **ENGINE)
    try:
        envs.reset(seed=0)
        envs.action_space.seed(1)
        actions = envs.action_space.sample()
        obs, *_ = envs.step(actions)
        assert data_equivalence(obs, actions)
    finally:
        envs.close()


def test_render_and_call():
    envs = AsyncVectorEnv([lambda: FrameEnv("rgb_array")] * 3, **ENGINE)
    try:
        assert envs.render_mode == "rgb_array"
        assert envs.metadata["render_fps"] == 7
        envs.reset(seed=4)
        frames = envs.render()
        assert isinstance(frames, tuple) and len(frames) == 3
        for i, frame in enumerate(frames):
            np.testing.assert_array_equal(frame, np.full((4, 6, 3), 4 + i, np.uint8))
        assert envs.call("max_count") == (3, 3, 3)  # not callable: the value itself
        assert envs.get_attr("max_count") == (3, 3, 3)
        with pytest.raises(ValueError, match=re.escape("use `step` directly instead")):
            envs.call("step", 0)
    finally:
        envs.close()
    envs = AsyncVectorEnv([FrameEnv] * 2, **ENGINE)
    assert envs.render_mode is None
    envs.close()


def test_call_async_and_wait_pass_arguments():
    envs = counters(3)
    try:
        envs.call_async("pid")
        with pytest.raises(AlreadyPendingCallError, match="pending call to `call`"):
            envs.step_async([0, 0, 0])
        pids = envs.call_wait(timeout=10)
        assert len(pids) == 3 and all(isinstance(p, int) for p in pids)
        with pytest.raises(NoAsyncCallError, match=re.escape("Calling `call_wait` without any")):
            envs.call_wait()
    finally:
        envs.close()


def test_set_attr_per_env_and_broadcast():
    envs = AsyncVectorEnv([cartpole(i) for i in range(4)], **ENGINE)
    try:
        envs.set_attr("gravity", [9.81, 3.72, 8.87, 1.62])
        assert envs.get_attr("gravity") == (9.81, 3.72, 8.87, 1.62)
        envs.set_attr("gravity", 2.0)
        assert envs.get_attr("gravity") == (2.0,) * 4
        with pytest.raises(ValueError, match="Values must be a list or tuple with length equal"):
            envs.set_attr("gravity", [1.0, 2.0])
    finally:
        envs.close()


def test_copy_true_returns_owned_arrays_and_copy_false_views():
    for copy in (True, False):
        envs = counters(3, copy=copy)
        try:
            obs0, _ = envs.reset()
            obs1, *_ = envs.step([0, 0, 0])
            assert list(obs1) == [1, 1, 1]
            assert list(obs0) == ([0, 0, 0] if copy else [1, 1, 1])
        finally:
            envs.close()


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_start_methods(context):
    envs = AsyncVectorEnv([cartpole(), cartpole()], context=context, num_workers=1)
    try:
        obs, _ = envs.reset(seed=3)
        ref = SyncVectorEnv([cartpole(), cartpole()])
        np.testing.assert_array_equal(obs, ref.reset(seed=3)[0])
        ref.close()
    finally:
        envs.close()


def test_engine_subset_reset_takes_indices_not_masks():
    envs = counters(3, autoreset_mode="Disabled")
    try:
        envs.reset()
        with pytest.raises(vecenv.InvalidArgumentError, match="flatnonzero"):
            envs.engine.reset_async(np.array([True, False, True]))
    finally:
        envs.close()


def test_max_concurrency_sets_the_number_of_workers():
    envs = AsyncVectorEnv([CountEnv] * 4, max_concurrency=2)
    try:
        assert len(set(envs.call("pid"))) == 2
    finally:
        envs.close()
    for bad, exc in ((0, ValueError), ("2", ValueError)):
        with pytest.raises(exc, match="max_concurrency"):
            AsyncVectorEnv([CountEnv], max_concurrency=bad)


def test_unsupported_arguments_fail_clearly():
    with pytest.raises(ValueError, match="custom worker"):
        AsyncVectorEnv([CountEnv], worker=lambda *a: None)
    with pytest.raises(ValueError, match="observation_mode"):
        AsyncVectorEnv([CountEnv], observation_mode="other")
    with pytest.raises(TypeError, match="unexpected keyword"):
        AsyncVectorEnv([CountEnv], no_such_option=1)
    with pytest.raises(ValueError, match="AutoresetMode"):
        AsyncVectorEnv([CountEnv], autoreset_mode="sb3")


def test_observation_mode_custom_and_different():
    single = Discrete(100)
    batched = MultiDiscrete([100] * 2)
    envs = AsyncVectorEnv([CountEnv] * 2, observation_mode=(batched, single), **ENGINE)
    try:
        assert envs.single_observation_space is single and envs.observation_space is batched
    finally:
        envs.close()
    envs = AsyncVectorEnv([CountEnv] * 2, observation_mode="different", **ENGINE)
    try:
        obs, _ = envs.reset()
        assert obs in envs.observation_space
    finally:
        envs.close()
    with pytest.raises(RuntimeError, match="common shape and dtype"):
        AsyncVectorEnv([CountEnv] * 2, observation_mode=(Box(0, 1, (2, 3)), Box(0, 1, (3,))))


def test_envs_with_different_spaces_raise_runtime_error():
    fns = [cartpole(i) for i in range(4)]
    fns[3] = lambda: gym.make("FrozenLake-v1")  # its own worker: the parent compares
    with pytest.raises(RuntimeError):
        AsyncVectorEnv(fns, **ENGINE)


def test_spaces_gymnasium_cannot_share_raise_its_errors_with_shared_memory():
    # gymnasium: ValueError for custom spaces, TypeError for Graph and Sequence;
    # with shared_memory=False they work (test_custom_spaces_work_without_shared_memory,
    # test_sequence_observations_need_shared_memory_off).
    with pytest.raises(ValueError, match=re.escape("shared_memory=False")) as info:
        AsyncVectorEnv([OddEnv] * 2, shared_memory=True, **ENGINE)
    assert isinstance(info.value, vecenv.SpaceError)
    seq = gym.spaces.Sequence(Discrete(3))
    with pytest.raises(TypeError, match="static shared memory"):
        AsyncVectorEnv([lambda: SampleEnv(seq)] * 2, **ENGINE)


@pytest.mark.parametrize("check_actions", [False, True])
def test_wrong_number_of_actions(check_actions):
    envs = counters(3, check_actions=check_actions)
    try:
        envs.reset()
        with pytest.raises(ValueError, match="expected 3"):
            envs.step([0, 0])
        with pytest.raises(ValueError):
            envs.step([0, 0, 0, 0])
        with pytest.raises(TypeError, match="one action per env"):
            envs.step(0)
        if check_actions:  # checked before anything is sent (opt-in)
            with pytest.raises(ValueError, match="outside Discrete"):
                envs.step([0, 0, 5])
        obs, *_ = envs.step([0, 0, 0])  # nothing was sent by the failed calls
        assert list(obs) == [1, 1, 1]
        if not check_actions:  # as gymnasium: the env gets the action as it is
            _, rewards, *_ = envs.step([0, 0, 5])
            assert rewards.tolist() == [0.0, 0.0, 5.0]
    finally:
        envs.close()


# ---------------------------------------------------------------- actions as the envs receive them
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
class FailingTypeEnv(TypeEnv):
    def step(self, action):
        if action >= 1:
            raise ValueError(f"Error in step with {action}")
        return super().step(action)


def test_worker_errors_are_logged_with_gymnasiums_texts():
    envs = AsyncVectorEnv([FailingTypeEnv] * 3, **ENGINE)
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
                # gymnasium 1.4 raises TypeError or ValueError, before 1.4 AssertionError.
                with pytest.raises((TypeError, ValueError, AssertionError)) as info:
                    e.reset(options={"reset_mask": mask})
                errors.append(info.value)
            gyms, ours = errors
            assert isinstance(ours, type(gyms)), (type(ours), type(gyms))
            assert str(ours) == str(gyms)
    finally:
        envs.close()
        theirs.close()


# The messages of gymnasium 1.3's asserts (its tests/vector/test_vector_env.py
# matches them); 1.4 raises TypeError / ValueError with the texts of
# test_reset_mask_validation.
_LEGACY_RESET_MASK = (
    (np.array([True]), "`options['reset_mask': mask]` must have shape `(3,)`, got (1,)"),
    (np.array([1, 1, 0]), "`options['reset_mask': mask]` must have `dtype=np.bool_`, got int64"),
    (
        np.array([False, False, False]),
        "`options['reset_mask': mask]` must contain a boolean array, got reset_mask=[False False False]",
    ),
    (
        [True, True, False],
        "`options['reset_mask': mask]` must be a numpy array, got <class 'list'>",
    ),
)


def test_argument_errors_follow_the_installed_gymnasium(monkeypatch):
    from vecenv import _gym_errors

    parts = tuple(int(p) for p in re.findall(r"\d+", gym.__version__)[:2])
    assert _gym_errors.ASSERTS_ARGUMENTS == (parts < (1, 4))
    envs = counters(3)
    try:
        envs.reset()
        for asserts in (True, False):
            monkeypatch.setattr(_gym_errors, "ASSERTS_ARGUMENTS", asserts)
            for mask, legacy in _LEGACY_RESET_MASK:
                with pytest.raises((AssertionError, TypeError, ValueError)) as info:
                    envs.reset(options={"reset_mask": mask})
                err = info.value
                assert isinstance(err, AssertionError) == asserts, str(err)
                assert isinstance(err, vecenv.InvalidArgumentError)
                assert (str(err) == legacy) == asserts
            with pytest.raises((AssertionError, ValueError)) as info:
                envs.reset(seed=[1, 2])
            assert isinstance(info.value, AssertionError) == asserts
            assert "must match num_envs=3 but got length=2" in str(info.value)
            with pytest.raises((AssertionError, TypeError)) as info:
                AsyncVectorEnv([CountEnv] * 2, observation_mode=(1, 2), **ENGINE)
            assert isinstance(info.value, AssertionError) == asserts
        envs.reset(options={"reset_mask": np.array([False, True, False])})  # still usable
    finally:
        envs.close()


def test_the_assert_probe_reads_gymnasiums_behaviour(monkeypatch):
    from vecenv import _gym_errors

    def asserting(self, seed=None, options=None):  # gymnasium 1.3's reset_async, in short
        self._assert_is_running()
        assert len(seed) == self.num_envs

    def raising(self, seed=None, options=None):  # 1.4's
        self._assert_is_running()
        if len(seed) != self.num_envs:
            raise ValueError("If seeds are passed as a list the length must match num_envs")

    for reset_async, asserts in ((asserting, True), (raising, False)):
        monkeypatch.setattr(gym.vector.AsyncVectorEnv, "reset_async", reset_async)
        assert _gym_errors.probe_asserts_arguments() is asserts
    monkeypatch.setattr(gym.vector.AsyncVectorEnv, "reset_async", lambda self, **kw: 1 / 0)
    monkeypatch.setattr(gym, "__version__", "1.3.0")  # the probe fails: the version decides
    assert _gym_errors.probe_asserts_arguments() is True
    monkeypatch.setattr(gym, "__version__", "1.4.1")
    assert _gym_errors.probe_asserts_arguments() is False


class _HolderEnv(CountEnv):
    """A CountEnv whose env ``bad`` holds a lock (it does not pickle)."""

    def __init__(self, env_id=0, bad=2, render_mode=None):
        super().__init__()
        import threading

        self.render_mode = render_mode
        self.lock = threading.Lock() if env_id == bad else env_id


def test_values_that_do_not_pickle_name_their_env():
    import functools
    import threading

    fns = [functools.partial(_HolderEnv, i) for i in range(4)]
    envs = AsyncVectorEnv(fns, num_workers=1, context="fork")
    try:
        envs.reset()
        # The error is logged with gymnasium's texts (captured here, not left to the summary).
        with pytest.warns(UserWarning) as logged:
            with pytest.raises(vecenv.ResultNotPicklableError) as info:
                envs.get_attr("lock")
        assert any("from Worker-2 - Shutting it down" in str(w.message) for w in logged)
        assert info.value.env_index == 2 and "env 2's call('lock')" in str(info.value)
        assert isinstance(info.value, TypeError) and not isinstance(info.value, AttributeError)
        assert envs.get_attr("max_count") == (3, 3, 3, 3)  # the state is unchanged
        with pytest.raises(vecenv.ArgumentNotPicklableError) as info:
            envs.set_attr("max_count", [5, 6, threading.Lock(), 8])
        assert info.value.env_indices == (2,) and isinstance(info.value, TypeError)
        # The envs before it were set; it and those after were not.
        assert envs.get_attr("max_count") == (5, 6, 3, 3)
        with pytest.raises(vecenv.ArgumentNotPicklableError, match=r"env\(s\) \[0, 1, 2, 3\]"):
            envs.reset(options={"lock": threading.Lock()})
        envs.reset()
    finally:
        envs.close()


def test_envs_with_different_render_modes_are_taken_as_gymnasium_takes_them():
    import functools

    modes = ["rgb_array", None, "rgb_array"]
    fns = [functools.partial(_HolderEnv, i, 9, m) for i, m in enumerate(modes)]
    theirs = gym.vector.AsyncVectorEnv(fns, context="fork")
    envs = AsyncVectorEnv(fns, num_workers=1, context="fork")
    try:
        assert envs.render_mode == theirs.render_mode == "rgb_array"
        assert envs.get_attr("render_mode") == theirs.get_attr("render_mode") == tuple(modes)
    finally:
        envs.close()
        theirs.close()


# ---------------------------------------------------------------- state machine
def test_reset_timeout_raises_multiprocessing_timeout_and_stays_pending():
    envs = AsyncVectorEnv([lambda: SlowEnv(0.5)] * 2, **ENGINE)
    try:
        envs.reset_async()
        with pytest.raises(multiprocessing.TimeoutError) as info:
            envs.reset_wait(timeout=0.05)
        assert isinstance(info.value, TimeoutError)
        assert str(info.value) == "The call to `reset_wait` has timed out after 0.05 second(s)."
        obs, _ = envs.reset_wait(timeout=30)  # the reset is still pending: wait again
        assert obs.shape == (2, 8, 8, 3)
    finally:
        envs.close(terminate=True)


def test_step_timeout_then_terminate():
    envs = AsyncVectorEnv([SlowEnv] * 4, **ENGINE)
    envs.reset()
    envs.step_async(np.array([0.0, 0.0, 0.6, 0.0]))
    with pytest.raises(TimeoutError, match=re.escape("The call to `step_wait` has timed out")):
        envs.step_wait(timeout=0.05)
    with pytest.warns(UserWarning, match=re.escape("waiting for a pending call to `step`")):
        envs.close(terminate=True)
    assert envs.closed


def test_out_of_order_calls_raise_gymnasiums_errors():
    envs = counters(2)
    with pytest.raises(
        NoAsyncCallError,
        match=re.escape("Calling `reset_wait` without any prior call to `reset_async`."),
    ):
        envs.reset_wait()
    envs.reset()
    with pytest.raises(
        NoAsyncCallError,
        match=re.escape("Calling `step_wait` without any prior call to `step_async`."),
    ) as info:
        envs.step_wait()
    assert info.value.name == "step"
    assert isinstance(info.value, vecenv.StateError)
    envs.step_async([0, 0])
    with pytest.raises(
        AlreadyPendingCallError,
        match=re.escape(
            "Calling `reset_async` while waiting for a pending call to `step` to complete"
        ),
    ):
        envs.reset_async()
    with pytest.raises(AlreadyPendingCallError, match="`step_async` while waiting"):
        envs.step_async([0, 0])
    with pytest.raises(AlreadyPendingCallError, match="`set_attr` while waiting"):
        envs.set_attr("max_count", 5)
    with pytest.warns(
        UserWarning,
        match=re.escape("Calling `close` while waiting for a pending call to `step` to complete."),
    ):
        envs.close()  # waits for the step, then closes politely

    envs = counters(2)
    envs.reset_async()
    with pytest.raises(
        AlreadyPendingCallError,
        match=re.escape(
            "Calling `step_async` while waiting for a pending call to `reset` to complete."
        ),
    ):
        envs.step_async([0, 0])
    with pytest.warns(UserWarning, match="pending call to `reset`"):
        envs.close(terminate=True)


def test_calls_after_close_raise_closed_environment_error():
    envs = counters(2)
    envs.close()
    envs.close()  # twice is fine
    for call in (
        envs.reset,
        lambda: envs.step([0, 0]),
        lambda: envs.call("pid"),
        lambda: envs.get_attr("count"),
        lambda: envs.set_attr("count", 1),
        envs.step_wait,
    ):
        with pytest.raises(ClosedEnvironmentError, match="after a call to `close\\(\\)`"):
            call()


def test_env_errors_are_raised_as_their_own_type_and_the_env_recovers():
    envs = AsyncVectorEnv([FailEnv] * 3, **ENGINE)
    try:
        envs.reset(seed=[0, 0, 0])
        # Logged with gymnasium's texts, as its own class logs them (captured here).
        with pytest.warns(UserWarning) as logged:
            with pytest.raises(ValueError, match="Error in reset") as info:
                envs.reset(seed=[1, 0, 0])
        assert any("from Worker-0 - Shutting it down" in str(w.message) for w in logged)
        assert isinstance(info.value, vecenv.WorkerError) and info.value.env_index == 0
        assert "ValueError: Error in reset" in info.value.worker_traceback
        envs.reset(seed=10)
        with pytest.warns(UserWarning) as logged:
            with pytest.raises(ValueError, match=r"Error in step with [12]") as info:
                envs.step([0, 1, 2])
        assert any("Raising the last exception back" in str(w.message) for w in logged)
        assert sorted(info.value.errors) == [1, 2]
        obs, _ = envs.reset()  # after an error, a reset makes the envs usable again
        obs, *_ = envs.step([0, 0, 0])
        assert obs.shape == (3, 2)
    finally:
        envs.close()


# ---------------------------------------------------------------- seeding and options
def test_int_seed_gives_seed_plus_index_and_lists_are_per_env():
    envs = counters(3)
    try:
        obs, _ = envs.reset(seed=10)
        assert list(obs) == [10, 11, 12]
        assert envs.np_random_seed == (10, 11, 12)
        obs, _ = envs.reset(seed=[5, None, 7])
        assert list(obs) == [5, 0, 7]
        with pytest.raises(ValueError, match="length must match num_envs=3"):
            envs.reset(seed=[1, 2])
        obs, _ = envs.reset()  # seeds are not sticky
        assert list(obs) == [0, 0, 0]
    finally:
        envs.close()


class StrictResetEnv(CountEnv):
    """reset() that needs both keywords, as gymnasium's vector envs always pass them."""

    def reset(self, seed, options):
        return super().reset(seed=seed, options=options)


def test_reset_passes_seed_and_options_keywords_always():
    envs = AsyncVectorEnv([StrictResetEnv] * 2, **ENGINE)
    try:
        obs, _ = envs.reset()
        assert list(obs) == [0, 0]
        obs, _ = envs.reset(seed=4, options={"reset_mask": np.array([False, True])})
        assert list(obs) == [0, 5]
    finally:
        envs.close()


def test_options_reach_every_env_and_are_not_modified():
    envs = counters(2)
    try:
        options = {"level": 3}
        envs.reset(options=options)
        assert envs.get_attr("last_options") == ({"level": 3}, {"level": 3})
        mask = np.array([True, False])
        options = {"reset_mask": mask, "level": 4}
        envs.reset(options=options)
        assert options == {"reset_mask": mask, "level": 4}
        assert envs.get_attr("last_options") == ({"level": 4}, {"level": 3})
    finally:
        envs.close()


def test_reset_mask_validation(monkeypatch):
    from vecenv import _gym_errors

    # gymnasium 1.4's errors, whichever gymnasium is installed (before 1.4 it
    # asserts: test_argument_errors_follow_the_installed_gymnasium).
    monkeypatch.setattr(_gym_errors, "ASSERTS_ARGUMENTS", False)
    envs = counters(3)
    try:
        envs.reset()
        for mask, exc, text in (
            ([True, False, True], TypeError, "must be a numpy array"),
            (np.array([True, False]), ValueError, "must have shape `(3,)`"),
            (np.array([1, 0, 1]), TypeError, "must have `dtype=np.bool_`"),
            (np.zeros(3, bool), ValueError, "at least one True value"),
        ):
            with pytest.raises(exc, match=re.escape(text)):
                envs.reset(options={"reset_mask": mask})
        envs.reset(options={"reset_mask": np.array([False, True, False])})  # still usable
    finally:
        envs.close()


# ---------------------------------------------------------------- autoreset modes
def test_autoreset_next_step():
    envs = counters(3, autoreset_mode=AutoresetMode.NEXT_STEP)
    try:
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        envs.set_attr("max_count", [2, 3, 3])
        obs, info = envs.reset()
        assert list(obs) == [0, 0, 0] and info == {}
        expected = [
            ([1, 1, 1], [1, 2, 3], [False, False, False]),
            ([2, 2, 2], [1, 2, 3], [True, False, False]),
            ([0, 3, 3], [0, 2, 3], [False, True, True]),  # env 0 resets: reward 0, flags off
            ([1, 0, 0], [1, 0, 0], [False, False, False]),
        ]
        for want_obs, want_rew, want_term in expected:
            obs, rew, term, trunc, info = envs.step([1, 2, 3])
            assert list(obs) == want_obs
            assert list(rew) == want_rew
            assert list(term) == want_term
            assert not trunc.any() and info == {}
    finally:
        envs.close()


def test_autoreset_same_step():
    envs = counters(3, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        envs.set_attr("max_count", [2, 3, 3])
        envs.reset()
        obs, rew, term, trunc, info = envs.step([1, 2, 3])
        assert list(obs) == [1, 1, 1] and info == {}
        obs, rew, term, _, info = envs.step([1, 2, 3])
        assert list(obs) == [0, 2, 2] and list(rew) == [1, 2, 3]
        assert list(term) == [True, False, False]
        assert data_equivalence(
            info,
            {
                "final_obs": np.array([2, None, None], dtype=object),
                "final_info": {},
                "_final_obs": np.array([True, False, False]),
                "_final_info": np.array([True, False, False]),
            },
        )
        obs, rew, term, _trunc, info = envs.step([1, 2, 3])
        assert list(obs) == [1, 0, 0] and list(term) == [False, True, True]
        assert list(info["final_obs"]) == [None, 3, 3]
        assert list(info["_final_obs"]) == [False, True, True]
    finally:
        envs.close()


def test_autoreset_disabled_with_reset_mask():
    envs = counters(3, autoreset_mode="Disabled")
    try:
        assert envs.metadata["autoreset_mode"] is AutoresetMode.DISABLED
        envs.set_attr("max_count", [2, 3, 3])
        envs.reset()
        envs.step([1, 2, 3])
        obs, rew, term, trunc, info = envs.step([1, 2, 3])
        assert list(obs) == [2, 2, 2] and list(term) == [True, False, False]
        obs, info = envs.reset(options={"reset_mask": term})
        assert list(obs) == [0, 2, 2] and info == {}
        obs, _, term, _, info = envs.step([1, 2, 3])
        assert list(obs) == [1, 3, 3] and list(term) == [False, True, True]
        obs, info = envs.reset(options={"reset_mask": term})
        assert list(obs) == [1, 0, 0]
        obs, _rew, term, _trunc, info = envs.step([1, 2, 3])
        assert list(obs) == [2, 1, 1] and list(term) == [True, False, False]
    finally:
        envs.close()


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_autoreset_metadata_from_enum_and_value(mode):
    for value in (mode, mode.value):
        envs = AsyncVectorEnv([CountEnv] * 2, autoreset_mode=value, num_workers=1)
        assert envs.metadata["autoreset_mode"] is mode
        assert envs.autoreset_mode is mode
        envs.close()


@pytest.mark.parametrize(
    "space",
    [
        Box(-1, 1, (2, 2)),
        Discrete(5, start=-2),
        MultiDiscrete([3, 4]),
        MultiBinary(4),
        Tuple((Discrete(3), Box(0, 255, (), np.uint8))),
        Dict({"a": Dict({"x": Discrete(4)}), "b": Box(0, 1, (3,), np.float64)}),
    ],
    ids=lambda s: type(s).__name__,
)
def test_same_step_final_obs_belongs_to_the_space(space):
    envs = AsyncVectorEnv(
        [lambda: SampleEnv(space, 2)] * 2, autoreset_mode=AutoresetMode.SAME_STEP, **ENGINE
    )
    try:
        envs.reset(seed=0)
        envs.step([0, 0])
        _, _, term, _, info = envs.step([0, 0])
        assert term.all()
        assert all(info["final_obs"][i] in envs.single_observation_space for i in range(2))
    finally:
        envs.close()


def test_same_step_final_obs_is_taken_before_the_reset():
    envs = AsyncVectorEnv([BufferEnv] * 2, autoreset_mode=AutoresetMode.SAME_STEP, **ENGINE)
    try:
        envs.reset()
        envs.step([0, 0])
        obs, _, term, _, info = envs.step([0, 0])
        assert term.all()
        np.testing.assert_array_equal(obs, -np.ones((2, 3)))  # the reset observation
        for i in range(2):
            np.testing.assert_array_equal(info["final_obs"][i], [2, 2, 2])
    finally:
        envs.close()


@pytest.mark.parametrize("layout", list(LAYOUTS.values()), ids=list(LAYOUTS))
def test_same_step_final_info_is_the_terminal_steps_when_the_env_reuses_its_info(layout):
    # The env changes its one info dict (and the array in it) in place at reset:
    # final_info must hold the terminal step's values, as SyncVectorEnv's does.
    fns = [functools.partial(ReusedInfoEnv, length) for length in (2, 3)]
    theirs = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
    ours = AsyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP, **layout)
    try:
        a, b = [theirs.reset(seed=0)], [ours.reset(seed=0)]
        for _ in range(7):
            a.append(theirs.step(np.zeros(2, np.int64)))
            b.append(ours.step(np.zeros(2, np.int64)))
    finally:
        theirs.close()
        ours.close()
    finals = [x[4]["final_info"] for x in a if "final_info" in x[-1]]
    assert len(finals) == 4  # the reference: each ended env's final t is its length
    assert all((f["t"] == np.where(f["_t"], [2, 3], 0)).all() for f in finals)
    for x, y in zip(a, b):
        assert data_equivalence(x, y, exact=True), (x, y)


# ---------------------------------------------------------------- infos
def test_infos_are_batched_with_masks():
    envs = AsyncVectorEnv(
        [
            lambda: InfoEnv([{"a": 1}, {"c": np.array([1, 2])}]),
            lambda: InfoEnv([{"a": 2, "b": 3}, {"c": np.array([3, 4])}]),
            lambda: InfoEnv([{"ep": {"r": 1.5}}, {}]),
        ],
        **ENGINE,
    )
    try:
        _, info = envs.reset()
        assert data_equivalence(
            info,
            {
                "a": np.array([1, 2, 0]),
                "_a": np.array([True, True, False]),
                "b": np.array([0, 3, 0]),
                "_b": np.array([False, True, False]),
                "ep": {"r": np.array([0.0, 0.0, 1.5]), "_r": np.array([False, False, True])},
                "_ep": np.array([False, False, True]),
            },
        )
        # InfoEnv always terminates; with NEXT_STEP the next step returns reset infos.
        _, _, term, _, info = envs.step(envs.action_space.sample())
        assert term.all()
        assert data_equivalence(
            info, {"c": np.array([[1, 2], [3, 4], [0, 0]]), "_c": np.array([True, True, False])}
        )
        _, _, term, _, info = envs.step(envs.action_space.sample())
        assert not term.any() and list(info["_a"]) == [True, True, False]
    finally:
        envs.close()


# ---------------------------------------------------------------- against gymnasium
def _rollout(envs, mode, steps=120, seed=123):
    actions = np.random.default_rng(seed).integers(0, 2, size=(steps, envs.num_envs))
    out = [envs.reset(seed=seed)]
    for t in range(steps):
        step = envs.step(actions[t])
        out.append(step)
        if mode is AutoresetMode.DISABLED:
            done = step[2] | step[3]
            if done.any():
                out.append(envs.reset(options={"reset_mask": done}))
    return out


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
@pytest.mark.parametrize("peer", ["sync", "async"])
def test_cartpole_trajectories_equal_gymnasiums(mode, peer):
    fns = [cartpole() for _ in range(3)]
    peer_cls = SyncVectorEnv if peer == "sync" else gym.vector.AsyncVectorEnv
    theirs = peer_cls(fns, autoreset_mode=mode)
    ours = AsyncVectorEnv(fns, autoreset_mode=mode, **ENGINE)
    try:
        # max_episode_steps is lowered so that truncations happen too.
        theirs.set_attr("_max_episode_steps", 25)
        ours.set_attr("_max_episode_steps", 25)
        a, b = _rollout(theirs, mode), _rollout(ours, mode)
    finally:
        theirs.close()
        ours.close()
    assert len(a) == len(b)
    ended = 0
    for x, y in zip(a, b):
        assert data_equivalence(x, y, exact=True), (x, y)
        if len(x) == 5:
            ended += int((x[2] | x[3]).sum())
    assert ended > 3  # episodes did end (and autoreset was exercised)


# ---------------------------------------------------------------- make_vec
def test_make_vec_builds_ours_for_async_and_sets_the_spec():
    envs = vecenv.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP, "num_workers": 1},
        wrappers=[gym.wrappers.RecordEpisodeStatistics],
    )
    try:
        assert isinstance(envs, AsyncVectorEnv)
        assert repr(envs) == "AsyncVectorEnv(CartPole-v1, num_envs=2, layout='1 worker x 2 envs')"
        assert envs.spec.kwargs["vectorization_mode"] == "async"
        assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        envs.reset(seed=0)
        envs.action_space.seed(0)
        # CartPole-v1 truncates at 500 steps, so an episode ends within 500 whatever the
        # actions (60 random steps ended none once in CI: a test that could flake).
        for _ in range(500):
            _, _, term, trunc, info = envs.step(envs.action_space.sample())
            if (term | trunc).any():
                assert "episode" in info["final_info"]
                break
        else:
            pytest.fail("no episode ended in 500 CartPole steps (it truncates at 500)")
    finally:
        envs.close()
    sync = vecenv.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    assert isinstance(sync, SyncVectorEnv)
    sync.close()


def test_gymnasium_make_vec_builds_ours_through_a_registered_vector_entry_point():
    env_id = "VecenvTestCartPole-v1"
    gym.register(env_id, entry_point="gymnasium.envs.classic_control:CartPoleEnv", kwargs={})
    try:
        vecenv.register_vector_entry_point(
            env_id, autoreset_mode=AutoresetMode.SAME_STEP, num_workers=1
        )
        theirs = gym.make_vec(env_id, 2, vectorization_mode="sync", max_episode_steps=5)
        for mode in (None, "vector_entry_point"):
            envs = gym.make_vec(env_id, 2, vectorization_mode=mode, max_episode_steps=5)
            try:
                assert isinstance(envs, AsyncVectorEnv) and envs.num_envs == 2
                assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
                assert envs.spec.kwargs["max_episode_steps"] == 5
                got = [envs.reset(seed=3)] + [envs.step(np.ones(2, np.int64)) for _ in range(5)]
            finally:
                envs.close()
            want = [theirs.reset(seed=3)] + [theirs.step(np.ones(2, np.int64)) for _ in range(4)]
            for x, y in zip(got, want):  # up to the truncation, where the modes differ
                assert data_equivalence(x, y), (x, y)
            assert got[-1][3].all()  # max_episode_steps=5 reached the envs
        theirs.close()
        # "sync" and "async" still build gymnasium's own classes.
        other = gym.make_vec(env_id, 2, vectorization_mode="async")
        assert type(other) is gym.vector.AsyncVectorEnv
        other.close()
    finally:
        del gym.registry[env_id]


def test_gymnasium_make_vec_has_no_class_option():
    # What the README says: gymnasium 1.4's make_vec builds its own AsyncVectorEnv
    # for "async"; vector_kwargs only reach that class's constructor.
    with pytest.raises(TypeError):
        gym.make_vec(
            "CartPole-v1", 2, vectorization_mode="async", vector_kwargs={"cls": AsyncVectorEnv}
        )


def test_no_warnings_on_a_clean_run():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envs = counters(2)
        envs.reset(seed=0)
        envs.step([0, 0])
        envs.close()
