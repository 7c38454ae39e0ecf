"""Workers that behave like the user's own process, and errors that blame the
right env: the parent's environment under every start method,
distinct and reproducible global random streams, a clear start-up timeout
when a forked worker inherits a held lock, and the env a crash or a stall
happened in when several envs share a worker.

Every test has a timeout and the autouse ``no_leaks`` fixture (conftest) checks
that no child process and no /dev/shm entry is left behind.
"""

from __future__ import annotations

import functools
import logging
import os
import pathlib
import random
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from helpers import SAFE_PYTHON

import vecenv
from vecenv import _startup

pytestmark = pytest.mark.timeout(120)

METHODS = pytest.mark.parametrize("context", ["fork", "forkserver", "spawn"])
ZEROS = np.zeros(4, np.int64)


class ProbeEnv(gym.Env):
    """Observation Box(3,) float64: draws of the global ``np.random``,
    ``random`` and (when imported) ``torch`` generators, taken at each reset
    and step. Env ``target`` injects ``fault`` ("exit", "segv", "hang") at
    its step ``at`` (0: in reset), in ``where`` ("step", "autoreset",
    "render", "method", "factory"). With ``marker`` (a file path) the fault
    fires once: the first env to fire creates the file.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, env_id=0, fault=None, target=0, at=2, where="step", marker=None):
        self.env_id = env_id
        self.fault = fault if env_id == target else None
        self.at = at
        self.where = where
        self.marker = marker
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0
        self._ended = False
        if where == "factory":
            self._fire()

    def _fire(self):
        if self.fault is None:
            return
        if self.marker is not None:
            if os.path.exists(self.marker):
                return
            pathlib.Path(self.marker).touch()
        if self.fault == "exit":
            os._exit(3)
        if self.fault == "segv":
            os.kill(os.getpid(), 11)
        if self.fault == "hang":
            time.sleep(1000)

    def _draws(self):
        torch = sys.modules.get("torch")
        t = float(torch.rand(1)[0]) if torch is not None else 0.0
        return np.array([np.random.random(), random.random(), t])  # noqa: NPY002

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        if self.where == "step" and self.at == 0:
            self._fire()
        if self.where == "autoreset" and self._ended:  # the reset after an episode
            self._fire()
        return self._draws(), {}

    def step(self, action):
        self.t += 1
        if self.where == "step" and self.t == self.at:
            self._fire()
        self._ended = self.where == "autoreset" and self.t == self.at
        return self._draws(), 0.0, self._ended, False, {}

    def render(self):
        if self.where == "render":
            self._fire()
        return np.zeros((2, 2, 3), np.uint8)

    def foo(self):
        if self.where == "method":
            self._fire()
        return self.env_id

    def environ(self, key):
        return os.environ.get(key)

    def cwd(self):
        return os.getcwd()

    def sys_path(self):
        return list(sys.path)

    def pid(self):
        return os.getpid()


def _kill_and_wait(pid):
    """SIGKILL a worker and wait until it is a zombie (left for its parent to reap)."""
    os.kill(pid, 9)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"worker {pid} did not die")


def make(context="fork", num_envs=4, envs_per_worker=2, **env_kwargs):
    vec_kwargs = {
        k: env_kwargs.pop(k)
        for k in list(env_kwargs)
        if k in ("timeout", "start_timeout", "on_worker_death", "autoreset_mode")
    }
    fns = [functools.partial(ProbeEnv, i, **env_kwargs) for i in range(num_envs)]
    return vecenv.ShmemVecEnv(fns, envs_per_worker=envs_per_worker, context=context, **vec_kwargs)


# ------------------------------------------------ what a worker inherits


@METHODS
def test_workers_see_the_environment_as_of_construction_and_restart(context, monkeypatch, tmp_path):
    # Have the forkserver (if that is the method) running before the change,
    # so a worker forked from it would carry the server's old environment.
    with make(context, num_envs=1, envs_per_worker=1):
        pass
    monkeypatch.setenv("VECENV_TEST_LATE", f"set just before construction ({context})")
    monkeypatch.delenv("VECENV_TEST_GONE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "late-path"))
    with make(context) as venv:
        venv.reset()
        assert (
            venv.env_method("environ", "VECENV_TEST_LATE")
            == [f"set just before construction ({context})"] * 4
        )
        assert venv.env_method("cwd") == [str(tmp_path)] * 4
        assert all(p[0] == str(tmp_path / "late-path") for p in venv.env_method("sys_path"))
        # A restarted worker sees the environment as of its restart.
        monkeypatch.setenv("VECENV_TEST_LATE", "changed before the restart")
        pid = venv.env_method("pid", indices=[2])[0]
        _kill_and_wait(pid)
        with pytest.raises(vecenv.WorkerDiedError):
            venv.step(ZEROS)
        venv.reset()
        got = venv.env_method("environ", "VECENV_TEST_LATE")
        assert got[2:] == ["changed before the restart"] * 2
        assert got[:2] == [f"set just before construction ({context})"] * 2


# ------------------------------------------------ global random streams


@METHODS
def test_global_random_streams_differ_per_worker_and_repeat_when_seeded(context):
    with make(context) as venv:
        obs = venv.reset()
        for col in (0, 1):  # np.random, random: 4 envs on 2 workers, all distinct
            assert len(set(obs[:, col].tolist())) == 4, obs
        unseeded = venv.step(ZEROS)[0]
        runs = []
        for _ in range(2):
            venv.seed(7)
            first = venv.reset()
            runs.append((first, venv.step(ZEROS)[0]))
        assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
        assert len(set(runs[0][0][:, 0].tolist())) == 4
        assert not np.array_equal(runs[0][1], unseeded)
    # Another vec env with the same seed draws the same numbers again.
    with make(context) as venv:
        venv.seed(7)
        assert np.array_equal(venv.reset(), runs[0][0])
        venv.seed(8)
        assert not np.array_equal(venv.reset(), runs[0][0])


@pytest.mark.timeout(180)
def test_torch_is_reseeded_in_forked_workers():
    torch = pytest.importorskip("torch")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # every forked worker starts from this state
        with make("fork") as venv:
            obs = venv.reset()
            assert len(set(obs[:, 2].tolist())) == 4, obs
            venv.seed(3)
            a = venv.reset()
            venv.seed(3)
            assert np.array_equal(a, venv.reset())


# ------------------------------------------------ start-up timeout


def _factory_behind_a_lock(i):
    # A lock an import or a library keeps at module level: present (and held
    # by a thread of the parent) in forked workers, absent in fresh ones.
    lock = getattr(threading, "_vecenv_test_lock", None)
    if lock is not None:
        with lock:
            pass
    return ProbeEnv(i)


@METHODS
@pytest.mark.timeout(60)
def test_a_lock_held_by_a_parent_thread_at_fork_gives_a_clear_start_error(
    context, monkeypatch, caplog
):
    lock = threading.Lock()
    monkeypatch.setattr(threading, "_vecenv_test_lock", lock, raising=False)
    monkeypatch.setattr(_startup, "_START_REPORT_S", 0.5)  # the start-up logs progress
    release = threading.Event()

    def hold():
        with lock:
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    fns = [functools.partial(_factory_behind_a_lock, i) for i in range(6)]
    me = psutil.Process()
    before = {p.pid for p in me.children()}
    try:
        caplog.set_level(logging.WARNING, logger="vecenv")
        t0 = time.monotonic()
        if context != "fork":  # fresh processes: no inherited lock, no hang
            with vecenv.ShmemVecEnv(fns, num_workers=3, context=context, start_timeout=30) as v:
                assert v.env_method("foo") == list(range(6))
            return
        with pytest.raises(vecenv.VecEnvTimeoutError) as info:
            vecenv.ShmemVecEnv(fns, num_workers=3, context=context, start_timeout=2.0)
        elapsed = time.monotonic() - t0
    finally:
        release.set()
        holder.join(5)
    err = str(info.value)
    # All three workers waited at once, not one after another.
    assert elapsed < 2.0 + 4.0, elapsed
    assert "3 of 3 workers did not start within start_timeout=2.0 s" in err
    for w, lo in enumerate((0, 2, 4)):
        assert f"worker {w} (envs [{lo}, {lo + 1}]) is inside the factory of env {lo}" in err
    assert "'fork'" in err and "context='spawn'" in err and "context='forkserver'" in err
    assert "lock" in err and "thread" in err
    assert info.value.env_indices == tuple(range(6)) and info.value.env_index == 0
    assert isinstance(info.value, TimeoutError)
    # Progress was logged while they did not start.
    assert any("0 of 3 workers ready" in r.getMessage() for r in caplog.records)
    # Every worker is gone (no_leaks also checks after the test).
    assert {p.pid for p in me.children()} - before == set()


def test_default_start_timeout_is_a_minute():
    import inspect

    sig = inspect.signature(vecenv.ShmemVecEnv)
    assert sig.parameters["start_timeout"].default == 60.0


# ------------------------------------------------ the env that crashed


@pytest.mark.parametrize(
    "fault, where, at, phrase, context",
    [
        ("exit", "step", 3, "inside env 2's step()", "fork"),
        ("exit", "step", 3, "inside env 2's step()", "spawn"),
        ("segv", "step", 2, "inside env 2's step()", "fork"),
        ("exit", "step", 0, "inside env 2's reset()", "fork"),
        ("exit", "autoreset", 2, "inside env 2's reset() (an automatic reset", "fork"),
    ],
)
def test_the_env_that_killed_its_worker_is_named(fault, where, at, phrase, context, tmp_path):
    # A death in reset() is restarted once by that reset: fire every time, so
    # the restarted worker dies as well and the reset raises.
    marker = None if at == 0 else str(tmp_path / "m")
    with make(
        context, envs_per_worker=4, fault=fault, target=2, at=at, where=where, marker=marker
    ) as venv:
        with pytest.raises(vecenv.WorkerDiedError) as info:
            venv.reset()
            for _ in range(4):
                venv.step(ZEROS)
        err = info.value
        assert err.env_index == 2, str(err)
        assert err.env_indices == (0, 1, 2, 3)
        assert phrase in str(err) and "envs [0, 1, 2, 3]" in str(err)
        assert "all 4 envs of the worker are lost" in str(err)
        if marker is not None:  # the next reset starts a clean worker
            venv.reset()
            venv.step(ZEROS)


@pytest.mark.parametrize("where", ["method", "render"])
def test_the_env_that_died_in_a_call_is_named(where, tmp_path):
    with make(envs_per_worker=4, fault="exit", target=3, where=where) as venv:
        venv.reset()
        with pytest.raises(vecenv.WorkerDiedError) as info:
            if where == "method":
                venv.env_method("foo")
            else:
                venv.get_images()
        err = str(info.value)
        assert info.value.env_index == 3 and info.value.env_indices == (0, 1, 2, 3)
        if where == "method":
            assert "env_method('foo')" in err and "inside env 3's env_method" in err
        else:
            assert "inside env 3's render()" in err


def test_a_worker_killed_between_env_calls_blames_no_env():
    with make(envs_per_worker=4) as venv:
        venv.reset()
        pid = venv.env_method("pid", indices=[0])[0]
        _kill_and_wait(pid)
        with pytest.raises(vecenv.WorkerDiedError) as info:
            venv.step(ZEROS)
        assert info.value.env_index is None and info.value.env_indices == (0, 1, 2, 3)
        assert "inside env" not in str(info.value)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_the_factory_that_killed_its_worker_is_named(context):
    fns = [functools.partial(ProbeEnv, i, "exit", 2, 0, "factory") for i in range(4)]
    with pytest.raises(vecenv.WorkerDiedError) as info:
        vecenv.ShmemVecEnv(fns, envs_per_worker=4, context=context)
    err = info.value
    assert err.env_index == 2 and err.env_indices == (0, 1, 2, 3)
    assert "inside the factory of env 2" in str(err) and "exited with code 3" in str(err)


def test_a_worker_that_dies_just_after_a_read_is_named_by_what_it_wrote_last(monkeypatch):
    # The race of a CI run (3.9, spawn): the parent read the worker's first
    # progress report ("unpickling its env factories"), the worker then
    # reported env after env and died in env 2's factory, and the parent,
    # seeing it dead, named the stale report. Each read of a starting
    # worker's pipe here is followed by a pause, so the worker always runs
    # ahead of the parent's reads, and dies before the next one.
    from vecenv._channel import ParentChannel

    pump = ParentChannel.pump

    def slow_pump(self, timeout):
        alive = pump(self, timeout)
        time.sleep(0.3)
        return alive

    monkeypatch.setattr(ParentChannel, "pump", slow_pump)
    fns = [functools.partial(ProbeEnv, i, "exit", 2, 0, "factory") for i in range(4)]
    with pytest.raises(vecenv.WorkerDiedError) as info:
        vecenv.ShmemVecEnv(fns, envs_per_worker=4, context="fork")
    assert info.value.env_index == 2
    assert "inside the factory of env 2" in str(info.value)


def test_the_factory_that_kills_a_restarted_worker_is_named(tmp_path):
    marker = tmp_path / "m"
    # Env 1 exits in its step 2; once the marker exists, env 2's factory exits.

    def factory(i):
        if i == 2 and marker.exists():
            os._exit(4)
        return ProbeEnv(i, "exit", 1, 2, "step", str(marker))

    fns = [functools.partial(factory, i) for i in range(4)]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=4, context="fork") as venv:
        venv.reset()
        venv.step(ZEROS)
        with pytest.raises(vecenv.WorkerDiedError) as info:
            venv.step(ZEROS)
        assert info.value.env_index == 1
        with pytest.raises(vecenv.WorkerDiedError) as info:
            venv.reset()  # the restart dies in env 2's factory
        assert info.value.env_index == 2
        assert "inside the factory of env 2" in str(info.value)
        assert "inside env 1" not in str(info.value)  # nothing stale from the dead worker


def test_the_watchdog_names_the_env_being_stepped(tmp_path):
    with make(envs_per_worker=4, fault="hang", target=1, at=2, timeout=1.0) as venv:
        venv.reset()
        venv.step(ZEROS)
        with pytest.raises(vecenv.VecEnvTimeoutError) as info:
            venv.step(ZEROS)
        err = info.value
        assert err.env_index == 1 and err.env_indices == (0, 1, 2, 3)
        assert "worker 0 was inside env 1's step()" in str(err)


def test_a_call_timeout_names_the_env_being_called():
    with make(envs_per_worker=4, fault="hang", target=2, where="method", timeout=1.0) as venv:
        venv.reset()
        with pytest.raises(vecenv.VecEnvTimeoutError) as info:
            venv.env_method("foo")
        assert "worker 0 was inside env 2's env_method" in str(info.value)


def _failing_factory(delay_s):
    time.sleep(delay_s)
    raise ValueError(f"factory failed after {delay_s} s")


@pytest.mark.timeout(60)
def test_factory_errors_of_several_workers_name_the_lowest_env():
    # Env 1's factory fails at once, env 0's a little later: the error names
    # env 0 whichever report the parent reads first (it used to be a race).
    fns = [functools.partial(_failing_factory, 0.3), functools.partial(_failing_factory, 0.0)]
    with pytest.raises(vecenv.WorkerError, match=r"after 0\.3 s") as info:
        vecenv.ShmemVecEnv(fns, num_workers=2, context="fork")
    assert info.value.env_index == 0


# ---------------------------------------------------------------- envs with processes of their own
def _serve(conn):
    """A tiny server: doubles what it receives until None or EOF."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        conn.send(2 * msg)


class ServerEnv(gym.Env):
    """Starts a ``multiprocessing.Process`` server in ``__init__`` (start
    method ``method``) and asks it for each observation; ``close()`` stops
    it unless ``stop`` is False (a badly behaved env)."""

    def __init__(self, method="fork", stop=True):
        import multiprocessing

        ctx = multiprocessing.get_context(method)
        self.conn, child = ctx.Pipe()
        self.server = ctx.Process(target=_serve, args=(child,))
        self.server.start()
        child.close()
        self.stop = stop
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
        self.action_space = gym.spaces.Discrete(4)

    def _ask(self, value):
        self.conn.send(int(value))
        return np.array([self.conn.recv()], np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._ask(0), {}

    def step(self, action):
        return self._ask(action), 0.0, False, False, {}

    def server_pid(self):
        return self.server.pid

    def close(self):
        if self.stop and self.server.pid is not None:
            self.conn.send(None)
            self.server.join(5.0)
            if self.server.exitcode is None:
                self.server.kill()
                self.server.join(5.0)


def _running(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids, within=5.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _running(pid)]
        if not alive:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if _running(pid)]


@pytest.mark.timeout(60)
@METHODS
def test_an_env_may_start_processes_and_its_close_stops_them(context):
    # Daemonic workers could not start the server: "daemonic processes are
    # not allowed to have children".
    # The server is forked by the env (the worker's start method is the point).
    venv = vecenv.ShmemVecEnv(
        [functools.partial(ServerEnv, "fork")] * 2, num_workers=2, context=context
    )
    try:
        venv.reset()
        obs, *_ = venv.step(np.array([1, 3]))
        np.testing.assert_array_equal(obs, [[2.0], [6.0]])
        servers = venv.env_method("server_pid")
        assert all(_running(pid) for pid in servers)
    finally:
        venv.close()
    assert _wait_gone(servers, within=0.5) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_processes_an_env_leaves_running_die_with_its_worker(context):
    venv = vecenv.ShmemVecEnv(
        [functools.partial(ServerEnv, "fork", stop=False)] * 2, num_workers=2, context=context
    )
    venv.reset()
    servers = venv.env_method("server_pid")
    start = time.monotonic()
    venv.close()
    assert time.monotonic() - start < 4.0  # close() does not wait for them
    assert _wait_gone(servers) == []


@pytest.mark.timeout(60)
def test_a_worker_killed_by_the_watchdog_takes_its_envs_processes_along():
    venv = vecenv.ShmemVecEnv(
        [functools.partial(ServerEnv, "fork")] * 2, num_workers=2, context="fork"
    )
    try:
        venv.reset()
        servers = venv.env_method("server_pid")
        venv._pool.bury(0)
        assert _wait_gone(servers[:1]) == []
        assert _running(servers[1])
    finally:
        venv.close()


_PARENT_SCRIPT = """
import functools, json, sys, time
sys.path.insert(0, {tests!r})
import numpy as np
import vecenv
from test_workers import ServerEnv

if __name__ == "__main__":
    venv = vecenv.ShmemVecEnv(
        [functools.partial(ServerEnv, {inner!r}, stop={stop!r})] * 2,
        num_workers=2, context={context!r}, daemon={daemon!r},
    )
    venv.reset()
    venv.step(np.array([1, 2]))
    workers = [p.pid for p in venv._pool.procs]
    print(json.dumps(workers + venv.env_method("server_pid")), flush=True)
    {ending}
"""


def _parent(tmp_path, ending, context="fork", daemon=True, stop=True):
    import subprocess

    script = tmp_path / "parent.py"
    inner = "fork"
    script.write_text(
        _PARENT_SCRIPT.format(
            tests=str(pathlib.Path(__file__).parent),
            inner=inner,
            stop=stop,
            context=context,
            daemon=daemon,
            ending=ending,
        )
    )
    return subprocess.Popen(
        [*SAFE_PYTHON, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.timeout(90)
@METHODS
def test_sigkill_of_the_parent_leaves_no_worker_and_no_env_process(tmp_path, context):
    import json
    import signal

    proc = _parent(tmp_path, "time.sleep(60)", context=context)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        pids = json.loads(line)
        assert all(_running(pid) for pid in pids)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _wait_gone(pids) == []
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("daemon", [True, False])
@pytest.mark.parametrize(
    "ending", ["pass", "raise RuntimeError('boom')", "raise KeyboardInterrupt"]
)
def test_a_script_that_exits_without_close_exits_promptly_and_leaves_nothing(
    tmp_path, daemon, ending
):
    import json

    # An env that leaves its server running is the worst case: the worker's
    # own exit must not wait for it, nor the parent's for the worker.
    proc = _parent(tmp_path, ending, daemon=daemon, stop=False)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    pids = json.loads(out.splitlines()[0])
    assert (proc.returncode == 0) == (ending == "pass"), err
    assert _wait_gone(pids) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("daemon", [True, False])
def test_the_drop_ins_accept_daemon_and_host_envs_with_processes(daemon):
    from vecenv.gymnasium_vector import AsyncVectorEnv

    fns = [functools.partial(ServerEnv, "fork")] * 2
    genv = AsyncVectorEnv(fns, context="fork", daemon=daemon)
    try:
        genv.reset()
        obs, *_ = genv.step(np.array([1, 2]))
        np.testing.assert_array_equal(obs, [[2.0], [4.0]])
        servers = list(genv.call("server_pid"))
    finally:
        genv.close()
    assert _wait_gone(servers, within=0.5) == []
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3 import SubprocVecEnv

    senv = SubprocVecEnv(fns, start_method="fork", daemon=daemon)
    try:
        senv.reset()
        servers = senv.env_method("server_pid")
        assert all(_running(pid) for pid in servers)
    finally:
        senv.close()
    assert _wait_gone(servers, within=0.5) == []


# ------------------------------------------------- values that do not pickle
class UnpicklableValueEnv(gym.Env):
    """Env ``bad`` (of envs sharing a worker) holds values that do not pickle:
    an attribute that is a local lambda (pickling it raises AttributeError)
    and one that is a lock (TypeError); its method and its ``render()``
    return them. The other envs hold plain ints."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, env_id=0, bad=1):
        self.env_id = env_id
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
        self.action_space = gym.spaces.Discrete(2)
        broken = env_id == bad
        self.fn = (lambda: env_id) if broken else env_id
        self.lock = threading.Lock() if broken else env_id

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.full(3, self.env_id, np.float64), {}

    def step(self, action):
        return np.full(3, self.env_id, np.float64), 0.0, False, False, {}

    def the_lock(self):
        return self.lock

    def render(self):
        return self.lock if isinstance(self.lock, type(threading.Lock())) else None


def _unpicklable_fns(n=4, bad=1):
    return [functools.partial(UnpicklableValueEnv, i, bad) for i in range(n)]


# (call, what the message names) for each kind of call whose value comes back.
_UNPICKLABLE_CALLS = {
    "get_attr lambda": (lambda v: v.get_attr("fn"), "get_attr('fn')", "AttributeError"),
    "get_attr lock": (lambda v: v.get_attr("lock"), "get_attr('lock')", "TypeError"),
    "env_method": (lambda v: v.env_method("the_lock"), "env_method('the_lock')", "TypeError"),
    "call": (lambda v: v.call_wait(v.call_async("call", "lock")), "call('lock')", "TypeError"),
    "render": (lambda v: v.get_images(), "render()", "TypeError"),
}


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("call", list(_UNPICKLABLE_CALLS))
def test_a_value_that_does_not_pickle_back_names_its_env(context, call):
    fn, what, pickling_error = _UNPICKLABLE_CALLS[call]
    bad = 2  # not the first env of its worker
    with vecenv.ShmemVecEnv(_unpicklable_fns(4, bad), num_workers=1, context=context) as venv:
        venv.reset()
        with pytest.raises(vecenv.ResultNotPicklableError) as info:
            fn(venv)
        err = info.value
        assert err.env_index == bad
        assert isinstance(err, TypeError) and not isinstance(err, AttributeError)
        assert err.exc_type == f"builtins.{pickling_error}"
        text = str(err)
        assert f"env {bad}'s {what} returned a value that could not be sent back" in text
        assert f"pickling it raised builtins.{pickling_error}" in text
        assert "raised builtins" not in text.split(":")[0]  # it does not say the env raised
        assert "During handling" not in err.worker_traceback
        # Nothing else is lost: the call works for the other envs, so do steps.
        assert venv.get_attr("fn", indices=[0, 1, 3]) == [0, 1, 3]
        venv.step(ZEROS)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_value_that_does_not_pickle_out_names_the_envs_and_sends_nothing(context):
    lock = threading.Lock()
    with vecenv.ShmemVecEnv(_unpicklable_fns(4), num_workers=1, context=context) as venv:
        venv.reset()
        calls = {
            "set_attr('x') value": lambda: venv.set_attr("x", lock, indices=[2, 3]),
            "env_method('the_lock') arguments": lambda: venv.env_method(
                "the_lock", lock, indices=[2, 3]
            ),
            "env_is_wrapped() arguments": lambda: venv.env_is_wrapped(
                type("LocalWrapper", (gym.Wrapper,), {"lock": lock}), indices=[2, 3]
            ),
        }
        for what, fn in calls.items():
            with pytest.raises(vecenv.ArgumentNotPicklableError) as info:
                fn()
            err = info.value
            assert isinstance(err, TypeError) and isinstance(err, ValueError)
            assert err.env_indices == (2, 3), what
            assert f"the {what} for env(s) [2, 3] cannot be sent" in str(err)
            assert "pickling it raised" in str(err)  # the pickling error, quoted
        venv.set_options([None, None, {"lock": lock}, None])
        with pytest.raises(
            vecenv.ArgumentNotPicklableError, match=r"reset options for env\(s\) \[2\]"
        ):
            venv.reset()
        venv.step(ZEROS)  # nothing was sent: the vec env is as it was (idle)
        with pytest.raises(vecenv.ArgumentNotPicklableError, match=r"actions for env\(s\) \[1\]"):
            venv.step_async([0, lock, 1, 0])  # an action that goes through the pipe
        venv.step(ZEROS)  # nothing was sent: still idle
        with pytest.raises(vecenv.WorkerError, match="x"):  # the set_attr never reached them
            venv.get_attr("x", indices=[2])


def test_in_process_values_pass_by_reference():
    with vecenv.ShmemVecEnv(_unpicklable_fns(3), num_workers=0) as venv:
        venv.reset()
        fn, lock = venv.get_attr("fn", indices=[1])[0], venv.get_attr("lock", indices=[1])[0]
        assert callable(fn) and fn() == 1  # the env's own objects, as SyncVectorEnv gives them
        assert venv.env_method("the_lock", indices=[1]) == [lock]
        mine = threading.Lock()
        venv.set_attr("x", mine, indices=[2])
        assert venv.get_attr("x", indices=[2])[0] is mine
        # Reset options are copied as a worker would get them: one that does
        # not pickle is refused, naming the env, and nothing is reset.
        venv.set_options([None, None, {"lock": mine}])
        with pytest.raises(vecenv.ArgumentNotPicklableError, match=r"env\(s\) \[2\]") as info:
            venv.reset()
        assert "num_workers=0" not in str(info.value)
        venv.step(np.zeros(3, np.int64))


class LambdaInfoEnv(gym.Env):
    """Its info at step 2 holds a lambda (which does not pickle) for env 1,
    a plain value for the others."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_id):
        self.env_id, self.t = env_id, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        info = {}
        if self.t == 2:
            info = {"fn": lambda: None} if self.env_id == 1 else {"t": self.t}
        return np.zeros(1, np.float32), 0.0, False, False, info


@pytest.mark.timeout(60)
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_an_info_that_does_not_pickle_blames_its_env_not_its_workers_first(context):
    fns = [functools.partial(LambdaInfoEnv, e) for e in range(4)]
    with vecenv.ShmemVecEnv(fns, envs_per_worker=2, context=context) as venv:
        venv.reset()
        venv.step(np.zeros(4, np.int64))
        with pytest.raises(vecenv.ResultNotPicklableError) as info:
            venv.step(np.zeros(4, np.int64))
        err = info.value
        assert err.env_index == 1 and isinstance(err, TypeError)
        assert not isinstance(err, AttributeError)
        assert "env 1's step() or reset() info dict" in str(err) and "raised" in str(err)
        assert "and envs" not in str(err)  # env 0, on the same worker, is not blamed
        venv.reset()  # recovers
        venv.step(np.zeros(4, np.int64))
