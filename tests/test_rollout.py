"""vecenv.rollout.Rollout: groups in a fixed order give lockstep's trajectories
whatever order the workers finish in; "ready" order; refusals."""

import functools
import random
import time

import gymnasium as gym
import numpy as np
import pytest

import vecenv
from vecenv.envs import CounterEnv
from vecenv.rollout import Rollout


class _Jitter(gym.Wrapper):
    """Each step sleeps 0-2 ms at random (OS entropy): workers finish in an
    order that changes from run to run."""

    def step(self, action):
        time.sleep(random.random() * 2e-3)
        return self.env.step(action)


def _make(e, jitter=True):
    env = CounterEnv(e, episode_length=3 + e % 4)
    return _Jitter(env) if jitter else env


def _policy(rng):
    """A seeded stochastic policy: one draw per row, in row order."""
    return lambda obs: rng.integers(0, 3, size=len(obs["count"]))


def _rows_of(obs, j):
    return (int(obs["count"][j]), int(obs["pair"][0][j]), obs["pair"][1][j].tolist())


def _lockstep(n, steps, seed):
    policy = _policy(np.random.default_rng(seed))
    traj = {i: [] for i in range(n)}
    fns = [functools.partial(_make, e, False) for e in range(n)]
    with vecenv.ShmemVecEnv(fns, num_workers=2) as venv:
        venv.seed(seed)
        obs = venv.reset()
        for i in range(n):
            traj[i].append(("reset", _rows_of(obs, i)))
        for _ in range(steps):
            obs, rew, dones, infos = venv.step(policy(obs))
            for i in range(n):
                term = infos[i].get("terminal_observation")
                traj[i].append((_rows_of(obs, i), float(rew[i]), bool(dones[i]), term is not None))
    return traj


LAYOUTS = {
    "2 workers": {"num_workers": 2},
    "4 workers": {"num_workers": 4},
    # The caller steps envs 0-2, inside group 0's send; the worker the rest.
    "the caller's share": {"num_workers": 1, "inline": True, "inline_envs": 3},
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_fixed_order_gives_lockstep_trajectories_whatever_order_the_workers_finish(copy, layout):
    n, steps, seed = 8, 12, 3
    want = _lockstep(n, steps, seed)
    policy = _policy(np.random.default_rng(seed))
    got = {i: [] for i in range(n)}
    fns = [functools.partial(_make, e) for e in range(n)]
    with vecenv.ShmemVecEnv(fns, **LAYOUTS[layout], batch_size=n // 2, copy=copy) as venv:
        rollout = Rollout(venv)
        obs, infos, env_ids = rollout.reset(seed=seed)
        for j, i in enumerate(env_ids):
            got[i].append(("reset", _rows_of(obs, j)))
        seen = [env_ids.tolist()]
        for _ in range(2 * steps):
            actions = policy(obs)
            obs, rew, dones, infos, env_ids = rollout.step(actions)
            seen.append(env_ids.tolist())
            for j, i in enumerate(env_ids.tolist()):
                if not got[i]:  # group 1's reset rows come as its first batch
                    got[i].append(("reset", _rows_of(obs, j)))
                    continue
                term = infos[j].get("terminal_observation")
                got[i].append((_rows_of(obs, j), float(rew[j]), bool(dones[j]), term is not None))
    # Groups 0, 1, 0, 1, ... whatever the workers' timing.
    assert seen[:4] == [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7]]
    for i in range(n):
        k = min(len(got[i]), len(want[i]))
        assert k >= steps
        assert got[i][:k] == want[i][:k], f"env {i}"


@pytest.mark.timeout(60)
def test_ready_order_returns_every_group_and_the_loop_keeps_going():
    n = 8
    fns = [functools.partial(_make, e) for e in range(n)]
    with vecenv.ShmemVecEnv(fns, num_workers=4, batch_size=4) as venv:
        rollout = Rollout(venv, order="ready")
        obs, _, env_ids = rollout.reset()
        counts = np.zeros(n, int)
        for _ in range(20):
            obs, rew, dones, infos, env_ids = rollout.step(np.ones(4, np.int64))
            assert len(env_ids) == 4 and len(set(env_ids.tolist())) == 4
            counts[env_ids] += 1
        assert counts.sum() == 80 and (counts > 0).all()


def test_refusals_name_what_is_wrong():
    with pytest.raises(vecenv.InvalidArgumentError, match="send/recv"):
        Rollout(object())
    with vecenv.ShmemVecEnv([CounterEnv] * 4, num_workers=0) as venv:
        with pytest.raises(vecenv.InvalidArgumentError, match="batch_size=4 must be below"):
            Rollout(venv)
    with vecenv.ShmemVecEnv([CounterEnv] * 6, num_workers=0, batch_size=4) as venv:
        with pytest.raises(vecenv.InvalidArgumentError, match="divide num_envs=6"):
            Rollout(venv)
    with vecenv.ShmemVecEnv([CounterEnv] * 4, num_workers=0, batch_size=2) as venv:
        with pytest.raises(vecenv.InvalidArgumentError, match="order must be"):
            Rollout(venv, order="fifo")
        with pytest.raises(vecenv.StateError, match=r"before Rollout\.reset"):
            Rollout(venv).step(np.zeros(2, np.int64))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("check_actions", [False, True])
@pytest.mark.parametrize(
    "layout",
    [{"num_workers": 2}, {"num_workers": 0}, {"num_workers": 1, "inline": True}],
    ids=["2 workers", "in process", "the caller's share"],
)
def test_a_refused_step_leaves_the_rollout_as_it_was(layout, check_actions):
    n, k = 8, 4
    fns = [functools.partial(_make, e, False) for e in range(n)]
    made = [
        vecenv.ShmemVecEnv(fns, **layout, batch_size=k, check_actions=check_actions)
        for _ in range(2)
    ]
    try:
        plain, refused = (Rollout(venv) for venv in made)
        want, got = plain.reset(seed=1), refused.reset(seed=1)
        for t in range(6):
            if t in (0, 3):
                with pytest.raises(vecenv.InvalidArgumentError):
                    refused.step(np.ones(k - 1, np.int64))  # one action short
            actions = np.full(k, t % 3, np.int64)
            want, got = plain.step(actions), refused.step(actions)
            np.testing.assert_array_equal(got[4], want[4])  # the same group
            np.testing.assert_array_equal(got[0]["count"], want[0]["count"])
            np.testing.assert_array_equal(got[1], want[1])
    finally:
        for venv in made:
            venv.close()
