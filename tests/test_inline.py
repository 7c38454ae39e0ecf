"""ShmemVecEnv(inline=True): the caller steps worker 0's share of the envs
while worker processes step the others (vecenv._pool with ``inline``,
vecenv._inprocess.SharedControl).

The trajectories of every case are compared with plain workers in
tests/test_inprocess.py (parametrized over the layouts that step envs in the
caller); here: the shares, errors from either share, calls, Ctrl-C inside the
caller's share, a worker's death, close, the options that ``inline``
refuses, ``"auto"`` choosing it, and ``inline_envs`` (the caller's share
sized by hand or by ``Stats.caller_share``) with partial batches.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import subprocess
import time

import numpy as np
import psutil
import pytest
from helpers import SAFE_PYTHON, Alarm, PayloadEnv, fuzz_lockstep, fuzz_partial, payload_fns
from test_inprocess import FailingEnv, SlowEnv

import vecenv
from vecenv._autolayout import choose_layout
from vecenv.envs import CounterEnv
from vecenv.errors import (
    InvalidArgumentError,
    RemoteTraceback,
    StateError,
    WorkerDiedError,
    WorkerError,
)

pytestmark = pytest.mark.timeout(60)


# The trajectories of every case and autoreset mode against plain workers:
# tests/test_inprocess.py (its LAYOUTS "inline" and "inline_2").


def test_layout_shares_and_processes():
    me = psutil.Process()
    before = set(me.children())
    with vecenv.ShmemVecEnv(payload_fns(7), num_workers=2, inline=True, copy=False) as venv:
        lay = venv.layout
        assert (lay.num_workers, lay.envs_per_worker, lay.inline) == (2, 3, True)
        assert venv.num_workers == 2 and "+ 2 workers x" in repr(venv)  # processes
        assert not venv.in_process and "caller stepping the first share" in lay.why
        assert venv._pool.ranges == [(0, 3), (3, 5), (5, 7)]
        assert len(set(me.children()) - before) == 2  # the caller's share is no process
        obs = venv.reset()
        assert obs[:, 0].tolist() == list(range(7)) and not obs.flags.owndata
        obs, *_ = venv.step(np.full(7, 4, np.int64))
        assert obs.tolist() == [[i, 1, 4] for i in range(7)]
    with vecenv.ShmemVecEnv(payload_fns(4), envs_per_worker=1, inline=True) as venv:
        assert (venv.layout.num_workers, venv._pool.ranges[0]) == (3, (0, 1))
    with vecenv.ShmemVecEnv(payload_fns(1), inline=True) as venv:  # one env: the caller's
        assert venv.in_process and venv.layout.num_workers == 0
        assert venv.reset().tolist() == [[0, 0, -1]]


def test_inline_envs_sizes_the_callers_share_and_the_workers_share_the_rest():
    kw = {"inline": True, "inline_envs": 1, "copy": False}
    with vecenv.ShmemVecEnv(payload_fns(7), num_workers=2, **kw) as venv:
        lay = venv.layout
        assert venv._pool.ranges == [(0, 1), (1, 4), (4, 7)]
        assert (lay.num_workers, lay.envs_per_worker, lay.inline_envs) == (2, 3, 1)
        assert "the caller stepping envs [0, 1) (inline_envs)" in lay.why
        assert venv.reset()[:, 0].tolist() == list(range(7))
        obs, *_ = venv.step(np.arange(7) % 5)
        assert obs.tolist() == [[i, 1, i % 5] for i in range(7)]
        assert venv.get_attr("t") == [1] * 7  # calls reach the uneven shares in env order
        assert venv.env_method("_obs", indices=[0, 3, 6])[1].tolist() == [3, 1, 3]
    with vecenv.ShmemVecEnv(payload_fns(7), num_workers=2, inline=True, inline_envs=5) as venv:
        assert venv._pool.ranges == [(0, 5), (5, 6), (6, 7)]
        assert venv.layout.envs_per_worker == 1  # the workers' share, not the caller's
    with vecenv.ShmemVecEnv(payload_fns(7), envs_per_worker=2, **kw) as venv:
        assert venv._pool.ranges == [(0, 1), (1, 3), (3, 5), (5, 7)]
        assert venv.layout.num_workers == 3
    with vecenv.ShmemVecEnv(payload_fns(7), **kw) as venv:  # one worker per core but one
        cores = len(os.sched_getaffinity(0))
        assert venv._pool.ranges[0] == (0, 1)
        assert venv.layout.num_workers == min(6, max(1, cores - 1))


def test_inline_envs_zero_is_inline_false_and_num_workers_zero_steps_every_env_here():
    with vecenv.ShmemVecEnv(payload_fns(4), num_workers=2, inline=True, inline_envs=0) as venv:
        lay = venv.layout
        assert (lay.inline, lay.inline_envs, lay.num_workers) == (False, None, 2)
        assert "caller" not in lay.why and venv.reset()[:, 0].tolist() == [0, 1, 2, 3]
    with vecenv.ShmemVecEnv(payload_fns(4), num_workers=0, inline=True, inline_envs=2) as venv:
        assert venv.in_process and venv.layout.inline_envs is None  # every env is the caller's


def test_the_default_share_count_is_one_per_usable_core():
    with vecenv.ShmemVecEnv(payload_fns(64), inline=True) as venv:
        cores = len(os.sched_getaffinity(0))
        assert venv.layout.num_workers == max(2, cores) - 1


# ------------------------------------------------------------ errors
@pytest.mark.parametrize("bad", [1, 3])  # the caller's share, a worker's
def test_an_env_error_names_the_env_and_reset_recovers(bad):
    fns = [functools.partial(FailingEnv, i, bad=bad) for i in range(5)]
    with vecenv.ShmemVecEnv(fns, num_workers=1, inline=True) as venv:
        venv.reset()
        acts = np.ones(5, np.int64)
        venv.step(acts)
        venv.step(acts)
        with pytest.raises(WorkerError) as info:
            venv.step(acts)
        err = info.value
        assert err.env_index == bad and f"env {bad}" in str(err) and "KeyError" in str(err)
        assert isinstance(err.__cause__, RemoteTraceback)
        assert f"boom in env {bad}" in err.__cause__.tb
        with pytest.raises(StateError, match="reset"):
            venv.step(acts)
        assert venv.reset()[:, 1].tolist() == [0] * 5
        obs, *_ = venv.step(acts)
        assert obs[:, 1].tolist() == [1] * 5


def test_errors_of_both_shares_in_one_step_are_all_reported():
    class Both(PayloadEnv):
        def step(self, action):
            if self.env_id in (1, 4):
                raise ValueError(f"env {self.env_id} fails")
            return super().step(action)

    fns = [functools.partial(Both, i) for i in range(6)]
    with vecenv.ShmemVecEnv(fns, num_workers=1, inline=True) as venv:
        venv.reset()
        with pytest.raises(WorkerError) as info:
            venv.step(np.zeros(6, np.int64))
        assert info.value.env_index == 1 and sorted(info.value.errors) == [1, 4]


@pytest.mark.parametrize("bad", [0, 2])
def test_a_factory_error_names_the_env_and_leaves_no_process(bad):
    def boom():
        raise KeyError("no such env")

    me = psutil.Process()
    before = set(me.children())
    fns = [PayloadEnv] * 4
    fns[bad] = boom
    with pytest.raises(WorkerError) as info:
        vecenv.ShmemVecEnv(fns, num_workers=1, inline=True)
    assert isinstance(info.value, KeyError) and info.value.env_index == bad
    assert "no such env" in info.value.__cause__.tb
    assert set(me.children()) - before == set()


def test_a_worker_that_dies_is_named_and_reset_starts_it_again():
    with vecenv.ShmemVecEnv(payload_fns(4), num_workers=1, inline=True) as venv:
        venv.reset()
        pid = venv._pool.procs[1].pid
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError) as info:
            for _ in range(100):
                venv.step(np.zeros(4, np.int64))
                time.sleep(0.01)
        assert sorted(info.value.env_indices) == [2, 3]
        assert venv.reset()[:, 1].tolist() == [0] * 4
        assert venv._pool.procs[1].pid != pid
        obs, *_ = venv.step(np.full(4, 2, np.int64))
        assert obs.tolist() == [[i, 1, 2] for i in range(4)]


@pytest.mark.parametrize("share", [None, 1])
def test_restart_on_worker_death_keeps_the_callers_share(share):
    kw = {"inline_envs": share, "on_worker_death": "restart"}
    with vecenv.ShmemVecEnv(payload_fns(4), num_workers=1, inline=True, **kw) as venv:
        mine = venv._pool.ranges[0][1]
        venv.reset()
        venv.step(np.zeros(4, np.int64))
        os.kill(venv._pool.procs[1].pid, signal.SIGKILL)
        for _ in range(200):
            obs, _, dones, infos = venv.step(np.zeros(4, np.int64))
            if dones.any():
                break
            time.sleep(0.01)
        assert dones.tolist() == [i >= mine for i in range(4)]
        assert all(infos[i]["worker_restarted"] for i in range(mine, 4))
        assert obs[:, 1].tolist()[:mine] == [obs[0, 1]] * mine and obs[0, 1] >= 2


# ------------------------------------------------------------ calls
def test_calls_reach_both_shares_in_env_order():
    fns = [functools.partial(CounterEnv, i, render_mode="rgb_array") for i in range(5)]
    with vecenv.ShmemVecEnv(fns, num_workers=1, inline=True) as venv:
        venv.reset()
        venv.step(np.ones(5, np.int64))
        assert venv.get_attr("env_id") == [0, 1, 2, 3, 4]
        assert venv.get_attr("env_id", indices=[4, 0, 3]) == [4, 0, 3]
        venv.set_attr("episode_length", 9, indices=[1, 4])
        assert venv.get_attr("episode_length") == [5, 9, 5, 5, 9]
        frames = venv.get_images()
        assert [f[0, 0, 0] for f in frames] == [0, 1, 2, 3, 4]
        with pytest.raises(WorkerError) as info:
            venv.env_method("no_such_method", indices=[3])
        assert info.value.env_index == 3
        venv.step(np.ones(5, np.int64))  # a failed call leaves it usable


def test_a_call_whose_arguments_do_not_pickle_changes_no_env():
    import threading

    with vecenv.ShmemVecEnv(payload_fns(4), num_workers=1, inline=True) as venv:
        venv.reset()
        with pytest.raises(vecenv.errors.ArgumentNotPicklableError, match="set_attr"):
            venv.set_attr("lock", threading.Lock())
        # Posted to the worker processes first: the caller's share was not reached.
        assert venv.env_method("__getattribute__", "__dict__", indices=[0])[0].get("lock") is None
        venv.step(np.zeros(4, np.int64))


def test_stats_count_the_callers_share():
    with vecenv.ShmemVecEnv(payload_fns(4), num_workers=1, inline=True) as venv:
        venv.reset()
        for _ in range(50):
            venv.step(np.zeros(4, np.int64))
        s = venv.stats()
        assert (s.batches, s.env_steps, s.in_process) == (50, 200, False)
        assert len(s.worker_busy_s) == 2 and min(s.worker_busy_s) > 0 and s.in_call_s > 0


# ------------------------------------------------------------ Ctrl-C
@pytest.mark.timeout(60, method="thread")  # SIGALRM is the test's own
def test_ctrl_c_inside_the_callers_share_then_reset_is_exact():
    fns = [functools.partial(SlowEnv, i) for i in range(6)]
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(fns, num_workers=1, inline=True) as venv:
            venv.reset()
            acts = np.full(6, 2, np.int64)
            hit, _ = alarm.run(0.003, venv.step, acts)  # lands in env 1's sleep, in this process
            assert hit and alarm.fired == 1
            assert venv._state.name == "NEEDS_RESET"
            assert venv._collector.ctrl.cut  # the caller's round was cut short
            obs = venv.reset()
            assert obs.tolist() == [[i, 0, -1] for i in range(6)]
            obs, _, _, infos = venv.step(acts)
            assert obs.tolist() == [[i, 1, 2] for i in range(6)]
            assert infos == [{"env": i, "t": 1, "a": 2} for i in range(6)]


@pytest.mark.timeout(120, method="thread")  # SIGALRM is the fuzz's
def test_keyboard_interrupt_fuzz_then_reset_is_always_correct():
    trials = int(os.environ.get("VECENV_FUZZ_TRIALS", "2500")) // 4
    rng = np.random.default_rng(23)
    stats = {"interrupts": 0, "pending_step": 0, "broken": 0}
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(payload_fns(6), num_workers=1, inline=True) as venv:
            fuzz_lockstep(venv, alarm, rng, trials, stats)
    assert stats["interrupts"] > trials // 10, stats


class _LeaveInterrupted:
    """The caller's loop's control block, whose first ``leave`` (the last
    step of abandon()) raises KeyboardInterrupt, as a Ctrl-C there would."""

    def __init__(self, ctrl):
        self.ctrl, self.calls = ctrl, 0

    def __getattr__(self, name):
        return getattr(self.ctrl, name)

    def leave(self, w):
        self.calls += 1
        if self.calls == 1:
            raise KeyboardInterrupt
        return self.ctrl.leave(w)


def test_a_ctrl_c_inside_the_abandon_of_a_cut_round_leaves_reset_working():
    # The first reset after a cut round abandons the caller's envs; a second
    # Ctrl-C inside that must leave the next reset to abandon them again
    # (a wait for envs nobody will publish would never end).
    fns = [functools.partial(SlowEnv, i) for i in range(4)]
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(fns, num_workers=1, inline=True) as venv:
            venv.reset()
            acts = np.full(4, 2, np.int64)
            hit, _ = alarm.run(0.001, venv.step, acts)  # inside env 0's sleep
            ctrl = venv._collector.ctrl
            assert hit and ctrl.cut
            loop = ctrl.loop
            real, loop.ctrl = loop.ctrl, _LeaveInterrupted(loop.ctrl)
            try:
                with pytest.raises(KeyboardInterrupt):
                    venv.reset()
                assert ctrl.cut and loop.ctrl.calls == 1  # still to be abandoned
                assert venv.reset().tolist() == [[i, 0, -1] for i in range(4)]
            finally:
                loop.ctrl = real
            obs, *_ = venv.step(acts)
            assert obs.tolist() == [[i, 1, 2] for i in range(4)]


# ------------------------------------------------------------ lifecycle
def test_close_closes_both_shares_and_leaks_nothing(request):
    class Closing(PayloadEnv):
        def close(self):
            with open(self.path, "a") as f:
                f.write(f"{self.env_id}\n")

    me = psutil.Process()
    before = set(me.children())
    shm = {n for n in os.listdir("/dev/shm") if "vecenv" in n}
    gc.collect()  # earlier tests' garbage (and its files) first; none collected meanwhile
    gc.disable()
    request.addfinalizer(gc.enable)
    fds = len(os.listdir("/proc/self/fd"))
    path = f"/tmp/vecenv-inline-close-{os.getpid()}"
    if os.path.exists(path):
        os.unlink(path)

    def make(i):
        env = Closing(i)
        env.path = path
        return env

    venv = vecenv.ShmemVecEnv(
        [functools.partial(make, i) for i in range(4)], num_workers=1, inline=True
    )
    venv.reset()
    venv.step(np.zeros(4, np.int64))
    venv.close()
    venv.close()
    with open(path) as f:
        assert sorted(int(x) for x in f.read().split()) == [0, 1, 2, 3]
    os.unlink(path)
    assert set(me.children()) - before == set()
    assert len(os.listdir("/proc/self/fd")) == fds
    assert {n for n in os.listdir("/dev/shm") if "vecenv" in n} <= shm


# ------------------------------------------------------------ options
@pytest.mark.parametrize(
    "kw, match",
    [
        ({"timeout": 5.0}, "timeout=5.0 cannot be enforced with inline=True"),
        ({"cpu_affinity": True}, "cpu_affinity=True is not taken with inline=True"),
        ({"inline_envs": 4}, r"inline_envs=4 leaves no env .* num_envs=4"),
        ({"inline_envs": -1}, "inline_envs must be an int >= 0 or None, got -1"),
        ({"inline_envs": True}, "inline_envs must be an int >= 0 or None, got True"),
        ({"inline_envs": 1.0}, r"inline_envs must be an int >= 0 or None, got 1\.0"),
        ({"inline_envs": 1, "num_workers": 4}, "num_workers=4 worker processes for the 3 envs"),
        (
            {"inline_envs": 1, "num_workers": 2, "envs_per_worker": 1},
            r"do not fit .* \(the workers' envs: num_envs=4 less inline_envs=1\)",
        ),
        ({"inline": False, "inline_envs": 2}, "inline_envs=2 is the caller's share of inline=True"),
        ({"num_workers": "auto"}, "inline=True and num_workers='auto'"),
        ({"inline": 1}, "inline must be a bool, got 1"),
        ({"num_workers": 1.5}, r"num_workers must be a positive int or None, got 1\.5"),
        ({"num_workers": True}, "num_workers must be a positive int or None, got True"),
        ({"num_workers": 2, "envs_per_worker": 2}, "num_workers=1 worker processes'"),
    ],
)
def test_options_inline_cannot_honour_are_refused(kw, match):
    kw = {"inline": True, **kw}
    with pytest.raises(InvalidArgumentError, match=match):
        vecenv.ShmemVecEnv(payload_fns(4), **kw)


# ------------------------------------------------------------ auto
def test_auto_considers_the_callers_share():
    # A cheap env on 2 cores: the caller and one worker beat a third process.
    lay = choose_layout(7.0, 32, 16, 2, inprocess=True)
    assert (lay.num_workers, lay.inline) == (1, True), lay.why
    assert "caller and 1 worker" in lay.why
    # Not a candidate where in process is not (an option needs worker processes).
    lay = choose_layout(7.0, 32, 16, 2, inprocess=False)
    assert not lay.inline and lay.num_workers >= 1
    # One core: nothing to share.
    assert not choose_layout(7.0, 32, 16, 1, inprocess=True).inline


def test_auto_never_chooses_the_callers_share_for_partial_batches():
    lay = choose_layout(7.0, 32, 16, 2, inprocess=True, inline_candidates=False)
    assert not lay.inline and "the caller and" not in lay.why
    with vecenv.ShmemVecEnv(payload_fns(8), num_workers="auto", batch_size=4) as venv:
        assert not venv.layout.inline, venv.layout.why
        venv.reset()


def test_killing_the_callers_stand_in_never_signals_this_process():
    # _kill sends SIGKILL to a worker's process group; the caller's share
    # stands for a worker with this process's pid, which may lead its group.
    code = (
        "import os; os.setpgid(0, 0)\n"
        "from vecenv._inprocess import InprocProcess\n"
        "from vecenv._pool import _kill\n"
        "_kill(InprocProcess()); print('alive')\n"
    )
    r = subprocess.run([*SAFE_PYTHON, "-c", code], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0 and r.stdout.strip() == "alive", (r.returncode, r.stderr)


def test_auto_layout_with_the_callers_share_runs():
    # CartPole-like steps on 2 cores or more: the caller and one worker per
    # other core; the envs step as in an explicit layout.
    fns = [functools.partial(PayloadEnv, i) for i in range(8)]
    with vecenv.ShmemVecEnv(fns, num_workers="auto") as venv:
        lay = venv.layout
        if lay.inline:
            assert lay.num_workers >= 1 and venv._pool.first_process == 1
        assert venv.reset()[:, 0].tolist() == list(range(8))
        obs, *_ = venv.step(np.full(8, 3, np.int64))
        assert obs.tolist() == [[i, 1, 3] for i in range(8)]


# ------------------------------------------------------------ partial batches
def _partial_loop(venv, rounds, rng, settle_s=0.0):
    """``rounds`` recv/send pairs on PayloadEnvs with random actions, then
    more until every env was received, for at most ``settle_s`` seconds;
    every row must be what its env did. The times each env was received.

    recv() takes the envs that finished first, and the caller steps its share
    inside send(), so while a worker is slow to run, the caller's share comes
    back alone (a stopped worker: 60 rounds of envs 0-2 of 6, then both
    shares once it runs). 60 rounds take a few ms; in one CI run the tests of
    two wheels saw none of the worker's envs in them."""
    n = venv.num_envs
    t = np.zeros(n, np.int64)
    last = np.full(n, -1, np.int64)
    seen = np.zeros(n, np.int64)
    assert venv.reset() is None
    done = 0
    deadline = time.monotonic() + settle_s
    while done < rounds or (not (seen > 0).all() and time.monotonic() < deadline):
        done += 1
        obs, rew, dones, infos, ids = venv.recv()
        assert len(ids) == venv.batch_size == len(set(ids.tolist()))
        for j, e in enumerate(ids.tolist()):
            assert obs[j].tolist() == [e, t[e], last[e]]
            assert infos[j]["env"] == e and infos[j]["t"] == t[e]
        seen[ids] += 1
        acts = rng.integers(0, 5, len(ids))
        venv.send(acts, ids)
        t[ids] += 1
        last[ids] = acts
    return seen


@pytest.mark.parametrize("share", [None, 1, 3])
def test_partial_batches_with_the_callers_share_return_what_each_env_did(share):
    kw = {"inline": True, "inline_envs": share, "num_workers": 1, "batch_size": 3}
    with vecenv.ShmemVecEnv(payload_fns(6), **kw) as venv:
        lo, hi = venv._pool.ranges[0]
        assert (lo, hi) == (0, 3 if share is None else share)
        seen = _partial_loop(venv, 60, np.random.default_rng(share or 0), settle_s=10.0)
        assert (seen > 0).all()  # the worker's envs too, not the caller's alone
        assert venv.stats().worker_busy_s[0] > 0  # the caller stepped its share


class _FailOnce(FailingEnv):
    """FailingEnv that raises the first time only (its state outlives reset)."""

    failed = False

    def explode(self):
        if not self.failed:
            self.failed = True
            super().explode()


@pytest.mark.parametrize("bad", [0, 4])  # the caller's share, the worker's
def test_an_env_error_with_partial_batches_names_the_env_and_reset_recovers(bad):
    fns = [functools.partial(_FailOnce, i, bad=bad) for i in range(6)]
    kw = {"inline": True, "inline_envs": 2, "num_workers": 1, "batch_size": 3}
    with vecenv.ShmemVecEnv(fns, **kw) as venv:
        venv.reset()
        with pytest.raises(WorkerError) as info:
            for _ in range(40):
                _, _, _, _, ids = venv.recv()
                venv.send(np.ones(len(ids), np.int64), ids)
        err = info.value
        assert err.env_index == bad and f"boom in env {bad}" in err.__cause__.tb
        with pytest.raises(StateError, match="reset"):
            venv.recv()
        seen = _partial_loop(venv, 30, np.random.default_rng(bad))
        assert seen.sum() == 90


@pytest.mark.timeout(60, method="thread")  # SIGALRM is the test's own
def test_ctrl_c_inside_the_callers_share_of_a_send_then_reset_is_exact():
    fns = [functools.partial(SlowEnv, i) for i in range(6)]
    kw = {"inline": True, "inline_envs": 2, "num_workers": 1, "batch_size": 3}
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(fns, **kw) as venv:
            venv.reset()
            _, _, _, _, ids = venv.recv()
            assert 0 in ids.tolist()  # the caller's envs, reset at once, come first
            hit, _ = alarm.run(0.001, venv.send, np.full(3, 2, np.int64), ids)  # env 0's sleep
            assert hit and alarm.fired == 1
            assert venv._state.name == "NEEDS_RESET" and venv._collector.ctrl.cut
            seen = _partial_loop(venv, 20, np.random.default_rng(5))
            assert seen.sum() == 60


@pytest.mark.timeout(120, method="thread")  # SIGALRM is the fuzz's
def test_keyboard_interrupt_fuzz_with_partial_batches_then_reset_is_always_correct():
    trials = int(os.environ.get("VECENV_FUZZ_TRIALS", "2500")) // 4
    rng = np.random.default_rng(29)
    stats = {"interrupts": 0, "pending_step": 0, "broken": 0}
    kw = {"inline": True, "inline_envs": 2, "num_workers": 1, "batch_size": 3}
    with Alarm() as alarm:
        with vecenv.ShmemVecEnv(payload_fns(6), **kw) as venv:
            fuzz_partial(venv, alarm, rng, trials, stats)
    assert stats["interrupts"] > trials // 10, stats
