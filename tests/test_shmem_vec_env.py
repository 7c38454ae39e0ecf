"""ShmemVecEnv end to end (vecenv/shmem_vec_env.py): trajectories, spaces,
copies, the GIL, clean-up; OpenAI baselines' ShmemVecEnv contract (reset() cancels a pending
step, Tuple/Dict actions come batched or per env, actions reach the envs as
given) and the engine options the drop-ins use (``check_actions``,
``pickled_leaves``)."""

import functools
import gc
import os
import threading
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium import spaces
from helpers import LAYOUTS, ReusedInfoEnv, WordSpace, compare_rollout, describe
from reference import assert_tree_equal, rollout_loop, stack

import vecenv
from vecenv.envs import CounterEnv, NoopEnv, SleepEnv

pytestmark = pytest.mark.timeout(120)

CONTEXTS = ["fork", "spawn"]


def cartpole():
    return gym.make("CartPole-v1")


def _counter_fns(n):
    return [functools.partial(CounterEnv, env_id=i, episode_length=3 + i % 3) for i in range(n)]


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("envs_per_worker", [1, 3])
def test_cartpole_matches_plain_loop(context, envs_per_worker):
    n = 5
    env_fns = [cartpole] * n
    rng = np.random.default_rng(1)
    actions = rng.integers(0, 2, size=(80, n))
    with vecenv.ShmemVecEnv(env_fns, envs_per_worker=envs_per_worker, context=context) as venv:
        assert venv.observation_space == gym.make("CartPole-v1").observation_space
        ends = compare_rollout(venv, env_fns, actions, seed=123)
    assert ends > 0, "episodes must end during the test so autoreset is covered"


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("envs_per_worker", [1, 2])
def test_dict_tuple_env_matches_plain_loop(context, envs_per_worker):
    n = 5
    env_fns = _counter_fns(n)
    actions = np.random.default_rng(2).integers(0, 3, size=(12, n))
    with vecenv.ShmemVecEnv(env_fns, envs_per_worker=envs_per_worker, context=context) as venv:
        obs = venv.reset()
        assert isinstance(obs, dict) and isinstance(obs["pair"], tuple)
        assert obs["count"].shape == (n,) and obs["pair"][1].shape == (n, 2)
        ends = compare_rollout(venv, env_fns, actions, seed=7)
    assert ends > 0


class AllDtypesEnv(gym.Env):
    """Box leaves of every dtype in a Dict, plus Discrete, MultiDiscrete and
    MultiBinary; the observation encodes the step count."""

    DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64"]
    DTYPES += ["uint8", "uint16", "uint32", "uint64", "bool"]

    def __init__(self):
        boxes = {d: spaces.Box(0, 100, (2, 3), np.dtype(d)) for d in self.DTYPES if d != "bool"}
        boxes["bool"] = spaces.Box(0, 1, (4,), np.bool_)
        self.observation_space = spaces.Dict(
            {
                **boxes,
                "discrete": spaces.Discrete(50),
                "multi": spaces.MultiDiscrete([5, 6]),
                "binary": spaces.MultiBinary(3),
            }
        )
        self.action_space = spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32)))
        self.t = 0

    def _obs(self):
        obs = {}
        for d in self.DTYPES:
            s = self.observation_space[d]
            obs[d] = np.full(s.shape, self.t % 2 if d == "bool" else self.t, dtype=s.dtype)
        obs["discrete"] = np.int64(self.t)
        obs["multi"] = np.array([self.t % 5, self.t % 6], np.int64)
        obs["binary"] = np.array([1, 0, self.t % 2], np.int8)
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        discrete, box = action
        assert isinstance(box, np.ndarray) and box.dtype == np.float32
        self.t += 1 + int(discrete)
        return self._obs(), float(box.sum()), False, False, {}


def test_every_dtype_round_trips():
    env_fns = [AllDtypesEnv] * 3
    actions = (np.array([0, 1, 2]), np.full((3, 2), 0.25, np.float32))
    first, steps = rollout_loop(env_fns, [list(zip(*actions))] * 2, seed=0)
    with vecenv.ShmemVecEnv(env_fns, envs_per_worker=2) as venv:
        assert_tree_equal(venv.reset(), first)
        for obs, rews, _, _ in steps:
            v_obs, v_rews, _, _ = venv.step(actions)
            assert_tree_equal(v_obs, obs)
            np.testing.assert_array_equal(v_rews, rews)


def test_copy_false_returns_views_valid_until_next_step():
    with vecenv.ShmemVecEnv([NoopEnv] * 2, copy=False, num_workers=1) as venv:
        obs = venv.reset()
        assert not obs.flags.owndata
        obs2, *_ = venv.step(np.zeros(2, np.int64))
        assert np.shares_memory(obs, obs2)  # same shared rows, overwritten in place
        del obs, obs2
    with vecenv.ShmemVecEnv([NoopEnv] * 2, copy=True, num_workers=1) as venv:
        a = venv.reset()
        b, *_ = venv.step(np.zeros(2, np.int64))
        assert a.flags.owndata and not np.shares_memory(a, b)


def test_parent_thread_runs_while_waiting():
    """The wait releases the GIL: a Python thread keeps counting meanwhile."""
    fn = functools.partial(SleepEnv, fast_s=0.3, slow_s=0.3, slow_prob=0.0)
    with vecenv.ShmemVecEnv([fn], spin=0.0) as venv:
        venv.reset()
        count = 0
        stop = threading.Event()

        def spin():
            nonlocal count
            while not stop.is_set():
                count += 1

        thread = threading.Thread(target=spin)
        thread.start()
        try:
            start = time.perf_counter()
            venv.step(np.zeros(1, np.int64))
            waited = time.perf_counter() - start
        finally:
            stop.set()
            thread.join()
    assert waited >= 0.25
    assert count > 10_000, f"the thread only counted to {count} while the parent waited"


def _children():
    def ours(p):
        cmd = " ".join(p.cmdline())
        return "forkserver" not in cmd and "resource_tracker" not in cmd

    # The workers (not their guards, which are the workers' children).
    return [p for p in psutil.Process().children() if ours(p)]


def test_close_is_idempotent_and_releases_everything():
    fds_before = len(os.listdir("/proc/self/fd"))
    venv = vecenv.ShmemVecEnv([NoopEnv] * 3, num_workers=2)
    pids = [p.pid for p in _children()]
    assert len(pids) == 2
    venv.reset()
    venv.close()
    venv.close()
    assert not any(
        psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in pids
    )
    assert len(os.listdir("/proc/self/fd")) <= fds_before
    with pytest.raises(vecenv.ClosedError, match="after close"):
        venv.reset()


def _memfd_mappings():
    with open("/proc/self/maps") as f:
        return sum("/memfd:vecenv" in line for line in f)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc (Linux)")
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_close_unmaps_the_shared_block_while_the_vec_env_is_still_referenced(
    num_workers, batch_size
):
    # A closed vec env kept by its caller (an SB3 model's .env, a sweep's list
    # of finished runs) must not keep its shared block mapped until garbage
    # collection when no caller-held view exists (copy=True). Earlier tests'
    # garbage goes first, and no collection runs meanwhile: one that unmapped
    # an older block between the counts made this test flaky (3.9 floor, CI).
    gc.collect()
    gc.disable()
    try:
        before = _memfd_mappings()
        venv = vecenv.ShmemVecEnv(
            [lambda: CounterEnv(0)] * 4, num_workers=num_workers, batch_size=batch_size
        )
        with venv:
            if batch_size is None:
                venv.reset()
                venv.step(np.zeros(4, dtype=np.int64))
            else:
                venv.reset()
                _, _, _, _, ids = venv.recv()
                venv.send(np.zeros(2, dtype=np.int64), ids)
                venv.recv()
            assert _memfd_mappings() > before
        assert _memfd_mappings() == before
        assert venv.closed
    finally:
        gc.enable()


def test_a_view_held_after_close_keeps_its_memory_readable():
    fns = [lambda: gym.make("CartPole-v1")] * 2
    with vecenv.ShmemVecEnv(fns, num_workers=1, copy=False) as venv:
        obs = venv.reset()
        kept = obs.copy()
    assert np.array_equal(obs, kept)  # still mapped: the view keeps the block alive


def test_garbage_collection_without_close_releases_workers():
    venv = vecenv.ShmemVecEnv([NoopEnv] * 2, num_workers=2)
    venv.reset()
    procs = [psutil.Process(p.pid) for p in _children()]
    del venv
    gc.collect()
    gone, alive = psutil.wait_procs(procs, timeout=10)
    assert not alive


def test_exception_in_parent_inside_with_block_cleans_up():
    with pytest.raises(KeyError):
        with vecenv.make("vecenv/Noop-v0", 2) as venv:
            venv.reset()
            raise KeyError("boom")
    assert venv.closed


def test_make_with_id_kwargs_and_vec_kwargs():
    with vecenv.make("CartPole-v1", 3, max_episode_steps=4, envs_per_worker=3) as venv:
        assert venv.num_envs == 3 and len(venv._ranges) == 1
        venv.reset()
        for _ in range(4):
            _, _, dones, infos = venv.step(np.zeros(3, np.int64))
        # Always pushing left ends CartPole after ~9 steps: here the time limit fires first.
        assert dones.all()
        assert all(info["TimeLimit.truncated"] for info in infos)


def test_make_with_callable_and_wrappers():
    with vecenv.make(NoopEnv, 2, wrappers=[gym.wrappers.RecordEpisodeStatistics]) as venv:
        assert venv.env_is_wrapped(gym.wrappers.RecordEpisodeStatistics) == [True, True]
    with pytest.raises(vecenv.InvalidArgumentError, match="string env_id"):
        vecenv.make(NoopEnv, 2, foo=1)
    with pytest.raises(vecenv.InvalidArgumentError, match="num_envs"):
        vecenv.make("CartPole-v1", 0)


class TextEnv(gym.Env):
    observation_space = spaces.Dict({"x": spaces.Box(0, 1, (2,)), "text": spaces.Text(5)})
    action_space = spaces.Discrete(2)


def test_unsupported_space_is_refused_at_construction():
    with pytest.raises(vecenv.SpaceError, match=r"observation_space\['text'\] is Text"):
        vecenv.ShmemVecEnv([TextEnv])


def test_spaces_argument_is_checked():
    obs_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
    with vecenv.ShmemVecEnv([NoopEnv], spaces=(obs_space, spaces.Discrete(2))) as venv:
        assert venv.action_space == spaces.Discrete(2)
    with pytest.raises(vecenv.SpaceError, match="differ"):
        vecenv.ShmemVecEnv([NoopEnv], spaces=(obs_space, spaces.Discrete(3)))


def test_envs_with_different_spaces_are_refused():
    fns = [NoopEnv, functools.partial(CounterEnv, 1)]
    with pytest.raises(vecenv.VecEnvError, match="share their spaces"):
        vecenv.ShmemVecEnv(fns, envs_per_worker=1)
    with pytest.raises(vecenv.VecEnvError, match="share their spaces"):
        vecenv.ShmemVecEnv(fns, envs_per_worker=2)


def test_env_method_get_attr_set_attr_seed_and_render():
    fns = [functools.partial(CounterEnv, i, render_mode="rgb_array") for i in range(3)]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=2) as venv:
        assert venv.get_attr("env_id") == [0, 1, 2]
        assert venv.get_attr("env_id", indices=[2, 0]) == [2, 0]
        venv.set_attr("episode_length", 1, indices=1)
        assert venv.get_attr("episode_length") == [5, 1, 5]
        assert venv.seed(10) == [10, 11, 12]
        venv.reset()
        _, rews, dones, _ = venv.step(np.zeros(3, np.int64))
        # CounterEnv shifts rewards by seed % 7: the seeds reached each env.
        np.testing.assert_array_equal(rews, [0.5 + 10 % 7, 0.5 + 11 % 7, 0.5 + 12 % 7])
        assert dones.tolist() == [False, True, False]
        assert venv.env_method("render", indices=[0])[0].shape == (4, 6, 3)
        frames = venv.get_images()
        assert [int(f[0, 0, 0]) for f in frames] == [0, 1, 2]
        tiled = venv.render()
        assert tiled.shape == (8, 12, 3)  # 3 frames on a 2x2 grid
        np.testing.assert_array_equal(tiled[:4, 6:], frames[1])
        assert venv.reset_infos == [{"reset": True}] * 3


class _FramelessCounter(CounterEnv):
    """A CounterEnv made with render_mode="rgb_array" whose render() returns
    None (or, with ``shape``, a frame of that shape)."""

    def __init__(self, env_id, shape=None):
        super().__init__(env_id, render_mode="rgb_array")
        self.shape = shape

    def render(self):
        return None if self.shape is None else np.zeros(self.shape, np.uint8)


@pytest.mark.parametrize("num_workers", [1, 0])
def test_render_names_the_envs_without_a_frame(num_workers):
    def make(odd):  # env i: a CounterEnv, or the frameless one of odd[i]
        return [
            functools.partial(_FramelessCounter, i, odd[i])
            if i in odd
            else functools.partial(CounterEnv, i, render_mode="rgb_array")
            for i in range(4)
        ]

    cases = [
        ({2: None}, r"env\(s\) \[2\] returned None from render\(\)"),
        ({1: None, 3: None}, r"env\(s\) \[1, 3\] returned None from render\(\)"),
        ({3: (4, 6)}, r"env\(s\) \[3\] returned arrays of shape \[\(4, 6\)\]"),
        ({0: (2, 2, 3)}, r"envs \[0\]: \(2, 2, 3\); envs \[1, 2, 3\]: \(4, 6, 3\)"),
    ]
    for odd, message in cases:
        with vecenv.ShmemVecEnv(make(odd), num_workers=num_workers) as venv:
            venv.reset()
            frames = venv.get_images()  # what each render() returned, None included
            assert [f is None for f in frames] == [odd.get(i, 0) is None for i in range(4)]
            with pytest.raises(vecenv.InvalidArgumentError, match=message):
                venv.render()


@pytest.mark.parametrize("num_workers", [1, 2, 0])
def test_envs_with_different_render_modes_are_refused(num_workers):
    modes = ["rgb_array", "rgb_array", None, "human"]
    fns = [functools.partial(CounterEnv, i, render_mode=m) for i, m in enumerate(modes)]
    with pytest.raises(vecenv.InvalidArgumentError) as info:
        vecenv.ShmemVecEnv(fns, num_workers=num_workers)
    assert (
        "different render_modes (render_mode='rgb_array': envs [0, 1]; "
        "render_mode=None: envs [2]; render_mode='human': envs [3])"
    ) in str(info.value)
    # check_spaces=False (the gymnasium drop-in) takes them, as gymnasium does.
    with vecenv.ShmemVecEnv(fns, num_workers=num_workers, check_spaces=False) as venv:
        assert venv.get_attr("render_mode") == modes


def test_step_order_and_bad_actions_are_refused():
    with vecenv.ShmemVecEnv([NoopEnv] * 2, num_workers=1, check_actions=True) as venv:
        with pytest.raises(vecenv.StateError, match="reset"):
            venv.step_async(np.zeros(2, np.int64))
        venv.reset()
        with pytest.raises(vecenv.StateError, match="step_async"):
            venv.step_wait()
        with pytest.raises(vecenv.InvalidArgumentError, match="got 3 actions, expected 2"):
            venv.step_async(np.zeros(3, np.int64))
        with pytest.raises(
            vecenv.InvalidArgumentError, match=r"actions\[1\]=2 is outside Discrete\(2\)"
        ):
            venv.step_async(np.array([0, 2]))
        with pytest.raises(vecenv.InvalidArgumentError, match="NaN"):
            venv.step_async(np.array([0.0, np.nan]))
        venv.step_async([1, 0])
        with pytest.raises(vecenv.StateError, match="step_wait"):
            venv.step_async([1, 0])
        obs, *_ = venv.step_wait()
        assert obs.shape == (2, 4)


@pytest.mark.parametrize("context", ["forkserver"])
def test_forkserver_context(context):
    with vecenv.ShmemVecEnv([cartpole] * 2, context=context) as venv:
        obs = venv.reset()
        assert obs.shape == (2, 4)
        venv.step(np.ones(2, np.int64))


def test_tuple_observation_like_the_seed():
    class TupleEnv(gym.Env):
        observation_space = spaces.Tuple((spaces.Box(0, 1, (2,), np.float32), spaces.Discrete(4)))
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return (np.zeros(2, np.float32), 3), {}

        def step(self, action):
            return (np.ones(2, np.float32), int(action)), 0.0, False, False, {}

    with vecenv.ShmemVecEnv([TupleEnv] * 2) as venv:
        obs = venv.reset()
        assert isinstance(obs, tuple) and obs[1].tolist() == [3, 3]
        obs, *_ = venv.step(np.array([1, 0]))
        assert_tree_equal(
            obs,
            stack([(np.ones(2, np.float32), np.int64(1)), (np.ones(2, np.float32), np.int64(0))]),
        )


def test_legacy_gym_env_through_shimmy():
    """An env written against gym 0.26 (gym.Env, gym.spaces) is converted by
    shimmy in the worker. (gym.make itself breaks under NumPy 2: its env
    checker uses np.bool8, so the env is built directly.)"""
    gym_legacy = pytest.importorskip(
        "gym", reason="the legacy-gym extra (gym, shimmy) is not installed"
    )
    pytest.importorskip("shimmy")

    class LegacyEnv(gym_legacy.Env):
        def __init__(self):
            self.observation_space = gym_legacy.spaces.Box(-1, 1, (3,), np.float32)
            self.action_space = gym_legacy.spaces.Discrete(2)
            self.t = 0

        def reset(self, seed=None, options=None):
            self.t = 0
            return np.zeros(3, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.full(3, self.t, np.float32), 1.0, self.t >= 2, False, {}

    with vecenv.ShmemVecEnv([LegacyEnv] * 2) as venv:
        assert isinstance(venv.observation_space, spaces.Box)
        assert isinstance(venv.action_space, spaces.Discrete)
        assert venv.reset().shape == (2, 3)
        venv.step(np.zeros(2, np.int64))
        obs, _, dones, infos = venv.step(np.zeros(2, np.int64))
        assert dones.all() and infos[0]["terminal_observation"].tolist() == [2, 2, 2]
        assert obs.tolist() == [[0, 0, 0]] * 2


def test_reset_kwargs_reach_the_envs_right_after_a_method_call():
    """Regression: a worker that had just answered a call could run the next
    reset before reading the seeds posted for it."""
    fns = [functools.partial(CounterEnv, i) for i in range(3)]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=2) as venv:
        for seed in range(20):
            venv.set_attr("foo", seed, indices=[1])
            venv.seed(seed)
            venv.reset()
            assert venv.get_attr("_shift") == [(seed + i) % 7 for i in range(3)]


@pytest.mark.parametrize(
    "space",
    [spaces.Dict({"a": spaces.Discrete(3)}), spaces.Tuple((spaces.Box(0, 1, (2,), np.float32),))],
)
def test_single_leaf_structured_observations_keep_their_structure(space):
    """Regression: a Dict or Tuple with one leaf came back as a bare array."""

    class OneLeafEnv(gym.Env):
        observation_space = space
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, False, {}

    with vecenv.ShmemVecEnv([OneLeafEnv] * 2, batch_size=2) as venv:
        obs = venv.reset()
        assert type(obs) is type(space.sample())
        venv.send(np.zeros(2, np.int64))
        assert type(venv.recv()[0]) is type(space.sample())


class ReusedArrayEnv(gym.Env):
    """Returns the same array object every time and overwrites it in reset():
    the terminal observation must be taken before the automatic reset."""

    observation_space = spaces.Box(0, 100, (3,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self):
        self.obs = np.zeros(3, np.float32)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        self.obs[:] = 0
        return self.obs, ({"reset_at": 0} if options else {})

    def step(self, action):
        self.t += 1
        self.obs[:] = self.t
        return self.obs, 0.0, self.t == 3, False, {"t": self.t} if action else {}


@pytest.mark.parametrize("batch_size", [None, 1])
def test_terminal_observation_is_taken_before_the_automatic_reset(batch_size):
    with vecenv.ShmemVecEnv([ReusedArrayEnv] * 2, batch_size=batch_size, num_workers=1) as venv:
        venv.reset()
        if batch_size is None:
            for action in (0, 1, 0):
                obs, _, dones, infos = venv.step(np.full(2, action))
        else:  # env 0 alone, through send/recv
            venv.recv()
            venv.recv()
            for _ in range(3):
                venv.send(np.zeros(1, np.int64), np.array([0]))
                obs, _, dones, infos, ids = venv.recv()
            assert ids.tolist() == [0]
        assert dones.all()
        assert obs.tolist() == [[0, 0, 0]] * len(obs)  # the reset observation
        for info in infos:
            assert info["terminal_observation"].tolist() == [3, 3, 3]
            assert info["TimeLimit.truncated"] is False
        assert venv.reset_infos[0] == {}


# ---------------------------------------------------------------- baselines' ShmemVecEnv contract
FORK = {"context": "fork", "num_workers": 2}
TUPLE = spaces.Tuple((spaces.Discrete(3), spaces.Box(0.0, 1.0, (2,), np.float32)))
DICT = spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0.0, 1.0, (), np.float64)})


class ActionRecordingEnv(gym.Env):
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


@pytest.mark.parametrize("batch_size", [None, 1], ids=["lockstep", "partial"])
@pytest.mark.parametrize("layout", list(LAYOUTS.values()), ids=list(LAYOUTS))
def test_same_step_final_info_is_the_terminal_steps_when_the_env_reuses_its_info(
    layout, batch_size
):
    # ReusedInfoEnv changes its one info dict (and its array) in place at reset.
    n, length = 2, 2
    fns = [functools.partial(ReusedInfoEnv, length)] * n
    with vecenv.ShmemVecEnv(
        fns, autoreset_mode="same_step", batch_size=batch_size, **layout
    ) as venv:
        venv.reset()
        if batch_size is not None:  # partial batches: the resets come through recv()
            ids = [int(venv.recv()[4][0]) for _ in range(n)]
        finals = []
        for _ in range(3 * length):
            if batch_size is None:
                _, _, dones, infos = venv.step(np.zeros(n, np.int64))
                ids = range(n)
            else:
                venv.send(np.zeros(n, np.int64), ids)
                got = [venv.recv() for _ in range(n)]
                dones = [d for g in got for d in g[2]]
                infos = [x for g in got for x in g[3]]
                ids = [int(i) for g in got for i in g[4]]
            for i, done, info in zip(ids, dones, infos):
                assert done == ("final_info" in info), (i, info)
                if done:
                    finals.append(info["final_info"])
                    assert info["t"] == 0  # the reset's info beside it
    assert len(finals) == 3 * n
    for final in finals:
        assert final["t"] == length
        np.testing.assert_array_equal(final["arr"], [length, length])


def test_reset_while_a_step_is_pending_cancels_it():
    with vecenv.ShmemVecEnv([lambda: ActionRecordingEnv(fragile=True)] * 3, **FORK) as venv:
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
    with vecenv.ShmemVecEnv(
        [lambda: ActionRecordingEnv(TUPLE)] * 3, check_actions=check_actions, **FORK
    ) as venv:
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
    with vecenv.ShmemVecEnv(
        [lambda: ActionRecordingEnv(DICT)] * 3, check_actions=check_actions, **FORK
    ) as venv:
        venv.reset()
        for actions in (batched, per_env):
            obs, *_ = venv.step(actions)
            assert obs[:, 1].tolist() == [2, 1, 0]


def test_actions_reach_the_envs_unchecked_by_default():
    with vecenv.ShmemVecEnv([ActionRecordingEnv] * 3, **FORK) as venv:
        venv.reset()
        obs, *_ = venv.step(np.array([5, -1, 0]))  # outside Discrete(3): the env decides
        assert obs[:, 1].tolist() == [5, -1, 0]
        venv.step(np.array([0.5, 1.0, 2.0]))  # float64 elements, as given
        assert venv.env_method("last_action")[0] == ("float64", 0.5)
        with pytest.raises(vecenv.InvalidArgumentError, match="got 2 actions, expected 3"):
            venv.step_async([0, 1])
        with pytest.raises(vecenv.ActionTypeError, match="one action per env"):
            venv.step_async(np.int64(1))
    with vecenv.ShmemVecEnv([ActionRecordingEnv] * 3, check_actions=True, **FORK) as venv:
        venv.reset()
        with pytest.raises(vecenv.InvalidArgumentError, match="outside Discrete"):
            venv.step_async(np.array([5, -1, 0]))


def test_partial_batches_send_piped_actions():
    with vecenv.ShmemVecEnv([ActionRecordingEnv] * 4, batch_size=2, **FORK) as venv:
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


# ---------------------------------------------------------------- pickled leaves (opt-in)
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


# ---------------------------------------------------------------- observation dtypes
class Float64ObsEnv(gym.Env):
    """A float32 Box whose observations come as float64 arrays (``np.array``
    of Python floats: the most common slip in custom envs), and an int32 Box
    leaf fed int64, inside a Dict when ``nested``."""

    def __init__(self, env_id=0, nested=False, bad=False):
        self.env_id, self.nested, self.bad, self.t = env_id, nested, bad, 0
        box = spaces.Box(-10.0, 10.0, (3,), np.float32)
        if nested:
            self.observation_space = spaces.Dict(
                {"x": box, "n": spaces.Box(0, 1000, (2,), np.int32)}
            )
        else:
            self.observation_space = box
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        x = np.array([self.env_id + 0.1, self.t + 0.25, -1.5])  # float64
        if self.bad and self.env_id == 1:
            x = x.astype(np.complex128)  # no same_kind cast to float32
        if self.nested:
            return {"x": x, "n": np.array([self.env_id, self.t], np.int64)}
        return x

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, False, False, {}


def _expected_rows(n, t, nested):
    x = np.array([[e + 0.1, t + 0.25, -1.5] for e in range(n)]).astype(np.float32)
    if nested:
        return {"x": x, "n": np.array([[e, t] for e in range(n)], np.int32)}
    return x


@pytest.mark.timeout(120)
@pytest.mark.parametrize("nested", [False, True], ids=["box", "dict"])
@pytest.mark.parametrize(
    "layout",
    [
        {"num_workers": 0},
        {"num_workers": 1},
        {"num_workers": 2},
        {"num_workers": 2, "_fallback_for_testing": True},
        {"num_workers": 2, "batch_size": 2},
    ],
    ids=["in-process", "1-worker", "2-workers", "fallback", "partial"],
)
def test_observations_of_another_dtype_are_cast_as_gymnasium_casts_them(layout, nested):
    n = 4
    fns = [functools.partial(Float64ObsEnv, e, nested) for e in range(n)]
    with vecenv.ShmemVecEnv(fns, context="fork", **layout) as venv:
        if layout.get("batch_size"):  # partial batches: each env's row, by env id
            venv.reset()
            steps = np.zeros(n, np.int64)  # each env's step count
            for _ in range(6):
                obs, _, _, _, ids = venv.recv()
                rows = [_expected_rows(n, int(steps[e]), nested) for e in ids]
                if nested:
                    want = {k: np.stack([r[k][e] for r, e in zip(rows, ids)]) for k in rows[0]}
                else:
                    want = np.stack([r[e] for r, e in zip(rows, ids)])
                assert_tree_equal(obs, want)
                venv.send(np.zeros(len(ids), np.int64), ids)
                steps[ids] += 1
            return
        assert_tree_equal(venv.reset(), _expected_rows(n, 0, nested))
        for t in (1, 2):
            obs, *_ = venv.step(np.zeros(n, np.int64))
            assert_tree_equal(obs, _expected_rows(n, t, nested))


@pytest.mark.timeout(120)
def test_the_drop_ins_cast_observations_too():
    from vecenv.gymnasium_vector import AsyncVectorEnv

    fns = [functools.partial(Float64ObsEnv, e) for e in range(2)]
    envs = AsyncVectorEnv(fns, context="fork")
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.dtype == np.float32 and np.array_equal(obs, _expected_rows(2, 0, False))
        obs, *_ = envs.step(np.zeros(2, np.int64))
        assert np.array_equal(obs, _expected_rows(2, 1, False))
    finally:
        envs.close()
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3 import SubprocVecEnv

    sub = SubprocVecEnv(fns, start_method="fork")
    try:
        assert np.array_equal(sub.reset(), _expected_rows(2, 0, False))
    finally:
        sub.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_observation_that_cannot_be_cast_names_env_leaf_dtypes_and_shapes(num_workers):
    fns = [functools.partial(Float64ObsEnv, e, bad=True) for e in range(3)]
    with vecenv.ShmemVecEnv(fns, num_workers=num_workers, context="fork") as venv:
        with pytest.raises(vecenv.ObservationError) as info:
            venv.reset()
        err = info.value
        text = str(err)
        assert err.env_index == 1 and "env 1 returned" in text
        assert "complex128" in text and "float32" in text and "(3,)" in text
        assert "raised" not in text  # the env raised nothing: vecenv refused its value


@pytest.mark.timeout(60)
def test_check_observations_refuses_another_dtype():
    fns = [functools.partial(Float64ObsEnv, e) for e in range(2)]
    with vecenv.ShmemVecEnv(fns, num_workers=1, check_observations=True) as venv:
        with pytest.raises(vecenv.ObservationError, match="dtype float64, expected float32"):
            venv.reset()
