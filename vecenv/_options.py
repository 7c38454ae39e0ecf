"""The engine's option names and their shared checks (parent side).

One list of the keyword options every front end passes through to the engine
(:class:`~vecenv.ShmemVecEnv`), and one check of the options given in
seconds, so that :func:`vecenv.make`, the gymnasium and SB3 drop-ins and
:class:`~vecenv.RayVecEnv` accept and refuse the same values.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from vecenv.errors import InvalidArgumentError

#: ShmemVecEnv's keyword options, in its signature's order.
ENGINE_OPTIONS = (
    "num_workers",
    "envs_per_worker",
    "batch_size",
    "context",
    "copy",
    "timeout",
    "start_timeout",
    "spin",
    "autoreset_mode",
    "cpu_affinity",
    "daemon",
    "on_worker_death",
    "max_restarts",
    "check_rewards",
    "check_actions",
    "pickled_leaves",
    "check_spaces",
)


def check_seconds(
    name: str, value: Any, *, allow_none: bool = True, zero_ok: bool = False
) -> Optional[float]:
    """``value`` checked as a duration in seconds: a finite-or-infinite
    number > 0 (>= 0 with ``zero_ok``), or None with ``allow_none``.

    Returns the value unchanged.

    Raises
    ------
    InvalidArgumentError
        Not a number (bools are refused), NaN, negative, zero where not
        allowed, or None where not allowed.
    """
    if value is None and allow_none:
        return None
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or value != value
        or value < 0
        or (value == 0 and not zero_ok)
    ):
        bound = ">= 0" if zero_ok else "> 0"
        tail = " or None" if allow_none else ""
        raise InvalidArgumentError(
            f"{name} must be a number of seconds {bound}{tail}, got {value!r}"
        )
    return value


def in_process(num_workers: Any, envs_per_worker: Any) -> bool:
    """Whether ``num_workers`` asks for the in-process engine: ``num_workers=0``
    (no worker process; the envs step in the calling process, see
    :mod:`vecenv._inprocess`). Any other value is left to the worker plan
    (:func:`vecenv._pool.plan_workers`), which checks it.

    Raises
    ------
    InvalidArgumentError
        ``num_workers`` is a negative int, or 0 together with
        ``envs_per_worker`` (which has no meaning without workers).
    """
    if (
        num_workers is None
        or isinstance(num_workers, bool)
        or not isinstance(num_workers, (int, np.integer))
    ):
        return False
    if num_workers < 0:
        raise InvalidArgumentError(
            f"num_workers must be an int >= 0 (0: in-process, no worker) or None, got {num_workers!r}"
        )
    if num_workers > 0:
        return False
    if envs_per_worker is not None:
        raise InvalidArgumentError(
            f"envs_per_worker must be None with num_workers=0 (in-process: there are no "
            f"workers), got envs_per_worker={envs_per_worker!r}"
        )
    return True


def check_auto_workers(num_workers: Any, envs_per_worker: Any) -> bool:
    """Whether ``num_workers`` asks for the layout to be chosen (``"auto"``).

    Other values are left to the layout's own checks (ints, None).

    Raises
    ------
    InvalidArgumentError
        Any other string, or ``"auto"`` together with ``envs_per_worker``
        (the choice includes it).
    """
    if not isinstance(num_workers, str):
        return False
    if num_workers != "auto":
        raise InvalidArgumentError(
            f"num_workers must be an int >= 0 (0: in-process), 'auto' or None, got {num_workers!r}"
        )
    if envs_per_worker is not None:
        raise InvalidArgumentError(
            f"num_workers='auto' chooses envs_per_worker too, got envs_per_worker="
            f"{envs_per_worker!r}: pass one of them"
        )
    return True
