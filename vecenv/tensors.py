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
(or none on the CPU, where ``t.observations`` is the input itself). With
``pin_memory=True`` the block is page-locked for CUDA (``cudaHostRegister``, as
PyTorch's ``torch.cuda.cudart()`` exposes it), so that copy is a direct DMA
transfer that ``non_blocking=True`` can overlap with the GPU's work.

torch is an optional dependency, imported when :func:`shared_tensors` is
called: ``pip install torch``.
"""

from __future__ import annotations

import dataclasses
import mmap
import weakref
from typing import Any

import numpy as np

from vecenv.errors import CudaError, InvalidArgumentError

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
    pinned : bool
        Whether these tensors hold a page-lock of the block for CUDA (the
        call had ``pin_memory=True``): the block stays page-locked while
        they live, ``tensor.is_pinned()`` is True and ``.to("cuda",
        non_blocking=True)`` copies by DMA without a staging buffer. Tensors
        of a plain call report False, even while other tensors hold a
        page-lock of the same block.
    """

    observations: Any
    rewards: Any
    terminated: Any
    truncated: Any
    pinned: bool = False


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


# cudaHostRegisterPortable: page-locked for every CUDA context, as PyTorch's
# own registrations of shared memory do (torch/cuda/_pin_memory_utils.py).
_CUDA_HOST_REGISTER_PORTABLE = 1

# Each vec env's live registration, as a weak reference (see _pin).
_registrations: weakref.WeakKeyDictionary[Any, weakref.ReferenceType] = weakref.WeakKeyDictionary()


def _unregister(sync: Any, cudart: Any, ptr: int, mapping: Any) -> None:
    """Undo one registration. First wait for the device, so that no copy
    still reads the pages; ``mapping`` (a view of the block, held by the
    finalizer until this returns) keeps them mapped until CUDA let go of
    them. Errors are ignored: a finalizer cannot raise, and a CUDA runtime
    being torn down has let go already."""
    try:
        sync()
    except Exception:
        pass
    try:
        cudart.cudaHostUnregister(ptr)
    except Exception:
        pass
    del mapping  # released only now


class _Registration:
    """One ``cudaHostRegister`` of a whole shared block, undone when the last
    pinned tensor over it is gone (each holds this through its array's base,
    see :class:`_PinnedLeaf`)."""

    def __init__(self, block: Any, torch: Any) -> None:
        cudart = torch.cuda.cudart()
        mapping = np.frombuffer(block, dtype=np.uint8)  # keeps the block mapped
        ptr = int(mapping.ctypes.data)
        # The mapping spans whole pages (mmap rounds its length up): register them all.
        size = -(-mapping.nbytes // mmap.PAGESIZE) * mmap.PAGESIZE
        # The finalizer first: a Ctrl-C just after the registration still undoes it
        # (unregistering a range that was never registered is an ignored error).
        undo = weakref.finalize(self, _unregister, torch.cuda.synchronize, cudart, ptr, mapping)
        err = int(cudart.cudaHostRegister(ptr, size, _CUDA_HOST_REGISTER_PORTABLE))
        if err != 0:
            undo.detach()
            raise CudaError(
                f"shared_tensors(venv, pin_memory=True): CUDA refused to page-lock the "
                f"{size}-byte shared block (cudaHostRegister returned cudaError {err})",
                code=err,
            )


class _PinnedLeaf:
    """A buffer of the block that NumPy wraps through ``__array_interface__``:
    the array's base is this object, which holds the registration (and so
    the block's mapping, see :func:`_unregister`), so the block stays mapped
    and page-locked while any tensor made from the array lives."""

    def __init__(self, buf: np.ndarray, registration: _Registration) -> None:
        self.__array_interface__ = buf.__array_interface__
        self.registration = registration


def _pin(engine: Any, torch: Any) -> _Registration:
    """The live registration of ``engine``'s block, made if there is none
    (CUDA refuses to register a range twice). Not for concurrent calls from
    several threads on one vec env."""
    if not torch.cuda.is_available():
        cuda = torch.version.cuda
        build = f"built for CUDA {cuda}" if cuda else "a CPU-only build"
        raise InvalidArgumentError(
            "shared_tensors(venv, pin_memory=True): page-locked memory is for copies to a "
            f"CUDA device, and CUDA is not available here (torch {torch.__version__}, "
            f"{build}, torch.cuda.is_available() is False); pass pin_memory=False"
        )
    ref = _registrations.get(engine)
    registration = ref() if ref is not None else None
    if registration is None:
        registration = _Registration(engine._resources.block, torch)
        _registrations[engine] = weakref.ref(registration)
    return registration


def shared_tensors(venv: Any, pin_memory: bool = False) -> SharedTensors:
    """Torch tensors sharing ``venv``'s observation, reward and flag buffers.

    Parameters
    ----------
    venv : ShmemVecEnv, vecenv.AsyncVectorEnv or vecenv.sb3.SubprocVecEnv
        An open vec env (any layout, ``num_workers=0`` included, any
        ``copy``, ``batch_size`` or ``autoreset_mode``). With partial batches
        (``batch_size < num_envs``) the rows of the envs still in flight are
        being written while you read the others: read the rows of the envs
        that ``recv`` returned.
    pin_memory : bool
        Page-lock the whole shared block for CUDA (``cudaHostRegister``,
        portable), as ``torch.Tensor.pin_memory()`` does for a copy, but in
        place: ``t.observations.to("cuda", non_blocking=True)`` is then one
        DMA transfer that returns at once, leaving the caller's thread free
        while it runs. Such a copy may still be reading the block when the
        call returns: let it finish (``torch.cuda.current_stream()
        .synchronize()``, or anything that waits for a result of it, such
        as ``actions.cpu()``) before the next ``step``/``send``/``reset``
        overwrites the rows. The block stays page-locked while any tensor of
        a pinned call lives (calls share one registration); the last one
        gone undoes it, after waiting for the device, and before the block
        is unmapped. Page-locked memory cannot be swapped out; the block
        holds about one batch of observations (two with
        ``autoreset_mode="sb3"``), plus the actions, rewards and flags.

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
        the block; or ``pin_memory=True`` where CUDA is not available
        (``torch.cuda.is_available()`` is False).
    CudaError
        ``pin_memory=True`` and CUDA refused to page-lock the block
        (``code`` is CUDA's error number; nothing stays registered). A
        ``RuntimeError`` too.

    Notes
    -----
    With ``autoreset_mode="sb3"`` an env whose episode ended holds the first
    observation of its next episode, as the step returns it; the last one is
    in ``infos[i]["terminal_observation"]``.
    """
    if not isinstance(pin_memory, bool):
        raise InvalidArgumentError(
            f"shared_tensors(venv, pin_memory=...): expected True or False, got {pin_memory!r}"
        )
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
    if pin_memory:
        registration = _pin(engine, torch)

        def tensor(buf: np.ndarray) -> Any:
            return torch.from_numpy(np.asarray(_PinnedLeaf(buf, registration)))

    else:
        tensor = torch.from_numpy
    leaves = [tensor(buf) for buf in col.obs_bufs]
    observations = leaves[0] if col.single_obs else col.unflatten_obs(leaves)
    return SharedTensors(
        observations=observations,
        rewards=tensor(col.rew),
        terminated=tensor(col.term),
        truncated=tensor(col.trunc),
        pinned=pin_memory,
    )
