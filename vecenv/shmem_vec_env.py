"""ShmemVecEnv: the shared-memory vectorized env (parent side).

The parent owns the worker processes, the shared block and the state machine.
Observations, actions, rewards and done flags live in shared memory; on the
step path the only traffic between processes is a futex wake per worker and
one per batch. Infos, terminal observations, errors and method calls use each
worker's pipe (:mod:`vecenv._channel`: framing, deadlines, refs), and only
when there is something to send.

Interrupts: every method makes its state transition before the side effect
it guards (NEEDS_RESET before a dispatch or a channel operation), so a
KeyboardInterrupt between any two statements leaves a state from which
``reset()`` is correct; replies and infos are matched by ref and ticket, so
an abandoned one is never taken for a later one, and a channel interrupted
inside a frame is restored by ``reset()``, which restarts its worker.

Faults: every wait checks that the workers live (their exit status, every
0.1 s) and has a deadline (the ``timeout`` watchdog). A dead, killed or
timed-out worker is buried: killed if needed, reaped, and its envs' control
bytes and published results forgotten (its channel is closed). ``reset()`` starts
buried workers again; ``on_worker_death="restart"`` does so during a step and
reports the envs as truncated. The segment handle stays valid for new workers
because the parent keeps the memfd open; a new worker starts from its slot's
current cmd_seq and msg_seq.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import signal
import threading
import time
import weakref
from multiprocessing import connection as mp_connection
from multiprocessing import get_context
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import cloudpickle
import numpy as np
from gymnasium import spaces as gym_spaces

from vecenv import _core, _layout, _shm
from vecenv._channel import ChannelBroken, ChannelDead, ChannelTimeout, ParentChannel
from vecenv._engine import EngineVecEnv, State
from vecenv._options import ENGINE_OPTIONS, check_seconds
from vecenv._protocol import AUTORESET_MODES, Msg, Op
from vecenv._worker import (
    PICKLED_FINAL_KEY,
    PICKLED_OBS_KEY,
    RESET_INFO_KEY,
    Activity,
    WorkerSpec,
    worker_main,
)
from vecenv.base import Indices, check_batch_size, check_env_ids
from vecenv.errors import (
    InvalidArgumentError,
    ObservationError,
    RemoteTraceback,
    RewardError,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WorkerDiedError,
    WorkerError,
    as_env_exception,
)

_NONE = np.empty(0, dtype=np.intp)  # no env indices
_OP_STEP, _OP_RESET = int(Op.STEP), int(Op.RESET)  # plain ints for the step path

# Wait in slices this long (seconds) so dead workers and Ctrl-C are noticed.
_SLICE_S = 0.1

# While workers start, log how many are ready every this many seconds.
_START_REPORT_S = 10.0

_log = logging.getLogger("vecenv")


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


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


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
        num_workers = _usable_cpus()
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

    def shutdown(self, timeout: float = 5.0, polite: bool = True) -> None:
        deadline = time.monotonic() + max(timeout, 0.0)
        if polite:
            ctrl = getattr(self, "ctrl", None)
            for w, (chan, proc) in enumerate(zip(self.chans, self.procs)):
                # A broken channel (an interrupted frame) cannot carry a close:
                # that worker is terminated below.
                if proc.exitcode is None and not chan.broken:
                    post = None if ctrl is None else functools.partial(ctrl.post_message, w)
                    try:
                        chan.request((Msg.CLOSE,), min(deadline, time.monotonic() + 1.0), post)
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


class ShmemVecEnv(EngineVecEnv):
    """Step ``num_envs`` gymnasium envs in worker processes over shared memory.

    The API of OpenAI baselines' ``ShmemVecEnv`` (``reset``, ``step_async``,
    ``step_wait``, ``step``, ``close``, ``render``) plus what stable-baselines3
    users expect (``seed``, ``env_method``, ``get_attr``, ``set_attr``), and an
    EnvPool-style partial-batch API (``send``/``recv``) when ``batch_size <
    num_envs``.

    Parameters
    ----------
    env_fns : sequence of callables
        One factory per env, returning a ``gymnasium.Env`` (or a legacy gym env
        when the ``legacy-gym`` extra is installed). Pickled with cloudpickle,
        so lambdas and closures work under every start method.
    spaces : (observation_space, action_space), optional
        The spaces every env must have; checked against the envs' own.
    num_workers, envs_per_worker : int, optional
        Worker layout (give one or neither). Default: one worker per usable
        CPU core, envs spread evenly. Each worker steps its envs in order.
    batch_size : int, optional
        Envs returned by :meth:`recv` (default num_envs: lockstep).
    context : str, optional
        multiprocessing start method: "fork", "spawn" or "forkserver"
        (default: the platform's default).
    copy : bool
        True (default): returned observations are arrays the caller owns.
        False: they are zero-copy views into shared memory, valid until the
        next ``step_async``, ``send``, ``reset`` or ``close``; copy to keep them.
        (:meth:`recv` then returns a gather buffer reused by the next ``recv``,
        or, when the batch's envs are consecutive, views of their shared rows
        in env order: no gather at all.) Rewards and done flags are always
        fresh arrays.
    timeout : float, optional
        Seconds to wait for a step, reset or method call before raising
        :class:`~vecenv.errors.VecEnvTimeoutError` (default: no limit). The
        workers that did not answer are killed and the vec env needs a
        :meth:`reset`, which starts them again (or :meth:`close`).
    start_timeout : float
        Seconds to wait for all workers to build their envs (default 60).
        Workers start in parallel, usually within a second (fork: about
        2 ms, spawn and forkserver: about 0.2 s plus the factories' imports);
        a minute covers heavy factories (Atari ROMs, MuJoCo models, importing
        torch on a busy machine) while a worker that will never start (a
        factory that waits forever, a lock held by another thread at fork)
        is reported before a user gives up on a silent program. Past 10 s,
        progress is logged (logger ``"vecenv"``, level WARNING) every 10 s.
        The error names every worker that did not start, the env factory it
        is inside, the start method and the likely fix.
    spin : float, optional
        Seconds a waiting process polls before sleeping on a futex. The poll
        yields the CPU (``sched_yield``) after a few microseconds, so it never
        starves a runnable process on its core, while its core stays awake and
        answers a wake in microseconds instead of waiting out an idle halt
        (tens of microseconds in a VM). Default: 200e-6 while num_workers is at
        most twice the usable cores, else 0 (measured on 2 cores: noop 8 envs
        on 2 workers 183k -> 446k env-steps/s, CartPole 16 envs 109k -> 153k,
        Pong unchanged; 16 workers on Pong lost 11%).
    autoreset_mode : {"sb3", "next_step", "same_step", "disabled"}
        What happens when an episode ends. "sb3" (default, as baselines and
        SB3): the env is reset in the same step, the returned observation is
        the reset one and ``infos[i]["terminal_observation"]`` holds the last
        one, with ``infos[i]["TimeLimit.truncated"]``. "next_step" and
        "same_step" follow gymnasium's ``AutoresetMode``; "disabled" never resets.
    cpu_affinity : bool or sequence of int, optional
        Pin worker ``w`` to core ``cores[w % len(cores)]``; True uses all usable
        cores in order. Default: no pinning.
    daemon : bool
        Start workers as daemon processes (default True).
    on_worker_death : {"raise", "restart"}
        "raise" (default): a worker that dies during a step raises
        :class:`~vecenv.errors.WorkerDiedError` and the vec env needs a
        :meth:`reset` (which restarts the worker). "restart": the worker is
        started again and its envs are reset; the step returns normally with
        ``dones[i] = True``, ``truncated[i] = True`` and
        ``infos[i]["TimeLimit.truncated"] = infos[i]["worker_restarted"] = True``
        for each of its envs (at the next result of an env the caller holds).
        Needs Linux (the memfd segment).
    max_restarts : int
        Most automatic restarts over the vec env's life (default 100); past
        it, a death raises as with "raise". Restarts by :meth:`reset` do not count.
    check_rewards : bool
        Make a non-finite reward (NaN, inf) an error
        (:class:`~vecenv.errors.RewardError` naming the env). Default False.
    check_actions : bool
        False (default): actions reach the envs as given, as in the seed's,
        SB3's and gymnasium's vector envs: an array of the action space's
        dtype and shape goes through shared memory (each env gets its row);
        anything else (lists, other dtypes, Tuple/Dict sequences of per-env
        actions) is split into per-env actions (gymnasium's ``iterate``) and
        sent through the worker pipes, element types unchanged, nothing
        cast or range-checked. True: every batch is validated and cast into
        shared memory first; the wrong count, shape or dtype, NaN where
        integers are needed, or a value outside a Discrete/MultiDiscrete/
        MultiBinary space raises :class:`~vecenv.errors.InvalidArgumentError`
        before anything is sent.
    pickled_leaves : bool
        Let spaces without a fixed layout (Text, Graph, Sequence, OneOf,
        custom ``Space`` subclasses, alone or inside Tuple/Dict) travel pickled
        through the worker pipes (observations in each step's info message,
        actions as above); fixed leaves stay in shared memory. Their batch
        is a tuple of per-env values, as gymnasium batches them. Default
        False: such spaces raise :class:`~vecenv.errors.SpaceError`.
    check_spaces : bool
        True (default): every env must have env 0's observation and action
        spaces. False: only their shapes and dtypes must agree (the caller
        checks the rest, as the gymnasium drop-in does for
        ``observation_mode="different"``).

    Notes
    -----
    Each worker sees the parent's ``os.environ`` as it was when the worker was
    started (at construction, or at a restart), under every start method;
    the working directory and ``sys.path`` are the parent's too.

    Each worker reseeds the global generators (``random``, ``np.random``'s
    legacy global ``RandomState``, and ``torch`` when imported) from fresh
    entropy when it starts (before the factories run), so envs that draw
    from them do not repeat each other's numbers (forked workers would
    otherwise all continue the parent's stream). When a reset gives the
    worker's envs seeds (:meth:`seed`, or ``reset(seed=...)`` in the
    façades), the worker reseeds them again from the first of those seeds,
    just before those resets run: a seeded run draws the same numbers again.
    The envs' own ``np_random`` is seeded by gymnasium from the same seed,
    independently.

    Raises
    ------
    InvalidArgumentError
        Bad arguments (before any process or shared memory exists).
    SpaceError
        A space that cannot live in shared memory, or envs that disagree.
    WorkerError
        An env factory raised; the message names the env and carries the
        worker's traceback.
    WorkerDiedError
        A worker died while building its envs; ``env_index`` is the env whose
        factory it was inside.
    VecEnvTimeoutError
        Workers did not start within ``start_timeout``; the message names
        each of them, the factory it is inside and the likely fix.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        spaces: Optional[Tuple[Any, Any]] = None,
        *,
        num_workers: Optional[int] = None,
        envs_per_worker: Optional[int] = None,
        batch_size: Optional[int] = None,
        context: Optional[str] = None,
        copy: bool = True,
        timeout: Optional[float] = None,
        start_timeout: float = 60.0,
        spin: Optional[float] = None,
        autoreset_mode: str = "sb3",
        cpu_affinity: Union[bool, Sequence[int], None] = None,
        daemon: bool = True,
        on_worker_death: str = "raise",
        max_restarts: int = 100,
        check_rewards: bool = False,
        check_actions: bool = False,
        pickled_leaves: bool = False,
        check_spaces: bool = True,
    ):
        self._state = State.CLOSED  # until construction succeeds
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, _shutdown, self._resources)
        env_fns = self._check_env_fns(env_fns)
        num_envs = len(env_fns)
        self._ranges = plan_workers(num_envs, num_workers, envs_per_worker)
        batch_size = check_batch_size(batch_size, num_envs)
        autoreset_mode = autoreset_mode_name(autoreset_mode)
        check_seconds("timeout", timeout)
        check_seconds("start_timeout", start_timeout)
        check_seconds("spin", spin, zero_ok=True)
        if on_worker_death not in ("raise", "restart"):
            raise InvalidArgumentError(
                f"on_worker_death must be 'raise' or 'restart', got {on_worker_death!r}"
            )
        if (
            not isinstance(max_restarts, (int, np.integer))
            or isinstance(max_restarts, bool)
            or max_restarts < 0
        ):
            raise InvalidArgumentError(f"max_restarts must be an int >= 0, got {max_restarts!r}")
        methods = ("fork", "spawn", "forkserver")
        if context is not None and context not in methods:
            raise InvalidArgumentError(f"context must be one of {methods} or None, got {context!r}")
        if spaces is not None and (not isinstance(spaces, (tuple, list)) or len(spaces) != 2):
            raise InvalidArgumentError("spaces must be a pair (observation_space, action_space)")
        num_workers = len(self._ranges)
        cpus = _usable_cpus()
        if spin is None:
            spin = 200e-6 if num_workers <= 2 * cpus else 0.0
        self._cores = self._check_affinity(cpu_affinity, num_workers)

        self.batch_size = int(batch_size)
        self.copy = bool(copy)
        self.timeout = timeout
        self.spin = float(spin)
        self.autoreset_mode = autoreset_mode
        self.context = context
        self._env_worker = np.repeat(np.arange(num_workers), [hi - lo for lo, hi in self._ranges])
        self._seeds: List[Optional[int]] = [None] * num_envs
        self._options: Dict[int, Any] = {}
        self.reset_infos: List[Dict[str, Any]] = [{} for _ in range(num_envs)]
        # Fault handling (see "Errors and fault handling" in the README).
        self.on_worker_death = on_worker_death
        self.max_restarts = int(max_restarts)
        self.restart_count = 0  # automatic restarts so far
        self.check_rewards = bool(check_rewards)
        self.check_actions = bool(check_actions)
        self.pickled_leaves = bool(pickled_leaves)
        self.check_spaces = bool(check_spaces)
        self._dead: set[int] = set()  # workers dead or killed, not yet restarted
        self._restarted: set[int] = set()  # envs whose next result reports a restart
        self._restart_infos: Dict[int, Any] = {}  # their reset infos
        self._reset_restarts: Any = None  # set of workers restarted by this reset(), or None
        self._pending_kwargs: Dict[int, Dict[str, Any]] = {}  # this reset's seeds/options
        self._next_check = 0.0  # time.monotonic() of the next liveness check on the fast path
        # Seconds for the next wait only, set by a caller that polls (the
        # gymnasium façade's ``*_wait(timeout=...)``): when they run out, nothing
        # is killed and the call stays pending. None: the ``timeout`` watchdog.
        self._wait_timeout: Optional[float] = None
        self._ctrl: Any = None  # the _core.Control; None once closed
        self._ctx: Any = get_context(context)
        self._daemon = daemon
        self._start_timeout = start_timeout
        self._progress: Dict[int, Tuple[Optional[int], int]] = {}  # starting: (env, activity)
        self._start_workers(self._ctx, env_fns, daemon, start_timeout)
        obs_space, act_space = self._spaces
        if spaces is not None and (spaces[0] != obs_space or spaces[1] != act_space):
            self.close()
            raise SpaceError(
                f"spaces=({spaces[0]}, {spaces[1]}) differ from the envs' own "
                f"({obs_space}, {act_space})"
            )
        super().__init__(num_envs, obs_space, act_space)
        try:
            self._attach(start_timeout)
        except BaseException:
            self.close()
            raise
        self._state = State.NEEDS_RESET

    # ------------------------------------------------------------ construction
    @staticmethod
    def _check_env_fns(env_fns):
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
                raise InvalidArgumentError(
                    f"env_fns[{i}] must be callable, got {type(fn).__name__}"
                )
        return env_fns

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
                _, obs_space, act_space, metadata = replies[w]
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
        while pending:
            now = time.monotonic()
            if now >= deadline:
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
                list(waitables), timeout=max(0.0, min(deadline, report_at) - now)
            )
            errors, died = [], []
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
                    if msg[0] == Msg.PROGRESS:
                        self._progress[w] = (msg[1], msg[2])
                    elif msg[0] == Msg.ERROR:
                        errors.append(msg[1])
                        pending.discard(w)
                    else:
                        self._progress.pop(w, None)
                        replies[w] = msg
                        pending.discard(w)
                if w in pending and (not alive or res.procs[w].exitcode is not None):
                    died.append(w)
            if errors:
                # As the env's own type too: `except NameNotFound` works.
                first = min(errors, key=lambda p: p.get("env_index") or 0)
                raise as_env_exception(self._worker_error(first))
            if died:
                raise self._died(min(died), "starting the workers")
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
        return VecEnvTimeoutError(
            f"ShmemVecEnv(): {len(workers)} of {n} workers did not start within "
            f"start_timeout={start_timeout} s (start method {method!r}): {where}. {cause}",
            env_indices=envs,
            env_index=first,
        )

    def _recv_started(self, w: int, deadline: Optional[float], what: str):
        """:meth:`_recv` for a starting worker: its ("progress", ...) reports
        are kept (for messages), the next other message is returned."""
        while True:
            msg = self._recv(w, deadline, what)
            if msg[0] != Msg.PROGRESS:
                self._progress.pop(w, None)
                return msg
            self._progress[w] = (msg[1], msg[2])

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
            self._post(w, (Msg.ATTACH, res.segment.handle, layout, []), deadline, wake=False)
        for w in range(num_workers):
            msg = self._recv(w, deadline, "attaching the workers")
            if msg[0] != Msg.ATTACHED:
                raise WorkerError(f"worker {w} answered {msg[0]!r} while attaching")
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
        what = f"sending it a {msg[0]!r} message"
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
        return VecEnvTimeoutError(
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
                if msg[0] == Msg.ERROR:
                    raise self._worker_error(msg[1])
                if self.check_spaces and (msg[1], msg[2]) != self._spaces:
                    raise SpaceError(
                        f"worker {w} came back with spaces ({msg[1]}, {msg[2]}), expected "
                        f"({self._spaces[0]}, {self._spaces[1]})"
                    )
                self._post(w, (Msg.ATTACH, res.segment.handle, self._layout, held), deadline, False)
                msg = self._recv(w, deadline, what)
                if msg[0] == Msg.ERROR:
                    raise self._worker_error(msg[1])
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
                    self._post(w, (Msg.RESET_KWARGS, kws))
                except WorkerDiedError:
                    pass
            self._ctrl.dispatch(np.asarray(lost, dtype=np.int64), _OP_RESET)
        self._restart_infos.update({i: self._take_pickled(i, inf) for i, inf in msg[2].items()})
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

    def _worker_error(self, payload) -> WorkerError:
        i = payload.get("env_index")
        cls: type[WorkerError]
        if payload.get("observation_error"):
            cls = ObservationError
        elif payload.get("reward_error"):
            cls = RewardError
        else:
            cls = WorkerError
        err = cls(
            f"env {i} raised {payload['exc_type']} in {payload['where']}: {payload['message']}",
            env_index=i,
            exc_type=payload["exc_type"],
            worker_traceback=payload["traceback"],
        )
        err.__cause__ = RemoteTraceback(payload["traceback"])
        return err

    def _wait(self, target: int, what: str, pending: Optional[State] = None) -> None:
        """Wait until ``target`` envs are published. Every _SLICE_S seconds,
        check that the workers live (a dead one is restarted or raised, see
        :meth:`_on_deaths`) and that the time has not run out.

        Time runs out after ``_wait_timeout`` seconds when a caller set it
        (and passes the ``pending`` state to go back to: nothing is killed),
        else after the ``timeout`` watchdog (the late workers are killed).
        """
        ctrl = self._ctrl
        first = _SLICE_S if self._wait_timeout is None else min(_SLICE_S, self._wait_timeout)
        if ctrl.wait_ready(target, self.spin, first) >= 0:
            # With partial batches the other envs may keep meeting the target
            # while a dead worker's envs starve: check liveness now and then.
            now = time.monotonic()
            if now < self._next_check:
                return
            self._next_check = now + _SLICE_S
            dead = self._dead_workers()
            if not dead:
                return
            # A restart takes back the dead worker's published envs: wait again.
            self._on_deaths(dead, what)
            if ctrl.published() >= target:
                return
        keep = pending is not None and self._wait_timeout is not None
        limit = self._wait_timeout if keep else self.timeout
        deadline = None if limit is None else time.monotonic() + limit - first
        while True:
            dead = self._dead_workers()
            if dead:
                self._on_deaths(dead, what)
                if limit is not None:  # a restart takes its own time
                    deadline = time.monotonic() + limit
            left = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
            if left <= 0 and ctrl.published() < target:
                if keep and pending is not None:
                    ready = ctrl.arrays()[2].astype(bool)
                    late = [int(i) for i in np.flatnonzero(self._in_flight & ~ready)]
                    self._state = pending
                    raise VecEnvTimeoutError(
                        f"envs {late} did not finish {what} within {limit} s; still pending: "
                        "wait again, or close()",
                        env_indices=late,
                    )
                self._timed_out(what)
            if self._wait_ready(target, max(left, 0.0)) >= 0:
                return

    def _wait_ready(self, target: int, timeout: float) -> int:
        """``ctrl.wait_ready`` for at most ``timeout`` seconds, reading the
        pipes of workers that wait for room on them (a worker blocked sending
        a large info would never take its next op). -1 when the time ran out
        or a worker is gone (the caller checks liveness)."""
        ctrl = self._ctrl
        end = time.monotonic() + timeout
        while True:
            r = ctrl.wait_ready(target, 0.0, max(end - time.monotonic(), 0.0))
            if r != -2:
                return r
            chans = self._resources.chans
            for w in ctrl.tx_blocked_workers():
                if w not in self._dead and not chans[w].pump(0.002):
                    return -1
            if time.monotonic() >= end:
                return -1

    def _timed_out(self, what: str) -> None:
        """Kill the workers of the envs still running and raise VecEnvTimeoutError."""
        ready = self._ctrl.arrays()[2].astype(bool)
        late = [int(i) for i in np.flatnonzero(self._in_flight & ~ready)]
        workers = sorted({int(self._env_worker[i]) for i in late})
        for w in workers:
            self._bury(w)  # stopped: its slot now says where it was stuck
        self._state = State.NEEDS_RESET
        stuck = [env for w in workers for env, _ in [self._inside(w)] if env is not None]
        raise VecEnvTimeoutError(
            f"envs {late} did not finish {what} within timeout={self.timeout} s"
            f"{self._killed_hint(workers)}",
            env_indices=late,
            env_index=stuck[0] if stuck else None,
        )

    def _read_flagged(self, ids) -> Tuple[Dict[int, Any], Dict[int, Any]]:
        """Read the pipe messages of the flagged envs among ``ids``.

        A worker found dead here is restarted or raised (:meth:`_on_deaths`);
        a restart clears the status of its envs, whose results are then
        reported as restarted.
        """
        infos: Dict[int, Any] = {}
        errors: Dict[int, Any] = {}
        status, tickets = self._status, self._tickets
        chans = self._resources.chans
        what = "reading infos"
        for i in ids:
            i = int(i)
            while status[i]:
                w = int(self._env_worker[i])
                deadline = None if self.timeout is None else time.monotonic() + self.timeout
                try:
                    # The message of the publish this env was collected under.
                    kind, value = chans[w].round_entry(i, int(tickets[i]), deadline)
                except ChannelDead:
                    self._on_deaths([w], what)  # a restart clears the status
                    continue
                except ChannelTimeout:
                    raise self._timeout_error(w, what, False) from None
                except ChannelBroken:
                    raise self._broken_error(w, what) from None
                (infos if kind == "info" else errors)[i] = value
                break
        return infos, errors

    def _raise_errors(self, errors: Dict[int, Any]) -> None:
        first = min(errors)
        err = self._worker_error(errors[first])
        if len(errors) > 1:
            err.args = (f"{err.args[0]} (and envs {sorted(errors)[1:]} failed too)",)
        err.errors = {i: self._worker_error(p) for i, p in errors.items()}
        self._state = State.NEEDS_RESET
        raise err

    def _obs_batch(self):
        if self.copy:
            leaves = [b.copy() for b in self._obs_bufs]
        else:
            leaves = self._obs_bufs
        if self._obs_pickled:
            leaves = _layout.merge_leaves(
                leaves, [tuple(col) for col in self._pickled_obs], self._obs_pickled
            )
        return leaves[0] if self._single_obs else self._unflatten_obs(leaves)

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

    def _allow_steps_before_reset(self) -> None:
        """Let the first step_async come before any reset (the envs then step
        from the state their factories left), as gymnasium's and SB3's vector
        envs do; the drop-ins call this right after construction."""
        if self._state is State.NEEDS_RESET and not self._in_flight.any() and not self._dead:
            self._state = State.IDLE

    def _put_actions(self, actions, ids=None) -> None:
        """Hand the envs (all, or ``ids``: int64 array) their actions, before
        their step is dispatched. See the ``check_actions`` parameter.

        Raises
        ------
        InvalidArgumentError, ActionTypeError
            Nothing was sent.
        WorkerDiedError
            A worker died before its actions could be sent.
        """
        n = self.num_envs if ids is None else len(ids)
        space = self.action_space
        if self.check_actions and not self._layout.actions_pickled:
            if _layout.per_env_form(space, actions, n):
                actions = _layout.stack_actions(space, actions)
            self._write_actions(actions, self._act_bufs, ids)  # validates, casts
            return
        if self._write_exact(actions, self._act_bufs, ids):
            return  # the fast path: rows of the space's dtype in shared memory
        per_env = self._split_actions(actions, n)
        if self.check_actions:
            for j, a in enumerate(per_env):
                if not space.contains(a):
                    raise InvalidArgumentError(f"actions[{j}]={a!r} is outside {space}")
        env_ids = range(n) if ids is None else ids.tolist()
        by_worker: Dict[int, Dict[int, Any]] = {}
        for i, a in zip(env_ids, per_env):
            by_worker.setdefault(int(self._env_worker[i]), {})[int(i)] = a
        # Posted before the step is dispatched: the worker reads every message
        # posted before it takes the ops (see _worker._Loop.run).
        for w, acts in by_worker.items():
            try:
                self._post(w, (Msg.ACTIONS, acts))
            except WorkerDiedError:  # restart (or raise), then send again
                self._on_deaths([w], "step")
                self._post(w, (Msg.ACTIONS, acts))

    # ------------------------------------------------------------ reset kwargs
    def _send_reset_kwargs(self, ids) -> None:
        per_worker: Dict[int, Dict[int, Dict[str, Any]]] = {}
        for i in ids:
            kw = {}
            if self._seeds[i] is not None:
                kw["seed"] = self._seeds[i]
            if i in self._options:
                kw["options"] = self._options[i]
            if kw:
                per_worker.setdefault(int(self._env_worker[i]), {})[int(i)] = kw
        for w, kws in per_worker.items():
            try:
                self._post(w, (Msg.RESET_KWARGS, kws))
            except WorkerDiedError:  # died since the last check: restart, send again
                self._on_deaths([w], "reset")
                self._post(w, (Msg.RESET_KWARGS, kws))
        self._pending_kwargs = {i: kw for kws in per_worker.values() for i, kw in kws.items()}
        self._seeds = [None] * self.num_envs
        self._options = {}

    def reset(self):
        """Reset every env and return the first observations.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            Shaped like ``observation_space`` with a leading num_envs axis
            (views into shared memory when ``copy=False``). When
            ``batch_size < num_envs`` the resets are only started and None is
            returned: collect them with :meth:`recv`.

        Reset infos are kept in ``self.reset_infos`` (a list of dicts); with
        ``autoreset_mode="sb3"`` a step that resets env ``i`` replaces
        ``reset_infos[i]`` with the info of that reset, as SB3 does.

        Workers that died or were killed (after a WorkerDiedError or a
        timeout) are started again first, with new envs from their factories;
        so is a worker that dies during the reset (once per call). Envs still
        in flight after a failed or interrupted step, or of a pending
        ``step_async`` (the seed's contract: that work is cancelled), are
        waited for and their results dropped.

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            The vec env still needs a reset afterwards.
        """
        self.reset_async()
        if self.batch_size < self.num_envs:
            return None
        return self.reset_wait()

    def reset_async(self, env_ids=None) -> None:
        """Start resetting the envs ``env_ids`` (default: all) with the seeds and
        options given by :meth:`seed` and :meth:`set_options`.

        Dead or killed workers are started again first (their envs are added
        to ``env_ids``), and so are workers whose pipe an interrupt (Ctrl-C)
        cut inside a message; envs in flight are waited for and their results
        dropped. A pending reset (say, one that Ctrl-C interrupted between
        reset_async and reset_wait) is abandoned and started again; a pending
        step_async is not (call step_wait first; :meth:`step` never leaves one).

        Parameters
        ----------
        env_ids : array-like of int, optional
            Distinct env indices to reset; the others keep their state and
            their last observation. Only with ``batch_size == num_envs``.

        Raises
        ------
        StateError
            A subset reset with ``batch_size < num_envs``. (A pending
            step_async() or reset_async() is finished and its results dropped.)
        InvalidArgumentError
            Bad ``env_ids``.
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            A worker could not be started again, or the envs in flight failed
            to finish; the vec env still needs a reset.
        """
        # A pending step_async is finished and its results dropped (the seed's
        # contract: "that work will be cancelled").
        self._guard(
            "reset_async",
            State.NEEDS_RESET,
            State.IDLE,
            State.RUNNING,
            State.RESET_PENDING,
            State.STEP_PENDING,
        )
        ids = self._reset_ids(env_ids)
        self._state = State.NEEDS_RESET  # until the reset completes
        self._reset_restarts = set()  # a worker may be restarted once per reset
        try:
            for w in self._broken_workers():  # a new pipe and a new worker: exact
                self._bury(w)
            dead = sorted(self._dead.union(self._dead_workers()))
            if dead:
                self._on_deaths(dead, "reset")
            if self._in_flight.any():
                self._drain("reset")
            for chan in self._resources.chans:  # replies of abandoned calls, old infos
                chan.forget_stale()
            if ids is not None and self._reset_restarts:  # their envs are new: reset them too
                new = [i for w in self._reset_restarts for i in range(*self._ranges[w])]
                ids = np.union1d(ids, np.asarray(new, dtype=np.int64))
            self._restarted.clear()
            self._restart_infos.clear()
            self._send_reset_kwargs(range(self.num_envs) if ids is None else ids)
            if ids is None:
                self._ctrl.dispatch_all(_OP_RESET)
            else:
                self._ctrl.dispatch(ids, _OP_RESET)
        except BaseException:
            self._reset_restarts = None
            raise
        if self.batch_size < self.num_envs:
            self._reset_restarts = None  # recv() collects the resets like steps
            self._state = State.RUNNING
        else:
            self._state = State.RESET_PENDING

    def reset_wait(self):
        """Wait for the resets started by :meth:`reset_async`.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            All num_envs rows: envs that were not reset keep their last
            observation. Copies, or views into shared memory with ``copy=False``.

        ``self.reset_infos`` gets one dict per env ({} for envs not reset).
        A worker that dies meanwhile is started again (once per reset).

        Raises
        ------
        StateError
            No reset_async() is pending.
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            As :meth:`step_wait`: the vec env needs a reset(), except after the
            timeout of a single wait (see ``_wait_timeout``), when the reset
            stays pending.
        """
        if self._state is not State.RESET_PENDING:
            self._guard("reset_wait", State.RESET_PENDING)
        self._state = State.NEEDS_RESET  # until the reset completes (see step_wait)
        try:
            ids = np.flatnonzero(self._in_flight)
            n = len(ids)
            self._wait(n, "reset", State.RESET_PENDING)
            if n == self.num_envs:
                flagged = self._ctrl.collect_all()
            else:
                flagged = self._ctrl.collect(n, self._ids_out)
            infos = [{} for _ in range(self.num_envs)]
            if flagged:
                got, errors = self._read_flagged(ids)
                if errors:
                    self._raise_errors(errors)
                for i, info in got.items():
                    infos[i] = self._take_pickled(i, info)
            for i, info in self._restart_infos.items():  # reset while restarting
                infos[i] = info
            self._restart_infos.clear()
        finally:
            if self._state is not State.RESET_PENDING:
                self._reset_restarts = None
        self.reset_infos = infos
        self._pending_kwargs = {}
        self._state = State.IDLE
        return self._obs_batch()

    def _add_terminal(self, ended, positions, infos: List[Dict[str, Any]]) -> None:
        """ "sb3" autoreset: give each env ``ended[j]`` (its episode ended in
        this step; its result is ``infos[positions[j]]``) the last observation
        from its shared row, a copy, and ``TimeLimit.truncated``."""
        for i, pos in zip(ended, positions):
            i = int(i)
            leaves = [buf[i].copy() for buf in self._final_bufs]
            if self._obs_pickled:
                leaves = _layout.merge_leaves(
                    leaves,
                    self._pickled_final.pop(i, [None] * len(self._obs_pickled)),
                    self._obs_pickled,
                )
            info = infos[pos]
            info["terminal_observation"] = (
                leaves[0] if self._single_obs else self._unflatten_obs(leaves)
            )
            info["TimeLimit.truncated"] = bool(self._trunc[i] and not self._term[i])

    def _split_reset_info(self, i: int, info: Dict[str, Any]) -> Dict[str, Any]:
        """Move the info of env ``i``'s automatic reset ("sb3" autoreset) from
        its step info into ``reset_infos[i]``; return the step info."""
        if RESET_INFO_KEY in info:
            self.reset_infos[i] = info.pop(RESET_INFO_KEY)
        return info

    def _drain(self, what: str) -> None:
        """Wait for every env in flight and drop the results (before a reset).
        A worker that dies meanwhile is restarted (inside reset)."""
        n = int(self._in_flight.sum())
        if n:
            self._wait(n, what)
            # Their round messages are never read: a later read asks for the
            # ticket of a later publish, so these are stale and overwritten.
            self._ctrl.collect(n, self._ids_out)

    def step_async(self, actions) -> None:
        """Start a step of every env.

        Parameters
        ----------
        actions : array-like, shape (num_envs, *action_space.shape)
            One action per env; for Tuple/Dict action spaces a tuple/dict of
            such arrays, or a sequence of num_envs per-env actions. An array
            of the space's dtype is copied into shared memory; anything else
            is sent through the pipes as the envs' own elements (see
            ``check_actions``). Either way the caller may reuse it at once.

        Raises
        ------
        ActionTypeError
            One scalar where a batch is needed (nothing is sent).
        InvalidArgumentError
            Not num_envs actions; with ``check_actions=True`` also a wrong
            shape, dtype, or a value outside a Discrete/MultiDiscrete/
            MultiBinary space (nothing is sent).
        StateError
            A step is already pending, reset() was not called, or the vec env
            uses batch_size < num_envs (use send/recv).
        """
        self._step_start(actions)
        self._state = State.STEP_PENDING

    def _step_start(self, actions) -> None:
        self._check_step_async()
        self._put_actions(actions)
        self._state = State.NEEDS_RESET  # before the dispatch: a Ctrl-C between is safe
        self._ctrl.dispatch_all(_OP_STEP)

    def step(self, actions):
        """:meth:`step_async` then :meth:`step_wait`, without passing through
        STEP_PENDING: a Ctrl-C anywhere in it leaves NEEDS_RESET, from which
        :meth:`reset` recovers (see step_wait for what it returns and raises)."""
        self._step_start(actions)
        return self._step_finish()

    def step_wait(self):
        """Wait for the step started by :meth:`step_async`.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            Arrays the caller owns, or with ``copy=False`` views into shared
            memory valid until the next ``step_async``, ``reset`` or ``close``.
        rewards : float64 array, shape (num_envs,)
        dones : bool array, shape (num_envs,)
            ``terminated | truncated``.
        infos : list of num_envs dicts
            With ``autoreset_mode="sb3"``, an env whose episode ended has
            ``"terminal_observation"`` and ``"TimeLimit.truncated"``.

        Raises
        ------
        StateError
            No step_async() is pending.
        WorkerError
            An env raised (names the env; the worker's traceback is chained).
        WorkerDiedError, VecEnvTimeoutError
            See the ``on_worker_death`` and ``timeout`` parameters.

        After any exception (Ctrl-C included) the vec env needs a reset().
        """
        if self._state is not State.STEP_PENDING:
            self._guard("step_wait", State.STEP_PENDING)
        # Until this step completes: any exception (Ctrl-C too) leaves a vec
        # env whose reset() drains the envs in flight.
        self._state = State.NEEDS_RESET
        return self._step_finish()

    def _step_finish(self):
        n = self.num_envs
        self._wait(n, "step", State.STEP_PENDING)
        flagged = self._ctrl.collect_all()
        infos = [{} for _ in range(n)]
        ended = np.flatnonzero(self._term | self._trunc) if self._sb3_final else _NONE
        for i in ended:  # an automatic reset's info, unless a message brings one
            self.reset_infos[i] = {}
        if flagged:
            got, errors = self._read_flagged(range(n))
            if errors:
                self._raise_errors(errors)
            for i, info in got.items():
                infos[i] = self._split_reset_info(i, self._take_pickled(i, info))
        self._add_terminal(ended, ended, infos)
        if self._restarted:
            self._report_restarts(range(n), infos)
        self._state = State.IDLE
        return self._obs_batch(), self._rew.copy(), self._term | self._trunc, infos

    def step_wait_gym(self):
        """:meth:`step_wait` returning gymnasium's split flags:
        ``(observations, rewards, terminated, truncated, infos)``."""
        if self._state is not State.STEP_PENDING:
            self._guard("step_wait", State.STEP_PENDING)
        obs, rew, _, infos = self.step_wait()
        return obs, rew, self._term.copy(), self._trunc.copy(), infos

    # ------------------------------------------------------------ partial batches
    def send(self, actions, env_ids=None) -> None:
        """Start a step of the envs ``env_ids`` (EnvPool-style async API).

        Parameters
        ----------
        actions : array-like, shape (len(env_ids), *action_space.shape)
            Row ``j`` is the action of env ``env_ids[j]``.
        env_ids : array-like of int, optional
            Distinct env indices, none in flight; default all envs (typically
            the ``env_ids`` returned by the previous :meth:`recv`).

        Raises
        ------
        InvalidArgumentError
            Bad actions or env_ids, or an env that is still in flight.
        """
        self._guard("send", State.IDLE, State.RUNNING)
        ids = check_env_ids(env_ids, self.num_envs)
        busy = ids[self._in_flight[ids]]
        if busy.size:
            raise InvalidArgumentError(
                f"env_ids {busy.tolist()} are still in flight: recv() them before sending again"
            )
        self._put_actions(actions, ids)
        self._state = State.NEEDS_RESET  # before the dispatch: a Ctrl-C between is safe
        self._ctrl.dispatch(ids, _OP_STEP)
        self._state = State.RUNNING

    def recv(self):
        """Collect the first ``batch_size`` envs that finished (FIFO order).

        Returns
        -------
        observations : array, tuple or dict of arrays, each (batch_size, *shape)
            Rows for ``env_ids``: arrays the caller owns; with ``copy=False`` a
            buffer reused by the next recv or, when the envs are consecutive,
            zero-copy views of their shared rows (valid until they are sent
            again).
        rewards : float64 array, (batch_size,)
        dones : bool array, (batch_size,)
        infos : list of batch_size dicts
        env_ids : int64 array, (batch_size,)
            Which env each row belongs to.

        Raises
        ------
        StateError
            Fewer than batch_size envs are in flight (nothing could complete
            the batch).
        """
        self._guard("recv", State.RUNNING, State.IDLE)
        k = self.batch_size
        pending = int(self._in_flight.sum())
        if pending < k:
            raise StateError(
                f"recv() needs batch_size={k} envs in flight but only {pending} are: "
                "send() actions for the env_ids of the last recv() first"
            )
        self._state = State.NEEDS_RESET  # until this batch is collected (see step_wait)
        self._wait(k, "step", State.RUNNING)
        flagged = self._ctrl.collect(k, self._ids_out)
        ids = self._ids_out[:k].copy()
        # copy=False and a batch of consecutive envs: hand out views of their
        # shared rows (in env order) instead of gathering them.
        contiguous = False
        if not self.copy:
            ids.sort()
            contiguous = int(ids[-1]) - int(ids[0]) == k - 1
        infos = [{} for _ in range(k)]
        ended_pos = np.flatnonzero(self._term[ids] | self._trunc[ids]) if self._sb3_final else _NONE
        for pos in ended_pos:  # an automatic reset's info, unless a message brings one
            self.reset_infos[int(ids[pos])] = {}
        if flagged:
            got, errors = self._read_flagged(ids)
            if errors:
                self._raise_errors(errors)
            pos = {int(e): j for j, e in enumerate(ids)}
            for i, info in got.items():
                infos[pos[i]] = self._split_reset_info(i, self._take_pickled(i, info))
        self._add_terminal(ids[ended_pos], ended_pos, infos)
        if self._restarted:
            self._report_restarts(ids, infos)
        if contiguous:
            lo = int(ids[0])
            leaves = [buf[lo : lo + k] for buf in self._obs_bufs]
        else:
            leaves = []
            for src, out in zip(self._obs_rows, self._gather_out):
                # copy=True gathers straight into a fresh array the caller owns.
                dst = np.empty_like(out) if self.copy else out
                _core.gather_rows(src, ids, _layout._bytes2d(dst))
                leaves.append(dst)
        if self._obs_pickled:
            values = [tuple(col[int(i)] for i in ids) for col in self._pickled_obs]
            leaves = _layout.merge_leaves(leaves, values, self._obs_pickled)
        obs = leaves[0] if self._single_obs else self._unflatten_obs(leaves)
        self._state = State.RUNNING if self._in_flight.any() else State.IDLE
        return obs, self._rew[ids], self._term[ids] | self._trunc[ids], infos, ids

    # ------------------------------------------------------------ slow path
    def _call_start(self, what: str, name: str, args, kwargs, indices: Indices):
        """Send a call to the envs ``indices``; :meth:`_call_finish` collects the
        replies. Nothing but other calls may be sent to the workers in between.

        The state is NEEDS_RESET while the frames are written (a Ctrl-C that
        cuts one leaves a state that needs the reset which restores the
        channel) and goes back to what it was once they are."""
        self._guard(what, State.IDLE, State.NEEDS_RESET)
        ids = self._indices(indices)
        by_worker: Dict[int, List[int]] = {}
        for i in ids:
            by_worker.setdefault(int(self._env_worker[i]), []).append(i)
        dead = sorted(w for w in by_worker if w in self._dead)
        if dead:
            raise StateError(
                f"{what}() cannot reach envs of dead worker(s) {dead}: call reset() first, "
                "which starts them again"
            )
        broken = [w for w in self._broken_workers() if w in by_worker]
        if broken:
            raise self._broken_error(broken[0], f"starting {what}()")
        prev = self._state
        if prev is State.NEEDS_RESET and self._in_flight.any():
            # After a death, a timeout or Ctrl-C envs may still be running; the
            # worker reads the call only after its round, so let them finish.
            self._drain(what)
        self._state = State.NEEDS_RESET  # until every frame is written
        refs: Dict[int, int] = {}
        try:
            for w, wids in by_worker.items():
                refs[w] = self._post(w, (Msg.CALL, what, name, args, kwargs, wids))
        except WorkerDiedError as exc:
            self._bury(int(self._env_worker[exc.env_indices[0]]))
            raise
        except BaseException:
            # An arg that does not pickle, or a Ctrl-C between two frames: the
            # channels are whole, and replies already asked for are only stale.
            if not self._broken_workers() and not self._dead.intersection(by_worker):
                self._state = prev
            raise
        self._state = prev
        return {
            "what": what,
            "name": name,
            "ids": ids,
            "by_worker": by_worker,
            "refs": refs,
            "results": {},
        }

    def _call_finish(self, pending) -> List[Any]:
        """Collect the replies of :meth:`_call_start` (each matched by its ref:
        a reply of an abandoned call is never taken for this one).

        After the timeout of a single wait (``_wait_timeout``), calling it
        again with the same ``pending`` waits for the workers not yet heard.
        After a death, the ``timeout`` watchdog (the late worker is killed) or
        Ctrl-C, the vec env needs a reset().
        """
        what, name, ids = pending["what"], pending["name"], pending["ids"]
        by_worker, results, refs = pending["by_worker"], pending["results"], pending["refs"]
        lost = sorted(w for w in by_worker if w in self._dead)
        if lost:
            raise StateError(
                f"{what}({name!r}) was abandoned: worker(s) {lost} were killed; call reset()"
            )
        keep = self._wait_timeout is not None
        limit = self._wait_timeout if keep else self.timeout
        deadline = None if limit is None else time.monotonic() + limit
        where = f"{what}({name!r})"
        prev = self._state
        self._state = State.NEEDS_RESET  # until every reply is read
        try:
            for w, wids in list(by_worker.items()):
                _, values = self._recv(w, deadline, where, keep=keep, ref=refs[w])
                del by_worker[w]  # answered: a retry after a timeout skips it
                for i, value in zip(wids, values):
                    results[i] = value
        except VecEnvTimeoutError:
            if keep:
                self._state = prev  # still pending: wait again
            raise
        except BaseException as exc:
            if isinstance(exc, WorkerDiedError):
                self._bury(int(self._env_worker[exc.env_indices[0]]))
            raise
        self._state = prev
        errors = {i: v for i, (kind, v) in results.items() if kind != "ok"}
        if errors:
            raise self._worker_error(errors[min(errors)])
        return [results[i][1] for i in ids]

    # ------------------------------------------------------------ close
    def close(self, timeout: float = 5.0) -> None:
        """Shut the workers down and release shared memory. Idempotent.

        Workers get a polite close (their envs' ``close()`` runs); after
        ``timeout`` seconds the ones still alive are terminated, then killed.
        Never hangs and leaves no zombie or shared-memory segment.
        """
        if not self._finalizer.alive:
            self._state = State.CLOSED
            return
        self._state = State.CLOSED
        self._finalizer.detach()
        self._obs_bufs = self._act_bufs = self._gather_out = self._obs_rows = ()
        self._rew = self._term = self._trunc = self._status = None
        self._ctrl = None
        self._write_actions = None
        self._resources.shutdown(timeout=timeout)

    def __repr__(self) -> str:
        return (
            f"ShmemVecEnv(num_envs={getattr(self, 'num_envs', '?')}, num_workers={len(self._ranges)}, "
            f"batch_size={getattr(self, 'batch_size', '?')}, state={self._state.value})"
        )


def make(
    env_id: Union[str, Callable[[], Any]],
    num_envs: int,
    *,
    vec_kwargs: Optional[Dict[str, Any]] = None,
    wrappers: Sequence[Callable[[Any], Any]] = (),
    **kwargs,
) -> ShmemVecEnv:
    """Build a :class:`ShmemVecEnv` of ``num_envs`` copies of one env.

    Parameters
    ----------
    env_id : str or callable
        A gymnasium id (``"CartPole-v1"``, ``"ALE/Pong-v5"``; the module that
        registers it is imported first when named as ``"module:Id"``), or a
        factory returning an env.
    num_envs : int
        Number of envs (>= 1).
    vec_kwargs : dict, optional
        Keyword arguments for ShmemVecEnv (num_workers, copy, timeout, ...).
    wrappers : sequence of callables
        Applied to each env in order (``wrapper(env) -> env``).
    **kwargs
        Passed to ``gymnasium.make`` (only with a string ``env_id``).

    Raises
    ------
    InvalidArgumentError
        Bad ``num_envs``, or kwargs with a callable ``env_id``.
    """
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
        raise InvalidArgumentError(f"num_envs must be a positive int, got {num_envs!r}")
    vec_kwargs = dict(vec_kwargs or {})
    for key in list(kwargs):
        if key in _VEC_KEYS:
            vec_kwargs[key] = kwargs.pop(key)
    if callable(env_id):
        if kwargs:
            raise InvalidArgumentError(
                f"keyword arguments {sorted(kwargs)} need a string env_id (they go to gymnasium.make)"
            )
        base_fn = env_id
    elif isinstance(env_id, str):
        base_fn = _GymMake(env_id, kwargs)
    else:
        raise InvalidArgumentError(
            f"env_id must be a gymnasium id or a callable, got {type(env_id).__name__}"
        )
    wrappers = tuple(wrappers)

    def make_one():
        env = base_fn()
        for wrap in wrappers:
            env = wrap(env)
        return env

    return ShmemVecEnv([make_one] * int(num_envs), **vec_kwargs)


_VEC_KEYS = frozenset(ENGINE_OPTIONS)  # make()'s keywords for the engine


class _GymMake:
    """Picklable ``gymnasium.make(env_id, **kwargs)`` that imports the
    registering module first (ale_py for ALE ids, or ``module:Id``)."""

    def __init__(self, env_id: str, kwargs: Dict[str, Any]):
        self.env_id = env_id
        self.kwargs = kwargs

    def __call__(self):
        import importlib

        import gymnasium

        env_id = self.env_id
        if ":" in env_id:
            module, env_id = env_id.split(":", 1)
            importlib.import_module(module)
        elif env_id.startswith("ALE/"):
            gymnasium.register_envs(importlib.import_module("ale_py"))
        return gymnasium.make(env_id, **self.kwargs)
