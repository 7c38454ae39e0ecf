"""stable-baselines3 ``VecEnv`` over agent rows of PettingZoo envs (parent side).

:class:`SB3MultiAgentVecEnv` presents a :class:`~vecenv.MultiAgentVecEnv` to
stable-baselines3 as ``num_envs = num_parallel_envs * max_agents`` single-agent
envs (one per agent row, env-major), the way SuperSuit's
``concat_vec_envs_v1(..., base_class="stable_baselines3")`` does, so every SB3
algorithm trains one policy shared by all agents (parameter sharing). Build it
directly, or through :func:`vecenv.multi_agent.concat_vec_envs_v1` with the
arguments of SuperSuit's function (PettingZoo's SB3 tutorials, one line changed).

stable-baselines3 is imported here only (``pip install vecenv[sb3]``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv as _SB3VecEnv
except ImportError as _exc:
    # ModuleNotFoundError where the package is missing (what pytest.importorskip
    # and `except ImportError` both expect); ImportError where it is broken.
    _missing = ModuleNotFoundError if isinstance(_exc, ModuleNotFoundError) else ImportError
    raise _missing(
        f"vecenv.sb3_multi_agent needs stable-baselines3 ({_exc}); install it with `pip install vecenv[sb3]`",
        name=_exc.name,
    ) from _exc

from vecenv._episodes import EPISODE_KEY
from vecenv.errors import InvalidArgumentError, StateError
from vecenv.multi_agent import MultiAgentVecEnv

__all__ = ["SB3MultiAgentVecEnv"]


class SB3MultiAgentVecEnv(_SB3VecEnv):
    """stable-baselines3's ``VecEnv`` API with one env per agent row.

    Parameters
    ----------
    env_fns : sequence of callables
        One factory per PettingZoo env (ParallelEnv or AECEnv).
    black_death : bool
        Default True (SB3 has no alive mask): an agent that dies before its
        env ends gets zero observations and reward 0 until the env ends,
        when every row of the env is done. False: a row is done when its
        agent is, then carries zeros until the agent is alive again (see
        :class:`~vecenv.MultiAgentVecEnv`).
    **options
        More :class:`~vecenv.MultiAgentVecEnv` arguments (``num_workers``,
        ``reset_when``, ``pad_spaces``, ``timeout``, ...); not ``copy`` or
        ``batch_size``.

    Attributes
    ----------
    num_envs : int
        Agent rows: ``num_parallel_envs * max_agents``.
    observation_space, action_space : gymnasium.spaces.Space
        One agent's spaces.
    venv : MultiAgentVecEnv
        The vec env doing the work.

    Notes
    -----
    ``step_wait`` returns, for a row whose episode ended, the observation to
    act on next (the env's reset observation, or zeros) and
    ``infos[row]["terminal_observation"]`` with ``"TimeLimit.truncated"``, as
    SB3's own vec envs do. ``seed(s)`` seeds env ``i`` with ``s + i *
    max_agents`` (the seed SB3 gives its first row) at the next reset.
    """

    metadata: Dict[str, Any]  # the envs' metadata with SB3's keys

    def __init__(
        self, env_fns: Sequence[Callable[[], Any]], *, black_death: bool = True, **options: Any
    ):
        for key in ("copy", "batch_size"):
            if key in options:
                raise InvalidArgumentError(
                    f"SB3MultiAgentVecEnv does not take {key}: SB3 steps every env at once "
                    "and keeps what it is given"
                )
        self.venv = MultiAgentVecEnv(env_fns, black_death=black_death, copy=True, **options)
        self._actions: Optional[np.ndarray] = None
        try:
            super().__init__(
                self.venv.num_envs,
                self.venv.single_observation_space,
                self.venv.single_action_space,
            )
        except BaseException:
            self.venv.close()
            raise
        self.metadata = {**self.venv.metadata, **self.metadata}
        self.metadata.pop("autoreset_mode", None)

    # ------------------------------------------------------------ stepping
    def reset(self):
        """Reset every env (seeds from :meth:`seed`, options from
        :meth:`set_options`, each used once); return the rows' observations
        (num_envs, *obs_shape). Row infos go to ``reset_infos``."""
        venv = self.venv
        a = venv.max_agents
        seeds = [self._seeds[i * a] for i in range(venv.num_parallel_envs)]
        options = self._options[0] or None
        obs, infos = venv.reset(
            seed=None if all(s is None for s in seeds) else seeds, options=options
        )
        self.reset_infos = self._row_infos(infos)
        self._reset_seeds()
        self._reset_options()
        self._actions = None
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Keep ``actions`` (num_envs, *action_shape) for :meth:`step_wait`."""
        self._actions = np.asarray(actions)

    def step_wait(self):
        """Step every env with the actions of :meth:`step_async`.

        Returns
        -------
        observations : ndarray, (num_envs, *obs_shape)
        rewards : float64 ndarray, (num_envs,)
        dones : bool ndarray, (num_envs,)
        infos : list of num_envs dicts
            ``"TimeLimit.truncated"`` in each; ``"terminal_observation"`` where
            the row's episode ended; the agent's own infos.

        Raises
        ------
        StateError
            No step_async() before.
        InvalidArgumentError, WorkerError, WorkerDiedError, VecEnvTimeoutError
            As :meth:`MultiAgentVecEnv.step`.
        """
        if self._actions is None:
            raise StateError("step_wait() needs a step_async(actions) first")
        actions, self._actions = self._actions, None
        obs, rew, term, trunc, infos = self.venv.step(actions)
        rows = self._row_infos(infos)
        dones = term | trunc
        time_limit = (trunc & ~term).tolist()
        for info, t in zip(rows, time_limit):
            info["TimeLimit.truncated"] = t
        if dones.any():
            final = infos.get("final_obs")
            for r in np.flatnonzero(dones).tolist():
                if final is not None:
                    rows[r]["terminal_observation"] = final[r]
        return obs, rew, dones, rows

    def _row_infos(self, infos) -> List[dict]:
        """Batched infos back to one dict per row (agent infos only)."""
        rows: List[dict] = [{} for _ in range(self.num_envs)]
        for key, value in infos.items():
            if key.startswith("_") or key in ("final_obs", "final_info"):
                continue
            mask = infos.get(f"_{key}")
            if key == EPISODE_KEY and mask is not None:  # SB3's Monitor form, per row
                for r in np.flatnonzero(mask).tolist():
                    rows[r][key] = {
                        "r": float(value["r"][r]),
                        "l": int(value["l"][r]),
                        "t": float(value["t"][r]),
                    }
                continue
            if mask is None or isinstance(value, dict):
                continue
            for r in np.flatnonzero(mask).tolist():
                rows[r][key] = value[r]
        return rows

    def close(self) -> None:
        """Stop the workers and release shared memory (safe twice)."""
        self.venv.close()

    # ------------------------------------------------------------ env access
    def _env_indices(self, indices) -> List[int]:
        rows = self._get_indices(indices)
        return [int(r) // self.venv.max_agents for r in rows]

    def _per_row(self, indices, fn) -> List[Any]:
        envs = self._env_indices(indices)
        unique = sorted(set(envs))
        values = dict(zip(unique, fn(unique))) if unique else {}
        return [values[i] for i in envs]

    def get_attr(self, attr_name: str, indices=None) -> List[Any]:
        """Attribute ``attr_name`` of the PettingZoo env of each row in ``indices``."""
        if attr_name == "render_mode":
            return [self.venv.render_mode] * len(list(self._get_indices(indices)))
        engine = self.venv.engine
        return self._per_row(
            indices, lambda ids: engine.env_method("par_env_attr", attr_name, indices=ids)
        )

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        """Set ``attr_name`` on the PettingZoo envs of the rows ``indices``."""
        engine = self.venv.engine
        ids = sorted(set(self._env_indices(indices)))
        engine.env_method("par_env_setattr", attr_name, value, indices=ids)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs):
        """Call ``method_name`` on the PettingZoo env of each row (once per env)."""
        engine = self.venv.engine
        return self._per_row(
            indices,
            lambda ids: engine.env_method(
                "call_par_env", method_name, method_args, method_kwargs, indices=ids
            ),
        )

    def env_is_wrapped(self, wrapper_class, indices=None) -> List[bool]:
        """False for every row: the rows are agents, not gymnasium envs."""
        return [False] * len(list(self._get_indices(indices)))

    def __repr__(self) -> str:
        return f"SB3MultiAgentVecEnv(num_envs={self.num_envs}, venv={self.venv!r})"
