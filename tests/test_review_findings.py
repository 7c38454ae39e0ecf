"""Regressions from a review of the compiled step paths against the Python ones.

Each test runs under the compiled paths (the default) and the Python ones
(``VECENV_PARENT_STEP=python``, ``VECENV_PY_ROUND=1``), which must agree.
"""

from __future__ import annotations

import functools
import os
import signal

import gymnasium as gym
import numpy as np
import pytest
from test_faults import DieAtEnv, _die_after_publishing

import vecenv


@pytest.fixture(params=["compiled", "python"])
def path(request, monkeypatch):
    """Run the test under the compiled parent step and worker round, then the Python ones."""
    if request.param == "python":
        monkeypatch.setenv("VECENV_PARENT_STEP", "python")
        monkeypatch.setenv("VECENV_PY_ROUND", "1")
    return request.param


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size", [4, 2], ids=["lockstep", "partial"])
def test_a_worker_restarted_while_its_info_is_read_reports_the_resets_reward(
    tmp_path, monkeypatch, path, batch_size
):
    # The restart resets the env (reward 0.0 in its shared row, as every
    # reset); the compiled step and recv had copied the rewards before the
    # infos were read and returned the pre-death step's 1.0.
    marker = _die_after_publishing(tmp_path, monkeypatch)
    fns = [functools.partial(DieAtEnv, i, 1) for i in range(4)]
    with vecenv.ShmemVecEnv(
        fns, envs_per_worker=1, batch_size=batch_size, context="fork", on_worker_death="restart"
    ) as venv:
        venv.reset()
        if batch_size == 2:
            venv.recv(), venv.recv()
        seen = {}
        for _ in range(3):
            if batch_size == 4:
                _, rew, dones, infos = venv.step(np.zeros(4, np.int64))
                ids = np.arange(4)
            else:
                venv.send(np.zeros(4, np.int64), np.arange(4))
                parts = [venv.recv() for _ in range(2)]
                rew = np.concatenate([p[1] for p in parts])
                dones = np.concatenate([p[2] for p in parts])
                infos = [info for p in parts for info in p[3]]
                ids = np.concatenate([p[4] for p in parts])
            for row, i in enumerate(ids.tolist()):
                seen.setdefault(i, []).append(
                    (float(rew[row]), bool(dones[row]), bool(infos[row].get("worker_restarted")))
                )
        assert marker.exists() and venv.restart_count == 1
        assert seen[1] == [(1.0, False, False), (0.0, True, True), (1.0, False, False)]


class CountEnv(gym.Env):
    """Observation ``[env_id, t]``, reward 1.0, no infos; never ends."""

    def __init__(self, env_id):
        self.env_id = env_id
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([self.env_id, 0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.env_id, self.t], np.float32), 1.0, False, False, {}


def _kill_worker(venv, w):
    proc = venv._resources.procs[w]
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10.0)
    assert proc.exitcode is not None


@pytest.mark.timeout(60)
def test_a_restart_while_sending_pipe_actions_is_reported_in_that_step(path):
    # Actions that are not an exact array go through the pipes (_put_actions);
    # a worker found dead there is restarted, so this step's result of its env
    # is the restart's. The compiled step checked for restarts to report
    # before _put_actions and skipped _complete for a batch without infos: the
    # restart was reported one step late, on an ordinary step's result.
    fns = [functools.partial(CountEnv, i) for i in range(2)]
    with vecenv.ShmemVecEnv(
        fns, envs_per_worker=1, context="fork", on_worker_death="restart"
    ) as venv:
        venv.reset()
        venv.step([0, 0])
        _kill_worker(venv, 1)
        obs, rew, dones, infos = venv.step([0, 0])
        assert venv.restart_count == 1
        assert obs[:, 1].tolist() == [2, 1]  # env 1 was reset, then stepped
        assert dones.tolist() == [False, True]
        assert infos[1].get("worker_restarted") is True and "worker_restarted" not in infos[0]
        obs, rew, dones, infos = venv.step([0, 0])
        assert obs[:, 1].tolist() == [3, 2] and dones.tolist() == [False, False]
        assert infos == [{}, {}]


class SeedEnv(gym.Env):
    """Observation ``[env_id, t]``; each reset's info holds the seed it got.
    Env ``die_env``'s worker dies inside its step at t = 2 while the file
    ``marker`` does not exist (it creates it first)."""

    def __init__(self, env_id, die_env, marker):
        self.env_id, self.die_env, self.marker = env_id, die_env, marker
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([self.env_id, 0], np.float32), {"seed": seed}

    def step(self, action):
        self.t += 1
        if self.env_id == self.die_env and self.t == 2 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return np.array([self.env_id, self.t], np.float32), 1.0, False, False, {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size", [4, 2], ids=["lockstep", "partial"])
def test_a_restart_after_the_reset_was_collected_does_not_reuse_its_seed(
    tmp_path, path, batch_size
):
    # A worker restarted while its envs are in flight resets them with the
    # seeds of the reset in progress (_pending_kwargs). reset_wait forgets
    # them once the reset is collected; with partial batches recv collects
    # the reset and they were kept for good: a death many steps later reset
    # the env with its first seed again (a replay of its first episode),
    # where lockstep gives it an unseeded reset.
    marker = str(tmp_path / "died")
    fns = [functools.partial(SeedEnv, i, 1, marker) for i in range(4)]
    with vecenv.ShmemVecEnv(
        fns,
        envs_per_worker=1,
        batch_size=batch_size,
        context="fork",
        on_worker_death="restart",
        autoreset_mode="next_step",  # a reported restart's info holds its reset's info
    ) as venv:
        venv.seed(100)
        venv.reset()
        if batch_size == 2:
            got = [venv.recv() for _ in range(2)]
            seeds = {int(i): info["seed"] for p in got for i, info in zip(p[4], p[3])}
            assert seeds == {0: 100, 1: 101, 2: 102, 3: 103}
        restarted = []
        for _ in range(3):
            if batch_size == 4:
                _, _, _, infos = venv.step(np.zeros(4, np.int64))
                restarted += [info for info in infos if info.get("worker_restarted")]
            else:
                venv.send(np.zeros(4, np.int64), np.arange(4))
                for _ in range(2):
                    infos = venv.recv()[3]
                    restarted += [info for info in infos if info.get("worker_restarted")]
        assert venv.restart_count == 1 and len(restarted) == 1
        assert restarted[0]["seed"] is None


class ActionEnv(gym.Env):
    """Observation ``[env_id, last action]`` (-1 after a reset)."""

    def __init__(self, env_id):
        self.env_id = env_id
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        return np.array([self.env_id, -1], np.float32), {}

    def step(self, action):
        return np.array([self.env_id, int(action)], np.float32), 0.0, False, False, {}


def _interrupt_the_second_actions_post(venv):
    """Make ``venv``'s next pipe-actions posts raise KeyboardInterrupt at the
    second worker (the first holds its actions); return the list of workers
    posted to. ``del venv._post`` undoes it."""
    post, posted = venv._post, []

    def interrupted_post(w, msg, *args, **kwargs):
        if msg.kind == vecenv._protocol.Msg.ACTIONS:
            posted.append(w)
            if len(posted) == 2:
                raise KeyboardInterrupt
        return post(w, msg, *args, **kwargs)

    venv._post = interrupted_post
    return posted


@pytest.mark.timeout(60)
@pytest.mark.parametrize("api", ["step", "step_async", "send"])
def test_ctrl_c_between_two_workers_pipe_actions_needs_a_reset(path, api):
    # Actions that are not an exact array go to each worker through its pipe
    # (_put_actions). A Ctrl-C after worker 0 got its actions and before
    # worker 1 did left the state IDLE (step's docstring promises NEEDS_RESET):
    # the next step, with actions in shared memory, silently ran env 0 with
    # the interrupted step's action.
    fns = [functools.partial(ActionEnv, i) for i in range(2)]
    batch_size = 1 if api == "send" else 2
    with vecenv.ShmemVecEnv(fns, envs_per_worker=1, batch_size=batch_size) as venv:
        venv.reset()
        if api == "send":
            venv.recv(), venv.recv()
        posted = _interrupt_the_second_actions_post(venv)
        with pytest.raises(KeyboardInterrupt):
            if api == "send":
                venv.send([2, 2], [0, 1])
            else:
                getattr(venv, api)([2, 2])
        del venv._post
        assert posted == [0, 1]
        with pytest.raises(vecenv.errors.StateError, match="reset"):
            if api == "send":
                venv.send(np.ones(2, np.int64), np.arange(2))
            else:
                venv.step(np.ones(2, np.int64))
        venv.reset()  # drops the actions worker 0 holds
        if api == "send":
            venv.recv(), venv.recv()
            venv.send(np.ones(2, np.int64), np.arange(2))
            rows = [venv.recv() for _ in range(2)]
            got = sorted(tuple(r[0][0].tolist()) for r in rows)
        else:
            got = sorted(tuple(row) for row in venv.step(np.ones(2, np.int64))[0].tolist())
        assert got == [(0.0, 1.0), (1.0, 1.0)]


@pytest.mark.timeout(60)
def test_a_subset_reset_after_an_interrupted_post_drops_the_held_actions(path):
    # After the Ctrl-C of the test above, a reset of env 1 alone left worker 0
    # holding env 0's interrupted action (2): its next step, with actions in
    # shared memory, took that action instead of its own (1).
    fns = [functools.partial(ActionEnv, i) for i in range(3)]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=1) as venv:
        venv.reset()
        _interrupt_the_second_actions_post(venv)
        with pytest.raises(KeyboardInterrupt):
            venv.step([2, 2, 2])
        del venv._post
        venv.reset_async(env_ids=[1])
        obs = venv.reset_wait()
        assert obs[1].tolist() == [1.0, -1.0]
        got = venv.step(np.ones(3, np.int64))[0]
        assert got.tolist() == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
