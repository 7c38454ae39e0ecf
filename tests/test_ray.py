"""RayVecEnv against real local Ray clusters (one node, then two nodes).

Ray binds to the machine's network address unless it has none, so every test
that starts Ray runs only inside a network namespace that holds nothing but
loopback (``unshare -n``; scripts/test.sh runs them that way) and skips
itself anywhere else. The tests without Ray (import behaviour, argument
checks before any cluster exists) run everywhere.
"""

import functools
import os
import signal
import subprocess
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from helpers import SAFE_PYTHON
from helpers import compare_rollout as _compare_rollout
from reference import assert_tree_equal

import vecenv
from vecenv.envs import CounterEnv

ray_mark = pytest.mark.ray
pytestmark = pytest.mark.timeout(240)


# ---------------------------------------------------------------- no Ray needed
def _run_python(code):
    return subprocess.run([*SAFE_PYTHON, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_without_ray_says_how_to_install():
    proc = _run_python(
        "import sys\nsys.modules['ray'] = None\n"
        "try:\n    import vecenv.ray\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n"
    )
    assert "IMPORTERROR" in proc.stdout, proc.stderr
    assert "pip install vecenv[ray]" in proc.stdout


def test_only_vecenv_ray_imports_ray():
    proc = _run_python(
        "import sys, vecenv, vecenv.envs, vecenv.shmem_vec_env\nprint('ray' in sys.modules)"
    )
    assert proc.stdout.strip() == "False", proc.stderr


def test_refuses_to_start_without_a_running_ray():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray is running in this process")
    from vecenv.ray import RayVecEnv

    with pytest.raises(vecenv.StateError, match=r"ray\.init\(address="):
        RayVecEnv([lambda: gym.make("CartPole-v1")])
    assert not ray.is_initialized()  # RayVecEnv never starts Ray by itself


def test_ray_vec_env_is_an_engine_that_holds_its_actor_pool():
    """RayVecEnv is the engine's state machine; its actors are a part it holds
    (``ActorPool``), not a base class."""
    pytest.importorskip("ray")
    from vecenv._engine import EngineVecEnv
    from vecenv._ray_actors import ActorPool
    from vecenv.ray import RayVecEnv

    inside = [c for c in RayVecEnv.__mro__ if c.__module__.split(".")[0] == "vecenv"]
    assert inside == [RayVecEnv, EngineVecEnv, vecenv.VecEnv]
    assert not issubclass(ActorPool, EngineVecEnv)


# ---------------------------------------------------------------- helpers
# (the loopback namespace and the Ray cluster fixtures are in conftest.py)
def _ray_children():
    return list(psutil.Process().children(recursive=True))


def cartpole():
    return gym.make("CartPole-v1")


def _counter_fns(n, episode_length=None):
    return [
        functools.partial(CounterEnv, env_id=i, episode_length=episode_length or 3 + i % 3)
        for i in range(n)
    ]


def _random_actions(space, num_envs, steps, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, space.n, num_envs) for _ in range(steps)]


def _compare_with_shmem(venv, env_fns, actions, seed, subset_reset_at=None):
    """Step ``venv`` and a ShmemVecEnv of the same envs side by side; with
    ``subset_reset_at=(t, env_ids)`` both reset ``env_ids`` before step t."""
    with vecenv.ShmemVecEnv(env_fns, num_workers=1) as ref:
        assert venv.seed(seed) == ref.seed(seed)
        assert_tree_equal(venv.reset(), ref.reset())
        assert venv.reset_infos == ref.reset_infos
        for t, acts in enumerate(actions):
            if subset_reset_at is not None and t == subset_reset_at[0]:
                for v in (venv, ref):
                    v.reset_async(subset_reset_at[1])
                assert_tree_equal(venv.reset_wait(), ref.reset_wait())
                assert venv.reset_infos == ref.reset_infos
            got, want = venv.step(acts), ref.step(acts)
            assert_tree_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            np.testing.assert_array_equal(got[2], want[2])
            assert len(got[3]) == len(want[3])
            for g, w in zip(got[3], want[3]):
                assert set(g) == set(w)
                if "terminal_observation" in w:
                    assert_tree_equal(g["terminal_observation"], w["terminal_observation"])
            assert venv.reset_infos == ref.reset_infos  # autoreset infos (sb3 mode)


class FailingEnv(CounterEnv):
    """Raises in step number ``fail_at``."""

    def __init__(self, env_id=0, fail_at=2):
        super().__init__(env_id=env_id, episode_length=100)
        self.fail_at = fail_at

    def step(self, action):
        if self._t + 1 == self.fail_at:
            raise RuntimeError(f"boom in env {self.env_id}")
        return super().step(action)


class ExitingEnv(CounterEnv):
    """Kills its worker process (``os._exit``) in step number ``exit_at``."""

    def __init__(self, env_id=0, exit_at=2):
        super().__init__(env_id=env_id, episode_length=100)
        self.exit_at = exit_at

    def step(self, action):
        if self._t + 1 == self.exit_at:
            os._exit(3)
        return super().step(action)


class SlowEnv(CounterEnv):
    """Each step sleeps ``delay_s`` seconds (to kill an actor mid-step)."""

    def __init__(self, env_id=0, delay_s=0.0):
        super().__init__(env_id=env_id, episode_length=1000)
        self.delay_s = delay_s

    def step(self, action):
        time.sleep(self.delay_s)
        return super().step(action)


def _gone(pids, timeout=15.0):
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return not alive


# ---------------------------------------------------------------- one node
@ray_mark
@pytest.mark.usefixtures("one_node")
class TestOneNode:
    def test_cartpole_matches_plain_loop_and_shmem(self):
        from vecenv.ray import RayVecEnv

        fns = [cartpole] * 4
        actions = _random_actions(gym.spaces.Discrete(2), 4, 40)
        with RayVecEnv(fns, num_actors=2, vec_kwargs={"num_workers": 1}) as venv:
            assert venv.num_envs == 4 and len(venv.actor_info) == 2
            assert [info["envs"] for info in venv.actor_info] == [(0, 2), (2, 4)]
            assert all(info["node_ip"] == "127.0.0.1" for info in venv.actor_info)
            assert _compare_rollout(venv, fns, actions, seed=7) > 0
            _compare_with_shmem(venv, fns, actions[:15], seed=11)

    def test_dict_tuple_obs_api_and_state_guards(self):
        from vecenv.ray import RayVecEnv

        fns = [functools.partial(CounterEnv, env_id=i, render_mode="rgb_array") for i in range(5)]
        venv = RayVecEnv(fns, envs_per_actor=3, placement_strategy=None)
        try:
            assert [info["envs"] for info in venv.actor_info] == [(0, 3), (3, 5)]
            with pytest.raises(vecenv.StateError, match="reset"):
                venv.step_async(np.zeros(5, np.int64))
            assert venv.seed(3) == [3, 4, 5, 6, 7]
            obs = venv.reset()
            np.testing.assert_array_equal(obs["pair"][0], np.arange(5))
            assert venv.reset_infos == [{"reset": True}] * 5
            venv.step_async([0, 1, 2, 0, 1])
            obs, rew, term, trunc, infos = venv.step_wait_gym()
            np.testing.assert_array_equal(obs["count"], np.ones(5, np.int64))
            # reward = action + 0.5 + seed % 7, with env i seeded 3 + i
            np.testing.assert_array_equal(rew, [3.5, 5.5, 7.5, 6.5, 1.5])
            assert not term.any() and not trunc.any() and infos == [{}] * 5
            with pytest.raises(vecenv.StateError, match="step_async"):
                venv.step_wait()
            with pytest.raises(vecenv.InvalidArgumentError, match="outside"):
                venv.step_async([0, 1, 2, 3, 9])
            assert venv.get_attr("env_id") == [0, 1, 2, 3, 4]
            assert venv.get_attr("env_id", indices=[4, 0]) == [4, 0]
            venv.set_attr("episode_length", 9, indices=[1, 3])
            assert venv.get_attr("episode_length") == [5, 9, 5, 9, 5]
            assert venv.env_method("render", indices=[3])[0][0, 0, 0] == 3
            assert venv.env_is_wrapped(gym.Wrapper, indices=0) == [False]
            frames = venv.get_images()
            assert [int(f[0, 0, 0]) for f in frames] == [0, 1, 2, 3, 4]
            assert venv.render().shape == (4 * 2, 6 * 3, 3)
        finally:
            venv.close()
        venv.close()  # idempotent
        with pytest.raises(vecenv.ClosedError):
            venv.reset()

    @pytest.mark.parametrize("facade", ["sb3", "gymnasium"])
    def test_facades_run_on_a_ray_engine(self, facade, monkeypatch):
        """The SB3 and gymnasium drop-ins only use the engine API that RayVecEnv
        shares with ShmemVecEnv: swap the engine and compare with the original."""
        import importlib

        from vecenv.ray import RayVecEnv

        module = importlib.import_module(
            "vecenv.sb3" if facade == "sb3" else "vecenv.gymnasium_vector"
        )
        cls = module.SubprocVecEnv if facade == "sb3" else module.AsyncVectorEnv

        class RayEngine:  # builds a RayVecEnv where the façade builds a ShmemVecEnv
            _check_env_fns = staticmethod(vecenv._options.check_env_fns)

            def __new__(cls, env_fns, autoreset_mode="sb3", **_local_options):
                return RayVecEnv(env_fns, num_actors=2, autoreset_mode=autoreset_mode)

        fns = _counter_fns(4)
        actions = _random_actions(gym.spaces.Discrete(3), 4, 8, seed=3)
        ref = cls(fns)
        monkeypatch.setattr(module, "ShmemVecEnv", RayEngine)
        venv = cls(fns)
        try:
            engine = venv.engine if facade == "sb3" else venv._venv
            assert isinstance(engine, RayVecEnv)
            # No worker layout of the drop-in's own: its repr says so by leaving it out.
            assert venv.layout is None and "layout=" not in repr(venv)
            if facade == "sb3":
                ref.seed(1), venv.seed(1)
                outs = [(venv.reset(), ref.reset())]
                outs += [(venv.step(a), ref.step(a)) for a in actions]
                assert venv.get_attr("env_id") == [0, 1, 2, 3]
                assert venv.env_method("render")[2][0, 0, 0] == 2
            else:
                outs = [(venv.reset(seed=1), ref.reset(seed=1))]
                outs += [(venv.step(a), ref.step(a)) for a in actions]
                assert list(venv.get_attr("env_id")) == [0, 1, 2, 3]
            for got, want in outs:
                for g, w in zip(got, want):
                    if isinstance(w, (np.ndarray, dict, tuple)):
                        assert_tree_equal(g, w)
        finally:
            venv.close()
            ref.close()

    def test_send_recv_returns_whole_actors(self):
        from vecenv.ray import RayVecEnv

        venv = RayVecEnv(_counter_fns(4, 100), num_actors=2, batch_size=2)
        try:
            assert venv.reset() is None
            seen = set()
            for _ in range(6):
                obs, rew, dones, infos, ids = venv.recv()
                assert len(ids) == 2 and ids[1] == ids[0] + 1 and ids[0] in (0, 2)
                np.testing.assert_array_equal(obs["pair"][0], ids)
                seen.add(int(ids[0]))
                assert rew.shape == dones.shape == (2,) and len(infos) == 2
                with pytest.raises(vecenv.InvalidArgumentError, match="whole actors"):
                    venv.send(np.zeros(1, np.int64), ids[:1])
                venv.send(np.ones(2, np.int64), ids)
            assert seen == {0, 2}
            with pytest.raises(vecenv.StateError, match="recv"):
                venv.step_async(np.zeros(4, np.int64))
            assert venv.reset() is None  # drains the steps in flight
            venv.recv()
        finally:
            venv.close()

    def test_bad_arguments_are_refused_before_anything_starts(self):
        from vecenv.ray import RayVecEnv

        fns = [cartpole] * 4
        cases = [
            (dict(num_actors=0), "num_actors"),
            (dict(num_actors=3, envs_per_actor=2), "num_actors"),
            (dict(num_actors=3, batch_size=2), "batch_size"),
            (dict(num_actors=2, batch_size=3), "multiple"),
            (dict(actor_options={"max_restarts": 3}), "max_restarts"),
            (dict(actor_options={"num_cpus": 0}), "no resources"),
            (dict(actor_options=[{}] * 3, num_actors=2), "one per actor"),
            (dict(actor_options={"num_cpuz": 1}), "not valid for Ray"),
            (dict(placement_strategy="EVERYWHERE"), "placement_strategy"),
            (dict(vec_kwargs={"batch_size": 1}), "vec_kwargs"),
            (dict(max_restarts=-2), "max_restarts"),
            (dict(timeout=-1), "timeout"),
            (dict(autoreset_mode="sometimes"), "autoreset_mode"),
            (dict(actor_options={"num_cpus": 2}, num_actors=2), "need 4 CPU"),
            (dict(num_actors=2, placement_strategy="STRICT_SPREAD"), "STRICT_SPREAD"),
        ]
        before = {p.pid for p in _ray_children()}
        for kwargs, match in cases:
            with pytest.raises(vecenv.InvalidArgumentError, match=match):
                RayVecEnv(fns, **kwargs)
        time.sleep(0.5)
        assert not [
            p
            for p in _ray_children()
            if "_EnvActor" in " ".join(p.cmdline()) and p.pid not in before
        ]

    def test_step_timeout_names_the_late_envs(self):
        from vecenv.ray import RayVecEnv

        fns = [
            functools.partial(SlowEnv, env_id=i, delay_s=3.0 if i == 0 else 0.0) for i in range(2)
        ]
        with RayVecEnv(fns, num_actors=2, timeout=0.5) as venv:
            venv.reset()
            t0 = time.monotonic()
            with pytest.raises(vecenv.VecEnvTimeoutError) as info:
                venv.step(np.zeros(2, np.int64))
            assert time.monotonic() - t0 < 2.5
            assert info.value.env_indices == (0,)
            # The step stays pending: waiting again (longer) collects it.
            with pytest.raises(vecenv.StateError, match="step_wait"):
                venv.step_async(np.zeros(2, np.int64))
            venv.timeout = None
            obs, *_ = venv.step_wait()
            np.testing.assert_array_equal(obs["count"], [1, 1])

    def test_garbage_collection_without_close_kills_the_actors(self):
        import gc

        from vecenv.ray import RayVecEnv

        venv = RayVecEnv([cartpole] * 2, num_actors=2)
        pids = [p for info in venv.actor_info for p in (info["pid"], *info["worker_pids"])]
        del venv
        gc.collect()
        assert _gone(pids)

    def test_dropping_the_last_reference_kills_the_actors_without_gc(self):
        """No reference cycle holds a RayVecEnv: reference counting alone runs
        its finalizer, which kills the actors."""
        import gc
        import weakref

        from vecenv.ray import RayVecEnv

        venv = RayVecEnv([cartpole] * 2, num_actors=2)
        venv.reset()
        pids = [p for info in venv.actor_info for p in (info["pid"], *info["worker_pids"])]
        alive = weakref.ref(venv)
        gc.disable()
        try:
            del venv
            assert alive() is None
        finally:
            gc.enable()
        assert _gone(pids)

    def test_env_errors_name_the_global_env(self):
        from vecenv.ray import RayVecEnv

        fns = [
            functools.partial(FailingEnv, env_id=i, fail_at=2 if i == 3 else 99) for i in range(4)
        ]
        with RayVecEnv(fns, num_actors=2) as venv:
            venv.reset()
            venv.step(np.zeros(4, np.int64))
            with pytest.raises(vecenv.WorkerError, match="boom in env 3") as info:
                venv.step(np.zeros(4, np.int64))
            assert info.value.env_index == 3
            assert "RuntimeError" in info.value.exc_type
            assert "boom in env 3" in info.value.worker_traceback
            with pytest.raises(vecenv.StateError, match="reset"):
                venv.step_async(np.zeros(4, np.int64))
            venv.reset()  # envs come back after an env error
            venv.step(np.zeros(4, np.int64))

    def test_worker_death_names_the_global_env_that_crashed(self):
        from vecenv.ray import RayVecEnv

        # Actor 1 hosts envs 2 and 3 in one local worker; env 3 kills it.
        fns = [
            functools.partial(ExitingEnv, env_id=i, exit_at=2 if i == 3 else 99) for i in range(4)
        ]
        with RayVecEnv(fns, num_actors=2, vec_kwargs={"num_workers": 1}) as venv:
            venv.reset()
            venv.step(np.zeros(4, np.int64))
            with pytest.raises(vecenv.WorkerDiedError) as info:
                venv.step(np.zeros(4, np.int64))
            assert info.value.env_index == 3
            assert info.value.env_indices == (2, 3)
            venv.reset()  # the actor's vec env restarts its worker
            venv.step(np.zeros(4, np.int64))

    def test_factory_error_is_reported_and_cleaned_up(self):
        from vecenv.ray import RayVecEnv

        def bad():
            raise ValueError("no such env")

        with pytest.raises(vecenv.WorkerError, match="no such env") as info:
            RayVecEnv([cartpole, cartpole, bad, cartpole], num_actors=2)
        assert info.value.env_index == 2

    def test_killed_actor_raises_worker_died_naming_its_envs(self):
        from vecenv.ray import RayVecEnv

        fns = [functools.partial(SlowEnv, env_id=i, delay_s=0.3) for i in range(4)]
        venv = RayVecEnv(fns, num_actors=2, vec_kwargs={"num_workers": 1})
        try:
            venv.reset()
            venv.step(np.zeros(4, np.int64))
            victim = venv.actor_info[1]
            venv.step_async(np.zeros(4, np.int64))
            os.kill(victim["pid"], signal.SIGKILL)  # mid-step
            with pytest.raises(vecenv.WorkerDiedError) as info:
                venv.step_wait()
            assert info.value.env_indices == (2, 3)
            assert "actor 1" in str(info.value)
            # The dead actor's local workers notice and exit.
            assert _gone(victim["worker_pids"])
            with pytest.raises(vecenv.WorkerDiedError, match=r"\[2, 3\]"):
                venv.reset()
        finally:
            venv.close()
        assert _gone([venv.actor_info[0]["pid"], *venv.actor_info[0]["worker_pids"]])

    def test_restart_policy_resets_the_envs_of_a_restarted_actor(self):
        from vecenv.ray import RayVecEnv

        venv = RayVecEnv(_counter_fns(4, 100), num_actors=2, max_restarts=1)
        try:
            venv.reset()
            for _ in range(3):
                venv.step(np.ones(4, np.int64))
            old_pid = venv.actor_info[0]["pid"]
            os.kill(old_pid, signal.SIGKILL)
            obs, rew, dones, infos = venv.step(np.ones(4, np.int64))
            np.testing.assert_array_equal(obs["count"], [0, 0, 4, 4])
            np.testing.assert_array_equal(dones, [True, True, False, False])
            np.testing.assert_array_equal(rew[:2], [0.0, 0.0])
            assert [bool(i.get("actor_restarted")) for i in infos] == [True, True, False, False]
            assert venv.restarts == [1, 0]
            assert venv.actor_info[0]["pid"] != old_pid and venv.actor_info[0]["restarted"]
            obs, *_ = venv.step(np.ones(4, np.int64))
            np.testing.assert_array_equal(obs["count"], [1, 1, 5, 5])
            # Restarts used up: the next death is final.
            os.kill(venv.actor_info[0]["pid"], signal.SIGKILL)
            with pytest.raises(vecenv.WorkerDiedError) as info:
                venv.step(np.ones(4, np.int64))
            assert info.value.env_indices == (0, 1)
        finally:
            venv.close()


# ---------------------------------------------------------------- two nodes
@ray_mark
class TestTwoNodes:
    def test_actors_on_different_nodes_step_like_shmem(self, two_nodes):
        ray, _, _ = two_nodes
        from vecenv.ray import RayVecEnv

        assert [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]] == ["127.0.0.1"] * 2
        fns = [cartpole] * 6
        actions = _random_actions(gym.spaces.Discrete(2), 6, 30, seed=1)
        with RayVecEnv(fns, placement_strategy="STRICT_SPREAD") as venv:
            # Default: one actor per alive node.
            nodes = {info["node_id"] for info in venv.actor_info}
            assert len(venv.actor_info) == 2 and len(nodes) == 2
            _compare_with_shmem(venv, fns, actions, seed=5)

    def test_counter_per_env_seeds_and_subset_reset_like_shmem(self, two_nodes):
        from vecenv.ray import RayVecEnv

        fns = _counter_fns(5)
        actions = _random_actions(gym.spaces.Discrete(3), 5, 12, seed=2)
        with RayVecEnv(fns, num_actors=2, placement_strategy="STRICT_SPREAD") as venv:
            assert len({info["node_id"] for info in venv.actor_info}) == 2
            _compare_with_shmem(venv, fns, actions, seed=[3, None, 12, 0, 5])
            _compare_with_shmem(venv, fns, actions, seed=4, subset_reset_at=(5, [1, 4]))

    def test_dict_obs_cross_node_partial_batches(self, two_nodes):
        from vecenv.ray import RayVecEnv

        with RayVecEnv(
            _counter_fns(4, 100), num_actors=2, batch_size=2, placement_strategy="STRICT_SPREAD"
        ) as venv:
            assert len({info["node_id"] for info in venv.actor_info}) == 2
            venv.reset()
            steps = {0: 0, 2: 0}
            for _ in range(8):
                obs, _, _, _, ids = venv.recv()
                np.testing.assert_array_equal(obs["pair"][0], ids)
                np.testing.assert_array_equal(obs["count"], [steps[int(ids[0])]] * 2)
                steps[int(ids[0])] += 1
                venv.send(np.zeros(2, np.int64), ids)

    def test_dead_node_raises_worker_died(self, two_nodes):
        # Last in the class: it removes the worker node.
        _, cluster, worker = two_nodes
        from vecenv.ray import RayVecEnv

        venv = RayVecEnv(
            _counter_fns(4, 100), num_actors=2, placement_strategy="STRICT_SPREAD", timeout=120
        )
        try:
            venv.reset()
            venv.step(np.zeros(4, np.int64))
            on_worker = [
                info["actor"] for info in venv.actor_info if info["node_id"] == worker.node_id
            ]
            assert len(on_worker) == 1
            lo, hi = venv.actor_info[on_worker[0]]["envs"]
            cluster.remove_node(worker)
            with pytest.raises(vecenv.WorkerDiedError) as info:
                for _ in range(50):  # until Ray notices
                    venv.step(np.zeros(4, np.int64))
                    time.sleep(0.1)
            assert info.value.env_indices == tuple(range(lo, hi))
        finally:
            venv.close()
