"""The engine's options, and the checks every front end shares (parent side).

:class:`EngineOptions` is the one list of the keyword options of the engine
(:class:`~vecenv.ShmemVecEnv`) with their defaults and their checks, so that
``ShmemVecEnv``, :func:`vecenv.make`, the gymnasium and SB3 drop-ins and
:class:`~vecenv.ray.RayVecEnv` (for its actors' local engines) accept and
refuse the same values with the same messages, before any process exists.
The checks of durations in seconds, autoreset mode names and env factories
live here too.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from vecenv._infos import check_info_keys
from vecenv._protocol import AUTORESET_MODES
from vecenv.errors import InvalidArgumentError

_CONTEXTS = ("fork", "spawn", "forkserver")


class UnknownOptionError(InvalidArgumentError, TypeError):
    """A keyword that is not one of the engine's options (also a ``TypeError``,
    what Python raises for an unexpected keyword argument)."""


@dataclasses.dataclass(frozen=True)
class EngineOptions:
    """The engine's options, checked once; see :class:`~vecenv.ShmemVecEnv`
    for what each one does.

    Every front end builds one from its keyword arguments (or takes one as
    ``engine_options=``), so each value is checked the same way everywhere.
    Checked here: ``inline`` (a bool), ``inline_envs`` (an int >= 0, with
    ``inline``), the durations (``timeout`` and ``start_timeout`` > 0 or
    None, ``spin`` >= 0 or None, in seconds), ``autoreset_mode`` (any
    spelling; stored as the engine's name), ``context``,
    ``on_worker_death``, ``max_restarts`` and ``info_keys`` (stored as a
    tuple). ``num_workers``,
    ``envs_per_worker``, ``batch_size`` and ``cpu_affinity`` depend on
    ``num_envs`` and are checked when the engine is built.

    Raises
    ------
    InvalidArgumentError
        A value out of its range; the message names the option.
    """

    num_workers: Any = None
    envs_per_worker: Optional[int] = None
    inline: bool = False
    inline_envs: Optional[int] = None
    batch_size: Optional[int] = None
    context: Optional[str] = None
    copy: bool = True
    timeout: Optional[float] = None
    start_timeout: float = 60.0
    spin: Optional[float] = None
    autoreset_mode: str = "sb3"
    cpu_affinity: Union[bool, Sequence[int], None] = None
    daemon: bool = True
    on_worker_death: str = "raise"
    max_restarts: int = 100
    check_rewards: bool = False
    check_actions: bool = False
    pickled_leaves: bool = False
    check_spaces: bool = True
    check_observations: bool = False
    episode_statistics: bool = False
    info_keys: Optional[Collection[str]] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "info_keys", check_info_keys(self.info_keys))
        if not isinstance(self.inline, (bool, np.bool_)):
            raise InvalidArgumentError(f"inline must be a bool, got {self.inline!r}")
        k = self.inline_envs
        if k is not None:
            if not isinstance(k, (int, np.integer)) or isinstance(k, (bool, np.bool_)) or k < 0:
                raise InvalidArgumentError(f"inline_envs must be an int >= 0 or None, got {k!r}")
            if not self.inline:
                raise InvalidArgumentError(
                    f"inline_envs={k} is the caller's share of inline=True: pass inline=True "
                    "too, or leave inline_envs out"
                )
        check_seconds("timeout", self.timeout)
        check_seconds("start_timeout", self.start_timeout)
        check_seconds("spin", self.spin, zero_ok=True)
        object.__setattr__(self, "autoreset_mode", autoreset_mode_name(self.autoreset_mode))
        if self.on_worker_death not in ("raise", "restart"):
            raise InvalidArgumentError(
                f"on_worker_death must be 'raise' or 'restart', got {self.on_worker_death!r}"
            )
        m = self.max_restarts
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 0:
            raise InvalidArgumentError(f"max_restarts must be an int >= 0, got {m!r}")
        if self.context is not None and self.context not in _CONTEXTS:
            raise InvalidArgumentError(
                f"context must be one of {_CONTEXTS} or None, got {self.context!r}"
            )

    @classmethod
    def from_kwargs(
        cls,
        kwargs: Mapping[str, Any],
        *,
        caller: str,
        allowed: Optional[Collection[str]] = None,
    ) -> EngineOptions:
        """The options of ``kwargs`` (option name -> value; the others keep
        their defaults), checked.

        Parameters
        ----------
        kwargs : mapping
            Keyword options, or an :class:`EngineOptions` under the key
            ``"engine_options"`` (then no other key).
        caller : str
            The API call, for messages (``"AsyncVectorEnv()"``).
        allowed : collection of str, optional
            The option names this caller passes through (default: all).

        Raises
        ------
        UnknownOptionError
            A key that is not an allowed option (an InvalidArgumentError and
            a TypeError).
        InvalidArgumentError
            A bad value.
        """
        names = ENGINE_OPTIONS if allowed is None else tuple(allowed)
        kwargs = dict(kwargs)
        given = kwargs.pop("engine_options", None)
        if given is not None:
            if not isinstance(given, EngineOptions):
                raise InvalidArgumentError(
                    f"{caller}: engine_options must be a vecenv.EngineOptions, "
                    f"got {type(given).__name__}"
                )
            if kwargs:
                raise InvalidArgumentError(
                    f"{caller}: pass engine options either as engine_options= or as "
                    f"keywords, not both (got keywords {sorted(kwargs)})"
                )
            extra = [k for k, v in given.changed().items() if k not in names]
            if extra:
                raise InvalidArgumentError(
                    f"{caller}: engine_options sets {extra}, which {caller} sets itself"
                )
            return given
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise UnknownOptionError(
                f"{caller} got unexpected keyword arguments {unknown}; "
                f"vecenv's own options are {list(names)}"
            )
        return cls(**kwargs)

    def replace(self, **changes: Any) -> EngineOptions:
        """A copy with ``changes`` applied (and checked)."""
        return dataclasses.replace(self, **changes)

    def as_kwargs(self) -> Dict[str, Any]:
        """Every option as a dict of ShmemVecEnv keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def changed(self) -> Dict[str, Any]:
        """The options that differ from their defaults."""
        default = _DEFAULTS.as_kwargs()
        return {k: v for k, v in self.as_kwargs().items() if not _same(v, default[k])}


#: The engine's keyword options, in ShmemVecEnv's signature order.
ENGINE_OPTIONS = tuple(f.name for f in dataclasses.fields(EngineOptions))


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an array compares elementwise
        return False


def autoreset_mode_name(mode: Any, allowed: Sequence[str] = AUTORESET_MODES) -> str:
    """The engine's name ("sb3", "next_step", "same_step", "disabled") for an
    autoreset mode given as a ``gymnasium.vector.AutoresetMode`` member or as a
    string in any of its spellings ("next_step", "NextStep", "NEXT_STEP",
    "nextstep"...).

    Raises
    ------
    InvalidArgumentError
        Not one of ``allowed``.
    """
    value = getattr(mode, "value", mode)  # an AutoresetMode member
    if isinstance(value, str):
        key = value.replace("_", "").replace("-", "").lower()
        for name in allowed:
            if name.replace("_", "") == key:
                return name
    raise InvalidArgumentError(
        f"autoreset_mode must be one of {tuple(allowed)} (or gymnasium's AutoresetMode "
        f"members and names such as 'NextStep'), got {mode!r}"
    )


def check_env_fns(env_fns: Any) -> List[Callable[[], Any]]:
    """``env_fns`` as a non-empty list of callables, one per env.

    Raises
    ------
    InvalidArgumentError
        A single value, not a sequence, empty, or an item that is not callable.
    """
    if callable(env_fns) or isinstance(env_fns, (str, bytes)):
        raise InvalidArgumentError(
            "env_fns must be a sequence of callables, one per env; got a single value"
        )
    try:
        env_fns = list(env_fns)
    except TypeError:
        raise InvalidArgumentError(
            f"env_fns must be a sequence of callables, got {type(env_fns).__name__}"
        ) from None
    if not env_fns:
        raise InvalidArgumentError("env_fns is empty: need at least one env factory")
    for i, fn in enumerate(env_fns):
        if not callable(fn):
            raise InvalidArgumentError(f"env_fns[{i}] must be callable, got {type(fn).__name__}")
    return env_fns


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


_DEFAULTS = EngineOptions()  # after check_seconds, which it calls


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
