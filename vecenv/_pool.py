"""WorkerPool: the worker processes of a ShmemVecEnv (parent side).

Spawning and attaching the workers, the pipe transport to each (post, recv,
with deadlines and liveness checks), noticing deaths, burying, restarting,
and the shutdown that a ``weakref.finalize`` runs over :class:`_Resources`
(the processes, channels and shared segment, kept apart from the vec env so
that the finalizer holds no reference to it). :class:`WorkerPool` holds these
methods and :class:`WorkerStartup`, on top of it, the start-up at
construction; both are bases of :class:`~vecenv.ShmemVecEnv`, and the state
they read and write is the vec env's own (see its ``__init__``).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import signal
import threading
import time
from multiprocessing import connection as mp_connection
from typing import Any, Dict, List, Optional, Tuple

import cloudpickle
import numpy as np
from gymnasium import spaces as gym_spaces

from vecenv import _core, _layout, _shm
from vecenv import _protocol as msgs
from vecenv._channel import ChannelBroken, ChannelDead, ChannelTimeout, ParentChannel
from vecenv._cpus import usable_cpus
from vecenv._engine import EngineVecEnv, State
from vecenv._protocol import PICKLED_FINAL_KEY, PICKLED_OBS_KEY, Activity, ErrorReport, Op
from vecenv._worker import WorkerSpec, worker_main
from vecenv.errors import (
    InvalidArgumentError,
    PendingTimeoutError,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WatchdogTimeoutError,
    WorkerDiedError,
    WorkerError,
    as_env_exception,
)

# Wait in slices this long (seconds) so dead workers and Ctrl-C are noticed.
_SLICE_S = 0.1

# While workers start, log how many are ready every this many seconds.
# After a factory error, how long to wait for the other workers' reports.
_START_ERRORS_S = 1.0

_START_REPORT_S = 10.0

_NONE = np.empty(0, dtype=np.intp)  # no env indices
_log = logging.getLogger("vecenv")


def plan_workers(
    num_envs: int, num_workers: Optional[int], envs_per_worker: Optional[int]
) -> List[Tuple[int, int]]:
    """Split envs ``0..num_envs-1`` into contiguous ``[lo, hi)`` ranges, one per worker.

    With ``envs_per_worker`` the ranges have that size (the last may be
    smaller); with ``num_workers`` alone they are balanced (sizes differ by at
    most one); with neither, one worker per usable CPU core (at most one per env).

    Raises
    ------
    InvalidArgumentError
        Non-positive values, or both given and inconsistent.
    """
    for name, v in (("num_workers", num_workers), ("envs_per_worker", envs_per_worker)):
        if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1):
            raise InvalidArgumentError(f"{name} must be a positive int or None, got {v!r}")
    if envs_per_worker is not None:
        need = math.ceil(num_envs / envs_per_worker)
        if num_workers is not None and num_workers != need:
            raise InvalidArgumentError(
                f"num_workers={num_workers} and envs_per_worker={envs_per_worker} do not fit "
                f"num_envs={num_envs}: with {envs_per_worker} envs per worker, num_workers must be "
                f"{need}; pass only one of them"
            )
        return [
            (lo, min(num_envs, lo + envs_per_worker)) for lo in range(0, num_envs, envs_per_worker)
        ]
    if num_workers is None:
        num_workers = usable_cpus()
    num_workers = min(int(num_workers), num_envs)
    base, extra = divmod(num_envs, num_workers)
    ranges, lo = [], 0
    for w in range(num_workers):
        hi = lo + base + (1 if w < extra else 0)
        ranges.append((lo, hi))
        lo = hi
    return ranges


class _Resources:
    """What must be released when the vec env goes away; kept apart from the
    ShmemVecEnv so a weakref finalizer can release it without a reference
    cycle (close, garbage collection and interpreter exit all end here)."""

    def __init__(self):
        self.procs: list = []
        self.chans: List[ParentChannel] = []  # chans[w]: the parent's end of worker w's pipe
        self.segment: Any = None  # the _shm.Segment; None once released
        self.block = None

    def shutdown(self, timeout: float = 5.0) -> None:
        """Close the workers politely (their envs' close() runs), then after
        ``timeout`` seconds terminate and kill the ones left; close the
        channels and release the shared block. Safe to call twice."""
        deadline = time.monotonic() + max(timeout, 0.0)
        ctrl = getattr(self, "ctrl", None)
        for w, (chan, proc) in enumerate(zip(self.chans, self.procs)):
            # A broken channel (an interrupted frame) cannot carry a close:
            # that worker is terminated below.
            if proc.exitcode is None and not chan.broken:
                post = None if ctrl is None else functools.partial(ctrl.post_message, w)
                try:
                    chan.request(msgs.Close(), min(deadline, time.monotonic() + 1.0), post)
                except Exception:
                    pass
        # Read the pipes meanwhile: a worker blocked sending a large info
        # message would otherwise never read its close message.
        while time.monotonic() < deadline and any(p.exitcode is None for p in self.procs):
            for chan in self.chans:
                try:
                    chan.pump(0)
                except Exception:
                    pass
            live = [w for w, p in enumerate(self.procs) if p.exitcode is None]
            mp_connection.wait(
                [self.procs[w].sentinel for w in live] + [self.chans[w] for w in live],
                timeout=min(0.05, max(0.0, deadline - time.monotonic())),
            )
        for proc in self.procs:  # join reaps and lets multiprocessing forget it
            proc.join(0)
        for sig in ("terminate", "kill"):
            alive = [p for p in self.procs if p.exitcode is None]
            if not alive:
                break
            for p in alive:
                try:
                    getattr(p, sig)()
                except Exception:
                    pass
            for p in alive:
                p.join(1.0)
        for chan in self.chans:
            chan.close()
        self.ctrl = None
        if self.block is not None:
            try:
                self.block.close()
            except BufferError:
                pass  # views handed out with copy=False keep the mapping alive
            self.block = None
        if self.segment is not None:
            self.segment.close()
            self.segment = None
        self.procs = []
        self.chans = []


def _shutdown(resources: _Resources) -> None:
    resources.shutdown(timeout=2.0)


class WorkerPool(EngineVecEnv):
    """Base of ShmemVecEnv: its workers' lifecycle and transport (see the module)."""

    # The vec env's state that these methods and Collector's share; set in
    # ShmemVecEnv.__init__ (which documents each).
    autoreset_mode: str
    check_actions: bool
    check_rewards: bool
    check_spaces: bool
    copy: bool
    max_restarts: int
    metadata: Dict[str, Any]
    on_worker_death: str
    pickled_leaves: bool
    reset_infos: List[Dict[str, Any]]
    restart_count: int
    spin: Optional[float]
    _resources: _Resources
    _ctrl: Any  # the _core.Control; None once closed
    _ctx: Any  # the multiprocessing context
    _daemon: bool
    _start_timeout: float
    _ranges: List[Tuple[int, int]]  # worker w hosts envs [lo, hi)
    _env_worker: np.ndarray  # env -> its worker
    _cores: Any
    _specs: List[Any]
    _spaces: Tuple[Any, Any]
    _layout: Any
    _progress: Dict[int, Tuple[Optional[int], int]]
    _dead: set[int]
    _restarted: set[int]
    _restart_infos: Dict[int, Any]
    _reset_restarts: Any  # set of workers restarted by this reset(), or None
    _pending_kwargs: Dict[int, Dict[str, Any]]
    _next_check: float
    _wait_timeout: Optional[float]
    _in_flight: np.ndarray
    _tickets: Any
    _ids_out: Any
    _status: Any
    _rew: Any
    _term: Any
    _trunc: Any
    _obs_bufs: Any
    _obs_rows: Any
    _act_bufs: Any
    _final_bufs: Any
    _gather_out: Any
    _obs_pickled: Any
    _pickled_obs: Any
    _pickled_final: Dict[int, List[Any]]
    _single_obs: bool
    _sb3_final: bool
    _unflatten_obs: Any
    _write_actions: Any
    _write_exact: Any
    _split_actions: Any

    def _recv_started(self, w: int, deadline: Optional[float], what: str):
        """:meth:`_recv` for a starting worker: its ("progress", ...) reports
        are kept (for messages), the next other message is returned."""
        while True:
            msg = self._recv(w, deadline, what)
            if not isinstance(msg, msgs.Progress):
                self._progress.pop(w, None)
                return msg
            self._progress[w] = (msg.env, msg.activity)

    def _inside(self, w: int) -> Tuple[Optional[int], str]:
        """``(env, phrase)``: the env worker ``w`` was inside (None: none) and
        what it did there, from its start-up reports or its control slot."""
        if w in self._progress:
            env, code = self._progress[w]
            return env, Activity(code).describe(env)
        if self._ctrl is None:
            return None, ""
        env, code = self._ctrl.activity(w)
        if env < 0:
            return None, ""
        try:
            act = Activity(code)
        except ValueError:
            act = Activity.CALL
        return env, act.describe(env)

    def _spawn(self, w: int) -> None:
        """Start the process of worker ``w`` and record it (and the parent's
        end of its pipe) as ``procs[w]``, ``chans[w]``."""
        ctx = self._ctx
        spec = self._specs[w]
        spec.environ = dict(os.environ)  # as of this start (forkserver would be stale)
        self._progress.pop(w, None)
        if self._ctrl is not None:
            self._ctrl.leave(w)  # no stale activity from a dead predecessor
        spec.pdeathsig = (
            ctx.get_start_method() in ("fork", "spawn")
            and threading.current_thread() is threading.main_thread()
        )
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=worker_main,
            args=(spec, child_conn),
            name=f"vecenv-worker-{w}",
            daemon=self._daemon,
        )
        # A Ctrl-C must not reach a worker that is still booting (spawn: the
        # child imports for a while before worker_main ignores SIGINT). Workers
        # inherit an ignored SIGINT (kept across exec, and Python leaves it
        # ignored) and a blocked one (fork); worker_main ignores it, then
        # unblocks it. Here the blocked signal stays pending (Linux never drops
        # a blocked signal) and is delivered once the handler is back.
        masked = hasattr(signal, "pthread_sigmask")
        if masked:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        old_handler = None
        if threading.current_thread() is threading.main_thread():
            old_handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs, chans = self._resources.procs, self._resources.chans
        try:
            proc.start()
            chan = ParentChannel(parent_conn, proc.sentinel)
            # Recorded before SIGINT is unblocked, so Ctrl-C cannot orphan it.
            if w < len(procs):
                procs[w], chans[w] = proc, chan
            else:
                procs.append(proc)
                chans.append(chan)
        finally:
            if old_handler is not None:
                signal.signal(signal.SIGINT, old_handler)
            if masked and signal.SIGINT not in old_mask:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            child_conn.close()
        if self._cores is not None:
            try:
                os.sched_setaffinity(proc.pid, {self._cores[w]})
            except OSError:
                pass

    def _attach(self, start_timeout):
        res = self._resources
        num_workers = len(self._ranges)
        layout = _layout.BlockLayout.build(
            self._spaces[0],
            self._spaces[1],
            len(self._env_worker),
            num_workers,
            final_obs=self.autoreset_mode == "sb3",
            pickled=self.pickled_leaves,
        )
        res.segment = _shm.Segment(layout.nbytes)
        block = res.segment.map()
        res.block = block
        block.touch(write=True)  # fault every page in now, never in a step
        res.ctrl = self._ctrl = _core.Control(
            block, layout.num_envs, num_workers, self._env_worker, init=True
        )
        self._layout = layout
        acts, obs, rew, term, trunc = layout.views(block)
        self._act_bufs, self._obs_bufs = acts, obs
        self._rew, self._term, self._trunc = rew, term, trunc
        self._final_bufs = layout.final_views(block)  # "sb3" autoreset: last observations
        self._status = self._ctrl.arrays()[1]
        self._tickets = self._ctrl.arrays()[3]  # a round message carries its env's ticket
        self._write_actions = _layout.make_action_writer(layout.action_leaves, self.action_space)
        self._write_exact = _layout.make_exact_writer(layout.action_leaves, self.action_space)
        self._split_actions = _layout.make_action_splitter(self.action_space)
        self._sb3_final = self.autoreset_mode == "sb3"
        # Leaves without a fixed layout: the last value of each env, per leaf,
        # and the last observation of an ended episode ("sb3" autoreset).
        self._obs_pickled = layout.obs_pickled
        self._pickled_obs = [[None] * layout.num_envs for _ in layout.obs_pickled]
        self._pickled_final: Dict[int, List[Any]] = {}
        self._unflatten_obs = _layout.make_unflattener(self.observation_space)
        self._single_obs = not isinstance(
            self.observation_space, (gym_spaces.Tuple, gym_spaces.Dict)
        )
        # Dispatched and not yet collected; kept by the Control's own calls.
        self._in_flight = np.zeros(layout.num_envs, dtype=bool)
        self._ctrl.track_in_flight(self._in_flight)
        self._ids_out = np.empty(layout.num_envs, dtype=np.int64)
        self._gather_out = [
            np.empty((self.batch_size, *leaf.shape), leaf.dtype) for leaf in layout.obs_leaves
        ]
        self._obs_rows = [_layout._bytes2d(b) for b in self._obs_bufs]  # (num_envs, row_bytes) u8
        deadline = time.monotonic() + start_timeout
        for w in range(num_workers):  # the workers are reading: no wake needed
            self._post(w, msgs.Attach(res.segment.handle, layout, []), deadline, wake=False)
        for w in range(num_workers):
            msg = self._recv(w, deadline, "attaching the workers")
            if not isinstance(msg, msgs.Attached):
                raise WorkerError(f"worker {w} answered {msg.kind!r} while attaching")
        res.segment.unlink()  # no name left once everyone is attached (macOS)

    # ------------------------------------------------------------ plumbing
    def _recv(
        self,
        w: int,
        deadline: Optional[float],
        what: str,
        keep: bool = False,
        ref: Optional[int] = None,
    ):
        """Receive the reply to request ``ref`` (default: the last request
        posted to worker ``w``, or its first message) from worker ``w``.
        Round messages that arrive meanwhile are kept for their envs.

        Raises
        ------
        WorkerDiedError
            The worker died first (the caller buries or restarts it).
        VecEnvTimeoutError
            ``deadline`` (a ``time.monotonic()`` value) passed; unless ``keep``
            (the caller will wait again) the worker was killed.
        StateError
            The channel was broken by an interrupt: reset() first.
        """
        chan = self._resources.chans[w]
        try:
            return chan.reply(chan.last_ref if ref is None else ref, deadline)
        except ChannelTimeout:
            raise self._timeout_error(w, what, keep) from None
        except ChannelDead:
            raise self._died(w, what) from None
        except ChannelBroken:
            raise self._broken_error(w, what) from None

    def _post(self, w: int, msg, deadline: Optional[float] = None, wake: bool = True) -> int:
        """Send ``msg`` to worker ``w`` (woken first unless ``wake`` is False)
        and return its ref. ``deadline`` defaults to ``timeout`` from now.

        Raises
        ------
        WorkerDiedError, StateError
            As :meth:`_recv`.
        VecEnvTimeoutError
            The frame could not be written in time: the worker was killed.
        """
        chan = self._resources.chans[w]
        if deadline is None and self.timeout is not None:
            deadline = time.monotonic() + self.timeout
        post = functools.partial(self._ctrl.post_message, w) if wake else None
        what = f"sending it a {msg.kind!r} message"
        try:
            return chan.request(msg, deadline, post)
        except ChannelTimeout:
            raise self._timeout_error(w, what, False) from None
        except ChannelDead:
            raise self._died(w, what) from None
        except ChannelBroken:
            raise self._broken_error(w, what) from None

    def _timeout_error(self, w: int, what: str, keep: bool) -> VecEnvTimeoutError:
        lo, hi = self._ranges[w]
        if keep:
            hint = "; the call is still pending"
        else:
            self._bury(w)
            hint = self._killed_hint([w])
        cls = PendingTimeoutError if keep else WatchdogTimeoutError
        return cls(
            f"envs {list(range(lo, hi))} (worker {w}) did not answer within the "
            f"timeout while {what}{hint}",
            env_indices=range(lo, hi),
        )

    def _broken_error(self, w: int, what: str) -> StateError:
        self._state = State.NEEDS_RESET
        lo, hi = self._ranges[w]
        return StateError(
            f"cannot use the pipe of worker {w} (envs {list(range(lo, hi))}) while {what}: "
            "an interrupt (Ctrl-C) cut a message short; call reset(), which restarts that worker"
        )

    def _died(self, w: int, what: str) -> WorkerDiedError:
        proc = self._resources.procs[w]
        proc.join(1.0)
        lo, hi = self._ranges[w]
        code = proc.exitcode
        if code is None:
            how = "closed its pipe"
        elif code < 0:
            try:
                name = f" ({signal.Signals(-code).name})"
            except ValueError:
                name = ""
            how = f"was killed by signal {-code}{name}"
        else:
            how = f"exited with code {code}"
        hint = ""
        if self._ctrl is not None:
            hint = "; reset() starts it again with new envs, close() releases everything"
        env, inside = self._inside(w)
        if inside:
            inside = f", {inside}"
            if env is not None:
                inside += f" (all {hi - lo} envs of the worker are lost)"
        return WorkerDiedError(
            f"worker {w} (envs {list(range(lo, hi))}) {how} while {what}{inside}{hint}",
            env_indices=range(lo, hi),
            exitcode=code,
            env_index=env,
        )

    def _killed_hint(self, workers) -> str:
        if self._ctrl is None:
            return ""
        envs = [i for w in workers for i in range(*self._ranges[w])]
        inside = "".join(
            f"; worker {w} was {phrase}"
            for w in workers
            for env, phrase in [self._inside(w)]
            if phrase
        )
        return (
            f"{inside}; worker(s) {list(workers)} (envs {envs}) were killed: reset() starts them "
            "again with new envs, close() releases everything"
        )

    def _bury(self, w: int) -> None:
        """Make sure worker ``w`` is dead and reaped, and forget its envs: their
        control bytes, published results and in-flight marks, and its channel.
        reset() or the restart policy starts it again."""
        res = self._resources
        proc = res.procs[w]
        if proc.exitcode is None:
            try:
                proc.kill()
            except Exception:
                pass
            proc.join(5.0)
        res.chans[w].close()
        if self._ctrl is None:  # still constructing: the caller shuts down
            return
        lo, hi = self._ranges[w]
        self._ctrl.forget(lo, hi)  # clears their in-flight flags too
        self._dead.add(w)

    def _dead_workers(self) -> List[int]:
        """Workers that exited and are not yet known to be dead."""
        return [
            w
            for w, proc in enumerate(self._resources.procs)
            if w not in self._dead and proc.exitcode is not None
        ]

    def _on_deaths(self, dead: List[int], what: str) -> None:
        """Workers ``dead`` died during ``what``: restart them, or bury them
        and raise WorkerDiedError.

        Inside reset() each worker may be restarted once (its envs are about to
        be reset anyway); elsewhere only with ``on_worker_death="restart"``
        and while ``restart_count`` stays within ``max_restarts``.
        """
        in_reset = self._reset_restarts is not None
        if in_reset:
            restart = not set(dead) & self._reset_restarts
        else:
            restart = (
                self.on_worker_death == "restart"
                and self.restart_count + len(dead) <= self.max_restarts
            )
        if not restart:
            errors = [self._died(w, what) for w in dead]
            for w in dead:
                self._bury(w)
            self._state = State.NEEDS_RESET
            msg = "; ".join(str(e) for e in errors)
            if not in_reset and self.on_worker_death == "restart":
                msg += f" (max_restarts={self.max_restarts} reached)"
            raise WorkerDiedError(
                msg,
                env_indices=[i for e in errors for i in e.env_indices],
                exitcode=errors[0].exitcode,
                env_index=next((e.env_index for e in errors if e.env_index is not None), None),
            )
        for w in dead:
            self._restart(w, report=not in_reset)
            if in_reset:
                self._reset_restarts.add(w)
            else:
                self.restart_count += 1

    def _restart(self, w: int, *, report: bool) -> None:
        """Start worker ``w`` again, with new envs built by its factories.

        Its envs in flight get a reset op (their results complete the wait in
        progress, with this reset's seeds and options if there are any); the
        others (collected, held by the caller) are reset while the worker
        starts, their infos kept in ``_restart_infos``. With ``report``, each
        env of the worker reports the restart in its next result.

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            The new worker failed to start; it is buried and reset() may try again.
        """
        res = self._resources
        lo, hi = self._ranges[w]
        if not res.segment.handle.startswith("/proc/"):  # pragma: no cover - macOS
            raise WorkerDiedError(
                f"worker {w} (envs {list(range(lo, hi))}) is dead and cannot be restarted: "
                "restarts need the Linux memfd segment; close() and build a new vec env",
                env_indices=range(lo, hi),
            )
        lost = [i for i in range(lo, hi) if self._in_flight[i]]
        held = [i for i in range(lo, hi) if not self._in_flight[i]]
        what = f"restarting worker {w}"
        while True:
            self._bury(w)
            self._spawn(w)
            deadline = time.monotonic() + self._start_timeout
            try:
                msg = self._recv_started(w, deadline, what)
                if isinstance(msg, msgs.Error):
                    raise self._worker_error(msg.report)
                got = (msg.observation_space, msg.action_space)
                if self.check_spaces and got != self._spaces:
                    raise SpaceError(
                        f"worker {w} came back with spaces ({got[0]}, {got[1]}), expected "
                        f"({self._spaces[0]}, {self._spaces[1]})"
                    )
                self._post(w, msgs.Attach(res.segment.handle, self._layout, held), deadline, False)
                msg = self._recv(w, deadline, what)
                if isinstance(msg, msgs.Error):
                    raise self._worker_error(msg.report)
            except WorkerDiedError:
                # The new worker died while starting: one more restart if allowed.
                if report and self.restart_count < self.max_restarts:
                    self.restart_count += 1
                    continue
                self._bury(w)
                self._state = State.NEEDS_RESET
                raise
            except BaseException:
                self._bury(w)
                self._state = State.NEEDS_RESET
                raise
            break
        self._dead.discard(w)
        if lost:
            # Dispatched even if the worker dies at once: the next wait then
            # sees them in flight and restarts it again.
            kws = {i: self._pending_kwargs[i] for i in lost if i in self._pending_kwargs}
            if kws:
                try:
                    self._post(w, msgs.ResetKwargs(kws))
                except WorkerDiedError:
                    pass
            self._ctrl.dispatch(np.asarray(lost, dtype=np.int64), int(Op.RESET))
        self._restart_infos.update({i: self._take_pickled(i, inf) for i, inf in msg.infos.items()})
        if report:
            self._restarted.update(range(lo, hi))

    def _report_restarts(self, ids, infos: List[Dict[str, Any]]) -> None:
        """Mark the results of restarted envs among ``ids`` (row ``pos`` of
        the batch is env ``ids[pos]``): done by truncation, with info flags."""
        for pos, i in enumerate(ids):
            i = int(i)
            if i not in self._restarted:
                continue
            self._restarted.discard(i)
            extra = self._restart_infos.pop(i, None)
            if extra is None:  # this result is the reset the restart gave it
                reset_info, info = infos[pos], {}
            else:  # reset while the worker started; this result came after
                reset_info, info = extra, dict(infos[pos])
            if self.autoreset_mode == "sb3":  # as an automatic reset's info
                self.reset_infos[i] = reset_info
            else:
                info = {**reset_info, **info}
            info["TimeLimit.truncated"] = True
            info["worker_restarted"] = True
            infos[pos] = info
            self._term[i] = False
            self._trunc[i] = True

    def _broken_workers(self) -> List[int]:
        """Live workers whose channel an interrupt broke (reset() restarts them)."""
        return [
            w for w, chan in enumerate(self._resources.chans) if chan.broken and w not in self._dead
        ]

    def _worker_error(self, report: ErrorReport) -> WorkerError:
        """A worker's error report (an env's exception) as a WorkerError."""
        err = report.to_exception()
        assert isinstance(err, WorkerError), report  # workers report env errors only
        return err

    def _take_pickled(self, i: int, info: Dict[str, Any]) -> Dict[str, Any]:
        """Move env ``i``'s pickled observation leaves out of ``info`` (see
        ``PICKLED_OBS_KEY``) into the parent's copies; return ``info``."""
        if self._obs_pickled and info:
            values = info.pop(PICKLED_OBS_KEY, None)
            if values is not None:
                for col, v in zip(self._pickled_obs, values):
                    col[i] = v
            final = info.pop(PICKLED_FINAL_KEY, None)
            if final is not None:
                self._pickled_final[i] = final
        return info


class WorkerStartup(WorkerPool):
    """Base of ShmemVecEnv: starting the workers at construction (CPU
    affinity, spawning all, waiting for their spaces with progress reports
    and a start-up deadline)."""

    @staticmethod
    def _check_affinity(cpu_affinity, num_workers):
        if cpu_affinity is None or cpu_affinity is False:
            return None
        if cpu_affinity is True:
            try:
                cores = sorted(os.sched_getaffinity(0))
            except AttributeError:  # pragma: no cover
                raise InvalidArgumentError(
                    "cpu_affinity needs os.sched_setaffinity (Linux)"
                ) from None
        else:
            try:
                cores = [int(c) for c in cpu_affinity]
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    f"cpu_affinity must be a bool or a list of core ids, got {cpu_affinity!r}"
                ) from None
            if not cores:
                raise InvalidArgumentError("cpu_affinity is an empty list")
            usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(cores)
            bad = [c for c in cores if c not in usable]
            if bad:
                raise InvalidArgumentError(
                    f"cpu_affinity has cores {bad} outside the usable cores {sorted(usable)}"
                )
        return [cores[w % len(cores)] for w in range(num_workers)]

    def _start_workers(self, ctx, env_fns, daemon, start_timeout):
        res = self._resources
        self._specs = [
            WorkerSpec(
                index=w,
                lo=lo,
                hi=hi,
                env_fns=cloudpickle.dumps(env_fns[lo:hi]),
                parent_pid=os.getpid(),
                spin_s=self.spin,
                autoreset_mode=self.autoreset_mode,
                check_rewards=self.check_rewards,
                check_spaces=self.check_spaces,
            )
            for w, (lo, hi) in enumerate(self._ranges)
        ]
        try:
            for w in range(len(self._ranges)):
                self._spawn(w)
            deadline = time.monotonic() + start_timeout
            spaces = None
            replies = self._await_started(deadline, start_timeout)
            for w in range(len(self._ranges)):
                reply = replies[w]
                obs_space, act_space = reply.observation_space, reply.action_space
                metadata = reply.metadata
                if spaces is None:
                    spaces = (obs_space, act_space)
                    self.metadata = metadata[0] if metadata else {}
                elif self.check_spaces and spaces != (obs_space, act_space):
                    lo = self._ranges[w][0]
                    raise SpaceError(
                        f"env {lo} has spaces ({obs_space}, {act_space}), env 0 has "
                        f"({spaces[0]}, {spaces[1]}); all envs must share their spaces"
                    )
            self._spaces = spaces
        except BaseException:
            res.shutdown(timeout=1.0)
            raise

    def _await_started(self, deadline: float, start_timeout: float) -> Dict[int, tuple]:
        """Wait for every worker's ("spaces", ...) message at once, keeping
        their ("progress", env, activity) reports; log progress every
        ``_START_REPORT_S`` seconds.

        Raises
        ------
        WorkerError
            A factory raised (the lowest env index among the reports read).
        WorkerDiedError
            A worker died while starting (names the factory it was inside).
        VecEnvTimeoutError
            ``deadline`` passed: names every worker that did not start.
        """
        res = self._resources
        n = len(self._ranges)
        replies: Dict[int, tuple] = {}
        pending = set(range(n))
        start = time.monotonic()
        report_at = start + _START_REPORT_S
        # Factory errors of all workers are gathered for a short while after
        # the first one, so the error raised is the lowest env's, whichever
        # worker's report arrives first.
        errors: List[ErrorReport] = []
        errors_until = math.inf
        while pending:
            now = time.monotonic()
            if now >= errors_until:
                break
            if now >= deadline:
                if errors:
                    break
                raise self._start_timed_out(sorted(pending), start_timeout)
            if now >= report_at:
                report_at += _START_REPORT_S
                _log.warning(
                    "ShmemVecEnv: %d of %d workers ready after %.0f s (start method %r); "
                    "still starting: %s; start_timeout=%s s",
                    n - len(pending),
                    n,
                    now - start,
                    self._ctx.get_start_method(),
                    "; ".join(f"worker {w} {self._starting(w)}" for w in sorted(pending)),
                    start_timeout,
                )
            waitables: Dict[Any, int] = {res.chans[w]: w for w in pending}
            waitables.update({res.procs[w].sentinel: w for w in pending})
            ready = mp_connection.wait(
                list(waitables), timeout=max(0.0, min(deadline, report_at, errors_until) - now)
            )
            died = []
            for obj in ready:
                w = waitables[obj]
                if w not in pending:
                    continue
                chan = res.chans[w]
                alive = chan.pump(0)
                # Unsolicited start-up messages carry ref 0; a later one
                # replaces an earlier one, and only the last matters.
                msg = chan.replies.pop(0, None)
                if msg is not None:
                    if isinstance(msg, msgs.Progress):
                        self._progress[w] = (msg.env, msg.activity)
                    elif isinstance(msg, msgs.Error):
                        errors.append(msg.report)
                        pending.discard(w)
                        errors_until = min(errors_until, time.monotonic() + _START_ERRORS_S)
                    else:
                        self._progress.pop(w, None)
                        replies[w] = msg
                        pending.discard(w)
                if w in pending and (not alive or res.procs[w].exitcode is not None):
                    died.append(w)
            if died:
                if not errors:
                    raise self._died(min(died), "starting the workers")
                pending.difference_update(died)  # a factory error is what we report
        if errors:
            # As the env's own type too: `except NameNotFound` works.
            first = min(errors, key=lambda p: p.env_index or 0)
            raise as_env_exception(self._worker_error(first))
        return replies

    def _starting(self, w: int) -> str:
        """Where worker ``w`` is in its start-up, for messages."""
        if w not in self._progress:
            return "has not reached its env factories yet (the process is still booting)"
        env, code = self._progress[w]
        return f"is {Activity(code).describe(env)}"

    def _start_timed_out(self, workers: List[int], start_timeout: float) -> VecEnvTimeoutError:
        """The error for workers ``workers`` that did not start in time."""
        method = self._ctx.get_start_method()
        n = len(self._ranges)
        where = "; ".join(
            f"worker {w} (envs {list(range(*self._ranges[w]))}) {self._starting(w)}"
            for w in workers
        )
        if method == "fork":
            cause = (
                "A forked worker that never starts usually inherited a lock that another "
                "thread of this process held at the fork (logging, an import, a thread pool, "
                "a BLAS, OpenMP or CUDA runtime): only the forking thread is copied, so the lock "
                "is never released in the worker. Pass context='spawn' or context='forkserver' "
                "(fresh processes), or start the vec env before other threads; if the "
                "factories are only slow, raise start_timeout."
            )
        else:
            cause = (
                "The factories are stuck or slow (an import, a download, a model compile, a "
                "server that does not answer): raise start_timeout if they are only slow."
            )
        first = next(
            (self._progress[w][0] for w in workers if w in self._progress),
            None,
        )
        envs = [i for w in workers for i in range(*self._ranges[w])]
        return WatchdogTimeoutError(
            f"ShmemVecEnv(): {len(workers)} of {n} workers did not start within "
            f"start_timeout={start_timeout} s (start method {method!r}): {where}. {cause}",
            env_indices=envs,
            env_index=first,
        )
