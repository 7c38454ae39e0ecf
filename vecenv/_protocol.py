"""The codes that cross the process boundary (parent and worker) and the
Python/C boundary (vecenv and its compiled core, ``vecenv._core``).

One table for every number and tag the parent, its workers and the compiled
core exchange:

* :class:`Op`: what the parent writes into ``op[env]`` of the control block
  before it wakes the env's worker (:meth:`vecenv._core.Control.dispatch`).
* :class:`Status`: what a worker writes into ``status[env]`` before it
  publishes the env (:meth:`vecenv._core.WorkerControl.publish`): whether a message
  for that env follows on the worker's pipe.
* :class:`Activity`: what the env a worker is inside is doing, in its control
  slot (and in :class:`Progress` while it starts).
* :class:`Autoreset`: the engine's autoreset modes, resolved once from the
  ``autoreset_mode`` string so that no step compares strings.
* :class:`Region`, :class:`Header`, :class:`SlotWord`: the geometry of the
  control region at the start of the shared block (the layout is drawn in
  ``csrc/_core.pyx``'s module docstring).
* :class:`ParentCode`, :class:`WaitCode`: what the compiled parent step and
  the compiled waits return instead of a result.
* The info keys (``RESET_INFO_KEY`` ...): the private keys a worker adds to
  an env's info for the parent, and the stable-baselines3 keys that the
  parent's step (compiled or not) adds to it.
* :class:`Msg`: the first element of every message tuple on a worker's pipe
  (:mod:`vecenv._channel` documents each message and who sends it).
* :class:`ErrorReport`: an exception raised in a worker (by an env) or in a
  Ray actor (by its local engine), as it crosses the process boundary; its
  :meth:`~ErrorReport.to_exception` is the one decoder into vecenv's
  exceptions, for the local engine and RayVecEnv alike.

Every table here but :class:`Msg` (the pipe's, which only Python reads) is
mirrored by name in ``csrc/_protocol.pxd``, which the compiled core cimports:
``vecenv._core.PROTOCOL`` exposes the C side's values and
``tests/test_protocol.py`` checks that it equals :func:`mirrored_tables`, so
renumbering a constant on one side only fails. On the step path the worker
binds these values to plain ints first (an enum attribute lookup per
env-step would cost more than the rest).
"""

from __future__ import annotations

import dataclasses
import enum
import traceback as _traceback
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Union

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
    SHARED_INFO = 3  # its info is in its row of the block's info rows (vecenv._infos), no message


class Activity(enum.IntEnum):
    """What the env a worker is inside is doing: the code in its control slot
    (:attr:`SlotWord.ACTIVITY`; the worker writes it before each env call) and
    in the :class:`Progress` messages sent while it starts."""

    NONE = 0
    UNPICKLE = 1  # unpickling the worker's env factories (no single env)
    CREATE = 2  # an env factory
    RESET = 3
    STEP = 4
    AUTORESET = 5  # the reset inside a step whose episode ended
    RENDER = 6
    GET_ATTR = 7
    SET_ATTR = 8
    ENV_METHOD = 9
    CALL = 10
    IS_WRAPPED = 11

    def describe(self, env: Optional[int]) -> str:
        """``"inside env 2's step()"`` and the like, for error messages."""
        if self is Activity.UNPICKLE or env is None:
            return "unpickling its env factories"
        if self is Activity.CREATE:
            return f"inside the factory of env {env}"
        what = {
            Activity.RESET: "reset()",
            Activity.STEP: "step()",
            Activity.AUTORESET: "reset() (an automatic reset: its episode ended in step())",
            Activity.RENDER: "render()",
            Activity.GET_ATTR: "get_attr",
            Activity.SET_ATTR: "set_attr",
            Activity.ENV_METHOD: "env_method",
            Activity.CALL: "call",
            Activity.IS_WRAPPED: "env_is_wrapped",
        }.get(self, f"activity {int(self)}")
        return f"inside env {env}'s {what}"


class Autoreset(enum.IntEnum):
    """The engine's autoreset modes, as the codes the compiled worker round
    switches on. ``Autoreset("sb3")`` looks a mode up by its
    ``autoreset_mode`` name (:attr:`mode_name`), as ``Autoreset(1)`` by code."""

    SB3 = 0
    NEXT_STEP = 1
    SAME_STEP = 2
    DISABLED = 3

    @property
    def mode_name(self) -> str:
        """The ``autoreset_mode`` string of this mode ("sb3", "next_step"...)."""
        return self.name.lower()

    @classmethod
    def named(cls, name: str) -> Autoreset:
        """The mode whose ``autoreset_mode`` name is ``name``.

        Raises
        ------
        ValueError
            Not one of :data:`AUTORESET_MODES`.
        """
        return cls(name)  # type: ignore[arg-type]  # _missing_ finds it by name

    @classmethod
    def _missing_(cls, value: object) -> Optional[Autoreset]:
        # Autoreset("next_step"): by name; None makes Enum raise ValueError.
        for mode in cls:
            if mode.mode_name == value:
                return mode
        return None


AUTORESET_MODES = tuple(m.mode_name for m in Autoreset)  # the accepted names


# ---------------------------------------------------------- control region
# The control region at byte 0 of the shared block (drawn in csrc/_core.pyx's
# module docstring): a header, one slot per worker, then the env table.


class Region(enum.IntEnum):
    """The control region's geometry (bytes) and its header's magic word."""

    HEADER_BYTES = 256  # the header; the worker slots start here
    SLOT_BYTES = 128  # one worker slot
    ALIGN = 64  # each env-table array starts on this boundary
    MAGIC = 0x56454331  # "VEC1": the parent wrote this header


class Header(enum.IntEnum):
    """Byte offsets of the header's u32 words."""

    MAGIC = 0  # Region.MAGIC
    NUM_ENVS = 4
    NUM_WORKERS = 8
    # Workers change it on every publish and when a pipe write blocks; the
    # parent futex-waits on it. Its value means nothing (never a count): a
    # waiter only sees that it changed.
    DOORBELL = 64
    PARENT_WAITING = 68  # 1 while the parent sleeps on the doorbell
    PARENT_TARGET = 72  # published count at which a worker must ring the parent awake
    TICKET_COUNTER = 128  # one ticket per published worker round (FIFO order)


class SlotWord(enum.IntEnum):
    """Index of each u32 word of a worker's slot (its byte offset is 4x)."""

    CMD_SEQ = 0  # parent adds 1 to hand the worker new work
    SLEEPING = 1  # 1 while the worker sleeps on CMD_SEQ
    MSG_SEQ = 2  # parent adds 1 per frame it starts writing to the worker's pipe
    PUBLISHED = 3  # worker adds the envs of each publish (wraps)
    COLLECTED = 4  # parent adds the worker's envs it collects (wraps)
    TX_BLOCKED = 5  # 1 while the worker waits for room on its pipe
    # The parent adds 1 before it writes op bytes of this worker's envs and 1
    # after (odd while it writes): the worker takes a dispatch's ops whole.
    OPS_WRITING = 6
    ENV = 8  # the env the worker is inside, plus 1 (0: between env calls)
    ACTIVITY = 9  # what that env is doing (an Activity)
    # u64 over words 10 and 11 (8-byte aligned): nanoseconds the worker spent
    # in rounds (its envs' steps and resets, their copies, the publish). Only
    # the worker writes it, after each round; the parent reads it for stats().
    BUSY_NS = 10


class ParentCode(enum.IntEnum):
    """What ``vecenv._core.ParentStep``'s calls return instead of a result
    (``vecenv._core.PARENT_*``)."""

    NOT_EXACT = -1  # the actions are not an exact array: nothing was done
    WAITING = 0  # dispatched (or in flight) but not all published within the slice
    TOO_FEW = -2  # recv: fewer than k envs in flight: nothing was done
    CHECK_DUE = 1  # a liveness check is due: dispatched (step) but not waited


class WaitCode(enum.IntEnum):
    """What ``Control.wait_ready`` and ``WorkerControl.worker_wait`` return
    instead of a count or a sequence number (``vecenv._core.WAIT_*``)."""

    TIMED_OUT = -1
    TX_BLOCKED = -2  # wait_ready: a worker waits for room on its pipe: read it


# ---------------------------------------------------------------- info keys
# Private keys a worker adds to an env's info; the parent pops them before the
# info reaches users.

#: With autoreset_mode="sb3", the info of an env whose episode ended carries
#: the info of its automatic reset under this key; the parent pops it into
#: ``reset_infos`` (as SB3's SubprocVecEnv does).
RESET_INFO_KEY = "_vecenv_reset_info"
#: Observation leaves without a fixed layout (``BlockLayout.obs_pickled``)
#: travel in the info of the step or reset that produced them, under these
#: keys: the observation, and with "sb3" autoreset the last one of an ended
#: episode.
PICKLED_OBS_KEY = "_vecenv_pickled_obs"
PICKLED_FINAL_KEY = "_vecenv_pickled_final"
# stable-baselines3's keys, which the parent's step (compiled or not) adds to
# the info of an env whose episode ended with "sb3" autoreset: its last
# observation, and whether a time limit (not a terminal state) ended it.
TERMINAL_OBS_KEY = "terminal_observation"
TIME_LIMIT_KEY = "TimeLimit.truncated"

#: The info keys by name, as the compiled core mirrors them.
INFO_KEYS: Dict[str, str] = {
    "RESET_INFO_KEY": RESET_INFO_KEY,
    "PICKLED_OBS_KEY": PICKLED_OBS_KEY,
    "PICKLED_FINAL_KEY": PICKLED_FINAL_KEY,
    "TERMINAL_OBS_KEY": TERMINAL_OBS_KEY,
    "TIME_LIMIT_KEY": TIME_LIMIT_KEY,
}

#: The tables csrc/_protocol.pxd mirrors (all but Msg, the pipe's).
MIRRORED = (Op, Status, Activity, Autoreset, Region, Header, SlotWord, ParentCode, WaitCode)


def mirrored_tables() -> Dict[str, Dict[str, Union[int, str]]]:
    """Every table that the compiled core mirrors, ``{table: {name: value}}``:
    what ``vecenv._core.PROTOCOL`` must equal (``"InfoKey"``: the info keys)."""
    tables: Dict[str, Dict[str, Union[int, str]]] = {
        cls.__name__: {m.name: int(m) for m in cls} for cls in MIRRORED
    }
    tables["InfoKey"] = dict(INFO_KEYS)
    return tables


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
    layout: Any  # the _layout.BlockLayout of the block
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
    activity: int  # an Activity code


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


# Reports of vecenv's own checks of what an env returned (the env raised nothing).
_CHECKS = frozenset({"ObservationError", "RewardError", "InfoError"})


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
        if self.kind in _CHECKS:  # vecenv's check of what the env returned: it raised nothing
            text = f"{text} (found in {self.where})" if self.where else text
        elif self.where:  # an env's own exception: say which env, doing what
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
