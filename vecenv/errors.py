"""Exceptions raised by vecenv (parent side).

Every exception derives from :class:`VecEnvError` and also from the builtin
that matches its kind (``RuntimeError``, ``TimeoutError``, ``ValueError``), so
callers can catch either.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, Optional, Sequence, Tuple

_FIRST = object()  # WorkerDiedError's default env_index: the first lost env


class VecEnvError(Exception):
    """Base class of every error raised by vecenv."""


class StateError(VecEnvError, RuntimeError):
    """A method was called in a state that does not allow it.

    Examples: ``step_wait()`` without a pending ``step_async()``, ``step_async()``
    twice, or any call after ``close()``. The message names the method, the
    pending call and what to call instead.
    """


class ClosedError(StateError):
    """The vectorized environment was already closed."""


class InvalidArgumentError(VecEnvError, ValueError):
    """An argument (actions, env indices, options) is malformed.

    Raised before anything is sent to a worker; the message names the argument,
    the expected value and the actual one.
    """


class ActionTypeError(InvalidArgumentError, TypeError):
    """Actions of the wrong kind: for example one scalar where a batch of
    ``num_envs`` actions is needed. Also a ``TypeError`` (what gymnasium's
    vector envs raise for it) and a ``ValueError``."""


class SpaceError(InvalidArgumentError):
    """A space cannot be laid out in fixed shared memory (Text, Graph, Sequence...)
    or the envs of one vectorized env disagree on their spaces."""


class WorkerError(VecEnvError, RuntimeError):
    """An environment raised an exception inside a worker process.

    Attributes
    ----------
    env_index : int or None
        Index of the env (0 <= env_index < num_envs) that failed, or None when
        the failure is not tied to one env.
    exc_type : str
        Qualified name of the exception type raised in the worker.
    worker_traceback : str
        The formatted traceback from the worker process.
    errors : dict of int to WorkerError
        Set when several envs failed in one step: env index -> its error.
    """

    errors: Dict[int, WorkerError]

    def __init__(
        self,
        message: str,
        *,
        env_index: Optional[int] = None,
        exc_type: str = "",
        worker_traceback: str = "",
    ):
        super().__init__(message)
        self.env_index = env_index
        self.exc_type = exc_type
        self.worker_traceback = worker_traceback


class ObservationError(WorkerError):
    """An env returned an observation that does not match its observation space
    (wrong shape, dtype or structure). Never silently cast."""


class RewardError(WorkerError):
    """An env returned a non-finite reward (NaN or inf) while the vec env was
    built with ``check_rewards=True``."""


class InfoError(WorkerError, TypeError):
    """An env returned an info that is not a dict, or a dict with keys that
    are not str (gymnasium's Env API asks for ``dict[str, Any]``). The env
    raised nothing; ``env_index`` is the env whose info it was."""


class ResultNotPicklableError(WorkerError, TypeError):
    """An env's value could not be sent back to the parent process: the
    result of ``get_attr``, ``env_method``, ``call`` or ``render`` does not
    pickle (a lambda, a lock, an open file). The env raised nothing and the
    attribute exists; ``env_index`` is the env whose value failed and
    ``exc_type`` the type of the pickling error (its message is quoted).

    Also a ``TypeError`` (what pickling a lock raises), never an
    ``AttributeError`` (what pickling a local lambda raises), which would
    read as a missing attribute. In process (``num_workers=0``) values are
    passed by reference and this is never raised.
    """


class ArgumentNotPicklableError(InvalidArgumentError, TypeError):
    """A value for the envs does not pickle, so it cannot reach their worker
    processes: a ``set_attr`` value, ``env_method`` / ``call`` arguments,
    an ``env_is_wrapped`` class, reset ``options``, or an action sent
    through the pipe. Raised in the parent before anything is sent (the vec
    env keeps its state); ``env_indices`` are the envs it was meant for.

    Also a ``TypeError`` (what gymnasium's and SB3's vec envs raise, from
    pickle) and a ``ValueError``.
    """

    def __init__(self, message: str, *, env_indices: Sequence[int] = ()):
        super().__init__(message)
        self.env_indices = tuple(env_indices)


class WorkerDiedError(WorkerError):
    """A worker process exited (crash, signal, ``os._exit``, OOM kill).

    Noticed within about 0.1 s, also while the parent waits. The vec env then
    needs a ``reset()``, which starts the worker again with new envs (or use
    ``on_worker_death="restart"`` to have steps go on).

    Attributes
    ----------
    env_index : int or None
        The env the worker was running when it died (its ``reset``, ``step``,
        ``render``, a method call or its factory; the message says which), or
        None when it died between env calls (killed from outside while idle).
    env_indices : tuple of int
        Every env hosted by the dead worker: all of them are lost with it.
    exitcode : int or None
        The process exit code; negative values are ``-signal``.
    """

    def __init__(
        self,
        message: str,
        *,
        env_indices: Sequence[int] = (),
        exitcode=None,
        env_index=_FIRST,
    ):
        if env_index is _FIRST:
            env_index = env_indices[0] if env_indices else None
        super().__init__(message, env_index=env_index)
        self.env_indices = tuple(env_indices)
        self.exitcode = exitcode


class VecEnvTimeoutError(VecEnvError, TimeoutError):
    """Envs did not answer in time. Every timeout vecenv raises is one of two
    subclasses, which say what became of the call:

    * :class:`PendingTimeoutError`: a wait ran out of time; nothing was
      killed and the call is still pending (wait again, or ``reset()`` /
      ``close()``).
    * :class:`WatchdogTimeoutError`: a time limit of the vec env itself
      (``timeout``, ``start_timeout``, ``restart_timeout``) passed and what
      was late was given up: its workers were killed, and the vec env needs a
      ``reset()`` (or, at construction, was never built).

    ``except VecEnvTimeoutError`` catches both.

    Attributes
    ----------
    env_indices : tuple of int
        The envs that had not answered when the deadline passed.
    env_index : int or None
        The env a late worker was running when the deadline passed (the one
        stuck; with several late workers, the first), or None if unknown.
    """

    def __init__(
        self, message: str, *, env_indices: Sequence[int] = (), env_index: Optional[int] = None
    ):
        super().__init__(message)
        self.env_indices = tuple(env_indices)
        self.env_index = env_index


class PendingTimeoutError(VecEnvTimeoutError):
    """A wait ran out of time and the call is still pending.

    Raised by a wait with a time limit of its own (:meth:`ShmemVecEnv.call_wait
    <vecenv.ShmemVecEnv.call_wait>` with ``timeout=``, any wait inside
    :meth:`ShmemVecEnv.limit_waits <vecenv.ShmemVecEnv.limit_waits>`, the
    gymnasium drop-in's ``*_wait(timeout=...)``) and by :class:`~vecenv.ray.RayVecEnv`'s
    ``timeout``. No worker was killed and no result was lost: calling the
    same wait again collects it; ``reset()`` or ``close()`` abandons it.
    ``env_indices`` names the envs not yet heard from.
    """


class WatchdogTimeoutError(VecEnvTimeoutError):
    """A time limit of the vec env itself passed and the late work was given up.

    ShmemVecEnv's ``timeout`` watchdog: the workers of the late envs were
    killed and the vec env needs a ``reset()``, which starts them again.
    ``start_timeout`` (ShmemVecEnv, RayVecEnv) or ``restart_timeout``
    (RayVecEnv): the workers or actors that did not start were stopped and
    the vec env was not built (or the actor's envs are lost).
    ``env_indices`` names the late envs; ``env_index`` the env a late worker
    was inside, when known.
    """


class CudaError(VecEnvError, RuntimeError):
    """CUDA refused what vecenv asked of it: page-locking the shared block
    (:func:`vecenv.tensors.shared_tensors` with ``pin_memory=True``).

    Attributes
    ----------
    code : int
        CUDA's ``cudaError_t`` number (for example 712,
        ``cudaErrorHostMemoryAlreadyRegistered``, or 2, out of memory).
    """

    def __init__(self, message: str, *, code: int):
        super().__init__(message)
        self.code = code


class RemoteTraceback(Exception):
    """Carries a worker's formatted traceback as the ``__cause__`` of a
    :class:`WorkerError`, so that both sides show in one report."""

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return "\n\n--- traceback in the worker process ---\n" + self.tb


# (WorkerError subclass, qualified name of the env's exception) -> the class that
# is both, or None when the env's type cannot be rebuilt here.
_DUAL_TYPES: Dict[Tuple[type, str], Optional[type]] = {}


def as_env_exception(err: WorkerError) -> WorkerError:
    """``err`` as an instance of the env's own exception type too.

    An env that raises ``gymnasium.error.NameNotFound`` while it is built (or
    ``KeyError`` while it steps) reaches the caller as an exception that
    ``except NameNotFound`` catches and that is still a :class:`WorkerError`
    of the same kind, with the same message, ``env_index``, ``exc_type`` and
    ``worker_traceback``. The env's type is imported in the parent by its
    qualified name (``err.exc_type``); when that fails, or the two classes
    cannot be combined, ``err`` itself is returned.

    Parameters
    ----------
    err : WorkerError
        The error as the worker reported it.

    Returns
    -------
    WorkerError
        A new exception of a class derived from ``type(err)`` and the env's
        exception class, or ``err``. Idempotent: an error that is already of
        such a class is returned unchanged.
    """
    if getattr(type(err), "_vecenv_dual", False) or isinstance(err, ResultNotPicklableError):
        return err  # (the env raised nothing: the pickling error's type is not the env's)
    name = err.exc_type
    key = (type(err), name)
    cls = _DUAL_TYPES.get(key)
    if cls is None and name and key not in _DUAL_TYPES:
        module, _, qualname = name.rpartition(".")
        try:
            env_cls: Any = importlib.import_module(module)
            for part in qualname.split("."):
                env_cls = getattr(env_cls, part)
            if (
                isinstance(env_cls, type)
                and issubclass(env_cls, Exception)
                and not issubclass(env_cls, WorkerError)
            ):
                cls = type(
                    env_cls.__name__,
                    (type(err), env_cls),
                    {"__module__": __name__, "_vecenv_dual": True},
                )
        except Exception:  # unknown module, layout conflict...: keep the WorkerError
            cls = None
        _DUAL_TYPES[key] = cls
    if cls is None:
        return err
    try:
        new = cls(
            err.args[0],
            env_index=err.env_index,
            exc_type=name,
            worker_traceback=err.worker_traceback,
        )
    except Exception:
        return err
    new.__cause__ = err.__cause__
    for attr in ("errors", "env_indices", "exitcode"):
        if hasattr(err, attr):
            setattr(new, attr, getattr(err, attr))
    return new
