"""Fault injection for ShmemVecEnv: env errors, dead workers, the
restart policy, timeouts, bad input and output, Ctrl-C, a SIGKILLed parent and
close() escalation, under fork and spawn (spawn only where start-up differs).

Every test has a timeout and the autouse ``no_leaks`` fixture (conftest) checks
that no child process and no /dev/shm entry is left behind.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from helpers import InfoEnv, make_control, sigint_after

import vecenv
from vecenv.errors import RemoteTraceback

pytestmark = pytest.mark.timeout(120)

BOTH = pytest.mark.parametrize("context", ["fork", "spawn"])


class FaultEnv(gym.Env):
    """Observation Box(2,) float32 ``[env_id, t]`` (t: steps in the episode),
    action Discrete(3), reward 1.0. Env ``target`` injects ``fault`` at its
    step ``at`` (``at=0``: in reset). With ``marker`` (a file path) the fault
    fires once: the first env to fire creates the file, and the envs of a
    restarted worker find it and behave.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, env_id=0, fault=None, target=0, at=2, marker=None, render_mode=None):
        self.env_id = env_id
        self.fault = fault if env_id == target else None
        self.at = at
        self.marker = marker
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.t = 0
        if self.fault == "hang_ignoring_sigterm":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def _armed(self):
        if self.fault is None:
            return False
        if self.marker is None:
            return True
        if os.path.exists(self.marker):
            return False
        pathlib.Path(self.marker).touch()
        return True

    def _fire(self):
        if not self._armed():
            return None
        fault = self.fault
        if fault == "raise":
            raise ValueError(f"injected fault in env {self.env_id}")
        if fault == "exit":
            os._exit(3)
        if fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if fault in ("hang", "hang_ignoring_sigterm"):
            time.sleep(1000)
        if fault == "slow":
            time.sleep(1.5)
        return fault

    def _obs(self):
        return np.array([self.env_id, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        if self.at == 0:
            self._fire()
        return self._obs(), {"env_id": self.env_id}

    def step(self, action):
        self.t += 1
        fault = self._fire() if self.t == self.at else None
        obs, reward = self._obs(), 1.0
        if fault == "bad_shape":
            obs = np.zeros(3, np.float32)
        elif fault == "bad_dtype":
            obs = obs.astype(np.complex64)
        elif fault == "nan_reward":
            reward = float("nan")
        return obs, reward, False, False, {}

    def render(self):
        if self.fault == "raise":
            raise ValueError(f"injected render fault in env {self.env_id}")
        return np.zeros((2, 2, 3), np.uint8)

    def pid(self):
        return os.getpid()

    def explode(self):
        raise KeyError(f"injected method fault in env {self.env_id}")

    def die(self):
        os._exit(5)

    def hang_if_target(self):
        if self.fault is not None:
            time.sleep(1000)
        return self.env_id


def make(fault=None, target=0, at=2, marker=None, num_envs=4, envs_per_worker=2, **kwargs):
    kwargs.setdefault("context", "fork")
    fns = [
        functools.partial(FaultEnv, i, fault, target, at, None if marker is None else str(marker))
        for i in range(num_envs)
    ]
    return vecenv.ShmemVecEnv(fns, envs_per_worker=envs_per_worker, **kwargs)


ZEROS = np.zeros(4, np.int64)


def _gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(_gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return all(_gone(p) for p in pids)


# ------------------------------------------------------------ env exceptions


@BOTH
def test_env_exception_reaches_parent_with_both_tracebacks(context):
    with make("raise", target=2, at=2, context=context) as venv:
        venv.reset()
        pids = venv.env_method("pid")
        venv.step(ZEROS)
        with pytest.raises(vecenv.WorkerError) as info:
            venv.step(ZEROS)
        err = info.value
        assert isinstance(err, RuntimeError) and isinstance(err, vecenv.VecEnvError)
        assert err.env_index == 2
        assert err.exc_type == "builtins.ValueError"
        assert "injected fault in env 2" in str(err) and "env 2" in str(err)
        assert "Traceback" in err.worker_traceback and "_fire" in err.worker_traceback
        assert isinstance(err.__cause__, RemoteTraceback)
        assert "injected fault in env 2" in str(err.__cause__)
        # The workers are untouched; the vec env needs a reset, then goes on.
        with pytest.raises(vecenv.StateError, match=r"reset\(\)"):
            venv.step_async(ZEROS)
        assert venv.env_method("pid") == pids
        obs = venv.reset()
        assert obs[:, 1].tolist() == [0, 0, 0, 0]
        obs, _, _, _ = venv.step(ZEROS)
        assert obs[:, 1].tolist() == [1, 1, 1, 1]
    assert venv.closed


@pytest.mark.parametrize("where", ["reset", "render", "method"])
def test_env_exception_in_reset_render_and_method_calls(where, tmp_path):
    at = 0 if where == "reset" else 2
    with make("raise", target=1, at=at, marker=tmp_path / "m") as venv:
        if where == "reset":
            with pytest.raises(vecenv.WorkerError, match="in reset") as info:
                venv.reset()
            assert info.value.env_index == 1
            venv.reset()  # the marker disarmed the fault
        else:
            venv.reset()
            with pytest.raises(vecenv.WorkerError) as info:
                if where == "render":
                    venv.get_images()
                else:
                    venv.env_method("explode", indices=[1, 3])
            assert info.value.env_index == 1
            assert info.value.exc_type.endswith("ValueError" if where == "render" else "KeyError")
            assert "Traceback" in info.value.worker_traceback
        obs, _, _, _ = venv.step(ZEROS)  # still usable: no reset needed
        assert obs[:, 1].tolist() == [1, 1, 1, 1]


# ------------------------------------------------------------ dead workers


@pytest.mark.parametrize(
    "fault, context, exitcode, words",
    [
        ("exit", "fork", 3, "exited with code 3"),
        ("sigkill", "fork", -9, "SIGKILL"),
        ("segv", "fork", -11, "SIGSEGV"),
        ("sigkill", "spawn", -9, "SIGKILL"),
    ],
)
def test_dead_worker_is_noticed_during_the_wait_and_named(
    fault, context, exitcode, words, tmp_path
):
    # Without liveness checks while waiting, this step would block forever.
    with make(fault, target=2, at=2, marker=tmp_path / "m", context=context) as venv:
        venv.reset()
        old = venv.env_method("pid")
        venv.step(ZEROS)
        with pytest.raises(vecenv.WorkerDiedError) as info:
            venv.step(ZEROS)
        err = info.value
        assert isinstance(err, vecenv.WorkerError)
        assert err.env_indices == (2, 3) and err.exitcode == exitcode
        assert words in str(err) and "envs [2, 3]" in str(err)
        assert _gone(old[2])
        with pytest.raises(vecenv.StateError):
            venv.step_async(ZEROS)
        with pytest.raises(vecenv.StateError, match="dead worker"):
            venv.env_method("pid", indices=[2])
        # reset() starts the worker again; the envs of worker 0 are the same.
        obs = venv.reset()
        assert obs[:, 1].tolist() == [0, 0, 0, 0]
        new = venv.env_method("pid")
        assert new[:2] == old[:2] and new[2] == new[3] != old[2]
        obs, _, _, _ = venv.step(ZEROS)
        assert obs[:, 1].tolist() == [1, 1, 1, 1]
        assert venv.restart_count == 0  # reset() restarts do not count


def test_worker_killed_while_idle_is_noticed_at_the_next_step():
    with make() as venv:
        venv.reset()
        pid = venv.env_method("pid", indices=[0])[0]
        os.kill(pid, signal.SIGKILL)
        assert _wait_gone([pid], 10)
        with pytest.raises(vecenv.WorkerDiedError, match="SIGKILL") as info:
            venv.step(ZEROS)
        assert info.value.env_indices == (0, 1)
        venv.reset()
        venv.step(ZEROS)


def test_worker_dying_in_a_method_call():
    with make(num_envs=4, envs_per_worker=1) as venv:
        venv.reset()
        with pytest.raises(vecenv.WorkerDiedError, match="exited with code 5") as info:
            venv.env_method("die", indices=[3])
        assert info.value.env_indices == (3,)
        venv.reset()
        assert venv.env_method("hang_if_target") == [0, 1, 2, 3]


# ------------------------------------------------------------ restart policy


@BOTH
def test_restart_policy_reports_truncation_and_goes_on(context, tmp_path):
    with make(
        "exit", target=2, at=3, marker=tmp_path / "m", context=context, on_worker_death="restart"
    ) as venv:
        venv.reset()
        old = venv.env_method("pid")
        for _ in range(2):
            venv.step(ZEROS)
        venv.step_async(ZEROS)
        obs, rewards, terminated, truncated, infos = venv.step_wait_gym()
        dones = terminated | truncated
        assert dones.tolist() == [False, False, True, True]
        assert truncated.tolist() == [False, False, True, True] and not terminated.any()
        for i in (2, 3):
            assert infos[i]["TimeLimit.truncated"] is True
            assert infos[i]["worker_restarted"] is True
            assert venv.reset_infos[i] == {"env_id": i}  # the new env's reset info
        for i in (0, 1):
            assert "worker_restarted" not in infos[i]
        assert obs[:, 1].tolist() == [3, 3, 0, 0]  # restarted envs: reset observations
        assert venv.restart_count == 1
        new = venv.env_method("pid")
        assert new[:2] == old[:2] and new[2] != old[2]
        obs, _, dones, infos = venv.step(ZEROS)
        assert obs[:, 1].tolist() == [4, 4, 1, 1] and not dones.any()
        assert not any("worker_restarted" in info for info in infos)


def test_restart_policy_with_partial_batches(tmp_path):
    with make(
        "sigkill",
        target=1,
        at=3,
        marker=tmp_path / "m",
        envs_per_worker=1,
        batch_size=2,
        on_worker_death="restart",
    ) as venv:
        venv.reset()
        seen = {i: 0 for i in range(4)}
        restarted = []
        obs, _, dones, infos, ids = venv.recv()
        # The other envs keep completing batches: env 1's death is noticed by
        # the periodic liveness check (every 0.1 s), not by a stalled wait.
        deadline = time.monotonic() + 20
        rounds_after = 0
        while rounds_after < 20 and time.monotonic() < deadline:
            rounds_after += bool(restarted)
            venv.send(np.zeros(len(ids), np.int64), ids)
            obs, _, dones, infos, ids = venv.recv()
            for row, i in enumerate(ids):
                seen[int(i)] += 1
                if infos[row].get("worker_restarted"):
                    assert dones[row] and infos[row]["TimeLimit.truncated"]
                    restarted.append(int(i))
        assert restarted == [1]
        assert all(n > 0 for n in seen.values())
        assert venv.restart_count == 1


def test_worker_dying_during_reset_is_restarted_by_that_reset(tmp_path):
    with make("exit", target=3, at=0, marker=tmp_path / "m") as venv:
        obs = venv.reset()  # worker 1 dies in reset: started again, once
        assert obs[:, 0].tolist() == [0, 1, 2, 3] and obs[:, 1].tolist() == [0, 0, 0, 0]
        assert venv.reset_infos[3] == {"env_id": 3}
        assert venv.restart_count == 0
        obs, _, dones, _ = venv.step(ZEROS)
        assert obs[:, 1].tolist() == [1, 1, 1, 1] and not dones.any()


def test_restart_policy_in_gymnasium_autoreset_mode(tmp_path):
    with make(
        "exit",
        target=0,
        at=2,
        marker=tmp_path / "m",
        on_worker_death="restart",
        autoreset_mode="same_step",
    ) as venv:
        venv.reset()
        venv.step(ZEROS)
        _, _, dones, infos = venv.step(ZEROS)
        assert dones.tolist() == [True, True, False, False]
        assert infos[0] == {"env_id": 0, "TimeLimit.truncated": True, "worker_restarted": True}


def test_subset_reset_also_resets_the_envs_of_a_restarted_worker():
    with make() as venv:
        venv.reset()
        venv.step(ZEROS)
        pid = venv.env_method("pid", indices=[2])[0]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(vecenv.WorkerDiedError):
            venv.step(ZEROS)
        venv.reset_async(env_ids=[0])
        obs = venv.reset_wait()
        # env 0 was asked for; envs 2 and 3 are new; env 1 kept its state
        # (worker 0 finished the failed step: its result was dropped).
        assert obs[:, 1].tolist() == [0, 2, 0, 0]
        assert venv.reset_infos[2] == {"env_id": 2} and venv.reset_infos[1] == {}


def test_restart_cap_then_raises():
    with make("exit", target=0, at=2, max_restarts=1, on_worker_death="restart") as venv:
        venv.reset()
        venv.step(ZEROS)
        _, _, dones, infos = venv.step(ZEROS)  # first death: restarted
        assert dones.tolist() == [True, True, False, False] and infos[0]["worker_restarted"]
        venv.step(ZEROS)
        with pytest.raises(vecenv.WorkerDiedError, match="max_restarts=1"):
            venv.step(ZEROS)  # the new env dies at its step 2 as well
        assert venv.restart_count == 1


def test_repeated_restarts_leak_no_process_or_descriptor():
    me = psutil.Process()
    before = {c.pid for c in me.children()}
    with make("exit", target=0, at=3, max_restarts=1000, on_worker_death="restart") as venv:
        venv.reset()
        for _ in range(3):  # the first restart: lazily created objects exist now
            venv.step(ZEROS)
        fds0 = me.num_fds()
        for _ in range(60):
            venv.step(ZEROS)
        assert venv.restart_count == 21
        assert me.num_fds() <= fds0
        # Every dead worker was reaped: only the two current ones remain.
        assert {c.pid for c in me.children()} - before == set(venv.env_method("pid"))


# ------------------------------------------------------------ timeouts


@BOTH
def test_step_timeout_kills_the_stuck_worker_and_reset_restarts_it(context, tmp_path):
    with make("hang", target=1, at=2, marker=tmp_path / "m", context=context, timeout=1.5) as venv:
        venv.reset()
        old = venv.env_method("pid")
        venv.step(ZEROS)
        with pytest.raises(vecenv.VecEnvTimeoutError) as info:
            venv.step(ZEROS)
        err = info.value
        assert isinstance(err, TimeoutError) and isinstance(err, vecenv.VecEnvError)
        # A worker publishes its envs together: both of worker 0's are late.
        assert err.env_indices == (0, 1)
        assert "envs [0, 1]" in str(err) and "killed" in str(err)
        assert _gone(old[0])
        with pytest.raises(vecenv.StateError, match=r"reset\(\)"):
            venv.step_async(ZEROS)
        obs = venv.reset()
        assert obs[:, 1].tolist() == [0, 0, 0, 0]
        new = venv.env_method("pid")
        assert new[0] != old[0] and new[2:] == old[2:]
        obs, _, _, _ = venv.step(ZEROS)
        assert obs[:, 1].tolist() == [1, 1, 1, 1]


def test_reset_timeout(tmp_path):
    with make("hang", target=3, at=0, marker=tmp_path / "m", timeout=1.5) as venv:
        with pytest.raises(vecenv.VecEnvTimeoutError) as info:
            venv.reset()
        assert info.value.env_indices == (2, 3)
        obs = venv.reset()
        assert obs[:, 0].tolist() == [0, 1, 2, 3]


def test_method_timeout_then_replies_stay_in_step():
    # Worker 0 hangs; worker 1's reply is left unread when the timeout fires.
    # reset() must drop it, or the next call would read a stale reply.
    with make("hang", target=0, timeout=1.5, envs_per_worker=2) as venv:
        venv.reset()
        with pytest.raises(vecenv.VecEnvTimeoutError, match="worker 0"):
            venv.env_method("hang_if_target")
        venv.reset()
        assert venv.get_attr("t") == [0, 0, 0, 0]  # a stale reply would say [.., .., 2, 3]
        obs, _, _, _ = venv.step(ZEROS)
        assert obs[:, 1].tolist() == [1, 1, 1, 1]


# ------------------------------------------------------------ bad input


def test_bad_actions_are_refused_before_anything_is_sent():
    # The strict mode (opt-in); the default passes actions on as given.
    with make(check_actions=True) as venv:
        venv.reset()
        cases = [
            (np.zeros(3, np.int64), r"got 3 actions, expected 4"),
            (np.zeros((4, 2), np.int64), r"shape \(4, 2\), expected \(4,\)"),
            (np.array(["a", "b", "c", "d"]), r"dtype <U1"),
            (np.array([0, 1, 2, 5]), r"actions\[3\]=5 is outside Discrete\(3\)"),
            (np.array([0.0, np.nan, 0.0, 0.0]), r"NaN"),
            (np.array([0.0, 0.5, 0.0, 0.0]), r"non-integral"),
        ]
        for actions, pattern in cases:
            with pytest.raises(vecenv.InvalidArgumentError, match=pattern) as info:
                venv.step_async(actions)
            assert isinstance(info.value, ValueError)
            assert str(info.value).startswith("actions")
        obs, _, _, _ = venv.step(ZEROS)  # nothing was sent: every env is at step 1
        assert obs[:, 1].tolist() == [1, 1, 1, 1]


def test_calls_out_of_order_say_what_to_call():
    with make() as venv:
        with pytest.raises(vecenv.StateError, match=r"call reset\(\) first"):
            venv.step_async(ZEROS)
        venv.reset()
        with pytest.raises(vecenv.StateError, match=r"call step_async\(actions\) first"):
            venv.step_wait()
        venv.step_async(ZEROS)
        with pytest.raises(vecenv.StateError, match=r"call step_wait\(\) first"):
            venv.step_async(ZEROS)
        venv.step_wait()
        venv.step_async(ZEROS)
        obs = venv.reset()  # the pending step is finished and dropped (the seed's contract)
        assert obs[:, 1].tolist() == [0, 0, 0, 0]
    for call in (venv.reset, lambda: venv.step(ZEROS), lambda: venv.env_method("pid")):
        with pytest.raises(vecenv.ClosedError, match=r"after close\(\)"):
            call()
    venv.close()  # idempotent


# ------------------------------------------------------------ bad output


@pytest.mark.parametrize("fault, expected", [("bad_shape", r"\(2,\)"), ("bad_dtype", "float32")])
def test_wrong_observation_names_env_and_expected_value(fault, expected):
    with make(fault, target=3, at=1) as venv:
        venv.reset()
        with pytest.raises(vecenv.ObservationError, match=expected) as info:
            venv.step(ZEROS)
        assert info.value.env_index == 3 and "env 3" in str(info.value)
        venv.reset()


def test_non_finite_reward_is_an_error_only_when_asked(tmp_path):
    with make("nan_reward", target=1, at=1) as venv:
        venv.reset()
        _, rewards, _, _ = venv.step(ZEROS)  # default: passed through
        assert np.isnan(rewards[1]) and rewards[[0, 2, 3]].tolist() == [1.0, 1.0, 1.0]
    with make("nan_reward", target=1, at=1, marker=tmp_path / "m", check_rewards=True) as venv:
        venv.reset()
        with pytest.raises(vecenv.RewardError, match=r"env 1 returned reward nan") as info:
            venv.step(ZEROS)
        assert info.value.env_index == 1 and "finite" in str(info.value)
        venv.reset()
        venv.step(ZEROS)


# ------------------------------------------------------------ Ctrl-C, parent death, close


def test_sigint_after_waits_for_go_however_long_start_takes():
    # The harness itself: no SIGINT before go, even with a zero delay.
    go = threading.Event()
    thread = sigint_after(go, 0.0)
    time.sleep(0.2)
    assert thread.is_alive()
    with pytest.raises(KeyboardInterrupt):
        go.set()
        time.sleep(30)
    thread.join()


def test_keyboard_interrupt_in_a_wait_leaves_a_resettable_env():
    with make("slow", target=0, at=2) as venv:
        venv.reset()
        venv.step(ZEROS)
        go = threading.Event()
        thread = sigint_after(go, 0.3)
        try:
            with pytest.raises(KeyboardInterrupt):
                go.set()
                venv.step(ZEROS)
        finally:
            thread.join()
        with pytest.raises(vecenv.StateError):
            venv.step_async(ZEROS)
        obs = venv.reset()  # waits for the slow step, drops it
        assert obs[:, 1].tolist() == [0, 0, 0, 0]
        venv.step(ZEROS)


def test_control_keeps_in_flight_flags_and_forgets_a_dead_workers_envs():
    # In-flight flags change inside dispatch/collect (no Python statement in
    # between for Ctrl-C to split); forget() takes a dead worker's published
    # envs back out of the ready count.
    from vecenv import _core

    block, ctrl, wk = make_control(4, 2, [0, 0, 1, 1])
    flags = np.zeros(4, bool)
    ctrl.track_in_flight(flags)
    ctrl.dispatch_all(_core.OP_STEP)
    assert flags.tolist() == [True] * 4 and ctrl.command_seq(1) == 1
    wk.publish([0, 1], None, 0)
    wk.publish([2], None, 1)
    out = np.empty(4, np.int64)
    ctrl.collect(1, out)
    assert flags.tolist() == [False, True, True, True]
    assert ctrl.forget(2, 4) == 1  # env 2 was published, env 3 was not
    assert flags.tolist() == [False, True, False, False] and ctrl.published() == 1
    ctrl.collect(1, out)
    assert not flags.any() and ctrl.published() == 0
    ctrl.dispatch(np.array([3], np.int64), _core.OP_RESET)
    assert flags.tolist() == [False, False, False, True]
    with pytest.raises(ValueError, match="C-contiguous"):
        ctrl.track_in_flight(np.zeros(3, bool))
    del ctrl, wk
    block.close()


def _check_step(obs, dones, infos):
    for i, info in enumerate(infos):
        assert info["env"] == i
        if dones[i]:
            assert info["t"] == 5 and obs[i, 1] == 0
        else:
            assert info["t"] == obs[i, 1]


def test_ctrl_c_at_random_points_then_reset_is_consistent():
    # Interrupts land anywhere in step_async/step_wait (waits, collects, pipe
    # reads); reset() must drain and resync so that no stale reply is taken.
    fns = [functools.partial(InfoEnv, i) for i in range(4)]
    rng = np.random.default_rng(0)
    with vecenv.ShmemVecEnv(fns, envs_per_worker=1, context="fork") as venv:
        venv.reset()
        for _ in range(int(os.environ.get("VECENV_CTRL_C_TRIALS", "15"))):
            go = threading.Event()
            thread = sigint_after(go, rng.uniform(0.0, 0.02))
            deadline = time.monotonic() + 30
            with pytest.raises(KeyboardInterrupt):  # DID NOT RAISE if the vec env ate it
                go.set()
                while time.monotonic() < deadline:
                    venv.step(ZEROS)
            thread.join()
            obs = venv.reset()
            assert obs[:, 1].tolist() == [0, 0, 0, 0]
            assert [info["t"] for info in venv.reset_infos] == [0, 0, 0, 0]
            for _ in range(7):
                obs, _, dones, infos = venv.step(ZEROS)
                _check_step(obs, dones, infos)


def _killer(stop, seed=1, progress=None, burst=3, kills=None):
    """A function that SIGKILLs a random new child process every 10-50 ms
    until ``stop`` is set.

    With ``progress`` (an Event), after every ``burst`` kills it waits for the
    caller to set it (after a step or reset that succeeded) and clears it:
    so a reset that takes longer than 50 ms (a loaded machine) is not killed
    again and again. ``kills`` (a list) gets the killed pids.
    """
    me = psutil.Process()
    before = {c.pid for c in me.children()}
    rng = np.random.default_rng(seed)

    def run():
        budget = 0  # kills left before the next success
        while not stop.wait(rng.uniform(0.01, 0.05)):
            if progress is not None and budget == 0:
                while not progress.wait(0.05):
                    if stop.is_set():
                        return
                progress.clear()
                budget = burst
                if stop.wait(rng.uniform(0.0, 0.05)):  # a random moment after the success
                    return
            ours = [c.pid for c in me.children() if c.pid not in before and not _gone(c.pid)]
            if ours:
                pid = int(rng.choice(ours))
                budget = max(budget - 1, 0)
                if kills is not None:
                    kills.append(pid)  # before the kill: its death may be seen at once
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    return run


def test_random_sigkills_then_reset_always_recovers():
    # Kills land in a step, between steps, while a worker publishes, and in
    # the recovery after a death, which may fail and be retried. Only
    # successes re-arm the killer (3 kills each), so a recovery is killed at
    # most 3 times and the loop ends after ten deaths however slow the
    # machine is (before, kills every 10-50 ms outpaced resets under load).
    fns = [functools.partial(InfoEnv, i) for i in range(4)]
    stop, progress = threading.Event(), threading.Event()
    kills = []
    thread = threading.Thread(target=_killer(stop, seed=2, progress=progress, kills=kills))
    deaths = 0
    with vecenv.ShmemVecEnv(fns, envs_per_worker=1, context="fork") as venv:
        venv.reset()
        pids = venv.env_method("pid")
        thread.start()
        try:
            while deaths < 10:
                progress.set()
                try:
                    obs, _, dones, infos = venv.step(ZEROS)
                    _check_step(obs, dones, infos)
                except vecenv.WorkerDiedError as exc:
                    deaths += 1
                    # The error names a worker that was killed (not a spurious death).
                    assert all(pids[i] in kills for i in exc.env_indices), (exc, pids, kills)
                    while True:  # a worker may die again during the reset
                        try:
                            obs = venv.reset()
                            infos = venv.reset_infos
                            pids = venv.env_method("pid")
                            break
                        except vecenv.WorkerDiedError:
                            pass
                    assert obs[:, 1].tolist() == [0, 0, 0, 0]
                    assert [info["t"] for info in infos] == [0, 0, 0, 0]
        finally:
            stop.set()
            thread.join()
        venv.reset()  # a last kill may have landed before the killer stopped
        obs, _, dones, infos = venv.step(ZEROS)
        _check_step(obs, dones, infos)


@pytest.mark.parametrize("batch_size", [4, 2], ids=["lockstep", "partial"])
def test_random_sigkills_with_the_restart_policy_keep_results_consistent(batch_size):
    # Workers are killed at random moments: in a step, idle, between
    # publishing a result and sending its info. Every result stays consistent.
    fns = [functools.partial(InfoEnv, i) for i in range(4)]
    stop = threading.Event()
    killer = _killer(stop)
    with vecenv.ShmemVecEnv(
        fns,
        envs_per_worker=1,
        batch_size=batch_size,
        context="fork",
        on_worker_death="restart",
        max_restarts=10_000,
    ) as venv:
        venv.reset()
        ids = None if batch_size == 4 else venv.recv()[4]
        thread = threading.Thread(target=killer)
        thread.start()
        restarted = 0
        deadline = time.monotonic() + 30
        try:
            steps = 0
            least = int(os.environ.get("VECENV_CHAOS_STEPS", "300"))
            while steps < least or (venv.restart_count < 10 and time.monotonic() < deadline):
                steps += 1
                if ids is None:
                    obs, _, dones, infos = venv.step(ZEROS)
                    rows = range(4)
                else:
                    venv.send(np.zeros(len(ids), np.int64), ids)
                    obs, _, dones, infos, ids = venv.recv()
                    rows = ids
                for row, i in enumerate(rows):
                    info, t = infos[row], obs[row, 1]
                    assert obs[row, 0] == i
                    if info.get("worker_restarted"):
                        restarted += 1
                        assert dones[row] and info["TimeLimit.truncated"] and t <= 1
                        assert info.get("t", t) == t
                    elif dones[row]:
                        assert info["env"] == i and info["t"] == 5 and t == 0
                    else:
                        assert info["env"] == i and info["t"] == t
        finally:
            stop.set()
            thread.join()
        assert venv.restart_count > 0 and restarted > 0


_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    import gymnasium as gym
    import numpy as np
    import vecenv

    class Env(gym.Env):
        observation_space = gym.spaces.Box(0, 1, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, hang):
            self.hang = hang

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            if self.hang:
                time.sleep(1000)
            return np.zeros(2, np.float32), 0.0, False, False, {}

        def pid(self):
            return os.getpid()

    if __name__ == "__main__":
        context, mode = sys.argv[1], sys.argv[2]
        fns = [lambda: Env(True), lambda: Env(True), lambda: Env(False), lambda: Env(False)]
        if mode == "build":  # Ctrl-C while the workers boot
            print("imported", flush=True)
            venv = vecenv.ShmemVecEnv(fns, envs_per_worker=1, context=context)
            time.sleep(1000)
        venv = vecenv.ShmemVecEnv(fns, envs_per_worker=2, context=context)
        venv.reset()
        print(*sorted(set(venv.env_method("pid"))), flush=True)
        venv.step_async(np.zeros(4, np.int64))
        print("stepping", flush=True)
        if mode == "sigint":
            venv.step_wait()
        else:
            time.sleep(1000)
    """
)


def _session(sid):
    """Live processes of session ``sid`` (the script and its workers)."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (OSError, psutil.Error):
            pass
    return out


def _session_ends(sid, seconds):
    deadline = time.monotonic() + seconds
    while _session(sid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _session(sid)


def _run_script(tmp_path, context, mode):
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)
    return subprocess.Popen(
        [sys.executable, str(script), context, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        start_new_session=True,  # its own process group, as under a terminal
    )


def _start_script(tmp_path, context, mode):
    proc = _run_script(tmp_path, context, mode)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2, proc.communicate()
    assert proc.stdout.readline().strip() == "stepping"
    time.sleep(0.3)  # worker 0 is inside its step, worker 1 idle again
    return proc, pids


@BOTH
def test_ctrl_c_in_the_parent_gives_one_traceback_and_leaves_nothing(context, tmp_path):
    proc, pids = _start_script(tmp_path, context, "sigint")
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: the whole group
    _, err = proc.communicate(timeout=60)
    assert err.count("Traceback (most recent call last)") == 1, err
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    assert _wait_gone(pids, 10), [(p, _gone(p)) for p in pids]
    assert not _session_ends(proc.pid, 10)


def test_ctrl_c_while_workers_boot_gives_one_traceback(tmp_path):
    proc = _run_script(tmp_path, "spawn", "build")
    assert proc.stdout.readline().strip() == "imported"
    time.sleep(0.1)  # the spawned workers are importing
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert err.count("Traceback (most recent call last)") == 1, err
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    assert not _session_ends(proc.pid, 10)


@BOTH
def test_sigkilled_parent_takes_its_workers_along(context, tmp_path):
    proc, pids = _start_script(tmp_path, context, "sleep")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    # Worker 0 is stuck in a step (PR_SET_PDEATHSIG), worker 1 idle (it polls).
    assert _wait_gone(pids, 10), [(p, _gone(p)) for p in pids]
    assert not _session_ends(proc.pid, 10)


def test_close_escalates_to_kill_and_leaves_no_zombie():
    venv = make("hang_ignoring_sigterm", target=0, at=1, context="fork")
    venv.reset()
    pids = venv.env_method("pid")
    procs = [psutil.Process(p) for p in set(pids)]
    venv.step_async(ZEROS)
    venv.close(timeout=0.3)  # polite close and SIGTERM are ignored: killed
    assert venv.closed
    for p in procs:
        assert not p.is_running()  # reaped, not a zombie


def test_close_gives_workers_that_ignore_sigterm_one_second_in_all(tmp_path):
    # Each env ignores SIGTERM and hangs in its step, one env per worker; a
    # worker forked from a parent where SDL (pygame) caught SIGTERM does the same.
    # Env i creates its marker file as it starts to hang.
    marks = [tmp_path / f"env{i}" for i in range(4)]
    fns = [
        functools.partial(FaultEnv, i, "hang_ignoring_sigterm", i, 1, str(marks[i]))
        for i in range(4)
    ]
    venv = vecenv.ShmemVecEnv(fns, envs_per_worker=1, context="fork")
    venv.reset()
    procs = [psutil.Process(p) for p in venv.env_method("pid")]
    venv.step_async(ZEROS)
    deadline = time.monotonic() + 30
    while not all(m.exists() for m in marks) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(m.exists() for m in marks)
    t0 = time.monotonic()
    venv.close(timeout=0.3)  # then SIGTERM, which all four outlive, then SIGKILL
    elapsed = time.monotonic() - t0
    assert elapsed < 0.3 + 1.0 + 1.5, elapsed  # one second each would be 4.3 s
    assert not any(p.is_running() for p in procs)


def test_close_after_a_worker_died_and_garbage_collection():
    venv = make("exit", target=0, at=1)
    venv.reset()
    pids = venv.env_method("pid")
    with pytest.raises(vecenv.WorkerDiedError):
        venv.step(ZEROS)
    del venv
    gc.collect()
    assert _wait_gone(pids, 10)


# ------------------------------------------------------------ soak


class SoakEnv(gym.Env):
    """NoopEnv with episodes of random length (1..64 steps)."""

    def __init__(self, seed):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._rng = np.random.default_rng(seed)
        self._obs = np.zeros(4, np.float32)
        self._left = 0

    def reset(self, *, seed=None, options=None):
        self._left = int(self._rng.integers(1, 65))
        return self._obs, {}

    def step(self, action):
        self._left -= 1
        return self._obs, 1.0, self._left <= 0, False, {}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("batch_size", [8, 4], ids=["lockstep", "partial"])
def test_soak_no_growth_of_rss_fds_or_shm(batch_size):
    num_envs, total = 8, 200_000
    rounds = total // batch_size
    me = psutil.Process()
    shm0 = set(os.listdir("/dev/shm"))
    fns = [functools.partial(SoakEnv, i) for i in range(num_envs)]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=4, batch_size=batch_size) as venv:
        venv.reset()
        actions = np.zeros(batch_size, np.int64)
        ids = None
        if batch_size < num_envs:
            _, _, _, _, ids = venv.recv()
        episodes = 0
        for t in range(rounds):
            if t == rounds // 10:  # allocator, caches and pipes have reached their size
                rss0, fds0 = me.memory_info().rss, me.num_fds()
            if ids is None:
                _, _, dones, infos = venv.step(actions)
            else:
                venv.send(actions, ids)
                _, _, dones, infos, ids = venv.recv()
            episodes += int(dones.sum())
            assert all("terminal_observation" in infos[j] for j in np.flatnonzero(dones))
        rss1, fds1 = me.memory_info().rss, me.num_fds()
        assert episodes > total // 64
        assert rss1 - rss0 < 16 * 2**20, (rss0, rss1)
        assert fds1 <= fds0 + 2, (fds0, fds1)
        assert set(os.listdir("/dev/shm")) - shm0 == set()
    assert me.num_fds() <= fds0


class SlowInfoEnv(FaultEnv):
    """A FaultEnv whose steps take 0.5 s and return a non-empty info, so its
    worker's round message is still on the way when another worker dies."""

    def step(self, action):
        time.sleep(0.5)
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {"slow": self.env_id}


def test_method_call_after_a_death_mid_step_gets_its_own_reply():
    """Regression: a call right after a WorkerDiedError read the other worker's
    pending round message as its reply."""
    fns = [
        functools.partial(FaultEnv, 0, "exit", 0, 1),
        functools.partial(FaultEnv, 1),
        functools.partial(SlowInfoEnv, 2),
        functools.partial(SlowInfoEnv, 3),
    ]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=2, context="fork") as venv:
        venv.reset()
        with pytest.raises(vecenv.WorkerDiedError):
            venv.step(np.zeros(4, np.int64))
        assert venv.get_attr("env_id", indices=[2, 3]) == [2, 3]
        assert venv.env_method("pid", indices=[3]) == venv.env_method("pid", indices=[2])


def test_gymnasium_facade_is_usable_after_the_watchdog_fires():
    """Regression: after the engine's timeout killed a stuck worker, the façade
    stayed 'waiting' and refused reset()."""
    fns = [functools.partial(FaultEnv, 0, "hang", 0, 2), functools.partial(FaultEnv, 1)]
    envs = vecenv.AsyncVectorEnv(fns, context="fork", timeout=0.5)
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(2, np.int64))
        with pytest.raises(multiprocessing.TimeoutError):
            envs.step(np.zeros(2, np.int64))
        obs, _ = envs.reset(seed=0)
        assert obs[:, 0].tolist() == [0, 1]
    finally:
        envs.close()


@pytest.mark.parametrize("name", ["timeout", "start_timeout"])
def test_zero_timeouts_are_refused(name):
    with pytest.raises(
        vecenv.InvalidArgumentError, match=f"{name} must be a number of seconds > 0"
    ):
        vecenv.ShmemVecEnv([FaultEnv], **{name: 0})
