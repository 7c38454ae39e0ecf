"""gymnasium's exceptions, and its argument errors as the installed gymnasium
raises them, for the drop-in :mod:`vecenv.gymnasium_vector` (parent side).

gymnasium before 1.4 asserts the arguments of its vector envs (a seed list of
the wrong length, a bad ``reset_mask``, a custom ``observation_mode`` that is
not two spaces); 1.4 raises TypeError and ValueError (Gymnasium PR 1615).
:data:`ASSERTS_ARGUMENTS` says which, found once at import by probing
gymnasium's own ``AsyncVectorEnv.reset_async``; :func:`argument_error` builds
the error either way. Every other error type and message the drop-in
reproduces is the same in 1.3 and 1.4.
"""

from __future__ import annotations

import multiprocessing
import re
from typing import Any, Optional

import gymnasium
import numpy as np
from gymnasium import Space, logger
from gymnasium import error as gym_error
from gymnasium import spaces as gym_spaces

from vecenv.errors import (
    ClosedError,
    InvalidArgumentError,
    PendingTimeoutError,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WatchdogTimeoutError,
    WorkerError,
)


# ---------------------------------------------------------------- exceptions
# Each is gymnasium's exception (so `except gymnasium.error.X` works) and
# vecenv's matching one (so `except vecenv.StateError` works too).
class AlreadyPendingCallError(gym_error.AlreadyPendingCallError, StateError):
    """An ``*_async`` call, ``set_attr`` or ``reset`` while another call is pending.

    ``name`` is the pending call: ``"reset"``, ``"step"`` or ``"call"``.
    """


class NoAsyncCallError(gym_error.NoAsyncCallError, StateError):
    """A ``*_wait`` call without the matching ``*_async`` call before it."""


class ClosedEnvironmentError(gym_error.ClosedEnvironmentError, ClosedError):
    """Any call after :meth:`AsyncVectorEnv.close`."""


class WaitTimeoutError(VecEnvTimeoutError, multiprocessing.TimeoutError):
    """A ``*_wait(timeout=...)`` ran out of time. Both ``multiprocessing.TimeoutError``
    (what gymnasium raises) and the builtin ``TimeoutError``; also a
    :class:`~vecenv.errors.PendingTimeoutError` (the wait's own ``timeout``:
    the call is still pending) or a :class:`~vecenv.errors.WatchdogTimeoutError`
    (the engine's ``timeout``: the late workers were killed)."""


class PendingWaitTimeout(WaitTimeoutError, PendingTimeoutError):
    """WaitTimeoutError of a wait's own ``timeout``: the call is still pending."""


class WatchdogWaitTimeout(WaitTimeoutError, WatchdogTimeoutError):
    """WaitTimeoutError of the engine's ``timeout``: the late workers were killed."""


class SpacesDifferError(SpaceError, RuntimeError):
    """The envs disagree on their spaces (gymnasium raises RuntimeError here)."""


class NoSharedLayoutError(SpaceError):
    """A custom observation space with ``shared_memory=True``, or a space vecenv
    cannot handle at all (gymnasium raises ValueError)."""


# Spaces gymnasium lays out in shared memory; Graph and Sequence raise
# TypeError there, any other Space subclass CustomSpaceError (a ValueError by
# the time AsyncVectorEnv raises it).
SHARED_MEMORY_SPACES = (
    gym_spaces.Box,
    gym_spaces.Discrete,
    gym_spaces.MultiDiscrete,
    gym_spaces.MultiBinary,
    gym_spaces.Text,
)


def check_shared_memory_space(space: Space) -> None:
    """Raise what gymnasium's ``AsyncVectorEnv(shared_memory=True)`` raises for
    an observation space it cannot put in shared memory (depth first)."""
    if isinstance(space, (gym_spaces.Tuple, gym_spaces.OneOf)):
        for sub in space.spaces:
            check_shared_memory_space(sub)
    elif isinstance(space, gym_spaces.Dict):
        for sub in space.spaces.values():
            check_shared_memory_space(sub)
    elif isinstance(space, (gym_spaces.Graph, gym_spaces.Sequence)):
        raise DynamicSpaceError(
            f"As {space} has a dynamic shape so its not possible to make a static shared "
            "memory. For `AsyncVectorEnv`, disable `shared_memory`."
        )
    elif not isinstance(space, SHARED_MEMORY_SPACES):
        raise NoSharedLayoutError(
            "Using `AsyncVector(..., shared_memory=True)` caused an error, you can disable "
            "this feature with `shared_memory=False` however this is slower."
        )


class ArgumentAssertionError(InvalidArgumentError, AssertionError):
    """A bad argument where the installed gymnasium asserts (before 1.4):
    an AssertionError, as gymnasium raises, and an InvalidArgumentError."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """A bad argument's type where gymnasium (1.4 and later) raises TypeError."""


def probe_asserts_arguments() -> bool:
    """True when the installed gymnasium raises AssertionError for bad
    arguments of its vector envs (a seed list of the wrong length, a bad
    ``reset_mask``, a custom ``observation_mode`` that is not two spaces):
    gymnasium before 1.4 asserts, 1.4 raises TypeError and ValueError
    (Gymnasium PR 1615). Found by calling gymnasium's own
    ``AsyncVectorEnv.reset_async`` on a stand-in with seeds of the wrong
    length (it checks them before it touches a pipe); the version decides if
    that probe fails some other way."""
    from types import SimpleNamespace

    from gymnasium.vector import AsyncVectorEnv as _GymAsync

    probe = SimpleNamespace(num_envs=2, closed=False, _assert_is_running=lambda: None)
    try:
        _GymAsync.reset_async(probe, seed=[0])  # type: ignore[arg-type]
    except AssertionError:
        return True
    except ValueError:
        return False
    except Exception:
        pass
    parts = [int(p) for p in re.findall(r"\d+", gymnasium.__version__)[:2]]
    return tuple(parts) < (1, 4)


#: Whether the installed gymnasium asserts its arguments (see
#: :func:`probe_asserts_arguments`); read at each check, so a test can set it.
ASSERTS_ARGUMENTS = probe_asserts_arguments()


def argument_error(kind: type, message: str, legacy: Optional[str] = None) -> Exception:
    """The error gymnasium raises for a bad argument: ``kind`` ("TypeError"
    or "ValueError" in gymnasium 1.4: ArgumentTypeError or
    InvalidArgumentError) with ``message``, or before 1.4 an AssertionError
    with its message then (``legacy``; default ``message``)."""
    if ASSERTS_ARGUMENTS:
        return ArgumentAssertionError(message if legacy is None else legacy)
    return kind(message)


class DynamicSpaceError(SpaceError, TypeError):
    """A Graph or Sequence observation space with ``shared_memory=True``
    (gymnasium raises TypeError)."""


def log_worker_errors(err: WorkerError) -> None:
    """Report each env's error through ``gymnasium.logger.error`` with
    gymnasium's texts ("Worker-i" is env i: gymnasium runs one env per worker)."""
    errors = getattr(err, "errors", None) or {err.env_index: err}
    for i, e in sorted(errors.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
        logger.error(f"Received the following error from Worker-{i} - Shutting it down")
        logger.error(f"{e.worker_traceback or e}")
    logger.error("Raising the last exception back to the main process.")


def check_reset_mask(mask: Any, num_envs: int) -> None:
    """Raise what gymnasium's ``reset_async`` raises for a bad
    ``options["reset_mask"]`` (before 1.4 an AssertionError)."""
    # gymnasium's messages: 1.4's, and (legacy) those of its asserts before.
    if not isinstance(mask, np.ndarray):
        raise argument_error(
            ArgumentTypeError,
            f"`options['reset_mask']` must be a numpy array, got {type(mask)}",
            f"`options['reset_mask': mask]` must be a numpy array, got {type(mask)}",
        )
    if mask.shape != (num_envs,):
        raise argument_error(
            InvalidArgumentError,
            f"`options['reset_mask']` must have shape `({num_envs},)`, got {mask.shape}",
            f"`options['reset_mask': mask]` must have shape `({num_envs},)`, got {mask.shape}",
        )
    if mask.dtype != np.bool_:
        raise argument_error(
            ArgumentTypeError,
            f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}",
            f"`options['reset_mask': mask]` must have `dtype=np.bool_`, got {mask.dtype}",
        )
    if not np.any(mask):
        raise argument_error(
            InvalidArgumentError,
            "`options['reset_mask']` must contain a boolean array with at least one True "
            f"value, got reset_mask={mask}",
            f"`options['reset_mask': mask]` must contain a boolean array, got reset_mask={mask}",
        )
