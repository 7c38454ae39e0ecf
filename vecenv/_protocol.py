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

``Op`` and ``Status`` are mirrored by the ``cdef enum`` of
``csrc/_protocol.pxd``, which the compiled core cimports;
``vecenv._core.PROTOCOL`` exposes the C values and a test checks that both
tables agree. On the step path the worker binds these values to plain ints
first (an enum attribute lookup per env-step would cost more than the rest).
"""

from __future__ import annotations

import enum


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
    ERROR = 12  # (ERROR, payload)
    ATTACHED = 13  # (ATTACHED, pid, infos)
    RESULT = 14  # (RESULT, [(tag, value), ...])
    ROUND = 15  # (ROUND, {env: info}, {env: error_payload})
    SYNCED = 16  # (SYNCED, token)
    CLOSED = 17  # (CLOSED,)


class Autoreset(enum.Enum):
    """The engine's autoreset modes; the value is the ``autoreset_mode`` name."""

    SB3 = "sb3"
    NEXT_STEP = "next_step"
    SAME_STEP = "same_step"
    DISABLED = "disabled"


AUTORESET_MODES = tuple(m.value for m in Autoreset)  # the accepted names
