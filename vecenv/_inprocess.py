"""The in-process engine of ``ShmemVecEnv(num_workers=0)`` (parent side).

No worker process: the parent builds the envs itself and steps them with the
worker's own loop (:class:`vecenv._worker._Loop`, hosting all envs ``[0,
num_envs)`` as worker 0) in the calling thread. Everything else is the
multiprocess engine unchanged: the same shared block (the parent's mapping
and the loop's own, as a worker maps it), the same Control block, dispatch,
collect, infos, error reports, calls and state machine. Three stand-ins take
the worker process's place:

- :class:`InprocChannel` replaces the pipe (:mod:`vecenv._channel`). A message
  the parent posts is handled by the loop at once, inside ``request``:
  ``attach`` builds the loop, ``reset_kwargs`` and ``actions`` are kept for
  the next round (pickled and unpickled on the way, so the envs get copies as
  they would in a worker, and the caller may reuse its arrays at once),
  ``call`` runs the calls (arguments and results by reference: no pickling, as
  in gymnasium's SyncVectorEnv) and ``close`` closes the envs. Replies are
  kept by ref and round messages by env and ticket, as ParentChannel keeps
  them; the parent's reads find them there. A round's infos are kept by
  reference (:meth:`InprocLoop._publish_round`: a shallow copy of each dict,
  nothing pickled), as SyncVectorEnv passes them: pickling them cost
  HalfCheetah-v5 about 18 us per step, 40% of its step.
- :class:`InprocControl` replaces the parent's Control: ``dispatch`` and
  ``dispatch_all`` write the ops, then run the loop's round over them
  (``take_ops`` then ``run_round``), so the envs are published, in the order
  they were sent, before the call returns (``send``/``recv`` keep their FIFO
  order: each ``send`` is one publish ticket). The engine's wait then finds
  them published.
- :class:`InprocProcess` stands for the worker process: it never dies; its
  ``exitcode`` becomes 0 once the envs are closed.

What the options mean here: ``timeout`` cannot be enforced (nothing can stop
an env running in the caller's thread), so ``num_workers=0`` refuses it, and
``cpu_affinity`` (no worker to pin) too; ``start_timeout``, ``spin``,
``context``, ``daemon``, ``on_worker_death`` and ``max_restarts`` have no
effect (no process starts, waits or dies). An env exception is a WorkerError
naming the env, with its traceback, exactly as from a worker. The caller's
global generators (``random``, ``np.random``, ``torch``) are never reseeded:
a worker reseeds its own from the first seed of a reset, but here they are
the learner's.

Interrupts: a KeyboardInterrupt inside a round (inside an env's ``step``)
leaves ops taken and envs not published, while the parent's state is
NEEDS_RESET (set before the dispatch). The next wait, the drain of
``reset()``, finds fewer envs published than in flight and abandons them
(:meth:`InprocControl.abandon`): pending ops are dropped and every env in
flight that is not published is published with status OK, so the drain
collects and drops them and the reset that follows writes every row again.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from vecenv import _core, _shm
from vecenv import _protocol as msgs
from vecenv._channel import encode
from vecenv._protocol import Msg
from vecenv._worker import (
    WorkerSpec,
    _Loop,
    _metadata,
    close_envs,
    error_payload,
    spaces_mismatch,
    to_gymnasium,
)
from vecenv.errors import InvalidArgumentError, StateError, as_env_exception

_CONTROL = _core.Control
_DISPATCH_ALL = _core.Control.dispatch_all
_DISPATCH = _core.Control.dispatch
_PUBLISHED = _core.Control.published
_MSG_CALL = Msg.CALL


def check_options(*, timeout: Any, cpu_affinity: Any) -> None:
    """Refuse the options that ``num_workers=0`` cannot honour.

    Raises
    ------
    InvalidArgumentError
        ``timeout`` is not None (an env running in the calling thread cannot
        be stopped), or ``cpu_affinity`` asks for pinning (there is no worker).
    """
    if timeout is not None:
        raise InvalidArgumentError(
            f"timeout={timeout!r} cannot be enforced with num_workers=0: the envs run in the "
            "calling thread and nothing can stop one that hangs; pass timeout=None, or "
            "num_workers >= 1 for a watchdog that kills a stuck worker"
        )
    if cpu_affinity is not None and cpu_affinity is not False:
        raise InvalidArgumentError(
            f"cpu_affinity={cpu_affinity!r} needs worker processes to pin; with num_workers=0 "
            "pass cpu_affinity=None (pin the calling process with os.sched_setaffinity instead)"
        )


class InprocProcess:
    """Stands for the worker process of the in-process engine: alive until
    its envs are closed (``exitcode`` 0 then), never killed."""

    name = "vecenv-inprocess"

    def __init__(self) -> None:
        self.exitcode: Optional[int] = None
        self.pid = os.getpid()

    def is_alive(self) -> bool:
        return self.exitcode is None

    def join(self, timeout: Optional[float] = None) -> None:
        return None

    def kill(self) -> None:
        """Nothing to kill: the envs live in this process."""

    terminate = kill


class InprocLoop(_Loop):
    """The worker loop run by the parent (see the module docstring)."""

    def _reseed_from(self, ops: List[Tuple[int, int]]) -> None:
        """In-process the global generators are the caller's: left alone."""

    def _publish_round(self, done_envs, statuses, infos, errors) -> None:  # as _Loop's
        """Publish the round's envs and keep its infos and errors by
        reference, as gymnasium's SyncVectorEnv does: nothing is pickled (an
        info need not pickle in process). Each info dict is a shallow copy,
        since the parent adds and pops keys (``terminal_observation``, the
        reset info) and an env may return the same dict every step."""
        ticket = self.ctrl.publish(done_envs, statuses, self.spec.index)
        if infos or errors:
            self.conn.keep_round({i: dict(info) for i, info in infos.items()}, errors, ticket)


class InprocChannel:
    """The pipe's stand-in: both ends in one object (see the module docstring).

    Parent side: ``request``, ``reply``, ``round_entry``, ``pump``,
    ``forget_stale``, ``broken``, ``close``, as :class:`~vecenv._channel.ParentChannel`.
    Loop side: ``send``, ``bind``, as
    :class:`~vecenv._channel.WorkerChannel`.
    """

    broken = False  # nothing can be cut short: no bytes travel

    def __init__(self, spec: WorkerSpec, envs: List[Any], process: InprocProcess):
        self.spec = spec
        self.envs = envs
        self.process = process
        self.loop: Optional[InprocLoop] = None
        self.replies: Dict[int, Any] = {}
        self.rounds: Dict[int, Tuple[int, str, Any]] = {}
        self.last_ref = 0
        self.reply_ref = 0

    # ------------------------------------------------------------ parent side
    def request(self, msg: Any, deadline: Optional[float], post: Any = None) -> int:
        """Hand ``msg`` to the loop and return its ref; its reply, if any, is
        kept for :meth:`reply`. Raises what the loop raises outside an env
        (an env's exception is a reply or a round entry)."""
        ref = self.last_ref + 1
        self.last_ref = self.reply_ref = ref
        kind = msg.kind
        if kind == _MSG_CALL:
            self._handle(msg)
        elif kind == Msg.ATTACH:
            block = _shm.attach(msg.handle, msg.layout.nbytes)
            self.loop = InprocLoop(self.spec, self, None, self.envs, block, msg.layout)
            self.send(msgs.Attached(os.getpid(), {}))
        elif kind == Msg.CLOSE:
            self._close_envs()
            self.send(msgs.Closed())
        else:  # kept for the next round: copies, as a worker would get
            self._handle(pickle.loads(encode(msg)))
        return ref

    def _handle(self, msg: Any) -> None:
        if self.loop is None:
            raise StateError(f"the in-process envs are closed; cannot handle {msg.kind!r}")
        self.loop.handle_message(msg)

    def _close_envs(self) -> None:
        loop, self.loop = self.loop, None
        close_envs(self.envs)
        if loop is not None:
            loop.release()
        self.process.exitcode = 0

    def reply(self, ref: int, deadline: Optional[float]) -> Any:
        """The reply to request ``ref``. Raises StateError when there is none
        (its request was interrupted)."""
        msg = self.replies.pop(ref, None)
        if msg is None:
            raise StateError(
                f"request {ref} of the in-process envs has no reply (it was interrupted); "
                "call reset()"
            )
        return msg

    def round_entry(self, env: int, ticket: int, deadline: Optional[float]) -> Tuple[str, Any]:
        """``("info", info)`` or ``("error", payload)`` of env ``env`` from
        the round published under ``ticket``. Raises StateError when there
        is none (its round was interrupted)."""
        entry = self.rounds.pop(env, None)
        if entry is None or entry[0] != ticket:
            raise StateError(
                f"env {env}'s round message is missing (its round was interrupted); call reset()"
            )
        return entry[1], entry[2]

    def pump(self, timeout: float) -> bool:
        return True

    def forget_stale(self) -> None:
        """Drop kept replies and round entries (all are stale at a reset)."""
        self.replies.clear()
        self.rounds.clear()

    def close(self) -> None:
        """Nothing to close (the envs are closed by the ``close`` message)."""

    # ------------------------------------------------------------ loop side
    def bind(self, ctrl: Any, index: int) -> None:
        """No pipe to block on: nothing to report."""

    def send(self, msg: Any, ref: Optional[int] = None) -> bool:
        """Keep ``msg`` as the reply to the request handled last (or ``ref``)."""
        self.replies[self.reply_ref if ref is None else ref] = msg
        return True

    def keep_round(self, infos: Dict[int, Any], errors: Dict[int, Any], ref: int) -> None:
        """Keep a round's infos and error reports under ticket ``ref``."""
        for env, info in infos.items():
            self.rounds[env] = (ref, "info", info)
        for env, err in errors.items():
            self.rounds[env] = (ref, "error", err)


class InprocControl(_CONTROL):
    """The parent's Control of the in-process engine: each dispatch runs the
    loop's round over the ops it wrote (see the module docstring). Set
    ``loop`` and ``in_flight`` before the first dispatch."""

    loop: Optional[InprocLoop]
    in_flight: np.ndarray

    def dispatch_all(self, op: int) -> None:
        _DISPATCH_ALL(self, op)
        self._run()

    def dispatch(self, env_ids, op: int) -> None:
        _DISPATCH(self, env_ids, op)
        self._run()

    def _run(self) -> None:
        loop = self.loop
        if loop is None:
            raise StateError("the in-process envs are closed")
        ops = loop.ctrl.take_ops(0, self.num_envs)
        if ops:
            loop.run_round(ops)

    def wait_ready(self, target: int, spin_s: float, timeout_s: float) -> int:
        """Published envs (>= ``target``): every dispatch published its envs
        already, unless an interrupt cut its round short; then those envs
        are abandoned first (:meth:`abandon`).

        Raises
        ------
        StateError
            Fewer than ``target`` envs are in flight (a caller's bug).
        """
        n = _PUBLISHED(self)
        if n >= target:
            return n
        self.abandon()
        n = _PUBLISHED(self)
        if n < target:
            raise StateError(
                f"waiting for {target} envs but only {n} of the in-process envs are in flight; "
                "call reset()"
            )
        return n

    def abandon(self) -> None:
        """After an interrupted round: drop the ops not yet run and publish
        every env in flight that is not published, with status OK (their
        results are garbage, for a drain to drop)."""
        loop = self.loop
        if loop is None:
            return
        loop.ctrl.take_ops(0, self.num_envs)
        ready = self.arrays()[2]
        lost = np.flatnonzero(self.in_flight & (ready == 0))
        if lost.size:
            loop.ctrl.publish(lost.tolist(), None, 0)
        loop.ctrl.leave(0)


def start_envs(venv: Any, env_fns) -> None:
    """Build the envs of ``venv`` (a ShmemVecEnv with ``num_workers=0``) in
    this process and stand in for its worker: set ``_spaces``, ``metadata``,
    ``_specs`` and the resources' ``procs`` and ``chans``. The parent's
    ``_attach`` then builds the loop (the ``attach`` message), and
    :func:`bind` hands it to the Control.

    Raises
    ------
    WorkerError
        A factory raised, or (``check_spaces``) an env's spaces differ from
        env 0's; names the env, with the traceback, and is also of the
        env's own exception type (as from a worker).
    """
    envs: List[Any] = []
    try:
        for i, fn in enumerate(env_fns):
            try:
                envs.append(to_gymnasium(fn()))
            except Exception as exc:
                # Its __cause__ is the env's traceback (RemoteTraceback), as from a worker.
                err = as_env_exception(
                    venv._worker_error(error_payload(exc, i, "creating the env"))
                )
                raise err from err.__cause__
        bad = spaces_mismatch(envs, 0) if venv.check_spaces else None
        if bad is not None:
            raise as_env_exception(
                venv._worker_error(error_payload(bad[1], bad[0], "checking spaces"))
            )
    except BaseException:
        close_envs(envs)
        raise
    spec = WorkerSpec(
        index=0,
        lo=0,
        hi=len(envs),
        env_fns=b"",
        parent_pid=os.getpid(),
        spin_s=0.0,
        autoreset_mode=venv.autoreset_mode,
        check_rewards=venv.check_rewards,
        check_spaces=venv.check_spaces,
    )
    process = InprocProcess()
    res = venv._resources
    res.procs = [process]
    res.chans = [InprocChannel(spec, envs, process)]
    venv._specs = [spec]
    venv._spaces = (envs[0].observation_space, envs[0].action_space)
    venv.metadata = _metadata(envs[0])


def bind(venv: Any) -> None:
    """After ``_attach``: replace the parent's Control of ``venv`` by an
    :class:`InprocControl` over the same block, bound to the loop."""
    res = venv._resources
    ctrl = InprocControl(res.block, venv.num_envs, 1, venv._env_worker)
    ctrl.loop = res.chans[0].loop
    ctrl.in_flight = venv._in_flight
    ctrl.track_in_flight(venv._in_flight)
    res.ctrl = venv._ctrl = ctrl
