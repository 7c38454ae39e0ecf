"""The in-process pool of ``ShmemVecEnv(num_workers=0)`` (parent side).

No worker process: the parent builds the envs itself and steps them with the
worker's own loop (:class:`vecenv._worker._Loop`, hosting all envs ``[0,
num_envs)`` as worker 0) in the calling thread. :class:`InprocPool` takes the
place of :class:`vecenv._pool.WorkerPool` in the vec env (the same interface:
start, attach, post and read, deaths, shutdown), and everything else is the
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
from vecenv._pool import WorkerPool, check_render_modes
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
from vecenv.errors import InvalidArgumentError, StateError, WorkerDiedError, as_env_exception

_CONTROL = _core.Control
_DISPATCH_ALL = _core.Control.dispatch_all
_DISPATCH = _core.Control.dispatch
_PUBLISHED = _core.Control.published
_WAIT_READY = _core.Control.wait_ready
_MSG_CALL = Msg.CALL


def check_options(*, timeout: Any, cpu_affinity: Any, what: str = "num_workers=0") -> None:
    """Refuse the options that ``num_workers=0`` (or ``what``: ``inline=True``,
    whose caller steps envs too) cannot honour.

    Raises
    ------
    InvalidArgumentError
        ``timeout`` is not None (an env running in the calling thread cannot
        be stopped), or ``cpu_affinity`` asks for pinning.
    """
    if timeout is not None:
        fix = "num_workers >= 1" if what == "num_workers=0" else "inline=False"
        raise InvalidArgumentError(
            f"timeout={timeout!r} cannot be enforced with {what}: envs run in the "
            f"calling thread and nothing can stop one that hangs; pass timeout=None, or "
            f"{fix} for a watchdog that kills a stuck worker"
        )
    if cpu_affinity is not None and cpu_affinity is not False and what == "num_workers=0":
        raise InvalidArgumentError(
            f"cpu_affinity={cpu_affinity!r} needs worker processes to pin; with num_workers=0 "
            "pass cpu_affinity=None (pin the calling process with os.sched_setaffinity instead)"
        )
    if cpu_affinity is not None and cpu_affinity is not False:
        raise InvalidArgumentError(
            f"cpu_affinity={cpu_affinity!r} is not taken with {what}: pass cpu_affinity=None, "
            "or inline=False to pin every worker"
        )


def build_envs(env_fns, lo: int, check_spaces: bool, worker_error) -> List[Any]:
    """Build envs ``lo, lo+1, ...`` from ``env_fns`` in this process, as a
    worker builds its own (gymnasium envs; an old-Gym env is converted).

    Raises
    ------
    WorkerError
        A factory raised, or (``check_spaces``) an env's spaces differ from
        the first's; names the env (its index in the vec env), with the
        traceback, and is also of the env's own exception type (as from a
        worker). The envs built so far are closed.
    InvalidArgumentError
        (``check_spaces``) The envs' ``render_mode`` differ.
    """
    envs: List[Any] = []
    try:
        for i, fn in enumerate(env_fns):
            try:
                envs.append(to_gymnasium(fn()))
            except Exception as exc:
                # Its __cause__ is the env's traceback (RemoteTraceback), as from a worker.
                err = as_env_exception(worker_error(error_payload(exc, lo + i, "creating the env")))
                raise err from err.__cause__
        bad = spaces_mismatch(envs, lo) if check_spaces else None
        if bad is not None:
            raise as_env_exception(worker_error(error_payload(bad[1], bad[0], "checking spaces")))
        if check_spaces:
            check_render_modes([_metadata(env).get("render_mode") for env in envs])
    except BaseException:
        close_envs(envs)
        raise
    return envs


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

    ships = False  # its infos are kept by reference (no info rows)

    def _reseed_from(self, ops: List[Tuple[int, int]]) -> None:
        """In-process the global generators are the caller's: left alone."""

    def _publish_round(self, done_envs, statuses, infos, errors) -> None:  # as _Loop's
        """Publish the round's envs and keep its infos and errors by
        reference, as gymnasium's SyncVectorEnv does: nothing is pickled (an
        info need not pickle in process). Each info dict is a shallow copy,
        since the parent adds and pops keys (``terminal_observation``, the
        reset info) and an env may return the same dict every step."""
        self._refuse_bad_keys(done_envs, statuses, infos, errors)
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
    cut = False  # a round of this process's envs was interrupted
    hi: int  # this process steps envs [0, hi): all of them, or worker 0's (inline)

    def bind(self, loop: Optional[InprocLoop], in_flight: np.ndarray, hi: int) -> None:
        """Bind the loop that steps envs ``[0, hi)`` here and the collector's
        in-flight marks (once attached)."""
        self.loop, self.in_flight, self.hi = loop, in_flight, hi

    def dispatch_all(self, op: int) -> None:
        self.cut = True  # until the round ends: an interrupt leaves it set
        _DISPATCH_ALL(self, op)
        self._run()

    def dispatch(self, env_ids, op: int) -> None:
        self.cut = True
        _DISPATCH(self, env_ids, op)
        self._run()

    def _run(self) -> None:
        loop = self.loop
        if loop is None:
            raise StateError("the in-process envs are closed")
        ops = loop.ctrl.take_ops(0, self.hi, 0)
        if ops:
            loop.run_round(ops)
        self.cut = False

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
        results are garbage, for a drain to drop). ``cut`` is cleared last:
        an interrupt inside leaves it set, and the next wait abandons again."""
        loop = self.loop
        if loop is None:
            self.cut = False
            return
        hi = self.hi  # this process steps envs [0, hi)
        loop.ctrl.take_ops(0, hi, 0)
        ready = self.arrays()[2][:hi]
        lost = np.flatnonzero(self.in_flight[:hi] & (ready == 0))
        if lost.size:
            loop.ctrl.publish(lost.tolist(), None, 0)
        loop.ctrl.leave(0)
        self.cut = False


class SharedControl(InprocControl):
    """The parent's Control of ``inline=True``: the calling process steps
    worker 0's envs, worker processes the others (:class:`vecenv._pool.WorkerPool`
    with ``inline``). A dispatch wakes the workers first, then runs worker
    0's round here, so both overlap; the wait is the compiled one, for the
    workers. After an interrupted round of this process's envs (``cut``),
    the next wait first abandons them, as :meth:`InprocControl.wait_ready`
    does."""

    def wait_ready(self, target: int, spin_s: float, timeout_s: float) -> int:
        if self.cut:
            self.abandon()
        return _WAIT_READY(self, target, spin_s, timeout_s)


class InprocPool:
    """The pool of ``num_workers=0``: the envs of one stand-in worker, built
    and stepped in this process (see the module docstring). Its interface
    is :class:`vecenv._pool.WorkerPool`'s; what concerns processes (deaths,
    restarts, pipes cut short) never happens here.

    Parameters
    ----------
    resources : vecenv._pool._Resources
        Where the stand-in process and channel are recorded for the finalizer.
    env_fns : sequence of callables
        The env factories (built by :meth:`start`).
    autoreset_mode, check_rewards, check_spaces, check_observations, info_keys
        What the loop is told (:class:`vecenv._worker.WorkerSpec`).
    """

    in_process = True
    num_workers = 1  # the stand-in worker (the vec env's num_workers is 0)
    timeout = None

    def __init__(
        self,
        resources: Any,
        env_fns,
        *,
        autoreset_mode: str,
        check_rewards: bool,
        check_spaces: bool,
        check_observations: bool = False,
        info_keys: Optional[Tuple[str, ...]] = None,
    ):
        self.resources = resources
        self.env_fns = list(env_fns)
        n = len(self.env_fns)
        self.ranges = [(0, n)]
        self.env_worker: Any = np.zeros(n, dtype=np.int64)
        self.check_spaces = check_spaces
        self.dead: set[int] = set()  # never filled: nothing here dies
        self.spec = WorkerSpec(
            index=0,
            lo=0,
            hi=n,
            env_fns=b"",
            parent_pid=os.getpid(),
            spin_s=0.0,
            autoreset_mode=autoreset_mode,
            check_rewards=check_rewards,
            check_spaces=check_spaces,
            check_observations=check_observations,
            info_keys=info_keys,
        )
        self.chan: Optional[InprocChannel] = None

    @property
    def procs(self) -> list:
        return self.resources.procs

    @property
    def chans(self) -> list:
        return self.resources.chans

    def start(self) -> Tuple[Tuple[Any, Any], Dict[str, Any]]:
        """Build the envs in this process; env 0's spaces and metadata.

        Raises
        ------
        WorkerError
            A factory raised, or (``check_spaces``) an env's spaces differ from
            env 0's; names the env, with the traceback, and is also of the
            env's own exception type (as from a worker).
        InvalidArgumentError
            (``check_spaces``) The envs' ``render_mode`` differ.
        """
        envs = build_envs(self.env_fns, 0, self.check_spaces, self.worker_error)
        self.env_fns = []
        process = InprocProcess()
        self.chan = InprocChannel(self.spec, envs, process)
        self.resources.procs = [process]
        self.resources.chans = [self.chan]
        return (envs[0].observation_space, envs[0].action_space), _metadata(envs[0])

    def make_control(self, block, num_envs: int) -> InprocControl:
        """The parent's Control over ``block`` (initialised here): each of
        its dispatches runs the loop's round (bound by :meth:`control`)."""
        return InprocControl(block, num_envs, 1, self.env_worker, init=True)

    def attach(self, segment: Any, layout: Any, ctrl: Any) -> None:
        """Build the loop over the shared block (the ``attach`` message)."""
        chan = self.chan
        if chan is None:
            raise StateError("the in-process envs were not built")
        ref = chan.request(msgs.Attach(segment.handle, layout, []), None)
        msg = chan.reply(ref, None)
        if not isinstance(msg, msgs.Attached):
            raise StateError(f"the in-process loop answered {msg.kind!r} while attaching")

    def control(self, ctrl: InprocControl, in_flight: np.ndarray) -> InprocControl:
        """``ctrl`` bound to the loop and to the collector's in-flight marks."""
        ctrl.bind(None if self.chan is None else self.chan.loop, in_flight, self.ranges[0][1])
        return ctrl

    # ------------------------------------------------------------ transport
    def post(self, w: int, msg: Any, deadline: Optional[float] = None, wake: bool = True) -> int:
        """Hand ``msg`` to the loop (see :meth:`InprocChannel.request`); its ref."""
        return self.resources.chans[w].request(msg, deadline)

    def recv(
        self,
        w: int,
        deadline: Optional[float],
        what: str,
        keep: bool = False,
        ref: Optional[int] = None,
    ) -> Any:
        """The reply to request ``ref`` (default: the last one)."""
        chan = self.resources.chans[w]
        return chan.reply(chan.last_ref if ref is None else ref, deadline)

    def round_entry(self, w: int, env: int, ticket: int) -> Tuple[str, Any]:
        """Env ``env``'s info or error report of the round under ``ticket``."""
        return self.resources.chans[w].round_entry(env, ticket, None)

    def pump_blocked(self, timeout: float) -> bool:
        return True  # no pipe to fill

    def forget_stale(self) -> None:
        for chan in self.resources.chans:
            chan.forget_stale()

    # ------------------------------------------------------------ faults (none)
    def dead_workers(self) -> List[int]:
        return []

    def broken_workers(self) -> List[int]:
        return []

    def inside(self, w: int) -> Tuple[Optional[int], str]:
        return None, ""

    def killed_hint(self, workers) -> str:
        return ""

    def bury(self, w: int) -> None:
        """Nothing to kill; an env in this process cannot be stopped."""

    def broken_error(self, w: int, what: str) -> StateError:  # pragma: no cover - no pipe
        return StateError(f"the in-process envs cannot be reached while {what}")

    def died(self, w: int, what: str) -> WorkerDiedError:  # pragma: no cover - cannot happen
        return WorkerDiedError(f"the in-process envs are gone while {what}", env_indices=[])

    def timeout_error(self, w: int, what: str, keep: bool) -> Exception:  # pragma: no cover
        return StateError(f"the in-process envs cannot time out while {what}")

    def respawn(self, w: int, held: List[int], spaces: Any) -> Dict[int, Any]:  # pragma: no cover
        raise StateError("the in-process envs cannot be restarted: close() and build a new vec env")

    worker_error = staticmethod(WorkerPool.worker_error)
