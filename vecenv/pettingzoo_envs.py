"""Small PettingZoo ParallelEnvs for tests, benchmarks and examples.

Imports PettingZoo (``pip install vecenv[pettingzoo]``); ``import vecenv``
does not import this module.

- :class:`SpawnDieEnv`: agents that spawn late and die early, with
  observations that name the env, the agent, the step and the agent's last
  action (to check that rows and actions reach the right (env, agent)).
- :class:`MatchEnv`: a cheap cooperative env: every agent sees a random sign
  and the team is rewarded for the fraction of agents whose action matches
  their sign; learnable in seconds, and cheap enough that vectorization
  overhead per row dominates.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

__all__ = ["MatchEnv", "SpawnDieEnv"]


class SpawnDieEnv(ParallelEnv):
    """Agents that spawn and die at random times (seeded).

    Observation of agent ``k`` (float32, shape (5,)): ``[tag, k, t, last
    action, u]`` with ``tag`` the constructor's, ``t`` the step count and
    ``u`` a uniform draw from the env's generator. Action: Discrete(5).
    Reward: ``action + 0.1 * k``. At reset a random non-empty subset of the
    agents is alive; each absent, never-alive agent spawns with probability
    ``p_spawn`` per step; each live agent terminates with probability
    ``p_die`` per step (info ``{"died_at": t}``); all live agents truncate
    at ``episode_length``. Dead agents never come back (PettingZoo's rule).
    """

    metadata = {"name": "spawn_die_v0", "render_modes": []}
    render_mode = None

    def __init__(
        self,
        num_agents: int = 4,
        episode_length: int = 20,
        p_spawn: float = 0.2,
        p_die: float = 0.1,
        tag: float = 0.0,
    ):
        self.possible_agents = [f"agent_{k}" for k in range(num_agents)]
        self.episode_length = episode_length
        self.p_spawn = p_spawn
        self.p_die = p_die
        self.tag = float(tag)
        self.agents: List[str] = []
        self._rng = np.random.default_rng()
        self._t = 0
        self._spawned: set = set()
        self._last = dict.fromkeys(self.possible_agents, -1)
        self._obs_space = spaces.Box(-np.inf, np.inf, (5,), np.float32)
        self._act_space = spaces.Discrete(5)

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def _obs(self, agent: str) -> np.ndarray:
        k = self.possible_agents.index(agent)
        return np.array(
            [self.tag, k, self._t, self._last[agent], self._rng.random()], dtype=np.float32
        )

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._last = dict.fromkeys(self.possible_agents, -1)
        alive = self._rng.random(len(self.possible_agents)) < 0.5
        alive[self._rng.integers(len(alive))] = True
        self.agents = [a for a, on in zip(self.possible_agents, alive) if on]
        self._spawned = set(self.agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: Dict[str, Any]):
        self._t += 1
        rewards, terms, truncs, infos = {}, {}, {}, {}
        for a in self.agents:
            act = int(actions[a])
            self._last[a] = act
            rewards[a] = act + 0.1 * self.possible_agents.index(a)
            died = self._rng.random() < self.p_die
            terms[a] = bool(died)
            truncs[a] = self._t >= self.episode_length
            infos[a] = {"died_at": self._t} if died else {}
        obs = {a: self._obs(a) for a in self.agents}
        survivors = [a for a in self.agents if not (terms[a] or truncs[a])]
        if self._t < self.episode_length:
            for a in self.possible_agents:
                if a not in self._spawned and self._rng.random() < self.p_spawn:
                    self._spawned.add(a)
                    survivors.append(a)
                    obs[a] = self._obs(a)
                    rewards[a], terms[a], truncs[a], infos[a] = 0.0, False, False, {}
        order = {a: k for k, a in enumerate(self.possible_agents)}
        self.agents = sorted(survivors, key=order.__getitem__)
        return obs, rewards, terms, truncs, infos


class MatchEnv(ParallelEnv):
    """A cheap cooperative env: match your sign.

    Each agent observes ``[s, 0, ..., 0]`` (float32, shape (obs_dim,)) with a
    random sign ``s`` in {-1, +1}; action Discrete(2). Every agent gets the
    team reward: the fraction of agents whose action is ``s > 0``. Episodes
    last ``episode_length`` steps (all agents truncate). A random policy
    earns 0.5 per step, the best one 1.0.
    """

    metadata = {"name": "match_v0", "render_modes": []}
    render_mode = None

    def __init__(self, num_agents: int = 2, obs_dim: int = 4, episode_length: int = 10):
        self.possible_agents = [f"agent_{k}" for k in range(num_agents)]
        self.agents: List[str] = []
        self.episode_length = episode_length
        self._obs_space = spaces.Box(-1.0, 1.0, (obs_dim,), np.float32)
        self._act_space = spaces.Discrete(2)
        self._rng = np.random.default_rng()
        self._signs = np.zeros((num_agents, obs_dim), np.float32)
        self._t = 0

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def _draw(self):
        self._signs[:, 0] = np.where(self._rng.random(len(self.possible_agents)) < 0.5, -1, 1)
        return dict(zip(self.possible_agents, self._signs.copy()))

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self.agents = list(self.possible_agents)
        return self._draw(), {a: {} for a in self.agents}

    def step(self, actions: Dict[str, Any]):
        self._t += 1
        agents = self.agents
        good = sum(
            int(actions[a]) == (s > 0) for a, s in zip(agents, self._signs[:, 0]) if a in actions
        )
        r = good / len(agents)
        done = self._t >= self.episode_length
        obs = self._draw()
        rewards = dict.fromkeys(agents, r)
        terms = dict.fromkeys(agents, False)
        truncs = dict.fromkeys(agents, done)
        infos: Dict[str, dict] = {a: {} for a in agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos
