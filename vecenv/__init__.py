"""vecenv: fast, dependable vectorized RL environments over shared memory.

Public names: :class:`VecEnv`, :class:`ShmemVecEnv`, :func:`make`, the
gymnasium drop-in :class:`AsyncVectorEnv` with :func:`make_vec`, and the
exceptions of :mod:`vecenv.errors`.
"""

try:
    from vecenv import _core  # noqa: F401
except ImportError as _exc:  # pragma: no cover - only without a build
    raise ImportError(
        "vecenv's compiled core (vecenv._core) is missing or broken: "
        f"{_exc}. Build it with `pip install .` (needs a C compiler, Cython>=3 "
        "and numpy>=2 at build time) or install a wheel."
    ) from _exc

from vecenv.base import VecEnv, tile_images
from vecenv.errors import (
    ClosedError,
    InvalidArgumentError,
    ObservationError,
    RewardError,
    SpaceError,
    StateError,
    VecEnvError,
    VecEnvTimeoutError,
    WorkerDiedError,
    WorkerError,
)
from vecenv.gymnasium_vector import AsyncVectorEnv, make_vec
from vecenv.multi_agent import MultiAgentVecEnv
from vecenv.shmem_vec_env import ShmemVecEnv, make

__version__ = "0.1.0"

__all__ = [
    "AsyncVectorEnv",
    "ClosedError",
    "InvalidArgumentError",
    "MultiAgentVecEnv",
    "ObservationError",
    "RewardError",
    "ShmemVecEnv",
    "SpaceError",
    "StateError",
    "VecEnv",
    "VecEnvError",
    "VecEnvTimeoutError",
    "WorkerDiedError",
    "WorkerError",
    "__version__",
    "make",
    "make_vec",
    "tile_images",
]
