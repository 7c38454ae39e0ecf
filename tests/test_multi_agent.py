"""MultiAgentVecEnv: PettingZoo envs as agent rows (vecenv/multi_agent.py,
vecenv/_pz_adapter.py, vecenv/sb3_multi_agent.py)."""

import functools
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import SAFE_PYTHON

pettingzoo = pytest.importorskip("pettingzoo")

from gymnasium import spaces  # noqa: E402
from pettingzoo import ParallelEnv  # noqa: E402
from pettingzoo.test import parallel_api_test  # noqa: E402

import vecenv  # noqa: E402
from vecenv import MultiAgentVecEnv  # noqa: E402
from vecenv.errors import (  # noqa: E402
    InvalidArgumentError,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WorkerDiedError,
    WorkerError,
)
from vecenv.pettingzoo_envs import MatchEnv, SpawnDieEnv  # noqa: E402


# ---------------------------------------------------------------- test envs
class ScriptedEnv(ParallelEnv):
    """Three agents; agent_1 terminates at step ``die_at``; all truncate at
    ``length``. Observation [k, t]; reward k + t. Faults on request."""

    metadata = {"name": "scripted_v0"}

    def __init__(self, die_at=2, length=5, raise_at=None, kill_at=None, sleep_at=None):
        self.possible_agents = ["agent_0", "agent_1", "agent_2"]
        self.agents = []
        self.die_at, self.length = die_at, length
        self.raise_at, self.kill_at, self.sleep_at = raise_at, kill_at, sleep_at
        self.t = 0
        self._spaces = {a: self._agent_spaces(a) for a in self.possible_agents}

    def _agent_spaces(self, agent):
        return spaces.Box(-np.inf, np.inf, (2,), np.float32), spaces.Discrete(3)

    def observation_space(self, agent):
        return self._spaces[agent][0]

    def action_space(self, agent):
        return self._spaces[agent][1]

    def _obs(self, a):
        return np.array([self.possible_agents.index(a), self.t], np.float32)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        if self.t == self.raise_at:
            raise RuntimeError("scripted failure")
        if self.t == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.t == self.sleep_at:
            time.sleep(30)
        obs = {a: self._obs(a) for a in self.agents}
        rew = {a: float(self.possible_agents.index(a) + self.t) for a in self.agents}
        term = {a: a == "agent_1" and self.t == self.die_at for a in self.agents}
        trunc = {a: self.t >= self.length for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, infos


class ReusedInfoEnv(ScriptedEnv):
    """Keeps one info dict per agent and changes it in place: ``t`` is the
    step count, 0 after a reset (the case where the final info is taken after
    the reset)."""

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed, options)
        self.infos = getattr(self, "infos", {a: {} for a in self.possible_agents})
        for info in self.infos.values():
            info["t"] = 0
        return obs, {a: self.infos[a] for a in self.agents}

    def step(self, actions):
        agents = list(self.agents)
        obs, rew, term, trunc, _ = super().step(actions)
        for a in agents:
            self.infos[a]["t"] = self.t
        return obs, rew, term, trunc, {a: self.infos[a] for a in agents}


class HeteroEnv(ScriptedEnv):
    """agent_2 sees a shorter observation and has fewer actions."""

    def _agent_spaces(self, agent):
        small = agent == "agent_2"
        obs_space = spaces.Box(-np.inf, np.inf, (1 if small else 2,), np.float32)
        return obs_space, spaces.Discrete(2 if small else 3)

    def _obs(self, a):
        full = super()._obs(a)
        return full[:1] if a == "agent_2" else full


def spawn_die(tag=0.0):
    return SpawnDieEnv(num_agents=4, episode_length=15, tag=tag)


def simple_spread():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3, max_cycles=8)


@pytest.fixture
def make_venv():
    made = []

    def make(*args, **kwargs):
        venv = MultiAgentVecEnv(*args, **kwargs)
        made.append(venv)
        return venv

    yield make
    for venv in made:
        venv.close()


# ---------------------------------------------------------------- a plain loop
class Reference:
    """The documented semantics, written as a plain loop over PettingZoo envs."""

    def __init__(self, fns, black_death=False, reset_when="all"):
        self.envs = [fn() for fn in fns]
        self.agents = list(self.envs[0].possible_agents)
        self.black_death, self.reset_when = black_death, reset_when
        self.dead = [{} for _ in self.envs]
        shape = self.envs[0].observation_space(self.agents[0]).shape
        self.shape = shape

    def _rows(self, i, obs_d):
        env = self.envs[i]
        obs = np.zeros((len(self.agents), *self.shape), np.float32)
        mask = np.zeros(len(self.agents), bool)
        for k, a in enumerate(self.agents):
            if a in env.agents:
                mask[k] = True
                obs[k] = obs_d[a]
        return obs, mask

    def reset(self, seed):
        out = [self._rows(i, e.reset(seed=seed + i)[0]) for i, e in enumerate(self.envs)]
        self.dead = [{} for _ in self.envs]
        return np.concatenate([o for o, _ in out]), np.concatenate([m for _, m in out])

    def step(self, actions):
        n_a = len(self.agents)
        all_obs, all_mask, all_rew, all_term, all_trunc, all_final = [], [], [], [], [], []
        for i, env in enumerate(self.envs):
            acts = actions[i * n_a : (i + 1) * n_a]
            obs_d, rew_d, term_d, trunc_d, _ = env.step(
                {a: int(acts[self.agents.index(a)]) for a in env.agents}
            )
            rew = np.array([rew_d.get(a, 0.0) for a in self.agents], np.float64)
            term = np.array([bool(term_d.get(a, False)) for a in self.agents])
            trunc = np.array([bool(trunc_d.get(a, False)) for a in self.agents])
            final = np.zeros((n_a, *self.shape), np.float32)
            ended = term | trunc
            alive_after = [a for a in env.agents if not (term_d.get(a) or trunc_d.get(a))]
            done = not alive_after or (self.reset_when == "any" and ended.any())
            if done:
                for a in alive_after:
                    trunc[self.agents.index(a)] = True
                ended = term | trunc
                for k, a in enumerate(self.agents):
                    if ended[k]:
                        final[k] = obs_d[a]
                if self.black_death:
                    for k in range(n_a):
                        if not ended[k]:
                            term[k], trunc[k] = self.dead[i].get(k, (True, False))
                obs_d, _ = env.reset()
                self.dead[i] = {}
            else:
                for k, a in enumerate(self.agents):
                    if not ended[k]:
                        continue
                    if self.black_death:
                        self.dead[i][k] = (bool(term[k]), bool(trunc[k]))
                        term[k] = trunc[k] = False
                    else:
                        final[k] = obs_d[a]
            obs, mask = self._rows(i, obs_d)
            for arr, v in zip(
                (all_obs, all_mask, all_rew, all_term, all_trunc, all_final),
                (obs, mask, rew, term, trunc, final),
            ):
                arr.append(v)
        return tuple(
            np.concatenate(x) for x in (all_obs, all_mask, all_rew, all_term, all_trunc, all_final)
        )


# ---------------------------------------------------------------- tests
def test_import_vecenv_does_not_import_pettingzoo():
    code = "import sys, vecenv; assert 'pettingzoo' not in sys.modules, 'imported'"
    subprocess.run([*SAFE_PYTHON, "-c", code], check=True, timeout=60)
    assert vecenv.MultiAgentVecEnv is MultiAgentVecEnv


@pytest.mark.parametrize(
    "make",
    [spawn_die, lambda: MatchEnv(num_agents=3), ScriptedEnv],
    ids=["spawn", "match", "script"],
)
def test_parallel_api_test_on_the_test_envs(make):
    parallel_api_test(make(), num_cycles=100)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "black_death,reset_when",
    [(False, "all"), (True, "all"), (False, "any")],
)
def test_matches_a_plain_loop_with_agents_that_die_and_spawn(make_venv, black_death, reset_when):
    fns = [functools.partial(spawn_die, tag=i) for i in range(5)]
    venv = make_venv(fns, num_workers=2, black_death=black_death, reset_when=reset_when)
    ref = Reference(fns, black_death=black_death, reset_when=reset_when)
    obs, _ = venv.reset(seed=7)
    r_obs, r_mask = ref.reset(7)
    np.testing.assert_array_equal(obs, r_obs)
    np.testing.assert_array_equal(venv.mask, r_mask)
    rng = np.random.default_rng(0)
    ended_rows = 0
    for t in range(60):
        actions = rng.integers(0, 5, venv.num_envs)
        obs, rew, term, trunc, infos = venv.step(actions)
        r_obs, r_mask, r_rew, r_term, r_trunc, r_final = ref.step(actions)
        np.testing.assert_array_equal(obs, r_obs, err_msg=f"step {t}")
        np.testing.assert_array_equal(venv.mask, r_mask, err_msg=f"step {t}")
        np.testing.assert_allclose(rew, r_rew, err_msg=f"step {t}")
        np.testing.assert_array_equal(term, r_term, err_msg=f"step {t}")
        np.testing.assert_array_equal(trunc, r_trunc, err_msg=f"step {t}")
        ended = term | trunc
        if ended.any():
            ended_rows += int(ended.sum())
            np.testing.assert_array_equal(infos["_final_obs"], ended)
            np.testing.assert_array_equal(infos["final_obs"], r_final, err_msg=f"step {t}")
        else:
            assert "final_obs" not in infos
        assert not (rew[~(r_mask | ended)] != 0).any() or black_death
    assert ended_rows > 5


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [1, 0])
def test_final_info_is_the_terminal_steps_when_the_env_reuses_its_infos(make_venv, num_workers):
    # agent_1 ends at t=2 (its env goes on), the others at t=4 (the env resets).
    fn = functools.partial(ReusedInfoEnv, die_at=2, length=4)
    venv = make_venv([fn] * 2, num_workers=num_workers)
    venv.reset(seed=0)
    finals = {}
    for t in range(1, 9):
        _, _, term, trunc, infos = venv.step(np.zeros(venv.num_envs, np.int64))
        if (term | trunc).any():
            final = infos["final_info"]
            finals[t] = final["t"][final["_t"]].tolist()
            np.testing.assert_array_equal(final["_t"], term | trunc)
    assert finals == {2: [2, 2], 4: [4, 4, 4, 4], 6: [2, 2], 8: [4, 4, 4, 4]}


@pytest.mark.timeout(60)
def test_matches_a_plain_loop_on_simple_spread(make_venv):
    pytest.importorskip("mpe2")
    fns = [simple_spread] * 4
    venv = make_venv(fns, num_workers=2)
    ref = Reference(fns)
    obs, _ = venv.reset(seed=3)
    np.testing.assert_array_equal(obs, ref.reset(3)[0])
    rng = np.random.default_rng(1)
    for t in range(20):  # max_cycles=8: two resets
        actions = rng.integers(0, 5, venv.num_envs)
        obs, rew, term, trunc, infos = venv.step(actions)
        r_obs, r_mask, r_rew, r_term, r_trunc, r_final = ref.step(actions)
        np.testing.assert_array_equal(obs, r_obs, err_msg=f"step {t}")
        np.testing.assert_array_equal(venv.mask, r_mask)
        np.testing.assert_allclose(rew, r_rew)
        np.testing.assert_array_equal(term, r_term)
        np.testing.assert_array_equal(trunc, r_trunc)
        if (term | trunc).any():
            np.testing.assert_array_equal(infos["final_obs"], r_final)
    assert venv.num_envs == 12 and venv.max_agents == 3


@pytest.mark.timeout(60)
def test_aec_envs_are_converted(make_venv):
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    venv = make_venv([lambda: simple_spread_v3.env(N=2, max_cycles=5)] * 2, num_workers=1)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (4, 12) and venv.mask.all()
    for _ in range(5):
        obs, rew, term, trunc, _ = venv.step(np.zeros(4, np.int64))
    assert trunc.all()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size", [None, 2])
def test_actions_reach_the_right_env_and_agent(make_venv, batch_size):
    # Per-player actions must reach their own env and agent (a multi-agent
    # pool can route them to the wrong envs: EnvPool did). Each env
    # carries its index as a tag; each agent echoes its last action.
    fns = [functools.partial(spawn_die, tag=i) for i in range(6)]
    venv = make_venv(fns, num_workers=3, batch_size=batch_size)
    a = venv.max_agents
    rng = np.random.default_rng(2)
    if batch_size is None:
        obs, _ = venv.reset(seed=0)
        for _ in range(30):
            actions = rng.integers(0, 5, venv.num_envs)
            obs, *_ = venv.step(actions)
            alive = venv.mask
            np.testing.assert_array_equal(obs[alive, 0], venv.row_env_ids[alive])
            np.testing.assert_array_equal(obs[alive, 1], venv.row_agent_ids[alive])
            acted = alive & (obs[:, 2] > 0)  # not freshly reset or spawned
            spawned = obs[:, 3] == -1
            np.testing.assert_array_equal(obs[acted & ~spawned, 3], actions[acted & ~spawned])
        return
    venv.async_reset(seed=0)
    seen = set()
    last = {}  # env -> the actions sent to its rows
    for _ in range(30):
        obs, rew, term, trunc, infos, env_ids = venv.recv()
        assert len(env_ids) == 2 and obs.shape == (2 * a, 5)
        seen.update(env_ids.tolist())
        alive = venv.mask
        np.testing.assert_array_equal(obs[alive, 0], np.repeat(env_ids, a)[alive])
        np.testing.assert_array_equal(obs[alive, 1], np.tile(np.arange(a), 2)[alive])
        actions = (np.repeat(env_ids, a) + np.tile(np.arange(a), 2)) % 5
        for j, i in enumerate(env_ids):
            rows = slice(j * a, (j + 1) * a)
            if int(i) in last:
                ok = alive[rows] & (obs[rows, 2] > 0) & (obs[rows, 3] != -1)
                np.testing.assert_array_equal(obs[rows, 3][ok], last[int(i)][ok])
            last[int(i)] = actions[rows]
        venv.send(actions, env_ids)
    assert seen == set(range(6))


@pytest.mark.timeout(60)
def test_agent_death_without_black_death(make_venv):
    venv = make_venv([ScriptedEnv] * 2, num_workers=1)
    obs, _ = venv.reset(seed=0)
    assert venv.mask.all()
    steps = [venv.step(np.zeros(6, np.int64)) for _ in range(2)]
    obs, rew, term, trunc, infos = steps[1]  # t=2: agent_1 dies
    np.testing.assert_array_equal(term, [0, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(venv.mask, [1, 0, 1, 1, 0, 1])
    np.testing.assert_array_equal(obs[1], [0, 0])  # absent: zero observation
    np.testing.assert_array_equal(infos["final_obs"][1], [1, 2])
    np.testing.assert_array_equal(rew, [2, 3, 4, 2, 3, 4])
    obs, rew, term, trunc, _ = venv.step(np.zeros(6, np.int64))  # t=3
    assert rew[1] == 0 and not term[1] and not trunc[1] and not venv.mask[1]
    venv.step(np.zeros(6, np.int64))
    obs, rew, term, trunc, infos = venv.step(np.zeros(6, np.int64))  # t=5: env ends, resets
    np.testing.assert_array_equal(trunc, [1, 0, 1, 1, 0, 1])
    assert not term.any()
    assert venv.mask.all()  # the next episode's agents
    np.testing.assert_array_equal(obs[:3], [[0, 0], [1, 0], [2, 0]])
    np.testing.assert_array_equal(infos["final_obs"][[0, 2]], [[0, 5], [2, 5]])


@pytest.mark.timeout(60)
def test_agent_death_with_black_death(make_venv):
    venv = make_venv([ScriptedEnv] * 2, num_workers=1, black_death=True)
    venv.reset(seed=0)
    venv.step(np.zeros(6, np.int64))
    obs, rew, term, trunc, infos = venv.step(np.zeros(6, np.int64))  # agent_1 dies
    assert not (term | trunc).any() and "final_obs" not in infos
    np.testing.assert_array_equal(obs[1], [0, 0])
    assert not venv.mask[1]
    for _ in range(2):
        obs, rew, term, trunc, _ = venv.step(np.zeros(6, np.int64))
        assert rew[1] == 0 and not (term | trunc).any()
    obs, rew, term, trunc, infos = venv.step(np.zeros(6, np.int64))  # env ends
    np.testing.assert_array_equal(term, [0, 1, 0, 0, 1, 0])  # the flags agent_1 died with
    np.testing.assert_array_equal(trunc, [1, 0, 1, 1, 0, 1])
    np.testing.assert_array_equal(infos["final_obs"][1], [0, 0])  # its black-death rows


@pytest.mark.timeout(60)
def test_agents_with_different_spaces_are_refused_unless_padded(make_venv):
    with pytest.raises(SpaceError, match=r"different observation spaces.*pad_spaces=True"):
        MultiAgentVecEnv([HeteroEnv], num_workers=1)
    venv = make_venv([HeteroEnv] * 2, num_workers=1, pad_spaces=True)
    assert venv.single_observation_space.shape == (2,)
    assert venv.single_action_space == spaces.Discrete(3)
    obs, _ = venv.reset(seed=0)
    np.testing.assert_array_equal(obs[:3], [[0, 0], [1, 0], [2, 0]])
    obs, *_ = venv.step(np.full(6, 2))  # agent_2's action 2 is past its Discrete(2)
    np.testing.assert_array_equal(obs[2], [2, 0])  # padded with zeros


@pytest.mark.timeout(60)
def test_envs_with_different_agents_are_refused():
    fns = [
        functools.partial(SpawnDieEnv, num_agents=3),
        functools.partial(SpawnDieEnv, num_agents=4),
    ]
    with pytest.raises(SpaceError, match="share their spaces"):
        MultiAgentVecEnv(fns, num_workers=2)
    fns = [MatchEnv, functools.partial(SpawnDieEnv, num_agents=2)]
    with pytest.raises(SpaceError):
        MultiAgentVecEnv(fns, num_workers=1)


@pytest.mark.timeout(60)
def test_an_env_error_names_the_env_and_reset_recovers(make_venv):
    fns = [ScriptedEnv, ScriptedEnv, functools.partial(ScriptedEnv, raise_at=2)]
    venv = make_venv(fns, num_workers=2)
    venv.reset(seed=0)
    venv.step(np.zeros(9, np.int64))
    with pytest.raises(WorkerError, match=r"env 2 raised builtins\.RuntimeError") as info:
        venv.step(np.zeros(9, np.int64))
    assert info.value.env_index == 2
    with pytest.raises(StateError, match="reset"):
        venv.step(np.zeros(9, np.int64))
    obs, _ = venv.reset(seed=0)
    assert venv.mask.all() and obs.shape == (9, 2)
    venv.step(np.zeros(9, np.int64))


@pytest.mark.timeout(60)
def test_a_killed_worker_raises_and_reset_recovers(make_venv):
    fns = [ScriptedEnv, functools.partial(ScriptedEnv, kill_at=2, length=50)]
    venv = make_venv(fns, num_workers=2)
    venv.reset(seed=0)
    venv.step(np.zeros(6, np.int64))
    with pytest.raises(WorkerDiedError, match="SIGKILL"):
        venv.step(np.zeros(6, np.int64))
    obs, _ = venv.reset(seed=0)  # a new worker with a new env
    np.testing.assert_array_equal(obs[3:], [[0, 0], [1, 0], [2, 0]])
    obs, *_ = venv.step(np.zeros(6, np.int64))
    np.testing.assert_array_equal(obs[3:, 1], [1, 1, 1])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("copy", [True, False])
def test_restart_on_worker_death_reports_alive_rows_truncated(make_venv, copy):
    fns = [ScriptedEnv, functools.partial(ScriptedEnv, kill_at=3, length=50)]
    venv = make_venv(fns, num_workers=2, on_worker_death="restart", copy=copy)
    venv.reset(seed=0)
    venv.step(np.zeros(6, np.int64))
    venv.step(np.zeros(6, np.int64))  # agent_1 of env 1 died at t=2
    obs, rew, term, trunc, infos = venv.step(np.zeros(6, np.int64))  # env 1's worker dies
    np.testing.assert_array_equal(trunc, [0, 0, 0, 1, 0, 1])
    assert not term.any()
    np.testing.assert_array_equal(infos["_worker_restarted"], [0, 0, 0, 1, 0, 1])
    np.testing.assert_array_equal(obs[3:], [[0, 0], [1, 0], [2, 0]])  # reset by the restart
    assert venv.mask[3:].all()


def test_calls_after_close_raise_closed_error():
    venv = MultiAgentVecEnv([ScriptedEnv], num_workers=1)
    venv.close()
    venv.close()  # twice is fine
    with pytest.raises(vecenv.ClosedError):
        venv.step(np.zeros(3, np.int64))


@pytest.mark.timeout(60)
def test_timeout_kills_a_stuck_env(make_venv):
    fns = [ScriptedEnv, functools.partial(ScriptedEnv, sleep_at=1)]
    venv = make_venv(fns, num_workers=2, timeout=1.0)
    venv.reset(seed=0)
    with pytest.raises(VecEnvTimeoutError):
        venv.step(np.zeros(6, np.int64))


@pytest.mark.timeout(60)
def test_copy_false_hands_out_views_of_shared_memory(make_venv):
    venv = make_venv([ScriptedEnv] * 2, num_workers=1, copy=False)
    obs0, _ = venv.reset(seed=0)
    before = obs0.copy()
    obs1, rew, term, trunc, _ = venv.step(np.zeros(6, np.int64))
    assert np.shares_memory(obs0, obs1)  # the same shared rows, overwritten
    assert not np.array_equal(before, obs1) and np.array_equal(obs0, obs1)
    assert not rew.flags.owndata and not venv.mask.flags.owndata


@pytest.mark.timeout(60)
def test_bad_actions_are_refused_before_anything_is_sent(make_venv):
    venv = make_venv([ScriptedEnv] * 2, num_workers=1)
    venv.reset(seed=0)
    with pytest.raises(InvalidArgumentError, match=r"expected \(6, \.\.\.\)"):
        venv.step(np.zeros(3, np.int64))
    with pytest.raises(
        InvalidArgumentError, match=r"actions\[0\]=7 is outside.*env 0, agent 'agent_0'"
    ):
        venv.step(np.full(6, 7))
    with pytest.raises(InvalidArgumentError, match="not integers"):
        venv.step(np.full(6, 0.5))
    obs, *_ = venv.step(np.ones(6, np.float32))  # integral floats are fine
    obs, *_ = venv.step(np.zeros(6, np.int64))  # t=2: only the valid steps ran
    np.testing.assert_array_equal(obs[venv.mask, 1], [2] * 4)


def test_bad_arguments_are_refused_before_any_process_starts():
    with pytest.raises(InvalidArgumentError, match="reset_when"):
        MultiAgentVecEnv([ScriptedEnv], reset_when="some")
    with pytest.raises(InvalidArgumentError, match="backend"):
        MultiAgentVecEnv([ScriptedEnv], backend="mpi")
    with pytest.raises(InvalidArgumentError, match="autoreset_mode"):
        MultiAgentVecEnv([ScriptedEnv], autoreset_mode="sb3")
    with pytest.raises(InvalidArgumentError, match="env_fns"):
        MultiAgentVecEnv(ScriptedEnv)


@pytest.mark.timeout(60)
def test_record_episode_statistics_reads_the_infos(make_venv):
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    venv = RecordEpisodeStatistics(
        make_venv([lambda: MatchEnv(num_agents=2, episode_length=4)] * 3, num_workers=1)
    )
    venv.reset(seed=0)
    total = np.zeros(6)
    for _ in range(4):
        obs, rew, term, trunc, infos = venv.step(np.ones(6, np.int64))
        total += rew
    assert trunc.all()
    np.testing.assert_array_equal(infos["_episode"], np.ones(6, bool))
    np.testing.assert_allclose(infos["episode"]["r"], total)
    np.testing.assert_array_equal(infos["episode"]["l"], [4] * 6)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [1, 0])
def test_episode_statistics_are_per_agent_row(make_venv, num_workers):
    # agent_1 terminates at t=2, the others truncate at t=5; reward k + t.
    venv = make_venv([ScriptedEnv] * 2, num_workers=num_workers, episode_statistics=True)
    venv.reset(seed=0)
    seen = []
    for t in range(1, 11):
        _, _, term, trunc, infos = venv.step(np.zeros(venv.num_envs, np.int64))
        if "episode" in infos:
            np.testing.assert_array_equal(infos["_episode"], term | trunc)
            rows = np.flatnonzero(infos["_episode"]).tolist()
            ep = infos["episode"]
            assert ep["r"].dtype == np.float64 and ep["l"].dtype == np.dtype(int)
            seen.append((t, rows, ep["r"][rows].tolist(), ep["l"][rows].tolist()))
            assert (ep["t"][rows] >= 0).all()
        else:
            assert not (term | trunc).any()
    both = [1, 4]  # agent_1 of env 0 and env 1
    rest = [0, 2, 3, 5]
    assert seen == [
        (2, both, [5.0, 5.0], [2, 2]),
        (5, rest, [15.0, 25.0, 15.0, 25.0], [5] * 4),
        (7, both, [5.0, 5.0], [2, 2]),  # the second episodes: not one step short
        (10, rest, [15.0, 25.0, 15.0, 25.0], [5] * 4),
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("black_death", [False, True])
def test_episode_statistics_match_a_plain_loop_over_the_rows(make_venv, black_death):
    # Agents that spawn and die: each row's return is the sum of its rewards and
    # its length the steps its agent acted in (alive at the step's start).
    fns = [functools.partial(spawn_die, tag=i) for i in range(3)]
    venv = make_venv(fns, num_workers=2, black_death=black_death, episode_statistics=True)
    venv.reset(seed=3)
    ret, length = np.zeros(venv.num_envs), np.zeros(venv.num_envs, int)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(50):
        acting = venv.mask.copy()
        _, rew, term, trunc, infos = venv.step(rng.integers(0, 5, venv.num_envs))
        ret += rew
        length += acting
        done = term | trunc
        if done.any():
            ended += int(done.sum())
            np.testing.assert_array_equal(infos["_episode"], done)
            np.testing.assert_allclose(infos["episode"]["r"][done], ret[done])
            np.testing.assert_array_equal(infos["episode"]["l"][done], length[done])
            ret[done], length[done] = 0.0, 0
        else:
            assert "episode" not in infos
    assert ended > 5


@pytest.mark.timeout(60)
def test_concat_vec_envs_takes_supersuits_vector_env():
    ss = pytest.importorskip("supersuit")
    from vecenv.multi_agent import concat_vec_envs_v1

    env = ss.pettingzoo_env_to_vec_env_v1(MatchEnv(num_agents=2))
    venv = concat_vec_envs_v1(env, 3, num_cpus=1, base_class="gymnasium")
    try:
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (6, 4) and venv.num_envs == 6
    finally:
        venv.close()


# ---------------------------------------------------------------- SB3 view
@pytest.mark.timeout(60)
def test_sb3_view_steps_and_reports_terminal_observations():
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3_multi_agent import SB3MultiAgentVecEnv

    venv = SB3MultiAgentVecEnv([ScriptedEnv] * 2, num_workers=1)
    try:
        assert venv.num_envs == 6
        obs = venv.reset()
        assert obs.shape == (6, 2)
        for _ in range(5):
            obs, rew, dones, infos = venv.step(np.zeros(6, np.int64))
        assert dones.all() and len(infos) == 6  # black death: every row ends with the env
        np.testing.assert_array_equal(infos[0]["terminal_observation"], [0, 5])
        assert infos[0]["TimeLimit.truncated"] and not infos[1]["TimeLimit.truncated"]
        np.testing.assert_array_equal(obs[:3], [[0, 0], [1, 0], [2, 0]])
    finally:
        venv.close()


@pytest.mark.timeout(120)
def test_sb3_ppo_learns_a_cooperative_env():
    pytest.importorskip("stable_baselines3")
    import torch
    from stable_baselines3 import PPO

    from vecenv.multi_agent import concat_vec_envs_v1

    torch.set_num_threads(1)
    env = concat_vec_envs_v1(MatchEnv(num_agents=2), 4, num_cpus=1, base_class="stable_baselines3")
    try:
        env.seed(0)
        model = PPO("MlpPolicy", env, n_steps=64, batch_size=128, learning_rate=3e-3, seed=0)
        model.learn(total_timesteps=6_000)
        obs = env.reset()
        rewards = []
        for _ in range(20):
            actions, _ = model.predict(obs, deterministic=True)
            obs, rew, _, _ = env.step(actions)
            rewards.append(rew.mean())
    finally:
        env.close()
    assert np.mean(rewards) > 0.9  # a random policy earns 0.5


# ---------------------------------------------------------------- the multi-agent guide
README = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs", "guides", "multi-agent.md"
)


def _readme_scripts():
    if not os.path.exists(README):
        return []
    text = open(README, encoding="utf-8").read()
    section = text
    return [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("index", [0, 1], ids=["cleanrl", "sb3"])
def test_readme_examples_run(index, tmp_path):
    pytest.importorskip("mpe2")
    pytest.importorskip("torch")
    if index == 1:
        pytest.importorskip("stable_baselines3")
    scripts = _readme_scripts()
    if not scripts:
        pytest.skip("docs/guides/multi-agent.md is not next to the tests")
    path = tmp_path / "example.py"
    path.write_text(scripts[index])
    out = subprocess.run([*SAFE_PYTHON, str(path)], capture_output=True, text=True, timeout=170)
    assert out.returncode == 0, out.stderr[-3000:]
    if index == 0:
        assert out.stdout.count("mean reward per agent-step") == 5


# ---------------------------------------------------------------- Ray
@pytest.mark.ray
@pytest.mark.timeout(240)
def test_ray_backend_matches_a_plain_loop(one_node):
    fns = [functools.partial(SpawnDieEnv, num_agents=4, episode_length=15, tag=i) for i in range(4)]
    venv = MultiAgentVecEnv(fns, backend="ray", num_actors=2, placement_strategy=None)
    try:
        ref = Reference(fns)
        obs, _ = venv.reset(seed=5)
        np.testing.assert_array_equal(obs, ref.reset(5)[0])
        rng = np.random.default_rng(3)
        for t in range(25):
            actions = rng.integers(0, 5, venv.num_envs)
            obs, rew, term, trunc, infos = venv.step(actions)
            r_obs, r_mask, r_rew, r_term, r_trunc, r_final = ref.step(actions)
            np.testing.assert_array_equal(obs, r_obs, err_msg=f"step {t}")
            np.testing.assert_array_equal(venv.mask, r_mask)
            np.testing.assert_allclose(rew, r_rew)
            np.testing.assert_array_equal(term | trunc, r_term | r_trunc)
    finally:
        venv.close()


# ---------------------------------------------------------------- benchmark
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "benchmarks")


@pytest.mark.timeout(120)
def test_benchmark_quick_run_writes_json(tmp_path):
    import json

    script = os.path.join(BENCH, "multi_agent.py")
    if not os.path.exists(script):
        pytest.skip("benchmarks/ is not next to the tests")
    out = tmp_path / "ma.json"
    args = ["--quick", "--cells", "cheap", "--only", "vecenv", "--num-envs", "4"]
    r = subprocess.run(
        [sys.executable, script, *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(out.read_text())
    cell = report["cells"]["cheap"]
    assert cell["rows"] == 32 and cell["contenders"]["raw"]["median"] > 0
    assert any(k.startswith("vecenv") for k in cell["contenders"])
    assert report["machine"]["usable_cores"] >= 1 and report["versions"]["vecenv"]
