"""The parent's compiled step (vecenv._core.ParentStep) against its fallback
(vecenv._step, forced by the private option ``_fallback_for_testing=True``): the same
trajectories for every autoreset mode and space, copy=True/False, infos,
episode ends, errors, partial batches with zero-copy blocks, interrupts,
timeouts and dead workers."""

import functools
import os
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from helpers import sigint_after as _sigint_after

import vecenv
from vecenv.errors import StateError, VecEnvTimeoutError, WorkerDiedError, WorkerError

pytestmark = pytest.mark.timeout(60)

OBS_KINDS = ("box", "tuple", "dict")


class ScriptEnv(gym.Env):
    """Deterministic: the observation encodes env id, step and last action;
    episodes of ``3 + env_id % 3`` steps end by termination (odd ids) or
    truncation (even ids); every third step of an even env has an info, and
    so has the reset of every fourth env;
    ``fail_at`` / ``exit_at``: raise / exit the worker at that step;
    ``sleep_s``: the step ``sleep_at`` (0: each step) sleeps; ``quiet``: no
    infos at all (episode ends then need no message)."""

    action_space = spaces.Discrete(5)

    def __init__(
        self, env_id, kind="box", fail_at=0, exit_at=0, sleep_s=0.0, sleep_at=0, quiet=False
    ):
        self.env_id, self.kind, self.quiet = env_id, kind, quiet
        self.fail_at, self.exit_at = fail_at, exit_at
        self.sleep_s, self.sleep_at = sleep_s, sleep_at
        self.length = 3 + env_id % 3
        if kind == "box":
            self.observation_space = spaces.Box(-1e9, 1e9, (3,), np.float32)
        elif kind == "tuple":
            self.observation_space = spaces.Tuple(
                (spaces.Discrete(100), spaces.Box(-1e9, 1e9, (2,), np.float64))
            )
        else:
            self.observation_space = spaces.Dict(
                {"a": spaces.Box(0, 2**40, (), np.int64), "b": spaces.Box(-1e9, 1e9, (2,))}
            )
        self.t = 0
        self.steps = 0

    def _obs(self, action):
        if self.kind == "box":
            return np.array([self.env_id, self.t, action], np.float32)
        if self.kind == "tuple":
            return (self.env_id, np.array([self.t, action], np.float64))
        return {"a": np.int64(100 * self.env_id + self.t), "b": np.array([action, 0.5], np.float32)}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        loud = self.env_id % 4 == 0 and not self.quiet
        return self._obs(-1), ({"reset_of": self.env_id} if loud else {})

    def step(self, action):
        self.t += 1
        self.steps += 1
        if self.sleep_s and self.sleep_at in (0, self.steps):
            time.sleep(self.sleep_s)
        if self.fail_at and self.steps == self.fail_at:
            raise ValueError(f"scripted failure of env {self.env_id}")
        if self.exit_at and self.steps == self.exit_at:
            os._exit(3)
        end = self.t >= self.length
        loud = self.env_id % 2 == 0 and self.t % 3 == 0 and not self.quiet
        info = {"t": self.t} if loud else {}
        term, trunc = (end, False) if self.env_id % 2 else (False, end)
        return self._obs(int(action)), float(self.env_id + 0.25 * int(action)), term, trunc, info


def _fns(n, **kw):
    return [functools.partial(ScriptEnv, i, **kw) for i in range(n)]


def _make(monkeypatch, path, fns, **kw):
    kw.setdefault("context", "fork")
    venv = vecenv.ShmemVecEnv(fns, _fallback_for_testing=path == "python", **kw)
    assert (venv._steps.fast is not None) == (path == "compiled")
    return venv


def _compiled_next(venv):
    """Let the next waits take the compiled path: no liveness check due for a
    minute (the Python wait makes one every 0.1 s; deaths are still found by
    the wait that does not finish within its first slice)."""
    venv._collector.next_check = time.monotonic() + 60


def _plain(x):
    """Observations and infos as nested lists/dicts of Python values, for ==."""
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        return ("a", str(x.dtype), np.asarray(x).tolist())
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    return x


def _actions(n, t):
    return np.array([(e + t) % 5 for e in range(n)], np.int64)


def _lockstep_run(venv, steps, api):
    out = [_plain(venv.reset())]
    out.append(_plain(venv.reset_infos))
    _compiled_next(venv)
    for t in range(steps):
        a = _actions(venv.num_envs, t)
        if api == "step":
            res = venv.step(a)
        elif api == "async":
            venv.step_async(a)
            res = venv.step_wait()
        else:  # non-exact actions: a list (sent through the pipes)
            res = venv.step(a.tolist())
        obs, rew, dones, infos = res
        assert rew.dtype == np.float64 and dones.dtype == np.bool_
        assert rew.flags.owndata and dones.flags.owndata
        out.append(_plain(res))
        out.append(_plain(venv._collector.term.copy()))
        out.append(_plain(venv.reset_infos))
    return out


@pytest.mark.parametrize("mode", ["sb3", "next_step", "same_step", "disabled"])
@pytest.mark.parametrize("kind", OBS_KINDS)
def test_lockstep_matches_the_python_path(monkeypatch, mode, kind):
    runs = {}
    for path in ("compiled", "python"):
        for copy in (True, False):
            with _make(
                monkeypatch, path, _fns(5, kind=kind), num_workers=2, copy=copy, autoreset_mode=mode
            ) as venv:
                runs[path, copy] = _lockstep_run(venv, 14, "step")
    assert runs["compiled", True] == runs["python", True]
    assert runs["compiled", False] == runs["python", False]
    assert runs["compiled", True] == runs["compiled", False]


@pytest.mark.parametrize("mode", ["sb3", "next_step", "same_step", "disabled"])
@pytest.mark.parametrize("kind", OBS_KINDS)
def test_in_process_steps_match_the_python_path(monkeypatch, mode, kind):
    """num_workers=0: the compiled call dispatches through the in-process
    Control, which runs the round before the wait; lockstep and partial."""
    runs = {}
    for path in ("compiled", "python"):
        fns = _fns(5, kind=kind)
        with _make(monkeypatch, path, fns, num_workers=0, autoreset_mode=mode) as venv:
            runs[path] = _lockstep_run(venv, 14, "step")
        with _make(
            monkeypatch, path, fns, num_workers=0, batch_size=2, autoreset_mode=mode
        ) as venv:
            runs[path, "partial"] = _partial_run(venv, 6)
    assert runs["compiled"] == runs["python"]
    assert runs["compiled", "partial"] == runs["python", "partial"]


@pytest.mark.parametrize("kind", OBS_KINDS)
@pytest.mark.parametrize("copy", [True, False])
def test_sb3_episode_ends_without_messages_match(monkeypatch, kind, copy):
    """No env has an info: the compiled call itself adds the terminal observations."""
    runs = {}
    for path in ("compiled", "python"):
        fns = _fns(5, kind=kind, quiet=True)
        with _make(monkeypatch, path, fns, num_workers=2, copy=copy) as venv:
            runs[path] = _lockstep_run(venv, 12, "step")
        with _make(monkeypatch, path, fns, num_workers=5, batch_size=2, copy=copy) as venv:
            runs[path, "partial"] = _partial_run(venv, 8)
    assert runs["compiled"] == runs["python"]
    ends = [i for step in runs["compiled"][2::3] for i in step[3] if "terminal_observation" in i]
    assert len(ends) >= 10 and {i["TimeLimit.truncated"] for i in ends} == {True, False}
    for e in range(5):
        assert runs["compiled", "partial"][e][:8] == runs["python", "partial"][e][:8]


@pytest.mark.parametrize("api", ["async", "list"])
@pytest.mark.parametrize("check_actions", [False, True])
def test_step_async_and_other_action_forms_match(monkeypatch, api, check_actions):
    runs = {}
    for path in ("compiled", "python"):
        with _make(
            monkeypatch, path, _fns(4, kind="dict"), num_workers=2, check_actions=check_actions
        ) as venv:
            runs[path] = _lockstep_run(venv, 10, api)
    assert runs["compiled"] == runs["python"]


def test_infos_are_fresh_dicts_the_caller_may_mutate(monkeypatch):
    with _make(monkeypatch, "compiled", _fns(4), num_workers=1) as venv:
        venv.reset()
        _, _, _, infos = venv.step(_actions(4, 0))
        assert len({id(i) for i in infos}) == 4
        infos[1]["mine"] = 1
        _, _, _, infos2 = venv.step(_actions(4, 1))
        assert all("mine" not in i for i in infos2)
        assert infos2 is not infos


def test_copy_false_lockstep_returns_the_shared_views(monkeypatch):
    with _make(monkeypatch, "compiled", _fns(4), num_workers=2, copy=False) as venv:
        venv.reset()
        obs, *_ = venv.step(_actions(4, 0))
        assert not obs.flags.owndata and np.shares_memory(obs, venv._collector.obs_bufs[0])
        obs2, *_ = venv.step(_actions(4, 1))
        assert obs2 is obs and obs[0, 1] == 2


def _partial_run(venv, each):
    """Per env, its sequence of (obs row, reward, done, info): until every env
    has ``each`` results (a busy machine may starve one worker for a while)."""
    n, k = venv.num_envs, venv.batch_size
    per_env = {e: [] for e in range(n)}
    steps = np.zeros(n, np.int64)
    venv.reset()
    _compiled_next(venv)
    deadline = time.monotonic() + 60  # by time, not by count: see the docstring
    while min(len(v) for v in per_env.values()) < each:
        assert time.monotonic() < deadline, {e: len(v) for e, v in per_env.items()}
        obs, rew, dones, infos, ids = venv.recv()
        assert ids.dtype == np.int64 and len(set(ids.tolist())) == k
        for j, e in enumerate(ids.tolist()):
            row = _plain(_row(obs, j))
            per_env[e].append((row, float(rew[j]), bool(dones[j]), _plain(infos[j])))
        venv.send(np.array([(e + steps[e]) % 5 for e in ids], np.int64), ids)
        steps[ids] += 1
    return per_env


def _row(obs, j):
    if isinstance(obs, dict):
        return {key: _row(v, j) for key, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(v, j) for v in obs)
    return obs[j].copy()


@pytest.mark.parametrize("mode", ["sb3", "next_step"])
@pytest.mark.parametrize("kind", OBS_KINDS)
@pytest.mark.parametrize("layout", [(2, 4), (4, 4)])  # (num_workers, batch_size) for 8 envs
@pytest.mark.parametrize("copy", [True, False])
def test_partial_batches_match_the_python_path(monkeypatch, mode, kind, layout, copy):
    workers, k = layout
    runs = {}
    for path in ("compiled", "python"):
        with _make(
            monkeypatch,
            path,
            _fns(8, kind=kind),
            num_workers=workers,
            batch_size=k,
            copy=copy,
            autoreset_mode=mode,
        ) as venv:
            runs[path] = _partial_run(venv, 8)
    # Which worker comes first depends on timing; each env's own sequence does not.
    for e in range(8):
        assert len(runs["compiled"][e]) >= 8 and len(runs["python"][e]) >= 8
        assert runs["compiled"][e][:8] == runs["python"][e][:8]


@pytest.mark.parametrize("copy", [True, False])
def test_whole_worker_blocks_are_one_contiguous_block(monkeypatch, copy):
    with _make(monkeypatch, "compiled", _fns(8), num_workers=2, batch_size=4, copy=copy) as venv:
        venv.reset()
        seq0 = [venv._collector.ctrl.command_seq(w) for w in range(2)]
        for t in range(20):
            obs, rew, dones, infos, ids = venv.recv()
            assert ids.tolist() in ([0, 1, 2, 3], [4, 5, 6, 7])  # one worker's envs, in order
            np.testing.assert_array_equal(obs[:, 0], ids)
            if copy:
                assert obs.flags.owndata
            else:  # zero-copy: the worker's rows of the shared buffer
                base = venv._collector.obs_bufs[0]
                assert np.shares_memory(obs, base[ids[0] : ids[-1] + 1])
                assert obs.__array_interface__["data"][0] == base[ids[0]].ctypes.data
            venv.send(_actions(8, t)[ids], ids)
        # One wake per batch: each send reached exactly one worker.
        assert sum(venv._collector.ctrl.command_seq(w) - seq0[w] for w in range(2)) == 20


def test_views_of_a_block_stay_valid_until_its_envs_are_sent(monkeypatch):
    with _make(monkeypatch, "compiled", _fns(8), num_workers=2, batch_size=4, copy=False) as venv:
        venv.reset()
        a_obs, *_, a_ids = venv.recv()
        kept = a_obs.copy()
        b_obs, *_, b_ids = venv.recv()
        assert set(a_ids.tolist()).isdisjoint(b_ids.tolist())
        np.testing.assert_array_equal(a_obs, kept)  # B's collect did not touch A's rows
        venv.send(_actions(8, 0)[b_ids], b_ids)
        b2_obs, *_, b2_ids = venv.recv()  # B again
        assert b2_ids.tolist() == b_ids.tolist()
        np.testing.assert_array_equal(a_obs, kept)  # still A's results: not sent yet
        venv.send(_actions(8, 1)[a_ids], a_ids)
        a2_obs, *_, a2_ids = venv.recv()
        assert a2_ids.tolist() == a_ids.tolist()
        assert (a_obs[:, 1] == kept[:, 1] + 1).all()  # now the rows moved on: documented


def test_gathered_batches_reuse_one_buffer_with_copy_false(monkeypatch):
    # 4 workers of 2 envs, batches of 4: two workers' blocks, not adjacent in general.
    with _make(monkeypatch, "compiled", _fns(8), num_workers=4, batch_size=4, copy=False) as venv:
        venv.reset()
        gathered = 0
        for t in range(30):
            obs, _, _, _, ids = venv.recv()
            assert ids.tolist() == sorted(ids.tolist())
            np.testing.assert_array_equal(obs[:, 0], ids)
            if ids[-1] - ids[0] != 3:
                gathered += 1
                assert np.shares_memory(obs, venv._collector.gather_out[0])
            venv.send(_actions(8, t)[ids], ids)
        assert gathered > 0


@pytest.mark.parametrize("partial", [False, True])
def test_errors_name_the_env_and_reset_recovers(monkeypatch, partial):
    for path in ("compiled", "python"):
        fns = [functools.partial(ScriptEnv, i, fail_at=3 if i == 2 else 0) for i in range(4)]
        kw = {"batch_size": 2} if partial else {}
        with _make(monkeypatch, path, fns, num_workers=2, **kw) as venv:
            with pytest.raises(
                WorkerError, match=r"env 2 raised builtins\.ValueError in step"
            ) as info:
                venv.reset()
                _compiled_next(venv)
                # Until env 2 fails: bounded by time, not by count, because the
                # first-finished batches of a busy machine may leave env 2's
                # worker out for hundreds of batches.
                deadline = time.monotonic() + 60
                t = 0
                while time.monotonic() < deadline:
                    t += 1
                    if partial:
                        *_, ids = venv.recv()
                        venv.send(_actions(4, t)[ids], ids)
                    else:
                        venv.step(_actions(4, t))
            assert info.value.env_index == 2
            with pytest.raises(StateError, match="reset"):
                venv.step(_actions(4, 0)) if not partial else venv.recv()
            venv.reset()
            if partial:
                assert len(venv.recv()[4]) == 2
            else:
                venv.step(_actions(4, 0))


def test_ctrl_c_during_a_compiled_step_then_reset(monkeypatch):
    with _make(monkeypatch, "compiled", _fns(2, sleep_s=0.3), num_workers=2) as venv:
        venv.reset()
        _compiled_next(venv)
        go = threading.Event()
        thread = _sigint_after(go, 0.05)  # counts from go: no race with start()
        try:
            with pytest.raises(KeyboardInterrupt):
                go.set()
                venv.step(_actions(2, 0))
                time.sleep(2)  # the interrupt lands here if the step outran it
        finally:
            thread.join()
        with pytest.raises(StateError, match="reset"):
            venv.step(_actions(2, 0))
        obs = venv.reset()
        assert obs[:, 1].tolist() == [0, 0]
        obs, *_ = venv.step(_actions(2, 0))
        assert obs[:, 1].tolist() == [1, 1]


def test_timeout_is_kept_by_the_compiled_wait(monkeypatch):
    fns = [functools.partial(ScriptEnv, i, sleep_s=3.0 * (i == 1), sleep_at=2) for i in range(2)]
    with _make(monkeypatch, "compiled", fns, num_workers=2, timeout=0.4) as venv:
        venv.reset()
        venv.step(_actions(2, 0))
        _compiled_next(venv)
        t0 = time.monotonic()
        with pytest.raises(VecEnvTimeoutError) as info:
            venv.step(_actions(2, 1))
        assert 0.35 < time.monotonic() - t0 < 5.0  # the 0.4 s deadline, not the 3 s step
        assert list(info.value.env_indices) == [1]
        venv.reset()  # starts the killed worker again
        obs, *_ = venv.step(_actions(2, 0))
        assert obs[:, 1].tolist() == [1, 1]


@pytest.mark.parametrize("policy", ["raise", "restart"])
def test_a_worker_that_dies_in_a_compiled_step(monkeypatch, policy):
    fns = [functools.partial(ScriptEnv, i, exit_at=2 if i == 3 else 0) for i in range(4)]
    with _make(monkeypatch, "compiled", fns, num_workers=2, on_worker_death=policy) as venv:
        venv.reset()
        venv.step(_actions(4, 0))
        _compiled_next(venv)
        if policy == "raise":
            with pytest.raises(WorkerDiedError) as info:
                venv.step(_actions(4, 1))
            assert 3 in info.value.env_indices
            venv.reset()
        else:
            _, _, dones, infos = venv.step(_actions(4, 1))
            assert dones[2:].all() and infos[3]["worker_restarted"]
        venv.step(_actions(4, 2))
