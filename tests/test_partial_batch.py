"""Partial batches (send/recv), worker layout and CPU placement."""

import collections
import functools
import os
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium import spaces

import vecenv
from vecenv._pool import plan_workers

pytestmark = pytest.mark.timeout(120)


class OrderEnv(gym.Env):
    """Observation [env_id, step, last action]; each step takes a random time
    (seeded per env), mostly short with a heavy tail."""

    observation_space = spaces.Box(-1e9, 1e9, (3,), np.float64)
    action_space = spaces.Discrete(1_000_000)

    def __init__(self, env_id, fast_s=0.0, slow_s=0.0, slow_prob=0.0):
        self.env_id = env_id
        self.fast_s, self.slow_s, self.slow_prob = fast_s, slow_s, slow_prob
        self.rng = np.random.default_rng(env_id)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([self.env_id, 0, -1], np.float64), {}

    def step(self, action):
        delay = self.slow_s if self.rng.random() < self.slow_prob else self.fast_s
        if delay:
            time.sleep(delay)
        self.t += 1
        return (
            np.array([self.env_id, self.t, action], np.float64),
            float(self.env_id),
            False,
            False,
            {},
        )


def _order_fns(n, **kw):
    return [functools.partial(OrderEnv, i, **kw) for i in range(n)]


@pytest.mark.parametrize("envs_per_worker", [1, 2])
def test_random_step_times_keep_each_env_in_order(envs_per_worker):
    n, k = 6, 3
    fns = _order_fns(n, fast_s=0.0002, slow_s=0.004, slow_prob=0.1)
    with vecenv.ShmemVecEnv(fns, batch_size=k, envs_per_worker=envs_per_worker) as venv:
        assert venv.reset() is None
        steps = np.zeros(n, np.int64)
        seen = collections.Counter()
        in_flight = set(range(n))
        obs, rews, dones, infos, ids = venv.recv()
        for _ in range(300):
            assert ids.dtype == np.int64 and ids.shape == (k,) and len(set(ids.tolist())) == k
            assert set(ids.tolist()) <= in_flight
            in_flight -= set(ids.tolist())
            np.testing.assert_array_equal(obs[:, 0], ids)  # rows belong to env_ids
            np.testing.assert_array_equal(obs[:, 1], steps[ids])  # no step lost or repeated
            np.testing.assert_array_equal(rews, ids.astype(np.float64) * (steps[ids] > 0))
            assert len(infos) == k and not dones.any()
            for e in ids.tolist():
                seen[e] += 1
            # The action sent to env e at its step t is 1000 * e + t: echoed back next time.
            actions = 1000 * ids + steps[ids]
            venv.send(actions, ids)
            in_flight |= set(ids.tolist())
            obs, rews, dones, infos, new_ids = venv.recv()
            for j, e in enumerate(new_ids.tolist()):
                if obs[j, 1] > 0:
                    assert obs[j, 2] == 1000 * e + obs[j, 1] - 1, "actions reached env out of order"
            steps[ids] += 1
            ids = new_ids
        assert min(seen.values()) > 0, f"starved envs: {seen}"


def test_no_starvation_over_thousands_of_recv():
    n, k = 8, 2
    # Envs 0-3 are fast, 4-7 slow: a FIFO batch still serves everyone.
    fns = [functools.partial(OrderEnv, i, fast_s=0.0 if i < 4 else 0.001) for i in range(n)]
    with vecenv.ShmemVecEnv(fns, batch_size=k, num_workers=n) as venv:
        venv.reset()
        counts = np.zeros(n, np.int64)
        for _ in range(2000):
            _, _, _, _, ids = venv.recv()
            counts[ids] += 1
            venv.send(np.zeros(k, np.int64), ids)
    # A slow env finishes a step every millisecond or so: with FIFO batches it
    # is collected soon after. Selection by index would never reach envs 4-7.
    assert counts.min() >= 10, f"per-env recv counts {counts.tolist()}"


def test_same_trajectories_as_lockstep_with_equal_step_times():
    n, k, horizon = 4, 2, 60

    def policy(env_id, t):
        return (env_id * 7 + t * 3) % 2

    def per_env(records):
        return {e: np.array(v) for e, v in records.items()}

    fns = [lambda: gym.make("CartPole-v1")] * n
    lock = collections.defaultdict(list)
    with vecenv.ShmemVecEnv(fns) as venv:
        venv.seed(5)
        obs = venv.reset()
        for e in range(n):
            lock[e].append(obs[e])
        for t in range(horizon):
            obs, rews, dones, _ = venv.step(np.array([policy(e, t) for e in range(n)]))
            for e in range(n):
                lock[e].append(np.concatenate([obs[e], [rews[e], dones[e]]]))
    part = collections.defaultdict(list)
    with vecenv.ShmemVecEnv(fns, batch_size=k) as venv:
        venv.seed(5)
        venv.reset()
        t_of = np.zeros(n, np.int64)
        first = set()
        while min(t_of) < horizon:
            obs, rews, dones, _, ids = venv.recv()
            send_ids = []
            for j, e in enumerate(ids.tolist()):
                if e not in first:
                    first.add(e)
                    part[e].append(obs[j])
                else:
                    part[e].append(np.concatenate([obs[j], [rews[j], dones[j]]]))
                    t_of[e] += 1
                send_ids.append(e)
            venv.send(np.array([policy(e, t_of[e]) for e in send_ids]), np.array(send_ids))
        # Drain so close() finds nothing in flight (it would cope anyway).
    for e in range(n):
        want = lock[e]
        got = part[e][: len(want)]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_recv_send_misuse_is_refused():
    with vecenv.ShmemVecEnv(_order_fns(4), batch_size=2) as venv:
        with pytest.raises(vecenv.StateError, match="reset"):
            venv.recv()
        venv.reset()
        _, _, _, _, ids = venv.recv()
        _, _, _, _, ids2 = venv.recv()
        with pytest.raises(vecenv.StateError, match="only 0 are"):
            venv.recv()  # nothing in flight: would block forever
        with pytest.raises(vecenv.InvalidArgumentError, match="duplicates"):
            venv.send(np.zeros(2, np.int64), np.array([ids[0], ids[0]]))
        with pytest.raises(vecenv.InvalidArgumentError, match=r"in \[0, 4\)"):
            venv.send(np.zeros(1, np.int64), np.array([4]))
        with pytest.raises(vecenv.InvalidArgumentError, match="got 1 actions, expected 2"):
            venv.send(np.zeros(1, np.int64), ids)
        with pytest.raises(vecenv.StateError, match="batch_size"):
            venv.step_async(np.zeros(4, np.int64))
        venv.send(np.zeros(2, np.int64), ids)
        with pytest.raises(vecenv.InvalidArgumentError, match="still in flight"):
            venv.send(np.zeros(2, np.int64), ids)
        venv.recv()
        assert venv.reset() is None  # reset drains what is in flight, then restarts all


def test_lockstep_api_with_batch_size_equal_num_envs_and_send_recv_together():
    with vecenv.ShmemVecEnv(_order_fns(3), batch_size=3) as venv:
        venv.reset()
        obs, *_ = venv.step(np.zeros(3, np.int64))
        np.testing.assert_array_equal(obs[:, 1], [1, 1, 1])
        venv.send(np.ones(3, np.int64))
        obs, _, _, _, ids = venv.recv()
        assert sorted(ids.tolist()) == [0, 1, 2]
        np.testing.assert_array_equal(obs[np.argsort(ids), 1], [2, 2, 2])


def test_copy_false_recv_reuses_its_buffer():
    # One worker per env: batches are rarely consecutive envs; each recv's rows
    # are either the reused gather buffer or views of the consecutive envs.
    with vecenv.ShmemVecEnv(_order_fns(4), batch_size=2, num_workers=4, copy=False) as venv:
        venv.reset()
        for _ in range(20):
            obs, *_, ids = venv.recv()
            np.testing.assert_array_equal(obs[:, 0], ids)
            if obs is not venv._collector.gather_out[0]:
                assert np.shares_memory(obs, venv._collector.obs_bufs[0]) and ids[1] == ids[0] + 1
            venv.send(np.zeros(2, np.int64), ids)


def test_copy_false_consecutive_batches_are_zero_copy_views():
    # Two workers of two envs each publish their pair together: every batch
    # is two consecutive envs, handed out as views of their shared rows.
    with vecenv.ShmemVecEnv(_order_fns(4), batch_size=2, num_workers=2, copy=False) as venv:
        venv.reset()
        for _ in range(10):
            obs, *_, ids = venv.recv()
            assert ids.tolist() in ([0, 1], [2, 3])
            assert np.shares_memory(obs, venv._collector.obs_bufs[0])
            np.testing.assert_array_equal(obs[:, 0], ids)
            venv.send(np.zeros(2, np.int64), ids)


# ------------------------------------------------------------------ layout


@pytest.mark.parametrize(
    ("num_envs", "num_workers", "envs_per_worker", "expected"),
    [
        (5, None, 2, [(0, 2), (2, 4), (4, 5)]),
        (5, 2, None, [(0, 3), (3, 5)]),
        (3, 8, None, [(0, 1), (1, 2), (2, 3)]),
        (8, 4, 2, [(0, 2), (2, 4), (4, 6), (6, 8)]),
    ],
)
def test_plan_workers(num_envs, num_workers, envs_per_worker, expected):
    assert plan_workers(num_envs, num_workers, envs_per_worker) == expected


def test_plan_workers_default_fits_the_machine_and_refuses_bad_values():
    cores = len(os.sched_getaffinity(0))
    ranges = plan_workers(64, None, None)
    assert len(ranges) == min(64, cores)
    assert ranges[0][0] == 0 and ranges[-1][1] == 64
    with pytest.raises(vecenv.InvalidArgumentError, match="num_workers must be 3"):
        plan_workers(6, 4, 2)
    with pytest.raises(vecenv.InvalidArgumentError, match="envs_per_worker"):
        plan_workers(6, None, 0)
    with pytest.raises(vecenv.InvalidArgumentError, match="num_workers"):
        plan_workers(6, 1.5, None)


def test_cpu_affinity_pins_workers():
    cores = sorted(os.sched_getaffinity(0))
    with vecenv.ShmemVecEnv(_order_fns(4), num_workers=2, cpu_affinity=True) as venv:
        pids = [p.pid for p in venv._resources.procs]
        assert [os.sched_getaffinity(pid) for pid in pids] == [{cores[0]}, {cores[1 % len(cores)]}]
        venv.reset()
    with vecenv.ShmemVecEnv(_order_fns(2), num_workers=2, cpu_affinity=[cores[-1]]) as venv:
        pids = [p.pid for p in venv._resources.procs]
        assert all(psutil.Process(pid).cpu_affinity() == [cores[-1]] for pid in pids)
    with pytest.raises(vecenv.InvalidArgumentError, match="outside the usable cores"):
        vecenv.ShmemVecEnv(_order_fns(2), cpu_affinity=[10_000])
