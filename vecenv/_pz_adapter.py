"""A PettingZoo ParallelEnv as one fixed-layout gymnasium env (runs in the workers).

:class:`ParallelEnvAdapter` turns a PettingZoo ``ParallelEnv`` (or an AEC env,
through PettingZoo's ``aec_to_parallel``) with agents ``possible_agents`` into a
``gymnasium.Env`` whose observation is a Dict of fixed leaves, one row per
agent of ``possible_agents`` in that order (``A = len(possible_agents)``):

``obs``        (A, *agent_obs_shape)  the observation to act on next; zero for absent agents
``final_obs``  (A, *agent_obs_shape)  the last observation of rows whose episode ended
                                       in this step; zero elsewhere (only with final_obs=True)
``mask``       (A,) bool               the agent is alive: it acts in the next step
``reward``     (A,) float64            this step's reward (0 for absent agents)
``terminated`` (A,) bool               the row's episode ended (terminated / truncated)
``truncated``  (A,) bool

and whose action is a batch of A agent actions (``batch_space(agent_action_space,
A)``); rows of absent agents are ignored. So vecenv's engine keeps every
per-agent array in shared memory, ``(num_envs, A, ...)`` per leaf, and the
parent reshapes it to ``(num_envs * A, ...)`` rows without a copy.

The adapter resets the PettingZoo env itself (the engine runs with
``autoreset_mode="disabled"``), in the step that ends its episode, as
gymnasium's SAME_STEP mode does: ``obs`` then holds the reset observation and
``final_obs`` the last one. The gymnasium-level reward is the sum of the agent
rewards and the gymnasium-level terminated/truncated flags are always False
(the engine uses them only to report a restarted worker).

Infos: per-agent infos that are not empty travel in the gymnasium info dict
as ``{"agents": {row: info}, "final": {row: info}}`` (``final`` for the rows
whose episode ended), so a step of an env with empty infos sends nothing
over the worker's pipe. With ``episode_statistics=True`` a row whose episode
ends in a step adds ``{"episodes": {row: {"r", "l", "t"}}}``: its return, its
length (the steps its agent acted in) and its duration (seconds since the
reset or the row's last episode end), kept per row in the worker.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from vecenv import _layout
from vecenv._infos import info_snapshot
from vecenv.errors import InvalidArgumentError, SpaceError

RESET_WHEN = ("all", "any")

# Keys of the adapter's info dict (see the module docstring).
INFO_AGENTS = "agents"
INFO_FINAL = "final"
INFO_EPISODES = "episodes"


class _RowEpisodes:
    """The running statistics of each agent row's episode (worker side):
    return and length (float64, int64, shape (A,)) and the start
    (``time.monotonic`` seconds)."""

    def __init__(self, num_rows: int):
        self.returns: np.ndarray = np.zeros(num_rows, np.float64)
        self.lengths: np.ndarray = np.zeros(num_rows, np.int64)
        self.starts: np.ndarray = np.full(num_rows, time.monotonic())

    def restart_all(self) -> None:
        self.returns.fill(0.0)
        self.lengths.fill(0)
        self.starts.fill(time.monotonic())

    def add(self, acting: List[int], rewards: np.ndarray) -> None:
        """One step of the rows ``acting`` (their agents acted), with the
        step's ``rewards`` (shape (A,), 0 for the others)."""
        self.returns += rewards
        self.lengths[acting] += 1

    def finish(self, rows: np.ndarray) -> Dict[int, Dict[str, Any]]:
        """The episodes of ``rows`` (they ended in this step), as gymnasium's
        ``RecordEpisodeStatistics`` reports one (``t`` rounded to 6
        decimals); each row starts afresh."""
        now = time.monotonic()
        out = {
            int(j): {
                "r": float(self.returns[j]),
                "l": int(self.lengths[j]),
                "t": round(now - float(self.starts[j]), 6),
            }
            for j in rows
        }
        self.returns[rows] = 0.0
        self.lengths[rows] = 0
        self.starts[rows] = now
        return out


def as_parallel(env):
    """``env`` as a PettingZoo ParallelEnv (AEC envs through ``aec_to_parallel``).

    Raises
    ------
    TypeError
        ``env`` is neither a ParallelEnv nor an AECEnv.
    """
    from pettingzoo.utils.conversions import aec_to_parallel
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if isinstance(env, ParallelEnv):
        return env
    if isinstance(env, AECEnv):
        return aec_to_parallel(env)
    # Duck-typed parallel envs (SuperSuit's vector wrapper exposes .par_env).
    inner = getattr(env, "par_env", None)
    if inner is not None:
        return as_parallel(inner)
    if all(hasattr(env, a) for a in ("possible_agents", "observation_space", "step", "reset")):
        return env
    raise TypeError(
        f"the env factory returned {type(env).__name__}, not a PettingZoo ParallelEnv or AECEnv"
    )


def _pad_box(boxes: List[spaces.Box], what: str) -> spaces.Box:
    ndims = {len(b.shape) for b in boxes}
    if len(ndims) != 1:
        raise SpaceError(
            f"pad_spaces=True cannot pad {what} spaces of different ranks: "
            f"{sorted({b.shape for b in boxes})}"
        )
    shape = tuple(int(max(s)) for s in zip(*(b.shape for b in boxes)))
    dtype = np.result_type(*(b.dtype for b in boxes))
    low: np.ndarray = np.zeros(shape, dtype=np.float64)
    high: np.ndarray = np.zeros(shape, dtype=np.float64)
    lo_v = min(float(np.min(b.low)) for b in boxes)
    hi_v = max(float(np.max(b.high)) for b in boxes)
    low[...] = min(lo_v, 0.0)  # padding is zero: the bounds must hold it
    high[...] = max(hi_v, 0.0)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        low, high = np.clip(low, info.min, info.max), np.clip(high, info.min, info.max)
    return spaces.Box(low.astype(dtype), high.astype(dtype), dtype=dtype)


def agent_spaces(par, agents: List[Any], pad: bool) -> Tuple[spaces.Space, spaces.Space]:
    """The one observation and action space every agent shares (padded to one
    Box / one Discrete when ``pad``).

    Raises
    ------
    SpaceError
        Agents with different spaces (and ``pad`` is False or cannot pad them).
    """
    if not agents:
        raise SpaceError("the env has no possible_agents: nothing to vectorize")
    result = []
    for what, get in (("observation", par.observation_space), ("action", par.action_space)):
        per_agent = [get(a) for a in agents]
        first = per_agent[0]
        if all(s == first for s in per_agent[1:]):
            result.append(first)
            continue
        differ = [a for a, s in zip(agents, per_agent) if s != first]
        if not pad:
            raise SpaceError(
                f"agents have different {what} spaces: {agents[0]!r} has {first}, "
                f"{differ[0]!r} has {get(differ[0])}; vecenv needs one {what} space for all "
                "agents: pass pad_spaces=True to pad Box spaces to one Box (and Discrete "
                "spaces to the largest n), or wrap the env"
            )
        if all(isinstance(s, spaces.Box) for s in per_agent):
            result.append(_pad_box(per_agent, what))
        elif what == "action" and all(
            isinstance(s, spaces.Discrete) and int(s.start) == 0 for s in per_agent
        ):
            result.append(spaces.Discrete(max(int(s.n) for s in per_agent)))
        else:
            raise SpaceError(
                f"pad_spaces=True pads Box {what} spaces (and Discrete action spaces) only; "
                f"agents have {sorted({type(s).__name__ for s in per_agent})}"
            )
    return result[0], result[1]


def _obs_writer(agent_space: spaces.Space, agent_spaces_: List[spaces.Space], bufs):
    """``write(j, value)`` stores agent ``j``'s observation in row ``j`` of the
    leaf buffers ``bufs`` (zero-padded when the agent's own Box is smaller)."""
    if len(bufs) == 1 and isinstance(agent_space, spaces.Box):
        buf = bufs[0]
        pads = [
            None if s.shape == agent_space.shape else tuple(slice(0, d) for d in s.shape or ())
            for s in agent_spaces_
        ]
        if all(p is None for p in pads):

            def write(j, value):
                buf[j] = value

            return write

        def write_padded(j, value):
            p = pads[j]
            if p is None:
                buf[j] = value
            else:
                row = buf[j]
                row.fill(0)
                row[p] = value

        return write_padded
    if len(bufs) == 1:
        buf = bufs[0]

        def write_leaf(j, value):
            buf[j] = value

        return write_leaf
    flatten = _layout.make_flattener(agent_space)

    def write_tree(j, value):
        for b, v in zip(bufs, flatten(value)):
            b[j] = v

    return write_tree


def _action_reader(agent_space: spaces.Space, agent_spaces_: List[spaces.Space]):
    """``read(batch, j)``: agent ``j``'s action out of the batched action."""
    if isinstance(agent_space, spaces.Discrete):
        limits: List[Any] = [
            int(s.n) - 1 if isinstance(s, spaces.Discrete) else None for s in agent_spaces_
        ]
        start = int(agent_space.start)
        if all(lim == int(agent_space.n) - 1 for lim in limits):
            return lambda batch, j: int(batch[j])
        # Padded: an action past the agent's own range becomes its last action.
        return lambda batch, j: min(int(batch[j]) - start, limits[j]) + start
    if isinstance(agent_space, spaces.Box):
        slices = [
            None if s.shape == agent_space.shape else tuple(slice(0, d) for d in s.shape or ())
            for s in agent_spaces_
        ]
        if all(p is None for p in slices):
            return lambda batch, j: batch[j]
        return lambda batch, j: batch[j] if slices[j] is None else batch[j][slices[j]]
    if isinstance(agent_space, spaces.Dict):
        return lambda batch, j: {k: v[j] for k, v in batch.items()}
    if isinstance(agent_space, spaces.Tuple):
        return lambda batch, j: tuple(v[j] for v in batch)
    return lambda batch, j: batch[j]


class ParallelEnvAdapter(gymnasium.Env):
    """One PettingZoo env as a gymnasium env with one row per possible agent.

    Parameters
    ----------
    env : pettingzoo.ParallelEnv or pettingzoo.AECEnv
    reset_when : {"all", "any"}
        Reset the env when all its agents are done ("all", default: PettingZoo's
        own rule, ``env.agents`` is empty) or when any agent is done ("any"; the
        others are reported truncated).
    black_death : bool
        False (default): an agent's episode ends when it terminates or truncates
        (its row reports it, with its last observation in ``final_obs``); then
        the row is absent (zero observation, reward 0, mask False) until the
        agent appears again. True: an agent that dies before the env ends
        reports nothing; its row carries a zero observation and reward 0 until
        the env ends, when every row reports the end (its own flags for agents
        that died, ``terminated`` for rows that never had a live agent in the
        episode, the env's flags for the others).
    pad_spaces : bool
        Pad agents' different Box spaces to one Box (zeros at the end of each
        axis) and Discrete action spaces to the largest ``n`` (an action past
        an agent's own range becomes its last action). Default False: agents
        with different spaces raise SpaceError.
    final_obs : bool
        Keep the ``final_obs`` leaf (default True). False saves one copy of
        the observations per step for large observations.
    episode_statistics : bool
        Report each row's finished episode in its info (``"episodes"``, see
        the module docstring). Default False.

    Raises
    ------
    SpaceError
        Agents' spaces differ and cannot be padded (or ``pad_spaces`` is False).
    InvalidArgumentError
        A bad ``reset_when``.
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        env,
        *,
        reset_when: str = "all",
        black_death: bool = False,
        pad_spaces: bool = False,
        final_obs: bool = True,
        episode_statistics: bool = False,
    ):
        if reset_when not in RESET_WHEN:
            raise InvalidArgumentError(
                f"reset_when must be one of {RESET_WHEN}, got {reset_when!r}"
            )
        par = as_parallel(env)
        self.par_env = par
        agents = list(par.possible_agents)
        self.possible_agents = agents
        obs_space, act_space = agent_spaces(par, agents, pad_spaces)
        self.agent_observation_space = obs_space
        self.agent_action_space = act_space
        self.reset_when = reset_when
        self.black_death = bool(black_death)
        self.metadata = dict(getattr(par, "metadata", {}) or {})
        self.render_mode = getattr(par, "render_mode", None)
        n = len(agents)
        self._index = {a: j for j, a in enumerate(agents)}
        obs_batched = batch_space(obs_space, n)
        # gymnasium's stub wants a float dtype; a 3.9 check reads NumPy's stubs as Any.
        flag = spaces.Box(0, 1, (n,), np.bool_)  # type: ignore[arg-type, unused-ignore]
        leaves = {
            "obs": obs_batched,
            "mask": flag,
            "reward": spaces.Box(-np.inf, np.inf, (n,), np.float64),
            "terminated": flag,
            "truncated": flag,
        }
        if final_obs:
            leaves["final_obs"] = obs_batched
        self.observation_space = spaces.Dict(leaves)
        if isinstance(act_space, spaces.Discrete):
            # An int64 Box: the parent checks the range itself (one min/max over
            # the whole batch), so the engine's writer only copies.
            lo = int(act_space.start)
            self.action_space = spaces.Box(lo, lo + int(act_space.n) - 1, (n,), np.int64)
        else:
            self.action_space = batch_space(act_space, n)

        def buffers(space):
            bufs = [np.zeros(leaf.shape, leaf.dtype) for leaf in _layout.flatten_space(space)]
            return bufs, _layout.make_unflattener(space)(bufs)

        self._obs_bufs, obs_tree = buffers(obs_batched)
        obs_per_agent = [par.observation_space(a) for a in agents]
        self._write_obs = _obs_writer(obs_space, obs_per_agent, self._obs_bufs)
        plain = len(self._obs_bufs) == 1 and all(s == obs_space for s in obs_per_agent)
        self._plain_obs_buf = self._obs_bufs[0] if plain else None
        self._final_bufs: List[np.ndarray] = []
        self._write_final: Optional[Callable[[int, Any], None]] = None
        final_tree = None
        if final_obs:
            self._final_bufs, final_tree = buffers(obs_batched)
            self._write_final = _obs_writer(obs_space, obs_per_agent, self._final_bufs)
        self._read_action = _action_reader(act_space, [par.action_space(a) for a in agents])
        self._mask: np.ndarray = np.zeros(n, np.bool_)
        self._reward: np.ndarray = np.zeros(n, np.float64)
        self._term: np.ndarray = np.zeros(n, np.bool_)
        self._trunc: np.ndarray = np.zeros(n, np.bool_)
        self._out = {
            "obs": obs_tree,
            "mask": self._mask,
            "reward": self._reward,
            "terminated": self._term,
            "truncated": self._trunc,
        }
        if final_obs:
            self._out["final_obs"] = final_tree
        self._final_rows: List[int] = []  # rows of final_obs to zero at the next step
        self._alive_rows: List[int] = []  # rows where mask is True, in agent order
        self._flagged = True  # term/trunc may hold flags to clear at the next step
        self._int_actions = isinstance(act_space, spaces.Discrete) and all(
            s == act_space for s in (par.action_space(a) for a in agents)
        )
        # black_death: flags of agents that died before the env ended, by row.
        self._dead_flags: Dict[int, Tuple[bool, bool]] = {}
        self._episodes = _RowEpisodes(n) if episode_statistics else None

    # ---------------------------------------------------------------- helpers
    def _zero_rows(self, bufs, rows) -> None:
        for b in bufs:
            b[rows] = 0

    def _fill_from_reset(self, obs_d: Dict[Any, Any], infos: Dict[Any, Any], out_info) -> None:
        """Rows after a reset: live agents' observations, zeros elsewhere."""
        index = self._index
        mask = self._mask
        mask.fill(False)
        for b in self._obs_bufs:
            b.fill(0)
        for a in self.par_env.agents:
            j = index[a]
            mask[j] = True
            if a in obs_d:
                self._write_obs(j, obs_d[a])
            info = infos.get(a) if infos else None
            if info:
                out_info.setdefault(INFO_AGENTS, {})[j] = info
        self._alive_rows = [index[a] for a in self.par_env.agents]
        self._dead_flags = {}
        if self._episodes is not None:  # a new episode on every row
            self._episodes.restart_all()

    # ---------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        obs_d, infos = self.par_env.reset(seed=seed, options=options)
        info: Dict[str, Any] = {}
        self._fill_from_reset(obs_d, infos, info)
        self._reward.fill(0.0)
        self._term.fill(False)
        self._trunc.fill(False)
        self._flagged = False
        if self._final_rows:
            self._zero_rows(self._final_bufs, self._final_rows)
            self._final_rows = []
        return self._out, info

    def step(self, action):
        par = self.par_env
        index = self._index
        acting = list(par.agents)  # a live list in some envs (aec_to_parallel): keep a copy
        if self._int_actions:  # Discrete agents: one tolist() instead of a scalar per agent
            values = action.tolist()
            if acting == self.possible_agents:
                actions = dict(zip(acting, values))
            else:
                actions = {a: values[index[a]] for a in acting}
        else:
            read = self._read_action
            actions = {a: read(action, index[a]) for a in acting}
        obs_d, rew_d, term_d, trunc_d, info_d = par.step(actions)

        reward, term, trunc = self._reward, self._term, self._trunc
        get = rew_d.get
        reward[:] = [get(a, 0.0) for a in self.possible_agents]
        if self._episodes is not None:
            self._episodes.add([index[a] for a in acting], reward)
        if self._flagged:
            term.fill(False)
            trunc.fill(False)
            self._flagged = False
        if self._final_rows:
            self._zero_rows(self._final_bufs, self._final_rows)
            self._final_rows = []
        ended: List[int] = []  # rows whose agent terminated or truncated in this step
        if any(term_d.values()) or any(trunc_d.values()):
            for a in acting:
                t = term_d.get(a, False)
                u = trunc_d.get(a, False)
                if t or u:
                    j = index[a]
                    term[j] = t
                    trunc[j] = u
                    ended.append(j)
        if ended:
            self._flagged = True
            alive_now = [a for a in par.agents if not (term_d.get(a) or trunc_d.get(a))]
        else:
            alive_now = list(par.agents)
        env_done = not alive_now or (self.reset_when == "any" and bool(ended))
        info: Dict[str, Any] = {}
        has_info = any(info_d.values())
        total = float(sum(rew_d.values()))

        if not env_done:
            write_obs = self._write_obs
            now = [index[a] for a in alive_now]
            if now != self._alive_rows:
                gone = set(self._alive_rows).difference(now)
                mask = self._mask
                mask.fill(False)
                mask[now] = True
                self._alive_rows = now
                if gone:
                    self._zero_rows(self._obs_bufs, sorted(gone))
            buf = self._plain_obs_buf
            if buf is not None:  # one unpadded leaf: store rows directly
                for a, j in zip(alive_now, now):
                    value = obs_d.get(a)
                    if value is not None:
                        buf[j] = value
            else:
                for a, j in zip(alive_now, now):
                    value = obs_d.get(a)
                    if value is not None:
                        write_obs(j, value)
            if has_info:
                for a, j in zip(alive_now, now):
                    inf = info_d.get(a)
                    if inf:
                        info.setdefault(INFO_AGENTS, {})[j] = inf
            for j in ended:
                a = self.possible_agents[j]
                if self.black_death:
                    self._dead_flags[j] = (bool(term[j]), bool(trunc[j]))
                    term[j] = trunc[j] = False
                elif self._write_final is not None and a in obs_d:
                    self._write_final(j, obs_d[a])
                    self._final_rows.append(j)
                inf = info_d.get(a) if has_info else None
                if inf:
                    key = INFO_AGENTS if self.black_death else INFO_FINAL
                    info.setdefault(key, {})[j] = inf
            self._report_episodes(info)
            return self._out, total, False, False, info

        # The env's episode ends in this step: every row ending now keeps its
        # last observation in final_obs, and the env is reset (SAME_STEP).
        self._flagged = True
        for a in alive_now:  # "any": the agents still alive are cut short
            j = index[a]
            trunc[j] = True
            ended.append(j)
        for j in ended:
            a = self.possible_agents[j]
            if self._write_final is not None and a in obs_d:
                self._write_final(j, obs_d[a])
                self._final_rows.append(j)
            inf = info_d.get(a) if has_info else None
            if inf:  # copied: the reset below may change the env's dicts in place
                info.setdefault(INFO_FINAL, {})[j] = info_snapshot(inf)
        if self.black_death:
            ended_set = set(ended)
            for j in range(len(self.possible_agents)):
                if j in ended_set:
                    continue
                flags = self._dead_flags.get(j)
                if flags is None:
                    term[j] = True  # a row without a live agent: its episode ends too
                else:
                    term[j], trunc[j] = flags
        self._report_episodes(info)  # before the reset starts every row afresh
        new_obs, new_infos = par.reset()
        reset_info: Dict[str, Any] = {}
        self._fill_from_reset(new_obs, new_infos, reset_info)
        if INFO_AGENTS in reset_info:
            info[INFO_AGENTS] = reset_info[INFO_AGENTS]
        return self._out, total, False, False, info

    def _report_episodes(self, info: Dict[str, Any]) -> None:
        """Add the episodes of the rows whose flags are set to ``info``."""
        if self._episodes is not None:
            rows = np.flatnonzero(self._term | self._trunc)
            if rows.size:
                info[INFO_EPISODES] = self._episodes.finish(rows)

    def render(self):
        return self.par_env.render()

    def close(self):
        self.par_env.close()

    def call_par_env(self, name: str, args=(), kwargs=None):
        """``getattr(par_env, name)(*args, **kwargs)``, or the attribute when not callable."""
        attr = getattr(self.par_env, name)
        return attr(*args, **(kwargs or {})) if callable(attr) else attr

    def par_env_attr(self, name: str):
        """``getattr(par_env, name)``."""
        return getattr(self.par_env, name)

    def par_env_setattr(self, name: str, value) -> None:
        """``setattr(par_env, name, value)``."""
        setattr(self.par_env, name, value)

    def describe(self) -> Dict[str, Any]:
        """What the parent needs to know: agents and their (shared) spaces."""
        return {
            "possible_agents": list(self.possible_agents),
            "agent_observation_space": self.agent_observation_space,
            "agent_action_space": self.agent_action_space,
            "final_obs": self._write_final is not None,
        }


class AdapterFactory:
    """Picklable factory: ``fn()`` wrapped in :class:`ParallelEnvAdapter`."""

    def __init__(self, fn: Callable[[], Any], options: Dict[str, Any]):
        self.fn = fn
        self.options = options

    def __call__(self) -> ParallelEnvAdapter:
        return ParallelEnvAdapter(self.fn(), **self.options)
