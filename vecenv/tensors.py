"""PyTorch tensors that share a vec env's shared block: batches without copies.

Runs in the parent process only. :func:`shared_tensors` returns tensors built
once over the shared block of a :class:`~vecenv.ShmemVecEnv` (or of the
gymnasium and stable-baselines3 drop-ins, through their ``engine``): the
workers write each step's observations, rewards and flags into that block, so
after every ``step``/``recv``/``reset`` the same tensors hold the new values,
with nothing copied and nothing allocated. ``torch.from_numpy`` makes them
(zero-copy, as NumPy's DLPack export would; see PyTorch's ``torch.from_numpy``).

A training loop then feeds the policy straight from the block, for example
``policy(t.observations.to(device))``; the one copy is the host-to-device one
(or none on the CPU, where ``t.observations`` is the input itself).

torch is an optional dependency, imported when :func:`shared_tensors` is
called: ``pip install torch``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vecenv.errors import InvalidArgumentError

__all__ = ["SharedTensors", "shared_tensors"]


@dataclasses.dataclass(frozen=True)
class SharedTensors:
    """Torch tensors over one vec env's shared block (see :func:`shared_tensors`).

    Every tensor is a view of shared memory: its values are those of the last
    completed ``reset``/``step``/``recv`` for each env and change in place when
    the next one completes. Read (or ``.clone()``) them before the next
    ``step_async``, ``send`` or ``reset``, as with ``copy=False`` views.
    Writing into them writes into the block the workers read and write: don't.

    Attributes
    ----------
    observations : torch.Tensor, or a tuple or dict of them
        Shaped like ``observation_space`` with a leading ``num_envs`` axis
        (row ``i`` is env ``i``), of the space's dtype (``torch.uint8`` for
        uint8 frames, ``torch.float32`` for a float32 Box), C-contiguous.
    rewards : torch.Tensor
        ``torch.float64``, shape (num_envs,).
    terminated, truncated : torch.Tensor
        ``torch.bool``, shape (num_envs,): gymnasium's flags (a done is their
        ``|``).
    """

    observations: Any
    rewards: Any
    terminated: Any
    truncated: Any


def _engine(venv: Any) -> Any:
    """The ShmemVecEnv that owns the block behind ``venv`` (itself or its
    ``engine``), or InvalidArgumentError naming what ``venv`` is."""
    from vecenv.multi_agent import MultiAgentVecEnv
    from vecenv.shmem_vec_env import ShmemVecEnv

    if isinstance(venv, ShmemVecEnv):
        return venv
    if isinstance(venv, MultiAgentVecEnv):
        raise InvalidArgumentError(
            "shared_tensors(venv): a MultiAgentVecEnv's rows are agents, not the envs of its "
            "block; pass a ShmemVecEnv, vecenv.AsyncVectorEnv or vecenv.sb3.SubprocVecEnv"
        )
    engine = getattr(venv, "engine", None) if hasattr(type(venv), "engine") else None
    if isinstance(engine, ShmemVecEnv):
        return engine
    raise InvalidArgumentError(
        f"shared_tensors(venv): venv must be a vecenv.ShmemVecEnv or a drop-in running on "
        f"one (vecenv.AsyncVectorEnv, vecenv.sb3.SubprocVecEnv), got {type(venv).__name__}"
        + (
            " (a RayVecEnv's batches come from Ray's object store, not a shared block: "
            "torch.from_numpy on what step returns shares that array)"
            if type(venv).__name__ == "RayVecEnv"
            else ""
        )
    )


def shared_tensors(venv: Any) -> SharedTensors:
    """Torch tensors sharing ``venv``'s observation, reward and flag buffers.

    Parameters
    ----------
    venv : ShmemVecEnv, vecenv.AsyncVectorEnv or vecenv.sb3.SubprocVecEnv
        An open vec env (any layout, ``num_workers=0`` included, any
        ``copy``, ``batch_size`` or ``autoreset_mode``). With partial batches
        (``batch_size < num_envs``) the rows of the envs still in flight are
        being written while you read the others: read the rows of the envs
        that ``recv`` returned.

    Returns
    -------
    SharedTensors
        Built once; valid for the vec env's life. They keep the block mapped
        while they live, so a closed vec env's memory is unmapped once they
        are gone (their contents after ``close()`` are the last step's).

    Raises
    ------
    ModuleNotFoundError
        torch is not installed.
    InvalidArgumentError
        ``venv`` has no shared block (a RayVecEnv, a MultiAgentVecEnv,
        another library's vec env), is closed, or has observation leaves
        without a fixed layout (``pickled_leaves=True``), which are not in
        the block.

    Notes
    -----
    With ``autoreset_mode="sb3"`` an env whose episode ended holds the first
    observation of its next episode, as the step returns it; the last one is
    in ``infos[i]["terminal_observation"]``.
    """
    try:
        import torch
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"vecenv.tensors needs PyTorch ({exc}); install it with `pip install torch`",
            name=exc.name,
        ) from exc
    engine = _engine(venv)
    col = engine._collector
    if engine.closed or col.rew is None:  # released by close()
        raise InvalidArgumentError("shared_tensors(venv): venv is closed")
    if col.obs_pickled:
        raise InvalidArgumentError(
            "shared_tensors(venv): observation leaves without a fixed layout "
            "(pickled_leaves=True) travel through the pipes, not the shared block"
        )
    leaves = [torch.from_numpy(buf) for buf in col.obs_bufs]
    observations = leaves[0] if col.single_obs else col.unflatten_obs(leaves)
    return SharedTensors(
        observations=observations,
        rewards=torch.from_numpy(col.rew),
        terminated=torch.from_numpy(col.term),
        truncated=torch.from_numpy(col.trunc),
    )
