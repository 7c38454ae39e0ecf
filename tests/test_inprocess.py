"""ShmemVecEnv(num_workers=0): the in-process engine (vecenv/_inprocess.py).

Every case compares the in-process engine with the multiprocess one, or with
gymnasium's and SB3's own vector envs, on the same seeds and actions:
trajectories (observations, rewards, flags, infos, reset infos) in every
autoreset mode and several spaces, the drop-ins, errors, calls, partial
batches, Ctrl-C, close and the options it refuses.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium import spaces
from helpers import Alarm, PayloadEnv, WordSpace, fuzz_lockstep, fuzz_partial, payload_fns
from reference import assert_tree_equal, stack

import vecenv
from vecenv.envs import CounterEnv
from vecenv.errors import (
    ClosedError,
    InvalidArgumentError,
    RemoteTraceback,
    StateError,
    WorkerError,
)

pytestmark = pytest.mark.timeout(60)

MODES = ["sb3", "next_step", "same_step", "disabled"]


# ------------------------------------------------------------ envs
class RandomEnv(gym.Env):
    """Draws from its own ``np_random``: observation and episode length
    depend on the seed; Box observation, MultiDiscrete action; infos on
    some steps (arrays among them), truncation or termination at random."""

    def __init__(self, env_id=0):
        self.env_id = env_id
        self.observation_space = spaces.Box(-10, 10, (3,), np.float32)
        self.action_space = spaces.MultiDiscrete([3, 4])
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, {"start": float(obs[0]), "options": options}

    def step(self, action):
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        obs[2] = action[0] + 10 * action[1]
        end = self.np_random.random()
        info = {"t": self.t, "arr": np.arange(self.t)} if self.t % 3 == 0 else {}
        return obs, float(end), bool(end < 0.08), bool(0.08 <= end < 0.16), info


class WordEnv(gym.Env):
    """A Dict observation with a leaf without a fixed layout (pickled leaves)."""

    def __init__(self, env_id=0):
        self.env_id = env_id
        self.observation_space = spaces.Dict(
            {"word": WordSpace(), "x": spaces.Box(0, 100, (2,), np.int32)}
        )
        self.action_space = spaces.Discrete(4)
        self.t = 0

    def _obs(self):
        return {"word": f"e{self.env_id}t{self.t}", "x": np.array([self.env_id, self.t], np.int32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), self.t >= 4, False, {}


def _cartpole():
    return gym.make("CartPole-v1", max_episode_steps=9)


def _pendulum():
    return gym.make("Pendulum-v1", max_episode_steps=6)


CASES = {
    "cartpole": (_cartpole, {}),
    "pendulum": (_pendulum, {}),
    "counter": (functools.partial(CounterEnv, episode_length=4), {}),
    "random": (RandomEnv, {}),
    "word": (WordEnv, {"pickled_leaves": True}),
}


def _factories(name, n):
    make, _ = CASES[name]
    if name in ("counter", "random", "word"):
        return [functools.partial(make, i) for i in range(n)]
    return [make] * n


def _plain(x):
    """``x`` with arrays as (dtype, list): comparable with ==."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    return x


def _batches(action_space, n, steps, seed, per_env=False):
    """``steps`` batches of ``n`` actions drawn from ``action_space``
    seeded with ``seed``: stacked arrays, or lists of per-env actions."""
    sp = action_space
    sp.seed(seed)
    out = []
    for _ in range(steps):
        acts = [sp.sample() for _ in range(n)]
        out.append(acts if per_env else stack(acts))
    return out


def _rollout(venv, batches, seed):
    """Seeded reset then a step per batch; everything the caller sees."""
    venv.seed(seed)
    first = venv.reset()
    seen = [(_plain(first), _plain(venv.reset_infos))]
    for acts in batches:
        venv.step_async(acts)
        obs, rew, term, trunc, infos = venv.step_wait_gym()
        seen.append((_plain(obs), rew.tolist(), term.tolist(), trunc.tolist(), _plain(infos)))
        seen.append(_plain(venv.reset_infos))
    return seen


# The layouts whose envs step in the calling process: all of them, or the
# caller's share beside worker processes (inline=True, tests/test_inline.py).
LAYOUTS = {
    "in_process": {"num_workers": 0},
    "inline": {"num_workers": 1, "inline": True},
    "inline_2": {"num_workers": 2, "inline": True},
    "inline_share": {"num_workers": 1, "inline": True, "inline_envs": 2},
}


def _run(name, mode, n=5, steps=40, seed=7, per_env=False, layout="in_process", **kw):
    """What the caller sees of a seeded rollout: ``layout``, then two plain workers."""
    fns = _factories(name, n)
    extra = dict(CASES[name][1], autoreset_mode=mode, **kw)
    out = []
    for given in (LAYOUTS[layout], {"num_workers": 2}):
        with vecenv.ShmemVecEnv(fns, **given, **extra) as venv:
            assert venv.in_process == (given["num_workers"] == 0)
            assert venv.layout.inline == given.get("inline", False)
            batches = _batches(venv.action_space, n, steps, seed, per_env)
            out.append(_rollout(venv, batches, seed))
    return out


# ------------------------------------------------------------ trajectories
@pytest.mark.filterwarnings("ignore:.*already returned terminated")  # "disabled": as with workers
@pytest.mark.parametrize("layout", ["in_process", "inline", "inline_share"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_trajectories_as_the_workers(name, mode, layout):
    here, workers = _run(name, mode, layout=layout)
    assert len(here) == len(workers)
    for step, (a, b) in enumerate(zip(here, workers)):
        assert a == b, f"step {step // 2}"


@pytest.mark.parametrize("layout", ["in_process", "inline_2"])
@pytest.mark.parametrize("name", ["counter", "random"])
def test_per_env_action_lists_take_the_pipe_path_and_match(name, layout):
    here, workers = _run(name, "sb3", per_env=True, steps=20, layout=layout)
    assert here == workers


def test_matches_a_plain_loop_and_copy_false_gives_views():
    fns = [_cartpole] * 3
    with vecenv.ShmemVecEnv(fns, num_workers=0, copy=False) as venv:
        venv.seed(3)
        obs = venv.reset()
        envs = [fn() for fn in fns]
        want = stack([e.reset(seed=3 + i)[0] for i, e in enumerate(envs)])
        assert_tree_equal(obs, want)
        for t in range(30):
            acts = np.array([(t + i) % 2 for i in range(3)])
            got, rew, dones, infos = venv.step(acts)
            assert not got.flags.owndata  # a view into shared memory
            for i, env in enumerate(envs):
                o, r, te, tr, _ = env.step(acts[i])
                if te or tr:
                    np.testing.assert_array_equal(infos[i]["terminal_observation"], o)
                    o, _ = env.reset()
                np.testing.assert_array_equal(got[i], o)
                assert rew[i] == r and dones[i] == (te or tr)


def test_make_passes_num_workers_through():
    with vecenv.make("CartPole-v1", 3, num_workers=0) as venv:
        assert venv.in_process and "layout='in process'" in repr(venv)
        assert venv.reset().shape == (3, 4)


def test_gymnasium_dropin_matches_gymnasium_sync_vector_env():
    from gymnasium.vector import SyncVectorEnv

    fns = [_cartpole] * 4
    ours = vecenv.AsyncVectorEnv(fns, num_workers=0)
    theirs = SyncVectorEnv(fns)
    try:
        assert ours._venv.in_process
        a = ours.reset(seed=5)
        b = theirs.reset(seed=5)
        assert_tree_equal(a[0], b[0])
        for t in range(40):
            acts = np.array([(t * 7 + i) % 2 for i in range(4)])
            ra, rb = ours.step(acts), theirs.step(acts)
            for x, y in zip(ra[:4], rb[:4]):
                assert_tree_equal(x, y)
            assert _plain(ra[4]) == _plain(rb[4])
    finally:
        ours.close()
        theirs.close()


def test_sb3_dropin_matches_sb3_dummy_vec_env():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from vecenv.sb3 import SubprocVecEnv

    fns = [_cartpole] * 4
    ours = SubprocVecEnv(fns, num_workers=0)
    theirs = DummyVecEnv(fns)
    try:
        assert ours.engine.in_process
        ours.seed(11)
        theirs.seed(11)
        np.testing.assert_array_equal(ours.reset(), theirs.reset())
        for t in range(40):
            acts = np.array([(t * 3 + i) % 2 for i in range(4)])
            ra, rb = ours.step(acts), theirs.step(acts)
            for x, y in zip(ra[:3], rb[:3]):
                np.testing.assert_array_equal(x, y)
            assert _plain(ra[3]) == _plain(rb[3])
    finally:
        ours.close()
        theirs.close()


def test_global_generators_are_left_alone():
    np.random.seed(123)  # noqa: NPY002 - the global state is the point
    want = np.random.random()  # noqa: NPY002
    with vecenv.ShmemVecEnv([RandomEnv] * 2, num_workers=0) as venv:
        np.random.seed(123)  # noqa: NPY002
        venv.seed(1)
        venv.reset()
        venv.step(np.zeros((2, 2), np.int64))
        assert np.random.random() == want  # noqa: NPY002


# ------------------------------------------------------------ errors
class FailingEnv(PayloadEnv):
    """Raises in step() when its ``t`` reaches ``fail_at`` (env ``bad`` only)."""

    def __init__(self, env_id=0, bad=2, fail_at=3):
        super().__init__(env_id)
        self.bad, self.fail_at = bad, fail_at

    def step(self, action):
        if self.env_id == self.bad and self.t + 1 == self.fail_at:
            self.explode()
        return super().step(action)

    def explode(self):
        raise KeyError(f"boom in env {self.env_id}")


def test_an_env_error_names_the_env_chains_its_traceback_and_reset_recovers():
    fns = [functools.partial(FailingEnv, i) for i in range(4)]
    with vecenv.ShmemVecEnv(fns, num_workers=0) as venv:
        venv.reset()
        acts = np.ones(4, np.int64)
        venv.step(acts)
        venv.step(acts)
        with pytest.raises(WorkerError) as info:
            venv.step(acts)
        err = info.value
        assert err.env_index == 2 and "env 2" in str(err) and "KeyError" in str(err)
        assert isinstance(err.__cause__, RemoteTraceback)
        assert "in explode" in err.__cause__.tb and "boom in env 2" in err.__cause__.tb
        with pytest.raises(StateError, match="reset"):
            venv.step(acts)
        obs = venv.reset()
        assert obs[:, 1].tolist() == [0, 0, 0, 0]
        obs, *_ = venv.step(acts)  # env 2 is at t=1 again: fails at t=3
        assert obs[:, 1].tolist() == [1, 1, 1, 1]


def test_errors_of_several_envs_in_one_round_are_all_reported():
    class Both(FailingEnv):
        def step(self, action):
            if self.env_id in (1, 3):
                raise ValueError(f"env {self.env_id} fails")
            return PayloadEnv.step(self, action)

    with vecenv.ShmemVecEnv([functools.partial(Both, i) for i in range(4)], num_workers=0) as venv:
        venv.reset()
        with pytest.raises(WorkerError) as info:
            venv.step(np.zeros(4, np.int64))
        assert info.value.env_index == 1 and sorted(info.value.errors) == [1, 3]


def test_a_factory_error_names_the_env():
    def bad():
        raise KeyError("no such env")

    fns = [PayloadEnv, bad, PayloadEnv]
    with pytest.raises(WorkerError) as info:
        vecenv.ShmemVecEnv(fns, num_workers=0)
    assert isinstance(info.value, KeyError) and info.value.env_index == 1
    assert "creating the env" in str(info.value)
    assert "no such env" in info.value.__cause__.tb


def test_envs_with_different_spaces_are_refused_as_in_one_worker():
    fns = [PayloadEnv, _cartpole]
    with pytest.raises(WorkerError, match="env 1 has spaces") as info:
        vecenv.ShmemVecEnv(fns, num_workers=0)
    assert info.value.env_index == 1


def test_reward_check_names_the_env():
    class NanEnv(PayloadEnv):
        def step(self, action):
            obs, _, te, tr, info = super().step(action)
            return obs, float("nan") if self.env_id == 1 else 0.0, te, tr, info

    fns = [functools.partial(NanEnv, i) for i in range(2)]
    with vecenv.ShmemVecEnv(fns, num_workers=0, check_rewards=True) as venv:
        venv.reset()
        with pytest.raises(vecenv.errors.RewardError) as info:
            venv.step(np.zeros(2, np.int64))
        assert info.value.env_index == 1


# ------------------------------------------------------------ calls
def test_calls_and_render():
    fns = [functools.partial(CounterEnv, i, render_mode="rgb_array") for i in range(3)]
    with vecenv.ShmemVecEnv(fns, num_workers=0) as venv:
        venv.reset()
        venv.step(np.ones(3, np.int64))
        assert venv.get_attr("env_id") == [0, 1, 2]
        assert venv.get_attr("_t", indices=[2, 0]) == [1, 1]
        venv.set_attr("episode_length", 9, indices=[1])
        assert venv.get_attr("episode_length") == [5, 9, 5]
        frames = venv.get_images()
        assert [f[0, 0, 0] for f in frames] == [0, 1, 2] and frames[0].shape == (4, 6, 3)
        assert venv.env_is_wrapped(gym.Wrapper) == [False] * 3
        # Results by reference, as in gymnasium's SyncVectorEnv: the env itself.
        (env,) = venv.get_attr("unwrapped", indices=[1])
        assert isinstance(env, CounterEnv) and env.env_id == 1 and env._t == 1
        with pytest.raises(WorkerError) as info:
            venv.env_method("no_such_method", indices=[2])
        assert info.value.env_index == 2 and isinstance(info.value.__cause__, RemoteTraceback)
        # A failed call leaves the vec env usable.
        venv.step(np.ones(3, np.int64))


def test_call_arguments_need_not_pickle():
    class Env(PayloadEnv):
        def apply(self, fn):
            return fn(self.env_id)

    with vecenv.ShmemVecEnv([functools.partial(Env, i) for i in range(2)], num_workers=0) as venv:
        venv.reset()
        assert venv.env_method("apply", lambda i: i + 100) == [100, 101]


def test_factories_need_not_pickle():
    import threading

    lock = threading.Lock()  # cloudpickle refuses it: workers could not get this factory

    def make(i):
        with lock:
            return PayloadEnv(i)

    fns = [functools.partial(make, i) for i in range(2)]
    with vecenv.ShmemVecEnv(fns, num_workers=0) as venv:
        assert venv.reset()[:, 0].tolist() == [0, 1]


def test_actions_are_copied_before_the_step_runs():
    """A list of actions goes through the pipe path: the envs get copies, so
    the caller may reuse its objects at once, as with workers."""

    class Keep(PayloadEnv):
        def __init__(self, env_id=0):
            super().__init__(env_id)
            self.action_space = spaces.Box(-1, 1, (2,), np.float32)
            self.last = None

        def step(self, action):
            self.last = action
            return super().step(0)

    with vecenv.ShmemVecEnv([Keep, Keep], num_workers=0) as venv:
        venv.reset()
        acts = [np.array([0.5, 0.5], np.float64), np.array([0.25, 0.25], np.float64)]
        venv.step_async(acts)
        acts[0][:] = 9.0
        venv.step_wait()
        assert venv.get_attr("last")[0].tolist() == [0.5, 0.5]


# ------------------------------------------------------------ partial batches
def test_partial_batches_step_the_envs_sent_in_fifo_order():
    with vecenv.ShmemVecEnv(payload_fns(4), num_workers=0, batch_size=2) as venv:
        assert venv.reset() is None
        _, _, _, infos, ids = venv.recv()
        assert ids.tolist() == [0, 1] and [i["t"] for i in infos] == [0, 0]
        _, _, _, _, ids = venv.recv()
        assert ids.tolist() == [2, 3]
        venv.send(np.array([4]), np.array([3]))
        venv.send(np.array([1, 2]), np.array([1, 0]))
        obs, rew, dones, infos, ids = venv.recv()
        # Sent first, received first; one send's envs in index order.
        assert ids.tolist() == [3, 0]
        assert obs.tolist() == [[3, 1, 4], [0, 1, 2]]
        assert infos == [{"env": 3, "t": 1, "a": 4}, {"env": 0, "t": 1, "a": 2}]
        with pytest.raises(StateError, match="in flight"):
            venv.recv()
        venv.send(np.array([3, 3]), np.array([2, 3]))
        obs, _, _, infos, ids = venv.recv()
        assert ids.tolist() == [1, 2] and obs.tolist() == [[1, 1, 1], [2, 1, 3]]
        with pytest.raises(InvalidArgumentError, match="still in flight"):
            venv.send(np.array([0]), np.array([3]))


# ------------------------------------------------------------ Ctrl-C
class SlowEnv(PayloadEnv):
    def step(self, action):
        time.sleep(0.002)
        return super().step(action)


@pytest.mark.timeout(60, method="thread")  # SIGALRM is the test's own
def test_ctrl_c_inside_an_env_step_then_reset_is_exact():
    fns = [functools.partial(SlowEnv, i) for i in range(4)]
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(fns, num_workers=0) as venv:
            venv.reset()
            acts = np.full(4, 2, np.int64)
            hit, _ = alarm.run(0.003, venv.step, acts)  # lands in env 1's sleep
            assert hit and alarm.fired == 1
            assert venv._state.name == "NEEDS_RESET"
            assert (
                venv._collector.in_flight.all() and venv._collector.ctrl.published() < 4
            )  # a round cut short
            obs = venv.reset()
            assert obs.tolist() == [[i, 0, -1] for i in range(4)]
            assert [(i["env"], i["t"]) for i in venv.reset_infos] == [(i, 0) for i in range(4)]
            obs, _, _, infos = venv.step(acts)
            assert obs.tolist() == [[i, 1, 2] for i in range(4)]
            assert infos == [{"env": i, "t": 1, "a": 2} for i in range(4)]


@pytest.mark.timeout(120, method="thread")  # SIGALRM is the fuzz's
@pytest.mark.parametrize("mode", ["lockstep", "partial"])
def test_keyboard_interrupt_fuzz_then_reset_is_always_correct(mode):
    trials = int(os.environ.get("VECENV_FUZZ_TRIALS", "2500")) // 4
    rng = np.random.default_rng(21 if mode == "lockstep" else 22)
    stats = {"interrupts": 0, "pending_step": 0, "broken": 0}
    kw = {"batch_size": 3} if mode == "partial" else {}
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(payload_fns(6), num_workers=0, **kw) as venv:
            if mode == "lockstep":
                fuzz_lockstep(venv, alarm, rng, trials, stats)
            else:
                fuzz_partial(venv, alarm, rng, trials, stats)
    assert stats["broken"] == 0  # no pipe to cut
    assert stats["interrupts"] > trials // 10, stats


# ------------------------------------------------------------ lifecycle
def _fds():
    return len(os.listdir("/proc/self/fd"))


class Closing(PayloadEnv):
    """Appends its env_id to ``log`` when closed."""

    def __init__(self, env_id, log):
        super().__init__(env_id)
        self.log = log

    def close(self):
        self.log.append(self.env_id)


def test_close_is_idempotent_closes_the_envs_and_leaks_nothing():
    me = psutil.Process()
    children = me.children()  # a forkserver of other tests may be there
    shm = {n for n in os.listdir("/dev/shm") if "vecenv" in n}  # other runs may share it
    fds = _fds()
    log: list = []
    venv = vecenv.ShmemVecEnv([functools.partial(Closing, i, log) for i in range(3)], num_workers=0)
    assert me.children() == children  # no worker process
    venv.reset()
    venv.step(np.zeros(3, np.int64))
    venv.close()
    assert log == [0, 1, 2]
    venv.close()
    assert log == [0, 1, 2] and venv.closed
    with pytest.raises(ClosedError):
        venv.reset()
    with pytest.raises(ClosedError):
        venv.get_attr("t")
    assert _fds() == fds
    assert {n for n in os.listdir("/dev/shm") if "vecenv" in n} <= shm


def test_garbage_collection_without_close_closes_the_envs():
    log: list = []
    gc.collect()  # earlier tests' garbage, and the files it holds, goes before the count
    fds = _fds()
    venv = vecenv.ShmemVecEnv([functools.partial(Closing, i, log) for i in range(2)], num_workers=0)
    venv.reset()
    del venv
    gc.collect()
    assert log == [0, 1]
    assert _fds() == fds


def test_copy_false_views_outlive_close_safely():
    venv = vecenv.ShmemVecEnv(payload_fns(2), num_workers=0, copy=False)
    obs = venv.reset()
    venv.close()
    assert obs.tolist() == [[0, 0, -1], [1, 0, -1]]  # the mapping stays while a view lives


# ------------------------------------------------------------ options
@pytest.mark.parametrize(
    "kw, match",
    [
        ({"timeout": 5.0}, "timeout=5.0 cannot be enforced with num_workers=0"),
        ({"cpu_affinity": True}, "cpu_affinity=True needs worker processes"),
        ({"envs_per_worker": 2}, "envs_per_worker must be None with num_workers=0"),
    ],
)
def test_options_that_in_process_cannot_honour_are_refused(kw, match):
    fds = _fds()
    with pytest.raises(InvalidArgumentError, match=match):
        vecenv.ShmemVecEnv(payload_fns(2), num_workers=0, **kw)
    assert _fds() == fds


def test_bad_num_workers_messages_name_zero():
    with pytest.raises(InvalidArgumentError, match=r"int >= 0 \(0: in-process"):
        vecenv.ShmemVecEnv(payload_fns(2), num_workers=-1)
    with pytest.raises(InvalidArgumentError, match="num_workers"):
        vecenv.ShmemVecEnv(payload_fns(2), num_workers=False)


def test_options_without_effect_are_accepted():
    with vecenv.ShmemVecEnv(
        payload_fns(2),
        num_workers=0,
        start_timeout=0.001,
        spin=1.0,
        context="spawn",
        daemon=False,
        on_worker_death="restart",
        max_restarts=0,
    ) as venv:
        assert venv.spin == 0.0
        assert venv.reset().tolist() == [[0, 0, -1], [1, 0, -1]]


def test_sigint_is_not_touched():
    before = signal.getsignal(signal.SIGINT)
    with vecenv.ShmemVecEnv(payload_fns(2), num_workers=0) as venv:
        assert signal.getsignal(signal.SIGINT) is before
        venv.reset()
    assert signal.getsignal(signal.SIGINT) is before
