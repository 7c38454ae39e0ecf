"""WorkerPool: the worker processes of a ShmemVecEnv (parent side).

A part that :class:`~vecenv.ShmemVecEnv` holds (``venv._pool``): spawning the
workers and waiting for their spaces (:class:`vecenv._startup.Startup`), attaching them to
the shared block, the pipe transport to each (post and read, with deadlines
and liveness checks), noticing deaths, burying, starting one worker again
(:meth:`WorkerPool.respawn`), and the shutdown that a ``weakref.finalize``
runs over :class:`_Resources` (the processes, channels and shared segment,
kept apart from the vec env so that the finalizer holds no reference to it).

The in-process pool of ``num_workers=0`` (:class:`vecenv._inprocess.InprocPool`)
has the same interface. With ``inline`` (``ShmemVecEnv(inline=True)``) worker
0 is not a process: the calling process steps its envs with the in-process
engine's stand-ins (:class:`vecenv._inprocess.InprocChannel`,
:class:`~vecenv._inprocess.InprocProcess`, and the Control
:class:`~vecenv._inprocess.SharedControl`, whose dispatch wakes the workers
and then runs worker 0's round), while the worker processes step the rest;
everything else, transport included, goes through the same methods. What to do about a death (restart or raise) is the
:class:`vecenv._collect.Recovery` part's decision; the pool only reports it.
The pool never touches the vec env's state: its errors propagate to the verb,
which set NEEDS_RESET before the side effect that raised.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import threading
import time
import weakref
from multiprocessing import connection as mp_connection
from multiprocessing import util as mp_util
from typing import Any, Dict, List, Optional, Tuple

import cloudpickle
import numpy as np

from vecenv import _core
from vecenv import _protocol as msgs
from vecenv._channel import ChannelBroken, ChannelDead, ChannelTimeout, ParentChannel
from vecenv._cpus import usable_cpus
from vecenv._protocol import Activity, ErrorReport
from vecenv._startup import Startup
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
)


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
        self.ctrl: Any = None  # the parent's Control (posts the close messages)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Close the workers politely (their envs' close() runs), then after
        ``timeout`` seconds terminate and kill the ones left; close the
        channels and release the shared block. Safe to call twice."""
        deadline = time.monotonic() + max(timeout, 0.0)
        ctrl = self.ctrl
        # Last to first: the caller's own share (worker 0, inline) closes its
        # envs at once, while the worker processes close theirs.
        for w, (chan, proc) in reversed(list(enumerate(zip(self.chans, self.procs)))):
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
            live = [w for w in live if hasattr(self.procs[w], "sentinel")]  # not this process
            if not live:
                break
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
                if sig == "kill":
                    _kill(p)
                    continue
                try:
                    p.terminate()
                except Exception:
                    pass
            # One second for all of them, not one each: workers that outlive
            # SIGTERM (an env ignores it, or a handler that a C library such as
            # SDL installed in the parent came along with fork) cost a second
            # in all, then SIGKILL.
            until = time.monotonic() + 1.0
            for p in alive:
                p.join(max(0.0, until - time.monotonic()))
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


# Every _Resources with live workers, for the exit hook (weak: a collected
# vec env's finalizer has shut it down already).
_LIVE: weakref.WeakSet[_Resources] = weakref.WeakSet()
_exit_hook: List[Any] = []


def _shutdown_all() -> None:
    for resources in list(_LIVE):
        _shutdown(resources)


def _track(resources: _Resources) -> None:
    """Shut ``resources`` down at interpreter exit, before multiprocessing's
    own exit handler terminates (daemon) or joins (non-daemon) the workers:
    a worker whose env has processes of its own, or a ``daemon=False``
    worker, then never makes the exit hang, whether or not close() was
    called (an exception, a Ctrl-C, a forgotten close). multiprocessing runs
    the finalizers with an exit priority before it joins its children; a
    ``Finalize`` is ignored in forked children (it records its pid)."""
    if not _exit_hook:
        _exit_hook.append(mp_util.Finalize(None, _shutdown_all, exitpriority=50))
    _LIVE.add(resources)


def _kill(proc) -> None:
    """SIGKILL worker ``proc`` and its process group (what its envs started
    and left in the group, and its guard); not yet reaped, so its pid (the
    group's id) cannot have been reused."""
    pid = proc.pid
    if pid == os.getpid():  # the caller's own share (inline): nothing to kill
        return
    try:
        if pid is not None and proc.exitcode is None and os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.kill()
    except Exception:
        pass


class WorkerPool:
    """The worker processes of a ShmemVecEnv and the pipe to each (see the module).

    Parameters
    ----------
    resources : _Resources
        Where the processes and channels are recorded for the finalizer.
    env_fns : sequence of callables
        The env factories (one per env).
    ranges : list of (lo, hi)
        Worker ``w`` hosts envs ``[lo, hi)``.
    ctx : multiprocessing context
        The start method's context.
    daemon : bool
        multiprocessing's daemon flag of the workers (in the parent; either
        way the workers may start processes, and exit shuts them down first).
    start_timeout : float
        Seconds a worker may take to build its envs (also at a restart).
    timeout : float or None
        The watchdog: seconds a post or a read may take (None: no limit).
    cores : list of int or None
        Core of each worker (``cpu_affinity``), or None: no pinning.
    spin, follow, autoreset_mode, check_rewards, check_spaces, check_observations, info_keys
        What each worker is told (:class:`vecenv._worker.WorkerSpec`;
        ``follow`` is its ``follow_s``).
    inline : bool
        Worker 0's envs step in the calling process (see the module); it
        never dies, times out or restarts.
    """

    in_process = False

    def __init__(
        self,
        resources: _Resources,
        env_fns,
        ranges: List[Tuple[int, int]],
        *,
        ctx: Any,
        daemon: bool,
        start_timeout: float,
        timeout: Optional[float],
        cores: Optional[List[int]],
        spin: float,
        autoreset_mode: str,
        check_rewards: bool,
        check_spaces: bool,
        check_observations: bool = False,
        info_keys: Optional[Tuple[str, ...]] = None,
        follow: float = 0.0,
        inline: bool = False,
    ):
        self.resources = resources
        self.inline = bool(inline)
        lo0, hi0 = ranges[0]
        self.inline_fns = list(env_fns[lo0:hi0]) if inline else []
        self.inline_chan: Any = None  # worker 0's InprocChannel (inline), once started
        _track(resources)
        self.ranges = ranges
        self.env_worker: Any = np.repeat(np.arange(len(ranges)), [hi - lo for lo, hi in ranges])
        self.ctx = ctx
        self.daemon = daemon
        self.start_timeout = start_timeout
        self.timeout = timeout
        self.cores = cores
        self.check_spaces = check_spaces
        self.ctrl: Any = None  # the Control, once bound (bind); None once closed
        self.dead: set[int] = set()  # workers dead or killed, not yet started again
        self.progress: Dict[int, Tuple[Optional[int], int]] = {}  # starting: (env, activity)
        self.segment_handle = ""  # the shared segment, once attached
        self.layout: Any = None
        self.specs = [
            WorkerSpec(
                index=w,
                lo=lo,
                hi=hi,
                env_fns=b"" if inline and w == 0 else cloudpickle.dumps(env_fns[lo:hi]),
                parent_pid=os.getpid(),
                spin_s=0.0 if inline and w == 0 else spin,
                follow_s=0.0 if inline and w == 0 else follow,
                autoreset_mode=autoreset_mode,
                check_rewards=check_rewards,
                check_spaces=check_spaces,
                check_observations=check_observations,
                info_keys=info_keys,
            )
            for w, (lo, hi) in enumerate(ranges)
        ]

    @property
    def num_workers(self) -> int:
        return len(self.ranges)

    @property
    def procs(self) -> list:
        return self.resources.procs

    @property
    def chans(self) -> List[ParentChannel]:
        return self.resources.chans

    # ------------------------------------------------------------ start, attach
    def start(self) -> Tuple[Tuple[Any, Any], Dict[str, Any]]:
        """Spawn every worker and wait for their envs' spaces.

        Returns
        -------
        spaces : (observation_space, action_space)
            Env 0's.
        metadata : dict
            Env 0's metadata (with ``render_mode`` and ``env_spec_id``).

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError, SpaceError
            See :class:`~vecenv.ShmemVecEnv`; every process is shut down first.
        InvalidArgumentError
            (``check_spaces``) The envs' ``render_mode`` differ.
        """
        try:
            if self.inline:  # worker 0's stand-ins first: the workers' indices follow
                self._add_inline()
            for w in range(self.first_process, self.num_workers):
                self.spawn(w)
            if self.inline:  # while the workers boot
                replies = {0: self._build_inline()}
            else:
                replies = {}
            replies.update(Startup(self).run(time.monotonic() + self.start_timeout))
            spaces = None
            metadata: Dict[str, Any] = {}
            render_modes: List[Any] = []
            for w in range(self.num_workers):
                reply = replies[w]
                got = (reply.observation_space, reply.action_space)
                render_modes += [md.get("render_mode") for md in reply.metadata or ()]
                if spaces is None:
                    spaces = got
                    metadata = reply.metadata[0] if reply.metadata else {}
                elif self.check_spaces and spaces != got:
                    raise SpaceError(
                        f"env {self.ranges[w][0]} has spaces ({got[0]}, {got[1]}), env 0 has "
                        f"({spaces[0]}, {spaces[1]}); all envs must share their spaces"
                    )
            if self.check_spaces:
                check_render_modes(render_modes)
        except BaseException:
            self.resources.shutdown(timeout=1.0)
            raise
        if spaces is None:  # pragma: no cover - plan_workers gives one worker at least
            raise WorkerError("ShmemVecEnv(): no worker to start")
        return spaces, metadata

    @property
    def first_process(self) -> int:
        """The first worker that is a process (1 with ``inline``, else 0)."""
        return 1 if self.inline else 0

    def _add_inline(self) -> None:
        """Record worker 0's stand-ins (``inline``) as ``procs[0]``, ``chans[0]``."""
        from vecenv._inprocess import InprocChannel, InprocProcess

        process = InprocProcess()
        chans: List[Any] = self.resources.chans  # ParentChannel's stand-in at 0
        self.resources.procs[:] = [process]
        chans[:] = [InprocChannel(self.specs[0], [], process)]
        self.inline_chan = chans[0]

    def _build_inline(self) -> Any:
        """Build worker 0's envs in this process (``inline``): a Spaces
        message as a worker's start-up sends it. Raises as
        :func:`vecenv._inprocess.build_envs`."""
        from vecenv._inprocess import build_envs
        from vecenv._worker import _metadata

        lo = self.ranges[0][0]
        envs = build_envs(self.inline_fns, lo, self.check_spaces, self.worker_error)
        self.inline_fns = []
        self.inline_chan.envs[:] = envs
        return msgs.Spaces(
            envs[0].observation_space, envs[0].action_space, [_metadata(e) for e in envs]
        )

    def make_control(self, block, num_envs: int) -> Any:
        """The parent's Control over ``block`` (initialised here)."""
        if self.inline:
            from vecenv._inprocess import SharedControl

            return SharedControl(block, num_envs, self.num_workers, self.env_worker, init=True)
        return _core.Control(block, num_envs, self.num_workers, self.env_worker, init=True)

    def control(self, ctrl: Any, in_flight: np.ndarray) -> Any:
        """The Control the parent steps with once attached: ``ctrl`` itself,
        bound to worker 0's loop and the collector's in-flight marks with
        ``inline``."""
        if self.inline:
            ctrl.bind(self.inline_chan.loop, in_flight, self.ranges[0][1])
        return ctrl

    def attach(self, segment: Any, layout: Any, ctrl: Any) -> None:
        """Hand every worker the shared block (``segment``, laid out as
        ``layout``) and bind ``ctrl``, the parent's Control over it.

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            A worker failed to attach (the caller closes the vec env).
        """
        self.ctrl = ctrl
        self.segment_handle = segment.handle
        self.layout = layout
        deadline = time.monotonic() + self.start_timeout
        for w in range(self.num_workers):  # the workers are reading: no wake needed
            self.post(w, msgs.Attach(segment.handle, layout, []), deadline, wake=False)
        for w in range(self.num_workers):
            msg = self.recv(w, deadline, "attaching the workers")
            if not isinstance(msg, msgs.Attached):
                raise WorkerError(f"worker {w} answered {msg.kind!r} while attaching")

    def spawn(self, w: int) -> None:
        """Start the process of worker ``w`` and record it (and the parent's
        end of its pipe) as ``procs[w]``, ``chans[w]``."""
        ctx = self.ctx
        spec = self.specs[w]
        spec.environ = dict(os.environ)  # as of this start (forkserver would be stale)
        self.progress.pop(w, None)
        if self.ctrl is not None:
            self.ctrl.leave(w)  # no stale activity from a dead predecessor
        spec.pdeathsig = (
            ctx.get_start_method() in ("fork", "spawn")
            and threading.current_thread() is threading.main_thread()
        )
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=worker_main,
            args=(spec, child_conn),
            name=f"vecenv-worker-{w}",
            daemon=self.daemon,
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
        procs, chans = self.resources.procs, self.resources.chans
        try:
            proc.start()
            try:  # its own process group (the worker does the same: see _worker._guard_group)
                os.setpgid(proc.pid, proc.pid)
            except OSError:
                pass  # it did so first, or it has exec'd (spawn)
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
        if self.cores is not None:
            try:
                os.sched_setaffinity(proc.pid, {self.cores[w]})
            except OSError:
                pass

    def respawn(self, w: int, held: List[int], spaces: Tuple[Any, Any]) -> Dict[int, Any]:
        """Start worker ``w`` again (buried first), with new envs from its
        factories, and attach it; it resets the envs ``held`` (collected,
        not in flight) before it answers.

        Returns
        -------
        dict
            env index -> the info of its reset (for ``held``).

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError, SpaceError
            The new worker failed to start; it is buried.
        """
        lo, hi = self.ranges[w]
        if w < self.first_process:  # pragma: no cover - this process never dies
            raise StateError(f"worker {w} steps in this process (inline=True): no restart")
        if not self.segment_handle.startswith("/proc/"):  # pragma: no cover - macOS
            raise WorkerDiedError(
                f"worker {w} (envs {list(range(lo, hi))}) is dead and cannot be restarted: "
                "restarts need the Linux memfd segment; close() and build a new vec env",
                env_indices=range(lo, hi),
            )
        what = f"restarting worker {w}"
        self.bury(w)
        self.spawn(w)
        deadline = time.monotonic() + self.start_timeout
        try:
            msg = self.recv_started(w, deadline, what)
            if isinstance(msg, msgs.Error):
                raise self.worker_error(msg.report)
            got = (msg.observation_space, msg.action_space)
            if self.check_spaces and got != spaces:
                raise SpaceError(
                    f"worker {w} came back with spaces ({got[0]}, {got[1]}), expected "
                    f"({spaces[0]}, {spaces[1]})"
                )
            self.post(w, msgs.Attach(self.segment_handle, self.layout, held), deadline, False)
            msg = self.recv(w, deadline, what)
            if isinstance(msg, msgs.Error):
                raise self.worker_error(msg.report)
        except BaseException:
            self.bury(w)
            raise
        self.dead.discard(w)
        return dict(msg.infos)

    # ------------------------------------------------------------ transport
    def recv_started(self, w: int, deadline: Optional[float], what: str):
        """:meth:`recv` for a starting worker: its ("progress", ...) reports
        are kept (for messages), the next other message is returned."""
        while True:
            msg = self.recv(w, deadline, what)
            if not isinstance(msg, msgs.Progress):
                self.progress.pop(w, None)
                return msg
            self.progress[w] = (msg.env, msg.activity)

    def recv(
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
        chan = self.resources.chans[w]
        try:
            return chan.reply(chan.last_ref if ref is None else ref, deadline)
        except ChannelTimeout:
            raise self.timeout_error(w, what, keep) from None
        except ChannelDead:
            raise self.died(w, what) from None
        except ChannelBroken:
            raise self.broken_error(w, what) from None

    def post(self, w: int, msg, deadline: Optional[float] = None, wake: bool = True) -> int:
        """Send ``msg`` to worker ``w`` (woken first unless ``wake`` is False)
        and return its ref. ``deadline`` defaults to ``timeout`` from now.

        Raises
        ------
        WorkerDiedError, StateError
            As :meth:`recv`.
        VecEnvTimeoutError
            The frame could not be written in time: the worker was killed.
        """
        chan = self.resources.chans[w]
        if deadline is None and self.timeout is not None:
            deadline = time.monotonic() + self.timeout
        post = functools.partial(self.ctrl.post_message, w) if wake else None
        what = f"sending it a {msg.kind!r} message"
        try:
            return chan.request(msg, deadline, post)
        except ChannelTimeout:
            raise self.timeout_error(w, what, False) from None
        except ChannelDead:
            raise self.died(w, what) from None
        except ChannelBroken:
            raise self.broken_error(w, what) from None

    def round_entry(self, w: int, env: int, ticket: int) -> Tuple[str, Any]:
        """``("info", info)`` or ``("error", report)`` of env ``env`` (of worker
        ``w``) from the round it published under ``ticket``.

        Raises
        ------
        ChannelDead
            The worker died first (the caller restarts it or raises).
        VecEnvTimeoutError, StateError
            The watchdog passed (the worker was killed), or a broken channel.
        """
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            return self.resources.chans[w].round_entry(env, ticket, deadline)
        except ChannelTimeout:
            raise self.timeout_error(w, "reading infos", False) from None
        except ChannelBroken:
            raise self.broken_error(w, "reading infos") from None

    def pump_blocked(self, timeout: float) -> bool:
        """Read the pipes of the workers that wait for room on them (a worker
        blocked sending a large info would never take its next op). False
        when one of them is gone (the caller checks liveness)."""
        chans = self.resources.chans
        for w in self.ctrl.tx_blocked_workers():
            if w not in self.dead and not chans[w].pump(timeout):
                return False
        return True

    def forget_stale(self) -> None:
        """Drop kept replies of abandoned calls and unread round messages (at a reset)."""
        for chan in self.resources.chans:
            chan.forget_stale()

    # ------------------------------------------------------------ faults
    def inside(self, w: int) -> Tuple[Optional[int], str]:
        """``(env, phrase)``: the env worker ``w`` was inside (None: none) and
        what it did there, from its start-up reports or its control slot."""
        if w in self.progress:
            env, code = self.progress[w]
            return env, Activity(code).describe(env)
        if self.ctrl is None:
            return None, ""
        env, code = self.ctrl.activity(w)
        if env < 0:
            return None, ""
        try:
            act = Activity(code)
        except ValueError:
            act = Activity.CALL
        return env, act.describe(env)

    def timeout_error(self, w: int, what: str, keep: bool) -> VecEnvTimeoutError:
        """The error for worker ``w`` not answering while ``what``: with
        ``keep`` a PendingTimeoutError (nothing killed), else the worker is
        killed and buried and the error is a WatchdogTimeoutError."""
        lo, hi = self.ranges[w]
        if keep:
            hint = "; the call is still pending"
        else:
            self.bury(w)
            hint = self.killed_hint([w])
        cls = PendingTimeoutError if keep else WatchdogTimeoutError
        return cls(
            f"envs {list(range(lo, hi))} (worker {w}) did not answer within the "
            f"timeout while {what}{hint}",
            env_indices=range(lo, hi),
        )

    def broken_error(self, w: int, what: str) -> StateError:
        """The error for a channel that an interrupt cut inside a frame."""
        lo, hi = self.ranges[w]
        return StateError(
            f"cannot use the pipe of worker {w} (envs {list(range(lo, hi))}) while {what}: "
            "an interrupt (Ctrl-C) cut a message short; call reset(), which restarts that worker"
        )

    def died(self, w: int, what: str) -> WorkerDiedError:
        """The error for worker ``w``, which died while ``what``: how it died,
        the env it was inside and what to do."""
        proc = self.resources.procs[w]
        proc.join(1.0)
        lo, hi = self.ranges[w]
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
        if self.ctrl is not None:
            hint = "; reset() starts it again with new envs, close() releases everything"
        env, inside = self.inside(w)
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

    def killed_hint(self, workers) -> str:
        if self.ctrl is None:
            return ""
        envs = [i for w in workers for i in range(*self.ranges[w])]
        inside = "".join(
            f"; worker {w} was {phrase}"
            for w in workers
            for env, phrase in [self.inside(w)]
            if phrase
        )
        return (
            f"{inside}; worker(s) {list(workers)} (envs {envs}) were killed: reset() starts them "
            "again with new envs, close() releases everything"
        )

    def bury(self, w: int) -> None:
        """Make sure worker ``w`` is dead and reaped, and forget its envs: their
        control bytes, published results and in-flight marks, and its channel.
        reset() or the restart policy starts it again. Worker 0 of ``inline``
        (this process) is left alone: nothing stops it."""
        if w < self.first_process:
            return
        res = self.resources
        proc = res.procs[w]
        if proc.exitcode is None:
            _kill(proc)
            proc.join(5.0)
        res.chans[w].close()
        if self.ctrl is None:  # still constructing: the caller shuts down
            return
        lo, hi = self.ranges[w]
        self.ctrl.forget(lo, hi)  # clears their in-flight flags too
        self.dead.add(w)

    def dead_workers(self) -> List[int]:
        """Workers that exited and are not yet known to be dead."""
        return [
            w
            for w, proc in enumerate(self.resources.procs)
            if w not in self.dead and proc.exitcode is not None
        ]

    def broken_workers(self) -> List[int]:
        """Live workers whose channel an interrupt broke (reset() restarts them)."""
        return [
            w for w, chan in enumerate(self.resources.chans) if chan.broken and w not in self.dead
        ]

    @staticmethod
    def worker_error(report: ErrorReport) -> WorkerError:
        """A worker's error report (an env's exception) as a WorkerError."""
        err = report.to_exception()
        if not isinstance(err, WorkerError):  # workers report env errors only
            raise TypeError(f"not an env's error report: {report!r}")
        return err


class RenderModesDiffer(InvalidArgumentError):
    """The envs of one vec env were built with different ``render_mode``;
    ``render_modes`` holds each env's (the SB3 drop-in raises it as SB3's
    AssertionError)."""

    def __init__(self, message: str, render_modes: List[Any]):
        super().__init__(message)
        self.render_modes = list(render_modes)


def check_render_modes(render_modes: List[Any]) -> None:
    """Raise RenderModesDiffer (an InvalidArgumentError) unless every env
    (``render_modes[i]`` is env ``i``'s ``render_mode``) has env 0's
    render_mode: one vec env renders in one mode (SB3's vec envs refuse a
    mix too)."""
    if not render_modes or all(m == render_modes[0] for m in render_modes):
        return
    by_mode: Dict[str, List[int]] = {}
    for i, mode in enumerate(render_modes):
        by_mode.setdefault(repr(mode), []).append(i)
    listed = "; ".join(f"render_mode={m}: envs {ids}" for m, ids in by_mode.items())
    raise RenderModesDiffer(
        f"the envs were built with different render_modes ({listed}); build every env "
        "with the same render_mode (say render_mode='rgb_array' in each factory)",
        render_modes,
    )


def check_affinity(cpu_affinity, num_workers: int) -> Optional[List[int]]:
    """The core of each worker for ``cpu_affinity`` (None: no pinning).

    Raises
    ------
    InvalidArgumentError
        Not a bool or a list of usable core ids.
    """
    if cpu_affinity is None or cpu_affinity is False:
        return None
    if cpu_affinity is True:
        try:
            cores = sorted(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover
            raise InvalidArgumentError("cpu_affinity needs os.sched_setaffinity (Linux)") from None
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
