"""The worker round (csrc/_round.pxi, ``vecenv._core.WorkerRound``) gives
exactly what its plain-Python reference (``tests/reference.py``,
``WorkerRoundReference``) gives.

Most tests run a worker loop (``vecenv._worker._Loop``, whose every round is
the compiled one) in this process over a real shared block, with a fake pipe
that records the round messages, and the reference over a block of the same
layout, on identical envs driven by the same script of actions, resets, pipe
actions and partial rounds, in every autoreset mode. After every round they
compare everything a parent could read: observation and final-observation
rows, rewards, flags, statuses, the round message (infos, reset infos, pickled
leaves, error reports without their traceback), the autoreset state, the
worker slot's activity, every action the envs received (type, dtype, value),
and with episode statistics the running and final returns and lengths (and
which envs have a duration). A few tests run whole vec envs (``ShmemVecEnv``, the SB3 drop-in) and
compare their trajectories with the reference driven the same way.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import WorkerRoundReference

import vecenv
from vecenv import _core, _layout, _worker
from vecenv._protocol import Msg

pytestmark = pytest.mark.timeout(60)

STEP, RESET = _core.OP_STEP, _core.OP_RESET


def canon(x):
    """A comparable form of a value: type, dtype, shape and contents."""
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, bool(x.flags.c_contiguous), x.tolist())
    if isinstance(x, np.generic):
        return (type(x).__name__, x.item())
    if isinstance(x, dict):
        return ("dict", [(k, canon(v)) for k, v in x.items()])
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, [canon(v) for v in x])
    return (type(x).__name__, x)


class ScriptEnv(gym.Env):
    """An env whose every return value is drawn from its own generator: the
    observation (as sampled, a reused array, non-contiguous, a list, the wrong
    dtype or the wrong shape), the reward type, the flag types, a list instead of a tuple,
    infos on some steps and resets, and optionally an error at one step."""

    def __init__(self, obs_space, act_space, env_id, knobs):
        self.observation_space = obs_space
        self.action_space = act_space
        self.env_id = env_id
        self.k = knobs
        self.received = []
        self.rng = np.random.default_rng([env_id, 7])
        self.t = 0
        self.steps = 0
        self.length = 3
        self.buf = None

    def _obs(self):
        x = self.observation_space.sample()
        if not isinstance(x, np.ndarray) or x.ndim == 0:
            return x
        kind = self.rng.choice(
            ["plain", "reused", "noncontig", "list", "wrongdtype", "wrongshape"],
            p=self.k["obs_p"],
        )
        if kind == "reused":  # the env's own array, overwritten by its next call
            if self.buf is None or self.buf.shape != x.shape:
                self.buf = np.empty_like(x)
            np.copyto(self.buf, x)
            return self.buf
        if kind == "noncontig" and x.size > 1:
            return np.repeat(x, 2, axis=-1)[..., ::2]
        if kind == "list":
            return x.tolist()
        if kind == "wrongdtype":
            return x.astype(np.float64 if x.dtype != np.float64 else np.float32)
        if kind == "wrongshape":  # the right dtype with a leading axis of 1
            return x[np.newaxis]
        return x

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng([self.env_id, seed])
        self.observation_space.seed(int(self.rng.integers(2**31)))
        self.t = 0
        self.length = int(self.rng.integers(1, 5))
        self.received.append(("reset", seed, canon(options)))
        if self.k["reset_raise"] and self.rng.random() < self.k["reset_raise"]:
            raise ValueError(f"env {self.env_id} cannot reset")
        info = {"reset_of": self.env_id} if self.rng.random() < self.k["reset_info_p"] else {}
        obs = self._obs()
        return [obs, info] if self.rng.random() < self.k["list_p"] else (obs, info)

    def step(self, action):
        self.received.append(("step", canon(action)))
        self.t += 1
        self.steps += 1
        if self.steps == self.k["raise_at"].get(self.env_id):
            raise RuntimeError(f"env {self.env_id} fails at step {self.steps}")
        r = float(self.rng.normal())
        kind = self.rng.choice(self.k["rewards"])
        reward = {
            "float": r,
            "f32": np.float32(r),
            "f64": np.float64(r),
            "int": int(r * 10),
            "bool": r > 0,
            "i64": np.int64(r * 10),
            "nan": math.nan,
            "huge": 10**400,
            "bigint": 2**60 + 2**7 + 1,  # rounds to a double
        }[kind]
        end = self.t >= self.length
        terminated = end and self.rng.random() < 0.5
        truncated = end and not terminated
        flag = self.rng.choice(self.k["flags"])
        if flag == "np":
            terminated, truncated = np.bool_(terminated), np.bool_(truncated)
        elif flag == "int":
            terminated, truncated = int(terminated), int(truncated)
        u = self.rng.random()
        info = {} if u > self.k["info_p"] else ({"t": self.t} if u > 0.02 else None)
        out = (self._obs(), reward, terminated, truncated, info)
        return list(out) if self.rng.random() < self.k["list_p"] else out


KNOBS = {
    "obs_p": [0.8, 0.04, 0.04, 0.04, 0.04, 0.04],
    "rewards": ["float", "float", "f32", "f64", "int", "bool", "i64"],
    "flags": ["bool", "bool", "np", "int"],
    "info_p": 0.2,
    "reset_info_p": 0.3,
    "list_p": 0.05,
    "raise_at": {},
    "reset_raise": 0.0,
}


class FakeConn:
    """The worker's pipe: records each round message with its ticket."""

    def __init__(self):
        self.bodies = []

    def bind(self, ctrl, index):
        pass

    def send_body(self, payload, ticket):
        self.bodies.append((ticket, pickle.loads(payload)))
        return True


class CountingLoop(_worker._Loop):
    """Counts the calls of the Python methods the compiled round falls back to."""

    def __init__(self, *args):
        self.calls = {"_step": 0, "_finish_step": 0, "_write_obs": 0, "_publish_round": 0}
        super().__init__(*args)

    def _step(self, i, k):
        self.calls["_step"] += 1
        return super()._step(i, k)

    def _finish_step(self, i, k, result):
        self.calls["_finish_step"] += 1
        return super()._finish_step(i, k, result)

    def _write_obs(self, *args, **kwargs):
        self.calls["_write_obs"] += 1
        return super()._write_obs(*args, **kwargs)

    def _publish_round(self, *args):
        self.calls["_publish_round"] += 1
        return super()._publish_round(*args)


def _layout_for(envs, mode, pickled, episodes=False):
    obs_space, act_space = envs[0].observation_space, envs[0].action_space
    return _layout.BlockLayout.build(
        obs_space,
        act_space,
        len(envs),
        1,
        final_obs=mode == "sb3",
        pickled=pickled,
        episodes=episodes,
    )


def make_loop(envs, mode, check_rewards=False, pickled=False, episodes=False, info_keys=None):
    """A worker loop hosting ``envs`` as worker 0 of one, over a fresh shared block."""
    n = len(envs)
    layout = _layout_for(envs, mode, pickled, episodes)
    fd = os.memfd_create("vecenv-test-round", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, layout.nbytes)
        block = _core.SharedBlock(fd, layout.nbytes)
    finally:
        os.close(fd)
    _core.Control(block, n, 1, [0] * n, init=True)
    spec = _worker.WorkerSpec(
        index=0,
        lo=0,
        hi=n,
        env_fns=b"",
        parent_pid=os.getpid(),
        spin_s=0.0,
        autoreset_mode=mode,
        check_rewards=check_rewards,
        info_keys=info_keys,
    )
    loop = CountingLoop(spec, FakeConn(), None, envs, block, layout)
    assert isinstance(loop.round, _core.WorkerRound) and not loop.round.closed
    return loop


def make_reference(envs, mode, check_rewards=False, pickled=False, episodes=False, info_keys=None):
    """The reference round over a zeroed block of the loop's layout."""
    layout = _layout_for(envs, mode, pickled, episodes)
    block = np.zeros(layout.nbytes, np.uint8)
    views = (*layout.views(block), layout.final_views(block))
    return WorkerRoundReference(
        envs,
        layout,
        views,
        mode,
        check_rewards=check_rewards,
        episodes=layout.episode_views(block),
        info_keys=info_keys,
    )


# What a parent reads from either side: the library's loop or the reference.
def views(side):
    """``(actions, observations, rewards, terminated, truncated, final)``."""
    return side.views if isinstance(side, WorkerRoundReference) else side._views


def statuses(side):
    return side.status if isinstance(side, WorkerRoundReference) else side.ctrl.arrays()[1]


def messages(side):
    """Every round message so far, as ``(infos, errors)``."""
    if isinstance(side, WorkerRoundReference):
        return side.messages
    out = []
    for _, (kind, infos, errors) in side.conn.bodies:
        assert kind == Msg.ROUND
        out.append((infos, errors))
    return out


def episode_stats(side):
    """The running ``(return, length)`` of each env, and the finals in the
    block: returns, lengths and whether a duration was written (durations
    differ between runs); None with the option off."""
    if isinstance(side, WorkerRoundReference):
        if side.episodes is None:
            return None
        sums, finals = list(side.episode_sums), side.episodes
    else:
        if side.episodes is None:
            return None
        ep = side.episodes
        sums = list(zip(ep.returns.tolist(), ep.lengths.tolist()))
        finals = (ep.final_returns, ep.final_lengths, ep.final_times)
    ret, length, dur = finals
    assert np.all(dur >= 0) and np.all((dur > 0) == (length > 0))
    return sums, ret.tolist(), length.tolist(), (dur > 0).tolist()


def activity(side):
    """The worker slot: ``(env, activity)``, ``(-1, 0)`` between env calls."""
    if isinstance(side, WorkerRoundReference):
        return side.slot
    return tuple(side.ctrl.activity(0))


def _check_tickets(loop, ops, seen):
    """The loop published the round's envs under one ticket, which its round
    message (if any) carries."""
    tickets = loop.ctrl.arrays()[3]
    round_tickets = {int(tickets[i]) for i, _ in ops}
    assert len(round_tickets) <= 1, f"one round, several tickets: {round_tickets}"
    for ticket, _ in loop.conn.bodies[seen:]:
        assert round_tickets == {ticket}


def snapshot(side, ops, seen):
    if not isinstance(side, WorkerRoundReference):
        _check_tickets(side, ops, seen)
    acts, obs, rew, term, trunc, final = views(side)
    status = statuses(side)
    bodies = []
    for infos, errors in messages(side)[seen:]:
        # The reports without their tracebacks (which name source lines).
        assert all(e.traceback.startswith("Traceback") for e in errors.values())
        errs = {i: dataclasses.replace(e, traceback="") for i, e in errors.items()}
        bodies.append((canon(infos), errs))
    return repr(
        (
            [canon(o) for o in obs],
            [canon(f) for f in final],
            rew.tolist(),
            term.tolist(),
            trunc.tolist(),
            [int(status[i]) for i, _ in ops],
            bodies,
            list(side.needs_reset),
            activity(side),
            [canon(env.received) for env in side.envs],
            dict(side.pipe_actions),
            episode_stats(side),
        )
    )


def drive(side, seed, rounds):
    """Run ``rounds`` rounds chosen by ``seed`` (never by the side's results);
    return one snapshot per round."""
    rng = np.random.default_rng(seed)
    n = len(side.envs)
    act_space = side.envs[0].action_space
    act_space.seed(seed)
    acts = views(side)[0]
    write = None
    if not side.layout.actions_pickled:
        write = _layout.make_action_writer(side.layout.action_leaves, act_space)
    out = []
    side.reset_kwargs.update({i: {"seed": seed + i} for i in range(n)})
    side.run_round([(i, RESET) for i in range(n)])
    out.append(snapshot(side, [(i, RESET) for i in range(n)], 0))
    for _ in range(rounds):
        seen = len(messages(side))
        per_env = [act_space.sample() for _ in range(n)]
        if write is not None:
            write(_layout.stack_actions(act_space, per_env), acts)
        ids = (
            list(range(n))
            if rng.random() < 0.7
            else sorted(rng.choice(n, rng.integers(1, n + 1), replace=False))
        )
        ops = []
        for i in ids:
            i = int(i)
            if rng.random() < 0.08:
                kw = (
                    {"seed": int(rng.integers(100)), "options": {"o": 1}}
                    if rng.random() < 0.5
                    else {}
                )
                side.reset_kwargs[i] = kw
                ops.append((i, RESET))
                continue
            if write is None or rng.random() < 0.1:
                side.pipe_actions[i] = per_env[i]
            ops.append((i, STEP))
        side.run_round(ops)
        out.append(snapshot(side, ops, seen))
    return out


def compare(make_envs, mode, seed=0, rounds=30, **kw):
    """Drive the library's loop and the reference the same way; every round's
    snapshot must be equal. Returns the loop's fallback call counts."""
    loop = make_loop(make_envs(), mode, **kw)
    assert (loop.episodes is not None) == kw.get("episodes", False)
    try:
        got = drive(loop, seed, rounds)
        want = drive(make_reference(make_envs(), mode, **kw), seed, rounds)
        for r, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"round {r} differs:\ncompiled  {g}\nreference {w}"
        return loop.calls
    finally:
        loop.release()


BOX_F32 = spaces.Box(-2.0, 2.0, (4,), np.float32)
SPACES = {
    # name: (observation space, action space, pickled leaves)
    "box_f32-discrete": (BOX_F32, spaces.Discrete(3), False),
    "box_u8_2d-discrete_start": (
        spaces.Box(0, 255, (3, 5), np.uint8),
        spaces.Discrete(4, start=-2),
        False,
    ),
    "box_f64_scalar-box_f32": (
        spaces.Box(-1.0, 1.0, (), np.float64),
        spaces.Box(-1.0, 1.0, (2,), np.float32),
        False,
    ),
    "box_i16-box_f64_scalar": (
        spaces.Box(-100, 100, (2,), np.int16),
        spaces.Box(-1.0, 1.0, (), np.float64),
        False,
    ),
    "discrete_start-multidiscrete": (
        spaces.Discrete(5, start=-2),
        spaces.MultiDiscrete([3, 4]),
        False,
    ),
    "multidiscrete-multibinary": (
        spaces.MultiDiscrete([2, 5, 7]),
        spaces.MultiBinary(3),
        False,
    ),
    "multibinary_2d-box_i32": (
        spaces.MultiBinary([2, 3]),
        spaces.Box(-5, 5, (3,), np.int32),
        False,
    ),
    "box_empty-discrete": (spaces.Box(0, 1, (0,), np.float32), spaces.Discrete(2), False),
    "tuple-tuple": (
        spaces.Tuple((BOX_F32, spaces.Discrete(3))),
        spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1, (2,), np.float32))),
        False,
    ),
    "dict-dict": (
        spaces.Dict({"a": BOX_F32, "b": spaces.Dict({"c": spaces.MultiBinary(2)})}),
        spaces.Dict({"x": spaces.Discrete(3), "y": spaces.MultiDiscrete([2, 2])}),
        False,
    ),
    "dict_one_key-discrete": (spaces.Dict({"only": BOX_F32}), spaces.Discrete(2), False),
    "pickled_obs-discrete": (
        spaces.Dict({"a": BOX_F32, "t": spaces.Text(5)}),
        spaces.Discrete(2),
        True,
    ),
    "box-pickled_actions": (BOX_F32, spaces.Text(4), True),
}
MODES = ["sb3", "next_step", "same_step", "disabled"]


def _envs(name, n=5, knobs=KNOBS):
    obs_space, act_space, _ = SPACES[name]
    return lambda: [ScriptEnv(obs_space, act_space, e, knobs) for e in range(n)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(SPACES))
def test_same_trajectories_and_episode_statistics_as_the_reference(name, mode):
    compare(_envs(name), mode, seed=len(name), pickled=SPACES[name][2], episodes=True)


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 2**16),
    mode=st.sampled_from(MODES),
    name=st.sampled_from(sorted(SPACES)),
    info_p=st.sampled_from([0.0, 0.3, 1.0]),
    odd=st.sampled_from([0.0, 0.2]),
    raise_env=st.integers(-1, 3),
    raise_at=st.integers(1, 12),
    reset_raise=st.sampled_from([0.0, 0.1]),
    episodes=st.booleans(),
)
def test_same_trajectories_for_random_scripts(
    seed, mode, name, info_p, odd, raise_env, raise_at, reset_raise, episodes
):
    knobs = dict(
        KNOBS,
        info_p=info_p,
        obs_p=[1 - odd] + [odd / 5] * 5,
        list_p=odd / 2,
        rewards=["float", "f32", "f64", "int", "bool", "i64", "nan", "bigint"]
        + ["huge"] * (odd > 0),
        raise_at={raise_env: raise_at},
        reset_raise=reset_raise,
    )
    compare(
        _envs(name, 4, knobs),
        mode,
        seed=seed,
        rounds=15,
        pickled=SPACES[name][2],
        episodes=episodes,
    )


@pytest.mark.parametrize("mode", MODES)
def test_check_rewards_gives_the_same_errors(mode):
    knobs = dict(KNOBS, rewards=["float", "nan", "huge", "f32", "i64"])
    compare(_envs("box_f32-discrete", 4, knobs), mode, check_rewards=True)


class PlainEnv(gym.Env):
    """Box(4,) float32 observations, Discrete(3) actions, nothing unusual:
    episodes of ``length`` steps, empty infos (a reset info if asked)."""

    def __init__(self, env_id=0, length=3, fail_step=None, fail_reset=None, reset_info=False):
        self.observation_space = BOX_F32
        self.action_space = spaces.Discrete(3)
        self.env_id, self.length = env_id, length
        self.fail_step, self.fail_reset, self.reset_info = fail_step, fail_reset, reset_info
        self.obs = np.zeros(4, np.float32)
        self.t = self.steps = self.resets = 0
        self.received = []

    def reset(self, *, seed=None, options=None):
        self.received.append(("reset", seed, options))
        self.resets += 1
        if self.resets == self.fail_reset:
            raise KeyError(f"env {self.env_id} reset {self.resets}")
        self.t = 0
        self.obs[:] = [self.env_id, 0, self.resets, -1]
        return self.obs, ({"r": self.resets} if self.reset_info else {})

    def step(self, action):
        self.received.append(("step", canon(action)))
        self.t += 1
        self.steps += 1
        if self.steps == self.fail_step:
            raise RuntimeError(f"env {self.env_id} step {self.steps}")
        self.obs[:] = [self.env_id, self.t, self.resets, float(action)]
        return self.obs, 0.5 * self.t, self.t >= self.length, False, {}


def _run_steps(side, rounds, n):
    acts = views(side)[0][0]
    side.run_round([(i, RESET) for i in range(n)])
    for _ in range(rounds):
        acts[:n] = np.arange(n) % 3
        side.run_round([(i, STEP) for i in range(n)])


@pytest.mark.parametrize("episodes", [False, True])
@pytest.mark.parametrize("mode", ["sb3", "next_step", "disabled"])
def test_common_steps_never_call_python(mode, episodes):
    loop = make_loop([PlainEnv(e, length=3 + e) for e in range(4)], mode, episodes=episodes)
    try:
        _run_steps(loop, 12, 4)  # every env ends at least two episodes
        assert loop.calls["_step"] == loop.calls["_finish_step"] == 0
        assert loop.calls["_write_obs"] == 4  # the reset round only
        assert loop.calls["_publish_round"] == 0  # no info, no error
        ref = make_reference([PlainEnv(e, length=3 + e) for e in range(4)], mode, episodes=episodes)
        _run_steps(ref, 12, 4)
        assert episode_stats(loop) == episode_stats(ref)
        if episodes and mode != "disabled":  # returns 0.5 + 1 + ... (disabled: no reset)
            sums, returns, lengths, timed = episode_stats(loop)
            assert lengths == [3, 4, 5, 6] and timed == [True] * 4
            assert returns == [0.5 * n * (n + 1) / 2 for n in lengths]
    finally:
        loop.release()


def test_the_fallbacks_are_taken_where_the_fast_path_does_not_apply():
    loop = make_loop([PlainEnv(e) for e in range(2)], "same_step")
    try:
        _run_steps(loop, 3, 2)  # both episodes end at step 3: same_step goes to Python
        assert loop.calls["_step"] == 0 and loop.calls["_finish_step"] == 2
        loop.pipe_actions[1] = 2  # a pipe action: the whole step in Python
        loop.run_round([(0, STEP), (1, STEP)])
        assert loop.calls["_step"] == 1 and loop.envs[1].obs[3] == 2
    finally:
        loop.release()


@pytest.mark.parametrize("mode", MODES)
def test_an_error_in_the_middle_of_a_round_names_its_env(mode):
    def envs():
        return [PlainEnv(0), PlainEnv(1, fail_step=2), PlainEnv(2), PlainEnv(3, fail_reset=2)]

    # The same assertions hold for the library's round and for the reference.
    loop = make_loop(envs(), mode)
    try:
        for side in (loop, make_reference(envs(), mode)):
            _run_steps(side, 2, 4)  # env 1 fails in its second step
            infos, errors = messages(side)[-1]
            assert list(errors) == [1] and infos == {}
            assert errors[1].env_index == 1 and errors[1].where == "step"
            assert errors[1].exc_type == "builtins.RuntimeError"
            assert errors[1].message == "env 1 step 2"
            obs, rew = views(side)[1][0], views(side)[2]
            assert obs[0].tolist() == [0, 2, 1, 0] and obs[2].tolist() == [2, 2, 1, 2]
            assert rew.tolist()[:3:2] == [1.0, 1.0]
            status = statuses(side)
            assert status.tolist() == [0, _core.STATUS_ERROR, 0, 0]
            if side is loop:
                ticket, _ = loop.conn.bodies[-1]
                assert loop.ctrl.arrays()[3].tolist() == [ticket] * 4
            assert activity(side) == (-1, 0)
            side.run_round([(i, STEP) for i in range(4)])  # every episode ends at step 3
            if mode in ("sb3", "same_step"):  # env 3's automatic reset fails
                infos, errors = messages(side)[-1]
                assert list(errors) == [3] and errors[3].exc_type == "builtins.KeyError"
                assert errors[3].env_index == 3 and errors[3].where == "step"
                info = _core.STATUS_INFO if mode == "same_step" else _core.STATUS_OK
                assert status.tolist() == [info, info, info, _core.STATUS_ERROR]
            assert activity(side) == (-1, 0)
    finally:
        loop.release()
    compare(envs, mode)


@pytest.mark.parametrize("mode", MODES)
def test_reset_infos_and_final_observations_match(mode):
    compare(lambda: [PlainEnv(e, length=2, reset_info=e % 2 == 1) for e in range(3)], mode)


def test_closed_round_refuses_to_run():
    loop = make_loop([PlainEnv()], "sb3")
    try:
        rnd = loop.round
        rnd.close()
        rnd.close()
        assert rnd.closed
        with pytest.raises(ValueError, match="closed"):
            rnd.run([(0, STEP)])
        with pytest.raises(ValueError, match="closed"):
            loop.run_round([(0, STEP)])
    finally:
        loop.release()  # closes the round again: safe
    with pytest.raises(ValueError, match="closed"):
        loop.run_round([(0, STEP)])


def test_an_env_outside_the_worker_is_refused():
    loop = make_loop([PlainEnv(), PlainEnv(1)], "sb3")
    try:
        with pytest.raises(ValueError, match="worker"):
            loop.run_round([(0, STEP), (1, STEP), (0, STEP)])
    finally:
        loop.release()


# ------------------------------------------------------------- whole vec envs


def _vec_env_trajectory(venv, n, steps, seed=None, sb3_dropin=False):
    """Reset, then ``steps`` steps with actions ``arange(n) % 3``: each result
    with the reset infos, and at the end what every env received."""
    try:
        if seed is not None:
            venv.seed(seed)
        out = [canon((venv.reset(), venv.reset_infos))]
        for _ in range(steps):
            if sb3_dropin:
                venv.step_async(np.arange(n) % 3)
                result = venv.step_wait()
            else:
                result = venv.step(np.arange(n) % 3)
            out.append(canon((result, venv.reset_infos)))
        out.append(canon(venv.get_attr("received")))
        return out
    finally:
        venv.close()


def _reference_trajectory(envs, mode, steps, seed=None, sb3_dropin=False):
    """What ``_vec_env_trajectory`` gives for ``envs``, from the reference
    round and the parent's documented handling of what it reads: observation
    and reward copies, ``dones = terminated | truncated``, one info dict per
    env (the round message's, ``{}`` without one), and with "sb3" autoreset
    the automatic reset's info moved to ``reset_infos``, the last observation
    as ``"terminal_observation"`` and ``"TimeLimit.truncated"`` (on every
    info for the SB3 drop-in)."""
    n = len(envs)
    ref = make_reference(envs, mode)
    acts, obs, rew, term, trunc, final = ref.views

    def run(op):
        seen = len(ref.messages)
        ref.run_round([(i, op) for i in range(n)])
        infos = [{} for _ in range(n)]
        for got, errors in ref.messages[seen:]:
            assert errors == {}
            for i, info in got.items():
                infos[i] = info
        return infos

    if seed is not None:
        ref.reset_kwargs.update({i: {"seed": seed + i} for i in range(n)})
    reset_infos = run(RESET)
    out = [canon((obs[0].copy(), reset_infos))]
    for _ in range(steps):
        acts[0][:] = np.arange(n) % 3
        infos = run(STEP)
        dones = term | trunc
        if mode == "sb3":
            for i in range(n):
                if dones[i]:
                    reset_infos[i] = infos[i].pop(_worker.RESET_INFO_KEY, {})
                    infos[i]["terminal_observation"] = final[0][i].copy()
                if dones[i] or sb3_dropin:
                    infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
        out.append(canon(((obs[0].copy(), rew.copy(), dones, infos), reset_infos)))
    out.append(canon([env.received for env in envs]))
    return out


def _assert_same_trajectory(got, want):
    assert len(got) == len(want)
    for t, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"result {t} differs:\nvec env   {g}\nreference {w}"


@pytest.mark.parametrize("mode", MODES)
def test_shmem_vec_env_trajectory_equals_the_reference(mode):
    def make(e):
        return lambda: PlainEnv(e, length=2 + e, reset_info=e == 1)

    venv = vecenv.ShmemVecEnv([make(e) for e in range(3)], num_workers=1, autoreset_mode=mode)
    got = _vec_env_trajectory(venv, 3, 8, seed=3)
    want = _reference_trajectory([make(e)() for e in range(3)], mode, 8, seed=3)
    _assert_same_trajectory(got, want)


def test_sb3_dropin_trajectory_and_terminal_observations_equal_the_reference():
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3 import SubprocVecEnv

    def make(e):
        return lambda: PlainEnv(e, length=2 + e, reset_info=e == 1)

    got = _vec_env_trajectory(SubprocVecEnv([make(e) for e in range(3)]), 3, 6, sb3_dropin=True)
    want = _reference_trajectory([make(e)() for e in range(3)], "sb3", 6, sb3_dropin=True)
    assert "terminal_observation" in repr(got)
    _assert_same_trajectory(got, want)


class SlotProbeEnv(PlainEnv):
    """Records what the worker slot says (``activity(side)``) inside its calls."""

    side = None

    def reset(self, *, seed=None, options=None):
        self.received.append(("slot", activity(self.side)))
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.received.append(("slot", activity(self.side)))
        return super().step(action)


@pytest.mark.parametrize("mode", ["sb3", "next_step"])
def test_the_slot_names_the_env_and_what_it_does(mode):
    seen = []
    for make_side in (make_loop, make_reference):
        envs = [SlotProbeEnv(e, length=2) for e in range(2)]
        side = make_side(envs, mode)
        try:
            for env in envs:
                env.side = side
            _run_steps(side, 3, 2)
            seen.append([[x for x in env.received if x[0] == "slot"] for env in envs])
            assert activity(side) == (-1, 0)
        finally:
            if make_side is make_loop:
                side.release()
    A = _worker.Activity
    for e, calls in enumerate(seen[0]):
        codes = [c[1] for c in calls]
        assert all(env == e for env, _ in codes)
        # reset op, step, step (the episode ends), then the automatic reset:
        # inside step 2 (sb3) or as step 3 (next_step)
        expected = [A.RESET, A.STEP, A.STEP, A.AUTORESET] + ([A.STEP] if mode == "sb3" else [])
        assert [int(a) for _, a in codes] == [int(a) for a in expected]
    assert seen[0] == seen[1]


class UnpicklableInfoEnv(PlainEnv):
    """Every env's second step returns an info; env 1's cannot be pickled."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.steps == 2:
            info = {"fn": lambda: None} if self.env_id == 1 else {"t": self.steps}
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("info_keys", [(), ("t", "reset_of"), ("absent",)])
def test_info_keys_cut_infos_as_the_reference_does(mode, info_keys):
    """info_keys: the step and reset infos cut alike on both sides, the None
    infos of the scripts still refused (InfoError), what vecenv adds kept."""
    knobs = {**KNOBS, "info_p": 0.6, "reset_info_p": 0.6}
    compare(_envs("box_f32-discrete", knobs=knobs), mode, seed=7, info_keys=info_keys)
    # The compiled path cuts too: common steps still never call Python.
    loop = make_loop([PlainEnv(e, length=3, reset_info=True) for e in range(3)], mode, info_keys=())
    try:
        _run_steps(loop, 7, 3)
        assert loop.calls["_step"] == 0
        if mode != "same_step":  # same_step's episode ends go to Python (final_info, final_obs)
            # Each reset info was cut to {}: no round message at all.
            assert loop.calls["_finish_step"] == loop.calls["_publish_round"] == 0
    finally:
        loop.release()


class OddInfoEnv(PlainEnv):
    """Env 1's step info is ``bad`` (not a dict, or a dict with a key that is
    not a str); the others return ``{"t": step}``."""

    def __init__(self, env_id, bad):
        super().__init__(env_id, length=50)
        self.bad = bad

    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, self.bad if self.env_id == 1 else {"t": 1}


@pytest.mark.parametrize("bad", [None, ["t", 1], {3: "x"}, {"t": 1, (1, 2): 0}])
def test_an_info_that_is_not_a_dict_of_str_keys_is_an_info_error_of_its_env(bad):
    loop = make_loop([OddInfoEnv(e, bad) for e in range(3)], "sb3")
    try:
        for side in (loop, make_reference([OddInfoEnv(e, bad) for e in range(3)], "sb3")):
            _run_steps(side, 1, 3)
            infos, errors = messages(side)[-1]
            assert list(errors) == [1] and set(infos) == {0, 2}
            assert errors[1].kind == "InfoError" and errors[1].env_index == 1
            assert "env 1 returned an info" in errors[1].message
    finally:
        loop.release()


@pytest.mark.parametrize("mode", ["sb3", "next_step"])
def test_an_unpicklable_info_is_reported_the_same_way(mode):
    compare(lambda: [UnpicklableInfoEnv(e, reset_info=True) for e in range(3)], mode, rounds=6)
    loop = make_loop([UnpicklableInfoEnv(e) for e in range(3)], mode)
    try:
        for side in (loop, make_reference([UnpicklableInfoEnv(e) for e in range(3)], mode)):
            _run_steps(side, 2, 3)
            infos, errors = messages(side)[-1]
            # Only env 1 is blamed: the other envs' infos of the round arrive.
            assert infos == {0: {"t": 2}, 2: {"t": 2}} and list(errors) == [1]
            assert errors[1].kind == "ResultNotPicklableError" and errors[1].env_index == 1
            assert statuses(side).tolist() == [
                _core.STATUS_INFO,
                _core.STATUS_ERROR,
                _core.STATUS_INFO,
            ]
    finally:
        loop.release()


class GlobalRandomEnv(PlainEnv):
    """Draws its observations and rewards from the global ``np.random`` and
    ``random`` generators, which the worker reseeds from a round's first seed."""

    def step(self, action):
        import random

        obs, _, terminated, truncated, info = super().step(action)
        obs[1] = np.random.random()  # noqa: NPY002 - the global state is the point
        return obs, random.random(), terminated, truncated, info


@pytest.mark.parametrize("mode", ["sb3", "next_step"])
def test_a_seeded_reset_reseeds_the_global_generators_the_same_way(mode):
    compare(lambda: [GlobalRandomEnv(e) for e in range(3)], mode, seed=11, rounds=10)
