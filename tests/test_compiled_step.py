"""The parent's compiled step (vecenv._core.ParentStep) against its fallback
(vecenv._step, forced by the private option ``_fallback_for_testing=True``): the same
trajectories for every autoreset mode and space, copy=True/False, infos,
episode ends, errors, partial batches with zero-copy blocks, interrupts,
timeouts and dead workers."""

import functools
import os
import signal
import threading
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from helpers import InfoEnv
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
    # 4 workers of 2 envs, batches of 4. The envs of workers 1 and 3 sleep
    # 20 ms a step, so the fast workers 0 and 2 (envs 0, 1, 4, 5: two blocks
    # that are not adjacent) come back together: left to the scheduler, the
    # batches were sometimes all adjacent pairs of workers (seen on a loaded CI run).
    fns = [functools.partial(ScriptEnv, i, sleep_s=0.02 * ((i // 2) % 2)) for i in range(8)]
    with _make(monkeypatch, "compiled", fns, num_workers=4, batch_size=4, copy=False) as venv:
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


# ------------------------------------------------ restarts and interrupts, both paths
# Each test below runs under the compiled step (the default) and under its
# fallback (``_fallback_for_testing=True``), which must agree: a worker
# killed between its publish and its info, restarts while actions are sent or
# after a reset was collected, and a Ctrl-C between two workers' pipe actions.


@pytest.fixture(params=["compiled", "fallback"])
def path(request):
    """Run the test under the compiled parent step, then under its fallback."""
    return request.param


def _die_after_publishing(tmp_path, monkeypatch):
    """Make a forked worker SIGKILL itself between publishing a round and
    sending its infos, once (the first round with an info ``{"die": "now"}``;
    a marker file keeps the restarted worker alive). The patch is inherited
    through fork: the compiled round calls ``_Loop._publish_round`` too."""
    from vecenv import _worker

    marker = tmp_path / "died"
    original = _worker._Loop._publish_round

    def publish_round(self, done_envs, statuses, infos, errors):
        if not marker.exists() and any(info.get("die") for info in infos.values()):
            marker.touch()
            self.ctrl.publish(done_envs, statuses, self.spec.index)
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, done_envs, statuses, infos, errors)

    monkeypatch.setattr(_worker._Loop, "_publish_round", publish_round)
    return marker


class DieAtEnv(InfoEnv):
    """InfoEnv whose env ``die_env`` asks for its worker's death at t = 2.
    The ask is a str, so its infos go pickled (not into the block's info rows)."""

    def __init__(self, env_id, die_env):
        super().__init__(env_id)
        self.die_env = die_env

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        info["die"] = "now" if self.env_id == self.die_env and self.t == 2 else ""
        return obs, reward, terminated, truncated, info


@pytest.mark.timeout(60)
@pytest.mark.parametrize("copy", [True, False], ids=["copy", "views"])
@pytest.mark.parametrize("batch_size", [4, 2], ids=["lockstep", "partial"])
def test_a_worker_killed_between_its_publish_and_its_info_reports_the_reset(
    tmp_path, monkeypatch, path, batch_size, copy
):
    # The CI failure: the compiled step and recv built the observations,
    # rewards and dones before the infos were read, so the env of a worker
    # restarted while its info was read came back with its pre-death row
    # (t = 2), reward 1.0 and done False. The restart resets the env: the
    # reset's row, reward 0.0 (as every reset), done.
    marker = _die_after_publishing(tmp_path, monkeypatch)
    fns = [functools.partial(DieAtEnv, i, 1) for i in range(4)]
    with vecenv.ShmemVecEnv(
        fns,
        envs_per_worker=1,
        batch_size=batch_size,
        context="fork",
        copy=copy,
        on_worker_death="restart",
        _fallback_for_testing=path == "fallback",
    ) as venv:
        venv.reset()
        if batch_size == 2:  # partial batches: the reset's results come by recv()
            assert sorted(venv.recv()[4].tolist() + venv.recv()[4].tolist()) == [0, 1, 2, 3]
        seen = {}
        for _ in range(4):  # each env steps 4 times: env 1's worker dies at its t = 2
            if batch_size == 4:
                obs, rew, dones, infos = venv.step(np.zeros(4, np.int64))
                ids = np.arange(4)
            else:
                rows = []
                venv.send(np.zeros(4, np.int64), np.arange(4))
                for _ in range(2):
                    obs, rew, dones, infos, ids = venv.recv()
                    rows.append((np.array(obs, copy=True), rew, dones, infos, ids))
                obs = np.concatenate([r[0] for r in rows])
                rew = np.concatenate([r[1] for r in rows])
                dones = np.concatenate([r[2] for r in rows])
                infos = [info for r in rows for info in r[3]]
                ids = np.concatenate([r[4] for r in rows])
            for row, i in enumerate(ids.tolist()):
                restarted = bool(infos[row].get("worker_restarted"))
                seen.setdefault(i, []).append(
                    (int(obs[row, 1]), float(rew[row]), bool(dones[row]), restarted)
                )
        assert marker.exists() and venv.restart_count == 1
        # Env 1: t = 1, then its restart (the reset's row, done, reported),
        # then a new episode; the other envs step on undisturbed.
        assert seen[1] == [
            (1, 1.0, False, False),
            (0, 0.0, True, True),
            (1, 1.0, False, False),
            (2, 1.0, False, False),
        ]
        for i in (0, 2, 3):
            assert seen[i] == [(t, 1.0, False, False) for t in (1, 2, 3, 4)]


class CountEnv(InfoEnv):
    """InfoEnv without infos that never ends: observation ``[env_id, t]``, reward 1.0."""

    def reset(self, *, seed=None, options=None):
        return super().reset()[0], {}

    def step(self, action):
        return super().step(action)[0], 1.0, False, False, {}


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
        fns,
        envs_per_worker=1,
        context="fork",
        on_worker_death="restart",
        _fallback_for_testing=path == "fallback",
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


class SeedEnv(CountEnv):
    """CountEnv whose reset info holds the seed it got. Env ``die_env``'s
    worker dies inside its step at t = 2 while the file ``marker`` does not
    exist (it creates it first)."""

    def __init__(self, env_id, die_env, marker):
        super().__init__(env_id)
        self.die_env, self.marker = die_env, marker

    def reset(self, *, seed=None, options=None):
        return super().reset()[0], {"seed": seed}

    def step(self, action):
        if self.env_id == self.die_env and self.t == 1 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return super().step(action)


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
        _fallback_for_testing=path == "fallback",
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
    posted to. ``del venv._pool.post`` undoes it."""
    post, posted = venv._pool.post, []

    def interrupted_post(w, msg, *args, **kwargs):
        if msg.kind == vecenv._protocol.Msg.ACTIONS:
            posted.append(w)
            if len(posted) == 2:
                raise KeyboardInterrupt
        return post(w, msg, *args, **kwargs)

    venv._pool.post = interrupted_post
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
    with vecenv.ShmemVecEnv(
        fns, envs_per_worker=1, batch_size=batch_size, _fallback_for_testing=path == "fallback"
    ) as venv:
        venv.reset()
        if api == "send":
            venv.recv(), venv.recv()
        posted = _interrupt_the_second_actions_post(venv)
        with pytest.raises(KeyboardInterrupt):
            if api == "send":
                venv.send([2, 2], [0, 1])
            else:
                getattr(venv, api)([2, 2])
        del venv._pool.post
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
    with vecenv.ShmemVecEnv(
        fns, envs_per_worker=1, _fallback_for_testing=path == "fallback"
    ) as venv:
        venv.reset()
        _interrupt_the_second_actions_post(venv)
        with pytest.raises(KeyboardInterrupt):
            venv.step([2, 2, 2])
        del venv._pool.post
        venv.reset_async(env_ids=[1])
        obs = venv.reset_wait()
        assert obs[1].tolist() == [1.0, -1.0]
        got = venv.step(np.ones(3, np.int64))[0]
        assert got.tolist() == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
