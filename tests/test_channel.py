"""The message channel (vecenv/_channel.py): messages of any size in
both directions, no deadlock between a waiting parent and a writing worker,
close() with a message stuck, replies and infos never attributed to the wrong
call or step, and a KeyboardInterrupt fuzz after which reset() recovers.

Every test has a timeout; the autouse ``no_leaks`` fixture (conftest) checks
that no child process is left behind.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time

import gymnasium as gym
import numpy as np
import pytest
from helpers import (
    KB,
    MB,
    SAFE_PYTHON,
    Alarm,
    PayloadEnv,
    blob_of,
    digest_of,
    fuzz_lockstep,
    fuzz_partial,
    make_control,
    payload_fns,
)

import vecenv
from vecenv import _core

pytestmark = pytest.mark.timeout(60)


def _check_info(info, env, t, size):
    assert info["env"] == env and info["t"] == t
    if size:
        blob = info["blob"]
        assert blob.shape == (size,)
        assert digest_of(blob) == digest_of(blob_of(size, env * 1000 + t))


# ------------------------------------------------------------ sizes


def _roundtrip(venv, num_envs, size, partial):
    """Calls, returns, reset options and step infos of ``size`` bytes."""
    arg = blob_of(size, 3)
    assert venv.env_method("digest", arg) == [(i, digest_of(arg)) for i in range(num_envs)]
    got = venv.env_method("make_blob", size)
    for i, x in enumerate(got):
        assert digest_of(x) == digest_of(blob_of(size, i))
    venv.set_options({"blob": arg})
    if partial:
        assert venv.reset() is None
        seen = []
        while len(seen) < num_envs:  # every reset
            obs, _, _, infos, ids = venv.recv()
            for j, e in enumerate(ids):
                assert obs[j].tolist() == [e, 0, -1]
                assert infos[j]["digest"] == digest_of(arg)
            seen += ids.tolist()
        assert sorted(seen) == list(range(num_envs))
        venv.send(np.full(num_envs, 3, np.int64), np.arange(num_envs))
        seen = []
        while len(seen) < num_envs:  # and those steps
            obs, _, _, infos, ids = venv.recv()
            for j, e in enumerate(ids):
                assert obs[j].tolist() == [e, 1, 3]
                _check_info(infos[j], int(e), 1, size)
            seen += ids.tolist()
        assert sorted(seen) == list(range(num_envs))
    else:
        venv.reset()
        assert [info["digest"] for info in venv.reset_infos] == [digest_of(arg)] * num_envs
        for t in (1, 2):
            obs, _, _, infos = venv.step(np.full(num_envs, 2, np.int64))
            assert obs[:, 1].tolist() == [t] * num_envs
            for i, info in enumerate(infos):
                _check_info(info, i, t, size)


@pytest.mark.parametrize("size", [10 * KB, 1 * MB])
@pytest.mark.parametrize("partial", [False, True], ids=["lockstep", "partial"])
@pytest.mark.parametrize("envs_per_worker", [1, 4])
def test_messages_of_any_size_fork(size, partial, envs_per_worker):
    n = 8 if envs_per_worker == 4 else 4
    kw = {"batch_size": 2} if partial else {}
    with vecenv.ShmemVecEnv(
        payload_fns(n, size), envs_per_worker=envs_per_worker, context="fork", timeout=30, **kw
    ) as venv:
        _roundtrip(venv, n, size, partial)


@pytest.mark.parametrize("partial", [False, True], ids=["lockstep", "partial"])
def test_messages_of_1mb_spawn(partial):
    kw = {"batch_size": 2} if partial else {}
    with vecenv.ShmemVecEnv(
        payload_fns(4, 1 * MB), envs_per_worker=2, context="spawn", timeout=30, **kw
    ) as venv:
        _roundtrip(venv, 4, 1 * MB, partial)


@pytest.mark.timeout(90)
def test_100mb_call_argument_return_value_and_info():
    with vecenv.ShmemVecEnv(payload_fns(2), envs_per_worker=1, context="fork", timeout=60) as venv:
        venv.reset()
        big = blob_of(100 * MB, 5)
        assert venv.env_method("digest", big, indices=[1]) == [(1, digest_of(big))]
        back = venv.env_method("echo", big, indices=[0])[0]
        assert back.shape == big.shape and digest_of(back) == digest_of(big)
    with vecenv.ShmemVecEnv(
        payload_fns(2, 100 * MB), envs_per_worker=2, context="fork", batch_size=1, timeout=60
    ) as venv:
        venv.reset()
        _, _, _, _, ids = venv.recv()
        venv.send(np.ones(1, np.int64), ids)
        for _ in range(2):  # one reset, one step of 100 MB
            obs, _, _, infos, ids = venv.recv()
            if obs[0, 1] == 1:
                _check_info(infos[0], int(ids[0]), 1, 100 * MB)


# ------------------------------------------------------------ no deadlock


@pytest.mark.timeout(30)
def test_waits_read_pipes_partial_send_send_recv_with_a_1mib_info():
    """Regression: worker 0 publishes env 0 and blocks sending a 1 MiB info,
    so it never takes env 1's op, while recv() waited on shared memory only."""
    with vecenv.ShmemVecEnv(
        payload_fns(2, 1 << 20), num_workers=1, batch_size=1, context="fork", timeout=10
    ) as venv:
        venv.reset()
        seen = [venv.recv()[4][0], venv.recv()[4][0]]
        assert sorted(seen) == [0, 1]
        venv.send(np.array([1]), np.array([0]))
        venv.send(np.array([2]), np.array([1]))
        for _ in range(2):
            obs, _, _, infos, ids = venv.recv()
            e = int(ids[0])
            assert obs[0].tolist() == [e, 1, 1 + e]
            _check_info(infos[0], e, 1, 1 << 20)
        # reset() from the partial state with envs in flight (its drain)
        venv.send(np.array([1]), np.array([0]))
        venv.send(np.array([1]), np.array([1]))
        pid = venv._resources.procs[0].pid
        assert venv.reset() is None
        for _ in range(2):
            obs, _, _, infos, ids = venv.recv()
            assert obs[0, 1] == 0 and infos[0]["t"] == 0
        assert venv.get_attr("t") == [0, 0]
        assert venv._resources.procs[0].pid == pid  # the same healthy worker


@pytest.mark.timeout(30)
def test_lockstep_step_with_1mib_infos_on_one_worker():
    with vecenv.ShmemVecEnv(
        payload_fns(4, 1 << 20), num_workers=1, context="fork", timeout=10
    ) as venv:
        venv.reset()
        pid = venv._resources.procs[0].pid
        for t in (1, 2, 3):
            _, _, _, infos = venv.step(np.zeros(4, np.int64))
            for i, info in enumerate(infos):
                _check_info(info, i, t, 1 << 20)
        assert venv._resources.procs[0].pid == pid


class SleepyEnv(PayloadEnv):
    def nap(self, seconds):
        time.sleep(seconds)
        return self.env_id


@pytest.mark.timeout(30)
def test_close_with_a_worker_stuck_in_a_call_returns_within_its_timeout():
    fns = [functools.partial(SleepyEnv, i) for i in range(2)]
    venv = vecenv.ShmemVecEnv(fns, envs_per_worker=1, context="fork")
    venv.reset()
    venv._call_start("env_method", "nap", (1000,), {}, [0])  # its reply never comes
    procs = list(venv._resources.procs)
    t0 = time.monotonic()
    venv.close(timeout=1.0)
    assert time.monotonic() - t0 < 4.0
    assert procs[0].exitcode is not None and procs[0].exitcode < 0  # terminated
    assert procs[1].exitcode == 0  # closed politely


@pytest.mark.timeout(30)
def test_close_with_a_worker_blocked_sending_a_10mb_info_closes_it_politely():
    with vecenv.ShmemVecEnv(
        payload_fns(2, 10 * MB), num_workers=1, batch_size=1, context="fork"
    ) as venv:
        venv.reset()
        _, _, _, _, ids = venv.recv()
        venv.send(np.zeros(1, np.int64), ids)
        time.sleep(0.5)  # the worker blocks writing the info nobody reads yet
        procs = list(venv._resources.procs)
        t0 = time.monotonic()
        venv.close(timeout=5.0)
        assert time.monotonic() - t0 < 4.0
        assert procs[0].exitcode == 0


@pytest.mark.timeout(30)
def test_close_with_a_frame_cut_short_terminates_that_worker():
    venv = vecenv.ShmemVecEnv(payload_fns(2), envs_per_worker=1, context="fork")
    venv.reset()
    chan = venv._resources.chans[0]

    def cut():
        raise KeyboardInterrupt

    chan._write_available = cut
    with pytest.raises(KeyboardInterrupt):
        venv.env_method("digest", blob_of(1 * MB, 1), indices=[0])
    procs = list(venv._resources.procs)
    t0 = time.monotonic()
    venv.close(timeout=1.0)
    assert time.monotonic() - t0 < 4.0
    assert procs[0].exitcode is not None and procs[1].exitcode == 0


_EXIT_SCRIPT = """
import functools, sys, time
import numpy as np
import gymnasium as gym
import vecenv

class Env(gym.Env):
    observation_space = gym.spaces.Box(0, 1e9, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)
    def reset(self, *, seed=None, options=None):
        return np.zeros(1), {}
    def step(self, action):
        return np.zeros(1), 0.0, False, False, {"blob": np.zeros(10_000_000, np.uint8)}
    def nap(self):
        time.sleep(1000)

a = vecenv.ShmemVecEnv([Env], num_workers=1, context="fork")
a.reset()
a._call_start("env_method", "nap", (), {}, [0])  # a worker stuck in a call
b = vecenv.ShmemVecEnv([Env, Env], num_workers=1, batch_size=1, context="fork")
b.reset()
b.send(np.zeros(1, np.int64), b.recv()[4])  # a worker blocked sending 10 MB
time.sleep(0.3)
print("exiting", flush=True)
"""


@pytest.mark.timeout(60)
def test_interpreter_exit_with_messages_stuck_does_not_hang(tmp_path):
    script = tmp_path / "exit_script.py"
    script.write_text(_EXIT_SCRIPT)
    t0 = time.monotonic()
    out = subprocess.run([*SAFE_PYTHON, str(script)], capture_output=True, text=True, timeout=45)
    assert out.returncode == 0, out.stderr
    assert "exiting" in out.stdout
    assert time.monotonic() - t0 < 30


# ------------------------------------------------------------ refs and tickets


def test_a_stale_reply_is_never_taken_for_another_call():
    """Regression: a call abandoned after its frame was sent (Ctrl-C before
    the reply is read) made every later call return the previous reply."""
    with vecenv.ShmemVecEnv(payload_fns(2), envs_per_worker=2, context="fork") as venv:
        venv.reset()
        venv._call_start("get_attr", "env_id", (), {}, [0])  # never finished
        assert venv.get_attr("env_id", [1]) == [1]
        assert venv.env_method("describe", "x") == [(0, 0, -1, "x"), (1, 0, -1, "x")]
        obs, _, _, infos = venv.step(np.array([3, 4]))
        assert obs[:, 2].tolist() == [3, 4] and [i["t"] for i in infos] == [1, 1]


def test_an_unread_round_message_is_never_taken_for_a_later_step():
    """Regression: recv() interrupted before reading a round message left it
    on the pipe; every later info of that worker came one step late."""
    with vecenv.ShmemVecEnv(payload_fns(2), num_workers=1, batch_size=1, context="fork") as venv:
        venv.reset()
        for _ in range(2):
            _, _, _, _, ids = venv.recv()
            venv.send(np.ones(1, np.int64), ids)
        venv._collector.wait(2, "step")  # both published, their infos unread
        venv.reset()  # drains without reading them
        for _ in range(2):
            obs, _, _, infos, ids = venv.recv()
            assert obs[0, 1] == 0 and infos[0]["t"] == 0 and infos[0]["env"] == ids[0]
            venv.send(np.full(1, 2, np.int64), ids)
        for _ in range(2):
            obs, _, _, infos, ids = venv.recv()
            assert obs[0, 1] == 1 and infos[0] == {"env": int(ids[0]), "t": 1, "a": 2}


def test_ctrl_c_right_after_dispatch_leaves_needs_reset():
    """Regression: a Ctrl-C between dispatch_all and the state change left
    IDLE with every env in flight, and a second step_async stepped them twice."""
    # The fallback step: the compiled step calls no patched method.
    with vecenv.ShmemVecEnv(
        payload_fns(2), envs_per_worker=1, context="fork", _fallback_for_testing=True
    ) as venv:
        venv.reset()
        real = venv._collector.ctrl

        class Interrupting:
            def __getattr__(self, name):
                return getattr(real, name)

            def dispatch_all(self, op):
                real.dispatch_all(op)
                raise KeyboardInterrupt

        venv._collector.ctrl = Interrupting()
        with pytest.raises(KeyboardInterrupt):
            venv.step(np.ones(2, np.int64))
        venv._collector.ctrl = real
        with pytest.raises(vecenv.StateError, match="reset"):
            venv.step_async(np.ones(2, np.int64))
        venv.reset()
        obs, _, _, infos = venv.step(np.array([1, 2]))
        assert obs.tolist() == [[0, 1, 1], [1, 1, 2]]


def test_a_frame_cut_by_ctrl_c_breaks_the_channel_and_reset_restores_it():
    with vecenv.ShmemVecEnv(payload_fns(2), envs_per_worker=1, context="fork") as venv:
        venv.reset()
        pid0 = venv._resources.procs[0].pid
        chan = venv._resources.chans[0]
        real_write = chan._write_available

        def cut():  # the interrupt lands inside the write of the frame
            raise KeyboardInterrupt

        chan._write_available = cut
        with pytest.raises(KeyboardInterrupt):
            venv.env_method("digest", blob_of(1 * MB, 1), indices=[0])
        chan._write_available = real_write
        assert chan.broken
        with pytest.raises(vecenv.StateError, match="reset"):
            venv.get_attr("t", [0])
        with pytest.raises(vecenv.StateError, match="reset"):
            venv.step_async(np.zeros(2, np.int64))
        assert venv.get_attr("t", [1]) == [0]  # worker 1's channel is whole
        venv.reset()
        assert venv._resources.procs[0].pid != pid0  # restarted: a new pipe
        assert venv.env_method("digest", 7, indices=[0]) == [(0, digest_of(7))]
        obs, _, _, _ = venv.step(np.array([1, 2]))
        assert obs.tolist() == [[0, 1, 1], [1, 1, 2]]


# ------------------------------------------------------------ control protocol


def test_control_counts_per_worker_forget_is_exact_and_nothing_wraps():
    block, ctrl, wk = make_control(4, 2, [0, 0, 1, 1])
    flags = np.zeros(4, bool)
    ctrl.track_in_flight(flags)
    ctrl.dispatch_all(_core.OP_STEP)
    t1 = wk.publish([2], None, 1)
    t2 = wk.publish([0, 1], [_core.STATUS_INFO, 0], 0)
    assert t2 == t1 + 1
    assert ctrl.arrays()[3].tolist() == [t2, t2, t1, 0]
    out = np.empty(4, np.int64)
    assert ctrl.collect(1, out) == 0 and out[0] == 2  # oldest ticket first
    # Worker 1 dies after its ready byte, before counting env 3: forget()
    # drops exactly its share (0 now), never more.
    ctrl.dispatch(np.array([2], np.int64), _core.OP_STEP)
    ctrl.arrays()[2][3] = 1  # env 3's ready byte, not counted
    assert ctrl.forget(2, 4) == 1
    assert ctrl.published() == 2
    assert ctrl.collect(2, out) == 1 and sorted(out[:2]) == [0, 1]
    assert ctrl.published() == 0
    with pytest.raises(ValueError, match="only 0"):
        ctrl.collect(1, out)  # an underflow is an error
    with pytest.raises(ValueError, match="only 0"):
        ctrl.collect_all()
    assert ctrl.published() == 0 and ctrl.wait_ready(1, 0.0, 0.01) == -1
    del ctrl, wk
    block.close()


def test_control_dispatch_clears_status_and_tx_blocked_wakes_the_parent():
    block, ctrl, wk = make_control(2, 1, [0, 0])
    ctrl.dispatch_all(_core.OP_STEP)
    wk.take_ops(0, 2, 0)
    wk.publish([0, 1], [_core.STATUS_ERROR, _core.STATUS_INFO], 0)
    ctrl.collect_all()
    ctrl.dispatch(np.array([0, 1], np.int64), _core.OP_STEP)
    assert ctrl.arrays()[1].tolist() == [0, 0] and ctrl.arrays()[0].tolist() == [1, 1]
    wk.set_tx_blocked(0, True)
    assert ctrl.tx_blocked_workers() == [0]
    assert ctrl.wait_ready(2, 0.0, 1.0) == -2  # read the pipe, then wait again
    wk.set_tx_blocked(0, False)
    assert ctrl.tx_blocked_workers() == [] and ctrl.wait_ready(2, 0.0, 0.01) == -1
    wk.set_tx_blocked(0, True)  # then the worker dies: its flag goes with it
    ctrl.forget(0, 2)
    assert ctrl.tx_blocked_workers() == [] and ctrl.wait_ready(2, 0.0, 0.01) == -1
    del ctrl, wk
    block.close()


# ------------------------------------------------------------ stable-baselines3


class GoalEnv(gym.Env):
    """A HER-style env: ``compute_reward`` takes batches of goals."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 0.0, False, False, {}

    def compute_reward(self, achieved_goal, desired_goal, _info):
        return -np.linalg.norm(achieved_goal - desired_goal, axis=-1).astype(np.float32)


@pytest.mark.timeout(60)
def test_sb3_her_compute_reward_with_1mb_batches():
    """stable-baselines3's HerReplayBuffer calls env_method("compute_reward",
    achieved, desired, infos, indices=[0]) with replay batches; at 2147005
    this hung as soon as the arguments passed the socket buffer."""
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3 import SubprocVecEnv

    venv = SubprocVecEnv([GoalEnv, GoalEnv], start_method="fork")
    try:
        venv.reset()
        rng = np.random.default_rng(0)
        achieved = rng.standard_normal((65536, 2)).astype(np.float32)  # 512 KiB each
        desired = rng.standard_normal((65536, 2)).astype(np.float32)
        infos = np.array([{"k": i} for i in range(1000)], dtype=object)
        (got,) = venv.env_method("compute_reward", achieved, desired, infos, indices=[0])
        np.testing.assert_allclose(got, GoalEnv().compute_reward(achieved, desired, None))
    finally:
        venv.close()


# ------------------------------------------------------------ KeyboardInterrupt fuzz


def _fds():
    return len(os.listdir("/proc/self/fd"))


# SIGALRM is the fuzz's: pytest-timeout watches from a thread here.
@pytest.mark.timeout(150, method="thread")
@pytest.mark.parametrize("mode", ["lockstep", "partial"])
def test_keyboard_interrupt_fuzz_then_reset_is_always_correct(mode):
    trials = int(os.environ.get("VECENV_FUZZ_TRIALS", "2500"))
    rng = np.random.default_rng(11 if mode == "lockstep" else 12)
    stats = {"interrupts": 0, "pending_step": 0, "broken": 0}
    fds = _fds()
    kw = {"batch_size": 3} if mode == "partial" else {}
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(
            payload_fns(6), envs_per_worker=2, context="fork", timeout=20, **kw
        ) as venv:
            if mode == "lockstep":
                fuzz_lockstep(venv, alarm, rng, trials, stats)
            else:
                fuzz_partial(venv, alarm, rng, trials, stats)
            restarts = venv.restart_count
    assert _fds() == fds, "file descriptors leaked"
    assert restarts == 0  # restarts by reset() do not count
    # Most trials are interrupted: thousands in CI with the default trials.
    assert stats["interrupts"] > trials // 3, stats
    print(mode, stats)


# ------------------------------------------------------------ the frame body
_NUMBERS = [np.dtype(c).type for c in np.typecodes["AllInteger"] + "?efdFD"]


def _same(a, b) -> bool:
    """The same type and the same bytes (NaN payloads and -0.0 included)."""
    return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("kind", _NUMBERS, ids=lambda t: t.__name__)
def test_encode_gives_numpy_number_scalars_back_with_their_type_and_bits(kind):
    import pickle

    from vecenv._channel import encode

    info = np.iinfo(kind) if np.issubdtype(kind, np.integer) else None
    values = [kind(0), kind(1)]
    if info is not None:
        values += [kind(info.min), kind(info.max)]
    elif kind is not np.bool_:
        values += [kind(-0.0), kind(np.nan), kind(np.inf), kind(1) / kind(3)]
        if np.issubdtype(kind, np.complexfloating):
            values.append(kind(complex(1.5, -np.inf)))
        # A signalling NaN with a payload (a double would quiet a float32's).
        bits = {2: 0x7C01, 4: 0x7F800001, 8: 0x7FF0000000000001}
        width = np.dtype(kind).itemsize // (2 if np.issubdtype(kind, np.complexfloating) else 1)
        part = np.frombuffer(bits[width].to_bytes(width, "little"), f"<f{width}")[0]
        values.append(kind(part) if np.issubdtype(kind, np.floating) else kind(0))
        if np.issubdtype(kind, np.complexfloating):
            values[-1] = np.frombuffer(part.tobytes() * 2, kind)[0]
    body = encode({"round": values})
    got = pickle.loads(body)["round"]
    assert all(_same(a, b) for a, b in zip(got, values)), (got, values)
    # Not NumPy's own reduce (its scalar() reconstructor and a dtype per
    # value), which only a NaN keeps.
    numbers = encode([v for v in values if not np.isnan(v)])
    assert b"multiarray" not in numbers and b"dtype" not in numbers


def test_encode_is_pickle_for_everything_else():
    import copyreg
    import pickle

    from vecenv._channel import encode

    class Later:  # a reducer registered after vecenv was imported is still used
        def __init__(self, x):
            self.x = x

    copyreg.pickle(Later, lambda o: (int, (o.x,)))
    try:
        msg = {"later": Later(7), "array": np.arange(3.0), "nested": [np.float64(2.5), {"a": b"x"}]}
        got = pickle.loads(encode(msg))
        assert got["later"] == 7 and got["array"].tolist() == [0.0, 1.0, 2.0]
        assert _same(got["nested"][0], np.float64(2.5)) and got["nested"][1] == {"a": b"x"}
    finally:
        del copyreg.dispatch_table[Later]
    # A user's reducer for a NumPy type wins, as with pickle.dumps.
    copyreg.pickle(np.float32, lambda x: (str, ("mine",)))
    try:
        assert pickle.loads(encode([np.float32(1.0)])) == ["mine"]
    finally:
        del copyreg.dispatch_table[np.float32]
    assert _same(pickle.loads(encode(np.float32(1.0))), np.float32(1.0))
    # After a dump that raises, after a 2 MiB body, inside a reducer: whole bodies.
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        encode({"f": lambda: 1})
    assert pickle.loads(encode((1, "a"))) == (1, "a")
    big = np.ones(1 << 18)
    assert pickle.loads(encode(big)).sum() == big.size
    assert pickle.loads(encode([np.int8(-3)])) == [np.int8(-3)]

    class Inner:
        def __reduce__(self):
            return (pickle.loads, (encode(np.float32(0.25)),))

    assert _same(pickle.loads(encode([Inner(), np.int16(2)])), [np.float32(0.25), np.int16(2)])


def test_encode_keeps_nothing_of_the_message_alive():
    import gc
    import weakref

    from vecenv._channel import encode

    class Big:  # a small body for a large object: the buffer is kept, the object must not be
        def __init__(self):
            self.data = np.zeros(1 << 20)

        def __reduce__(self):
            return (int, (0,))

    obj = Big()
    ref = weakref.ref(obj)
    encode([obj])
    del obj
    gc.collect()
    assert ref() is None


class NumberInfoEnv(gym.Env):
    """An env whose info holds NumPy number scalars, as MuJoCo's do."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {"x": np.float64(-0.0), "n": np.int64(-5)}

    def step(self, action):
        info = {"x": np.float64(0.1) * int(action), "r": np.float32(1 / 3), "ok": np.bool_(action)}
        return np.zeros(2, np.float32), 1.0, False, False, info


def test_infos_with_numpy_scalars_come_back_from_the_workers_with_their_types():
    with vecenv.ShmemVecEnv([NumberInfoEnv] * 4, num_workers=2) as venv:
        venv.reset()
        *_, infos = venv.step(np.array([0, 1, 0, 1]))
    for i, info in enumerate(infos):
        assert _same(info["x"], np.float64(0.1) * (i % 2)), info
        assert _same(info["r"], np.float32(1 / 3)) and _same(info["ok"], np.bool_(i % 2))
