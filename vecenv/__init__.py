"""vecenv: fast, dependable vectorized RL environments over shared memory.

Public names: :class:`VecEnv`, :class:`ShmemVecEnv`, :func:`make`, the
gymnasium drop-in :class:`AsyncVectorEnv` with :func:`make_vec` and
:func:`register_vector_entry_point` (for ``gymnasium.make_vec``), and the
exceptions of :mod:`vecenv.errors`. ``python -m vecenv.bench ENV`` (:mod:`vecenv.bench`)
measures which layout suits an env on this machine.
"""

try:
    from vecenv import _core  # noqa: F401
except ImportError as _exc:  # pragma: no cover - only without a build
    from vecenv._missing_core import missing_core_error as _missing_core_error

    _err = _missing_core_error(__file__, _exc)  # says why, and how to fix it
    raise _err from _err.__cause__

from vecenv._options import EngineOptions
from vecenv._stats import Stats
from vecenv._version import __version__
from vecenv.base import VecEnv, tile_images
from vecenv.errors import (
    ActionTypeError,
    ArgumentNotPicklableError,
    ClosedError,
    CudaError,
    InfoError,
    InvalidArgumentError,
    ObservationError,
    PendingTimeoutError,
    ResultNotPicklableError,
    RewardError,
    SpaceError,
    StateError,
    VecEnvError,
    VecEnvTimeoutError,
    WatchdogTimeoutError,
    WorkerDiedError,
    WorkerError,
)
from vecenv.gymnasium_vector import AsyncVectorEnv, make_vec, register_vector_entry_point
from vecenv.multi_agent import MultiAgentVecEnv
from vecenv.shmem_vec_env import ShmemVecEnv, make

__all__ = [
    "ActionTypeError",
    "ArgumentNotPicklableError",
    "AsyncVectorEnv",
    "ClosedError",
    "CudaError",
    "EngineOptions",
    "InfoError",
    "InvalidArgumentError",
    "MultiAgentVecEnv",
    "ObservationError",
    "PendingTimeoutError",
    "ResultNotPicklableError",
    "RewardError",
    "ShmemVecEnv",
    "SpaceError",
    "StateError",
    "Stats",
    "VecEnv",
    "VecEnvError",
    "VecEnvTimeoutError",
    "WatchdogTimeoutError",
    "WorkerDiedError",
    "WorkerError",
    "__version__",
    "make",
    "make_vec",
    "register_vector_entry_point",
    "tile_images",
]
