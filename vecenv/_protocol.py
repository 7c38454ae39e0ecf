"""The codes that cross the process boundary (parent and worker).

One table for every number and tag the parent and its workers exchange:

* :class:`Op`: what the parent writes into ``op[env]`` of the control block
  before it wakes the env's worker (:meth:`vecenv._core.Control.dispatch`).
* :class:`Status`: what a worker writes into ``status[env]`` before it
  publishes the env (:meth:`vecenv._core.WorkerControl.publish`): whether a message
  for that env follows on the worker's pipe.
* :class:`Msg`: the first element of every message tuple on a worker's pipe
  (:mod:`vecenv._channel` documents each message and who sends it).
* :class:`Autoreset`: the engine's autoreset modes, resolved once from the
  ``autoreset_mode`` string so that no step compares strings.
* :class:`ErrorReport`: an exception raised in a worker (by an env) or in a
  Ray actor (by its local engine), as it crosses the process boundary; its
  :meth:`~ErrorReport.to_exception` is the one decoder into vecenv's
  exceptions, for the local engine and RayVecEnv alike.

``Op`` and ``Status`` are mirrored by the ``cdef enum`` of
``csrc/_protocol.pxd``, which the compiled core cimports;
``vecenv._core.PROTOCOL`` exposes the C values and a test checks that both
tables agree. On the step path the worker binds these values to plain ints
first (an enum attribute lookup per env-step would cost more than the rest).
"""

from __future__ import annotations

import dataclasses
import enum
import traceback as _traceback
from typing import Any, ClassVar, Dict, List, Optional, Tuple

from vecenv import errors as _errors


class Op(enum.IntEnum):
    """``op[env]``: the parent's command for an env (one byte)."""

    NONE = 0  # nothing to do (what take_ops skips)
    STEP = 1
    RESET = 2


class Status(enum.IntEnum):
    """``status[env]``: a worker's report for an env it publishes (one byte)."""

    OK = 0
    INFO = 1  # an info dict for this env is on the worker's pipe
    ERROR = 2  # an error report for this env is on the worker's pipe


class Msg(enum.IntEnum):
    """The kind of each message on a worker's pipe: the ``kind`` of its
    dataclass below (the step's round message is a tuple, ``ROUND`` first)."""

    # Parent -> worker.
    ATTACH = 1  # Attach
    RESET_KWARGS = 2  # ResetKwargs
    ACTIONS = 3  # Actions
    CALL = 4  # Call
    SYNC = 5  # Sync
    CLOSE = 6  # Close
    # Worker -> parent.
    PROGRESS = 10  # Progress, while starting
    SPACES = 11  # Spaces
    ERROR = 12  # Error
    ATTACHED = 13  # Attached
    RESULT = 14  # Result
    ROUND = 15  # (ROUND, {env: info}, {env: ErrorReport}): a tuple, on the step path
    SYNCED = 16  # Synced
    CLOSED = 17  # Closed


# ---------------------------------------------------------------- messages
# One frozen dataclass per message kind (but the round's tuple). _channel
# documents who sends each one and when; ``kind`` names it in messages.


@dataclasses.dataclass(frozen=True)
class Attach:
    """Parent -> worker: map the shared block and reset ``reset_ids``."""

    kind: ClassVar[Msg] = Msg.ATTACH
    handle: str  # the segment's name or /proc path
    layout: Any  # the _layout.Layout of the block
    reset_ids: List[int]  # envs to reset now (a restarted worker's envs not in flight)


@dataclasses.dataclass(frozen=True)
class ResetKwargs:
    """Parent -> worker: ``{env: {"seed": ..., "options": ...}}`` for their next reset."""

    kind: ClassVar[Msg] = Msg.RESET_KWARGS
    kwargs: Dict[int, Dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Actions:
    """Parent -> worker: ``{env: action}`` for their next step (off the shared rows)."""

    kind: ClassVar[Msg] = Msg.ACTIONS
    actions: Dict[int, Any]
    replace: bool = False  # drop the actions held from before (an interrupted post's)


@dataclasses.dataclass(frozen=True)
class Call:
    """Parent -> worker: run the call ``what`` of ``name`` on each of ``env_ids``."""

    kind: ClassVar[Msg] = Msg.CALL
    what: str  # one of _engine.CALL_KINDS
    name: str
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    env_ids: List[int]


@dataclasses.dataclass(frozen=True)
class Sync:
    """Parent -> worker: a barrier; the worker answers :class:`Synced`."""

    kind: ClassVar[Msg] = Msg.SYNC
    token: Any


@dataclasses.dataclass(frozen=True)
class Close:
    """Parent -> worker: close the envs, answer :class:`Closed` and exit."""

    kind: ClassVar[Msg] = Msg.CLOSE


@dataclasses.dataclass(frozen=True)
class Progress:
    """Worker -> parent while starting: now doing ``activity`` for ``env``."""

    kind: ClassVar[Msg] = Msg.PROGRESS
    env: Optional[int]
    activity: int  # a _worker.Activity code


@dataclasses.dataclass(frozen=True)
class Spaces:
    """Worker -> parent: the envs are built; their spaces and env 0's metadata."""

    kind: ClassVar[Msg] = Msg.SPACES
    observation_space: Any
    action_space: Any
    metadata: List[Dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Error:
    """Worker -> parent: starting failed (a factory, a space check, a reset)."""

    kind: ClassVar[Msg] = Msg.ERROR
    report: ErrorReport


@dataclasses.dataclass(frozen=True)
class Attached:
    """Worker -> parent: attached; ``infos`` of the envs it reset."""

    kind: ClassVar[Msg] = Msg.ATTACHED
    pid: int
    infos: Dict[int, Any]


@dataclasses.dataclass(frozen=True)
class Result:
    """Worker -> parent: a :class:`Call`'s ``("ok", value)`` or ``("error",
    ErrorReport)`` per env, in the call's ``env_ids`` order."""

    kind: ClassVar[Msg] = Msg.RESULT
    values: List[Tuple[str, Any]]


@dataclasses.dataclass(frozen=True)
class Synced:
    """Worker -> parent: the answer to :class:`Sync`."""

    kind: ClassVar[Msg] = Msg.SYNCED
    token: Any


@dataclasses.dataclass(frozen=True)
class Closed:
    """Worker -> parent: the envs are closed; the worker exits."""

    kind: ClassVar[Msg] = Msg.CLOSED


class Autoreset(enum.Enum):
    """The engine's autoreset modes; the value is the ``autoreset_mode`` name."""

    SB3 = "sb3"
    NEXT_STEP = "next_step"
    SAME_STEP = "same_step"
    DISABLED = "disabled"


AUTORESET_MODES = tuple(m.value for m in Autoreset)  # the accepted names


@dataclasses.dataclass(frozen=True)
class ErrorReport:
    """A picklable report of an exception raised across the process boundary.

    Written by a worker for an env's exception (``_worker.error_payload``:
    ``where`` says what the env was doing) or by a Ray actor for an exception
    of its local engine (:meth:`of_exception`: ``message`` is that
    exception's full message). The parent turns it into an exception with
    :meth:`to_exception`, and nowhere else.
    """

    #: The :mod:`vecenv.errors` class to raise ("WorkerError", "ObservationError",
    #: "WorkerDiedError", "WatchdogTimeoutError"...); unknown names raise WorkerError.
    kind: str
    message: str
    exc_type: str = ""  # qualified name of the original exception's type
    traceback: str = ""  # formatted where it was raised
    env_index: Optional[int] = None  # the env it concerns, if one
    where: str = ""  # what the env was doing ("step", "creating the env"...); "" if not an env's
    env_indices: Tuple[int, ...] = ()  # WorkerDiedError, VecEnvTimeoutError: the envs concerned
    exitcode: Optional[int] = None  # WorkerDiedError: the worker's exit code

    @classmethod
    def of_exception(cls, exc: BaseException) -> ErrorReport:
        """The report of ``exc`` as it is: a vecenv error keeps its class,
        env indices and worker traceback; anything else becomes a WorkerError."""
        kind = type(exc).__name__
        if not isinstance(exc, _errors.VecEnvError) or not hasattr(_errors, kind):
            kind = "WorkerError"
        return cls(
            kind=kind,
            message=str(exc),
            exc_type=getattr(exc, "exc_type", "")
            or f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback=getattr(exc, "worker_traceback", "")
            or "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__)),
            env_index=getattr(exc, "env_index", None),
            env_indices=tuple(getattr(exc, "env_indices", ()) or ()),
            exitcode=getattr(exc, "exitcode", None),
        )

    def to_exception(self, prefix: str = "", offset: int = 0) -> Exception:
        """The vecenv exception this report stands for.

        Parameters
        ----------
        prefix : str
            Put before the message (RayVecEnv: which actor, while doing what).
        offset : int
            Added to the env indices (RayVecEnv: the actor's first env).

        Returns
        -------
        Exception
            An instance of ``vecenv.errors.<kind>`` (WorkerError if unknown),
            with the env indices, the original type's name and its traceback
            chained as a :class:`~vecenv.errors.RemoteTraceback`.
        """
        cls = getattr(_errors, self.kind, None)
        if not (isinstance(cls, type) and issubclass(cls, _errors.VecEnvError)):
            cls = _errors.WorkerError
        i = None if self.env_index is None else offset + int(self.env_index)
        text = self.message
        if self.where:  # an env's own exception: say which env, doing what
            text = f"env {i} raised {self.exc_type} in {self.where}: {text}"
        text = prefix + text
        indices = tuple(offset + int(k) for k in self.env_indices)
        err: Exception
        if issubclass(cls, _errors.WorkerDiedError):
            err = cls(text, env_indices=indices, exitcode=self.exitcode, env_index=i)
        elif issubclass(cls, _errors.WorkerError):
            err = cls(text, env_index=i, exc_type=self.exc_type, worker_traceback=self.traceback)
        elif issubclass(cls, _errors.VecEnvTimeoutError):
            err = cls(text, env_indices=indices, env_index=i)
        else:
            err = cls(text)
        if self.traceback:
            err.__cause__ = _errors.RemoteTraceback(self.traceback)
        return err
