"""The codes that cross the process boundary (parent and worker).

One table for every number and tag the parent and its workers exchange:

* :class:`Op`: what the parent writes into ``op[env]`` of the control block
  before it wakes the env's worker (:meth:`vecenv._core.Control.dispatch`).
* :class:`Status`: what a worker writes into ``status[env]`` before it
  publishes the env (:meth:`vecenv._core.Control.publish`): whether a message
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
from typing import Optional, Tuple

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
    """The kind of a message tuple on a worker's pipe (its first element)."""

    # Parent -> worker.
    ATTACH = 1  # (ATTACH, handle, layout, reset_ids)
    RESET_KWARGS = 2  # (RESET_KWARGS, {env: {"seed", "options"}})
    ACTIONS = 3  # (ACTIONS, {env: action})
    CALL = 4  # (CALL, what, name, args, kwargs, env_ids)
    SYNC = 5  # (SYNC, token)
    CLOSE = 6  # (CLOSE,)
    # Worker -> parent.
    PROGRESS = 10  # (PROGRESS, env or None, activity) while starting
    SPACES = 11  # (SPACES, obs_space, act_space, metadata)
    ERROR = 12  # (ERROR, ErrorReport)
    ATTACHED = 13  # (ATTACHED, pid, infos)
    RESULT = 14  # (RESULT, [(tag, value), ...])
    ROUND = 15  # (ROUND, {env: info}, {env: ErrorReport})
    SYNCED = 16  # (SYNCED, token)
    CLOSED = 17  # (CLOSED,)


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
