"""ShmemVecEnv: the shared-memory vectorized env (parent side).

The parent owns the worker processes, the shared block and the state machine.
Observations, actions, rewards and done flags live in shared memory; on the
step path the only traffic between processes is a futex wake per worker and
one per batch. Infos, terminal observations, errors and method calls use each
worker's pipe, and only when there is something to send.
"""

from __future__ import annotations

import enum
import math
import os
import time
import weakref
from multiprocessing import connection as mp_connection
from multiprocessing import get_context
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import cloudpickle
import numpy as np
from gymnasium import spaces as gym_spaces

from vecenv import _core, _layout, _shm
from vecenv._worker import AUTORESET_MODES, RESET_INFO_KEY, WorkerSpec, worker_main
from vecenv.base import Indices, VecEnv
from vecenv.errors import (
    ClosedError,
    InvalidArgumentError,
    ObservationError,
    RemoteTraceback,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WorkerDiedError,
    WorkerError,
)

# Wait in slices this long (seconds) so dead workers and Ctrl-C are noticed.
_SLICE_S = 0.1


class State(enum.Enum):
    """Where the parent's state machine stands."""

    NEEDS_RESET = "needs reset"  # built, or an env failed: call reset()
    IDLE = "idle"  # ready for step_async / send / reset
    STEP_PENDING = "step pending"  # step_async sent, step_wait not yet called
    RESET_PENDING = "reset pending"  # reset_async sent, reset_wait not yet called
    RUNNING = "running"  # envs in flight (send/recv API)
    CLOSED = "closed"


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
        self.conns: list = []
        self.segment: Optional[_shm.Segment] = None
        self.block = None

    def shutdown(self, timeout: float = 5.0, polite: bool = True) -> None:
        deadline = time.monotonic() + max(timeout, 0.0)
        if polite:
            for conn, proc in zip(self.conns, self.procs):
                if proc.exitcode is None:
                    try:
                        conn.send(("close",))
                    except Exception:
                        pass
            # The close message sits on the pipe; the worker sees it when woken.
            ctrl = getattr(self, "ctrl", None)
            if ctrl is not None:
                for w in range(len(self.procs)):
                    try:
                        ctrl.post_message(w)
                    except Exception:
                        pass
            for proc in self.procs:
                proc.join(max(0.0, deadline - time.monotonic()))
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
        for conn in self.conns:
            try:
                conn.close()
            except Exception:
                pass
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
        self.conns = []


def _shutdown(resources: _Resources) -> None:
    resources.shutdown(timeout=2.0)


class ShmemVecEnv(VecEnv):
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
    timeout : float, optional
        Seconds to wait for a step or reset before raising
        :class:`~vecenv.errors.VecEnvTimeoutError` (default: no limit).
    start_timeout : float
        Seconds to wait for workers to build their envs (default 300).
    spin : float, optional
        Seconds a waiting process busy-polls before sleeping on a futex.
        Default: 100e-6 when workers plus the parent fit on the usable cores,
        else 0 (busy-waiting with more spinners than cores collapses).
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

    Raises
    ------
    InvalidArgumentError
        Bad arguments (before any process or shared memory exists).
    SpaceError
        A space that cannot live in shared memory, or envs that disagree.
    WorkerError
        An env factory raised; the message names the env and carries the
        worker's traceback.
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
        start_timeout: float = 300.0,
        spin: Optional[float] = None,
        autoreset_mode: str = "sb3",
        cpu_affinity: Union[bool, Sequence[int], None] = None,
        daemon: bool = True,
    ):
        self._state = State.CLOSED  # until construction succeeds
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, _shutdown, self._resources)
        env_fns = self._check_env_fns(env_fns)
        num_envs = len(env_fns)
        self._ranges = plan_workers(num_envs, num_workers, envs_per_worker)
        if batch_size is None:
            batch_size = num_envs
        if (
            not isinstance(batch_size, (int, np.integer))
            or isinstance(batch_size, bool)
            or not 1 <= batch_size <= num_envs
        ):
            raise InvalidArgumentError(
                f"batch_size must be an int in [1, num_envs={num_envs}], got {batch_size!r}"
            )
        if autoreset_mode not in AUTORESET_MODES:
            raise InvalidArgumentError(
                f"autoreset_mode must be one of {AUTORESET_MODES}, got {autoreset_mode!r}"
            )
        for name, v in (("timeout", timeout), ("start_timeout", start_timeout), ("spin", spin)):
            if v is not None and (
                not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or v != v
            ):
                raise InvalidArgumentError(
                    f"{name} must be a number of seconds >= 0 or None, got {v!r}"
                )
        methods = ("fork", "spawn", "forkserver")
        if context is not None and context not in methods:
            raise InvalidArgumentError(f"context must be one of {methods} or None, got {context!r}")
        if spaces is not None and (not isinstance(spaces, (tuple, list)) or len(spaces) != 2):
            raise InvalidArgumentError("spaces must be a pair (observation_space, action_space)")
        num_workers = len(self._ranges)
        cpus = _usable_cpus()
        if spin is None:
            spin = 100e-6 if num_workers + 1 <= cpus else 0.0
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
        self._stash: Dict[int, Tuple[str, Any]] = {}

        ctx = get_context(context)
        self._start_workers(ctx, env_fns, daemon, start_timeout)
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
        try:
            for w, (lo, hi) in enumerate(self._ranges):
                spec = WorkerSpec(
                    index=w,
                    lo=lo,
                    hi=hi,
                    env_fns=cloudpickle.dumps(env_fns[lo:hi]),
                    parent_pid=os.getpid(),
                    spin_s=self.spin,
                    autoreset_mode=self.autoreset_mode,
                )
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=worker_main,
                    args=(spec, child_conn),
                    name=f"vecenv-worker-{w}",
                    daemon=daemon,
                )
                proc.start()
                child_conn.close()
                res.procs.append(proc)
                res.conns.append(parent_conn)
                if self._cores is not None:
                    try:
                        os.sched_setaffinity(proc.pid, {self._cores[w]})
                    except OSError:
                        pass
            deadline = time.monotonic() + start_timeout
            spaces = None
            for w in range(len(self._ranges)):
                msg = self._recv(w, deadline, "starting the workers")
                if msg[0] == "error":
                    raise self._worker_error(msg[1])
                _, obs_space, act_space, metadata = msg
                if spaces is None:
                    spaces = (obs_space, act_space)
                    self.metadata = metadata[0] if metadata else {}
                elif spaces != (obs_space, act_space):
                    lo = self._ranges[w][0]
                    raise SpaceError(
                        f"env {lo} has spaces ({obs_space}, {act_space}), env 0 has "
                        f"({spaces[0]}, {spaces[1]}); all envs must share their spaces"
                    )
            self._spaces = spaces
        except BaseException:
            res.shutdown(timeout=1.0)
            raise

    def _attach(self, start_timeout):
        res = self._resources
        num_workers = len(self._ranges)
        layout = _layout.BlockLayout.build(
            self._spaces[0], self._spaces[1], len(self._env_worker), num_workers
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
        self._status = self._ctrl.arrays()[1]
        self._write_actions = _layout.make_action_writer(layout.action_leaves, self.action_space)
        self._unflatten_obs = _layout.make_unflattener(self.observation_space)
        self._single_obs = not isinstance(
            self.observation_space, (gym_spaces.Tuple, gym_spaces.Dict)
        )
        self._in_flight = np.zeros(layout.num_envs, dtype=bool)
        self._ids_out = np.empty(layout.num_envs, dtype=np.int64)
        self._gather_out = [
            np.empty((self.batch_size, *leaf.shape), leaf.dtype) for leaf in layout.obs_leaves
        ]
        deadline = time.monotonic() + start_timeout
        for conn in res.conns:
            conn.send(("attach", res.segment.handle, layout))
        for w in range(num_workers):
            msg = self._recv(w, deadline, "attaching the workers")
            if msg[0] != "attached":
                raise WorkerError(f"worker {w} answered {msg[0]!r} while attaching")
        res.segment.unlink()  # no name left once everyone is attached (macOS)

    # ------------------------------------------------------------ plumbing
    def _recv(self, w: int, deadline: Optional[float], what: str):
        """Receive a message from worker ``w``; raise if it dies or the deadline passes."""
        res = self._resources
        conn, proc = res.conns[w], res.procs[w]
        while True:
            left = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
            if left <= 0:
                lo, hi = self._ranges[w]
                raise VecEnvTimeoutError(
                    f"envs {list(range(lo, hi))} (worker {w}) did not answer within the timeout while {what}",
                    env_indices=range(lo, hi),
                )
            ready = mp_connection.wait([conn, proc.sentinel], timeout=left)
            if conn in ready:
                try:
                    return conn.recv()
                except (EOFError, OSError):
                    proc.join(0.5)
                    raise self._died(w, what) from None
            if proc.sentinel in ready:
                proc.join(0.5)
                raise self._died(w, what)

    def _died(self, w: int, what: str) -> WorkerDiedError:
        proc = self._resources.procs[w]
        lo, hi = self._ranges[w]
        code = proc.exitcode
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited with code {code}"
        )
        self._state = State.NEEDS_RESET
        return WorkerDiedError(
            f"worker {w} (envs {list(range(lo, hi))}) {how} while {what}",
            env_indices=range(lo, hi),
            exitcode=code,
        )

    def _worker_error(self, payload) -> WorkerError:
        i = payload.get("env_index")
        cls = ObservationError if payload.get("observation_error") else WorkerError
        err = cls(
            f"env {i} raised {payload['exc_type']} in {payload['where']}: {payload['message']}",
            env_index=i,
            exc_type=payload["exc_type"],
            worker_traceback=payload["traceback"],
        )
        err.__cause__ = RemoteTraceback(payload["traceback"])
        return err

    def _check_workers(self, what: str) -> None:
        for w, proc in enumerate(self._resources.procs):
            if proc.exitcode is not None:
                raise self._died(w, what)

    def _wait(self, target: int, what: str) -> None:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        ctrl, spin = self._ctrl, self.spin
        if ctrl.wait_ready(target, spin, _SLICE_S) >= 0:
            return
        while True:
            self._check_workers(what)
            left = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
            if left <= 0:
                ready = self._ctrl.arrays()[2].astype(bool)
                late = [int(i) for i in np.flatnonzero(self._in_flight & ~ready)]
                raise VecEnvTimeoutError(
                    f"envs {late} did not finish {what} within timeout={self.timeout} s",
                    env_indices=late,
                )
            if ctrl.wait_ready(target, 0.0, left) >= 0:
                return

    def _read_flagged(self, ids) -> Tuple[Dict[int, Any], Dict[int, Any]]:
        """Read the pipe messages of the flagged envs among ``ids``."""
        infos: Dict[int, Any] = {}
        errors: Dict[int, Any] = {}
        status = self._status
        for i in ids:
            i = int(i)
            if not status[i]:
                continue
            while i not in self._stash:
                w = int(self._env_worker[i])
                msg = self._recv(
                    w,
                    None if self.timeout is None else time.monotonic() + self.timeout,
                    "reading infos",
                )
                _, m_infos, m_errors = msg
                for j, info in m_infos.items():
                    self._stash[j] = ("info", info)
                for j, err in m_errors.items():
                    self._stash[j] = ("error", err)
            kind, value = self._stash.pop(i)
            (infos if kind == "info" else errors)[i] = value
        return infos, errors

    def _raise_errors(self, errors: Dict[int, Any]) -> None:
        first = min(errors)
        err = self._worker_error(errors[first])
        if len(errors) > 1:
            err.args = (f"{err.args[0]} (and envs {sorted(errors)[1:]} failed too)",)
        err.errors = {i: self._worker_error(p) for i, p in errors.items()}
        self._state = State.NEEDS_RESET
        raise err

    def _guard(self, method: str, *allowed: State) -> None:
        state = self._state
        if state in allowed:
            return
        if state is State.CLOSED:
            raise ClosedError(f"{method}() called after close(); create a new vec env")
        hints = {
            State.NEEDS_RESET: "call reset() first",
            State.STEP_PENDING: "a step_async() is pending: call step_wait() first",
            State.RESET_PENDING: "a reset_async() is pending: call reset_wait() first",
            State.RUNNING: "envs are in flight from send(): call recv() until none is, or reset()",
            State.IDLE: "no step_async() is pending: call step_async(actions) first",
        }
        raise StateError(f"{method}() is not allowed while {state.value}: {hints[state]}")

    def _obs_batch(self):
        if self.copy:
            leaves = [b.copy() for b in self._obs_bufs]
        else:
            leaves = self._obs_bufs
        return leaves[0] if self._single_obs else self._unflatten_obs(leaves)

    # ------------------------------------------------------------ the seed's API
    def seed(self, seed: Union[int, Sequence[Optional[int]], None] = None) -> List[Optional[int]]:
        """Seed env ``i`` with ``seed + i`` at the next :meth:`reset` (as SB3 does),
        or with ``seed[i]`` when ``seed`` is a sequence of num_envs ints or Nones
        (as gymnasium's vector envs do).

        Returns the list of seeds, one per env (all None for ``seed=None``).

        Raises
        ------
        InvalidArgumentError
            A seed that is not an int or None, or a sequence of the wrong length.
        """

        def bad(v):
            return v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool))

        if isinstance(seed, (list, tuple, np.ndarray)):
            seeds = list(seed)
            if len(seeds) != self.num_envs or any(bad(v) for v in seeds):
                raise InvalidArgumentError(
                    f"seed as a sequence must hold num_envs={self.num_envs} ints or Nones, got {seed!r}"
                )
            self._seeds = [None if v is None else int(v) for v in seeds]
            return list(self._seeds)
        if bad(seed):
            raise InvalidArgumentError(f"seed must be an int, a sequence or None, got {seed!r}")
        self._seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        return list(self._seeds)

    def set_options(
        self, options: Union[Dict[str, Any], Sequence[Optional[Dict[str, Any]]], None] = None
    ) -> None:
        """Options passed to each env's ``reset`` at the next :meth:`reset`
        (one dict for all envs, or one per env)."""
        if options is None:
            self._options = {}
        elif isinstance(options, dict):
            self._options = dict.fromkeys(range(self.num_envs), options)
        else:
            options = list(options)
            if len(options) != self.num_envs:
                raise InvalidArgumentError(
                    f"options has {len(options)} entries, expected num_envs={self.num_envs}"
                )
            self._options = {i: o for i, o in enumerate(options) if o is not None}

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
            self._resources.conns[w].send(("reset_kwargs", kws))
            self._ctrl.post_message(w)
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

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError
        """
        self.reset_async()
        if self.batch_size < self.num_envs:
            return None
        return self.reset_wait()

    def reset_async(self, env_ids=None) -> None:
        """Start resetting the envs ``env_ids`` (default: all) with the seeds and
        options given by :meth:`seed` and :meth:`set_options`.

        Parameters
        ----------
        env_ids : array-like of int, optional
            Distinct env indices to reset; the others keep their state and
            their last observation. Only with ``batch_size == num_envs``.

        Raises
        ------
        StateError
            A step or reset is pending (call its wait first), or a subset
            reset with ``batch_size < num_envs``.
        InvalidArgumentError
            Bad ``env_ids``.
        """
        self._guard("reset_async", State.NEEDS_RESET, State.IDLE, State.RUNNING)
        ids = self._reset_ids(env_ids)
        if self._state is State.RUNNING:
            self._drain("reset")
        self._send_reset_kwargs(range(self.num_envs) if ids is None else ids)
        if ids is None:
            self._ctrl.dispatch_all(_core.OP_RESET)
            self._in_flight[:] = True
        else:
            self._ctrl.dispatch(ids, _core.OP_RESET)
            self._in_flight[ids] = True
        self._state = State.RUNNING if self.batch_size < self.num_envs else State.RESET_PENDING

    def _reset_ids(self, env_ids) -> Optional[np.ndarray]:
        """``reset_async``'s ``env_ids`` checked: None (all envs) or sorted
        distinct int64 indices. Raises InvalidArgumentError or StateError."""
        if env_ids is None:
            return None
        ids = np.asarray(env_ids)
        if ids.dtype.kind not in "iu":
            raise InvalidArgumentError(
                f"env_ids must be env indices (ints), got dtype {ids.dtype}; "
                "for a bool mask pass np.flatnonzero(mask)"
            )
        ids = np.unique(ids.astype(np.int64).reshape(-1))
        if ids.size == 0 or ids[0] < 0 or ids[-1] >= self.num_envs:
            raise InvalidArgumentError(
                f"env_ids must be non-empty env indices in [0, {self.num_envs}), got {env_ids!r}"
            )
        if self.batch_size < self.num_envs:
            raise StateError(
                "reset_async(env_ids=...) needs batch_size == num_envs; reset all envs instead"
            )
        return ids

    def reset_wait(self):
        """Wait for the resets started by :meth:`reset_async`.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            All num_envs rows: envs that were not reset keep their last
            observation. Copies, or views into shared memory with ``copy=False``.

        ``self.reset_infos`` gets one dict per env ({} for envs not reset).

        Raises
        ------
        StateError
            No reset_async() is pending.
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            As :meth:`step_wait`; after a timeout the reset stays pending.
        """
        if self._state is not State.RESET_PENDING:
            self._guard("reset_wait", State.RESET_PENDING)
        ids = np.flatnonzero(self._in_flight)
        n = len(ids)
        self._wait(n, "reset")
        if n == self.num_envs:
            flagged = self._ctrl.collect_all()
        else:
            flagged = self._ctrl.collect(n, self._ids_out)
        self._in_flight[:] = False
        infos = [{} for _ in range(self.num_envs)]
        if flagged:
            got, errors = self._read_flagged(ids)
            if errors:
                self._raise_errors(errors)
            for i, info in got.items():
                infos[i] = info
        self.reset_infos = infos
        self._state = State.IDLE
        return self._obs_batch()

    def _split_reset_info(self, i: int, info: Dict[str, Any]) -> Dict[str, Any]:
        """Move the info of env ``i``'s automatic reset ("sb3" autoreset) from
        its step info into ``reset_infos[i]``; return the step info."""
        if RESET_INFO_KEY in info:
            self.reset_infos[i] = info.pop(RESET_INFO_KEY)
        return info

    def _drain(self, what: str) -> None:
        """Wait for every env in flight and drop the results (before a reset)."""
        n = int(self._in_flight.sum())
        if n:
            self._wait(n, what)
            self._ctrl.collect(n, self._ids_out)
            self._read_flagged(self._ids_out[:n])
        self._in_flight[:] = False
        self._stash.clear()

    def step_async(self, actions) -> None:
        """Start a step of every env.

        Parameters
        ----------
        actions : array-like, shape (num_envs, *action_space.shape)
            One action per env; a tuple/dict of such arrays for Tuple/Dict
            action spaces. Copied into shared memory before this returns.

        Raises
        ------
        InvalidArgumentError
            Wrong number of actions, shape, dtype, or a value outside a
            Discrete/MultiDiscrete/MultiBinary space (nothing is sent).
        StateError
            A step is already pending, reset() was not called, or the vec env
            uses batch_size < num_envs (use send/recv).
        """
        if self._state is not State.IDLE:
            self._guard("step_async", State.IDLE)
        if self.batch_size != self.num_envs:
            raise StateError(
                f"step_async() needs batch_size == num_envs; this vec env has batch_size="
                f"{self.batch_size}: use send(actions, env_ids) and recv()"
            )
        self._write_actions(actions, self._act_bufs)
        self._ctrl.dispatch_all(_core.OP_STEP)
        self._state = State.STEP_PENDING

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
        """
        if self._state is not State.STEP_PENDING:
            self._guard("step_wait", State.STEP_PENDING)
        n = self.num_envs
        self._wait(n, "step")
        flagged = self._ctrl.collect_all()
        infos = [{} for _ in range(n)]
        if flagged:
            got, errors = self._read_flagged(range(n))
            if errors:
                self._raise_errors(errors)
            for i, info in got.items():
                infos[i] = self._split_reset_info(i, info)
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
        if env_ids is None:
            ids = np.arange(self.num_envs, dtype=np.int64)
        else:
            ids = np.asarray(env_ids)
            if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
                raise InvalidArgumentError(
                    f"env_ids must be a 1-D array of ints, got {ids.dtype} shape {ids.shape}"
                )
            ids = ids.astype(np.int64, copy=False)
            if ids.size and (ids.min() < 0 or ids.max() >= self.num_envs):
                raise InvalidArgumentError(
                    f"env_ids must be in [0, {self.num_envs}), got {ids.tolist()}"
                )
            if np.unique(ids).size != ids.size:
                raise InvalidArgumentError(f"env_ids has duplicates: {ids.tolist()}")
        busy = ids[self._in_flight[ids]]
        if busy.size:
            raise InvalidArgumentError(
                f"env_ids {busy.tolist()} are still in flight: recv() them before sending again"
            )
        self._write_actions(actions, self._act_bufs, ids)
        self._ctrl.dispatch(ids, _core.OP_STEP)
        self._in_flight[ids] = True
        self._state = State.RUNNING

    def recv(self):
        """Collect the first ``batch_size`` envs that finished (FIFO order).

        Returns
        -------
        observations : array, tuple or dict of arrays, each (batch_size, *shape)
            Rows for ``env_ids`` (copies, or with ``copy=False`` a buffer reused
            by the next recv).
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
        self._wait(k, "step")
        flagged = self._ctrl.collect(k, self._ids_out)
        ids = self._ids_out[:k].copy()
        self._in_flight[ids] = False
        infos = [{} for _ in range(k)]
        if flagged:
            got, errors = self._read_flagged(ids)
            if errors:
                self._raise_errors(errors)
            pos = {int(e): j for j, e in enumerate(ids)}
            for i, info in got.items():
                infos[pos[i]] = self._split_reset_info(i, info)
        leaves = []
        for buf, out in zip(self._obs_bufs, self._gather_out):
            _core.gather_rows(_layout._bytes2d(buf), ids, _layout._bytes2d(out))
            leaves.append(out.copy() if self.copy else out)
        obs = leaves[0] if self._single_obs else self._unflatten_obs(leaves)
        if not self._in_flight.any():
            self._state = State.IDLE
        return obs, self._rew[ids], self._term[ids] | self._trunc[ids], infos, ids

    # ------------------------------------------------------------ slow path
    def _indices(self, indices: Indices) -> List[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            indices = [indices]
        out = []
        for i in indices:
            if not isinstance(i, (int, np.integer)) or not -self.num_envs <= i < self.num_envs:
                raise InvalidArgumentError(
                    f"indices must be env indices in [0, {self.num_envs}), got {i!r}"
                )
            out.append(int(i) % self.num_envs)
        return out

    def _call(self, what: str, name: str, args, kwargs, indices: Indices) -> List[Any]:
        return self._call_finish(self._call_start(what, name, args, kwargs, indices))

    def _call_start(self, what: str, name: str, args, kwargs, indices: Indices):
        """Send a call to the envs ``indices``; :meth:`_call_finish` collects the
        replies. Nothing else may be sent to the workers in between."""
        self._guard(what, State.IDLE, State.NEEDS_RESET)
        ids = self._indices(indices)
        by_worker: Dict[int, List[int]] = {}
        for i in ids:
            by_worker.setdefault(int(self._env_worker[i]), []).append(i)
        for w, wids in by_worker.items():
            self._resources.conns[w].send(("call", what, name, args, kwargs, wids))
            self._ctrl.post_message(w)
        return {"what": what, "name": name, "ids": ids, "by_worker": by_worker, "results": {}}

    def _call_finish(self, pending) -> List[Any]:
        """Collect the replies of :meth:`_call_start`. After a timeout, calling
        it again with the same ``pending`` waits for the workers not yet heard."""
        what, name, ids = pending["what"], pending["name"], pending["ids"]
        by_worker, results = pending["by_worker"], pending["results"]
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        for w, wids in list(by_worker.items()):
            _, values = self._recv(w, deadline, f"{what}({name!r})")
            del by_worker[w]  # answered: a retry after a timeout skips it
            for i, value in zip(wids, values):
                results[i] = value
        errors = {i: v for i, (kind, v) in results.items() if kind != "ok"}
        if errors:
            raise self._worker_error(errors[min(errors)])
        return [results[i][1] for i in ids]

    def env_method(
        self, method_name: str, *method_args, indices: Indices = None, **method_kwargs
    ) -> List[Any]:
        """Call ``method_name(*method_args, **method_kwargs)`` on each env in
        ``indices`` (default all; through wrappers) and return the results in
        that order. Raises WorkerError if a call raises."""
        return self._call("env_method", method_name, method_args, method_kwargs, indices)

    def get_attr(self, attr_name: str, indices: Indices = None) -> List[Any]:
        """Attribute ``attr_name`` of each env in ``indices`` (through wrappers)."""
        return self._call("get_attr", attr_name, (), {}, indices)

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        """Set ``attr_name`` to ``value`` on each env in ``indices``."""
        self._call("set_attr", attr_name, (value,), {}, indices)

    def env_is_wrapped(self, wrapper_class, indices: Indices = None) -> List[bool]:
        """Whether each env in ``indices`` is wrapped in ``wrapper_class``."""
        return self._call("is_wrapped", "", (wrapper_class,), {}, indices)

    def get_images(self) -> List[np.ndarray]:
        """One frame per env from ``env.render()`` (envs made with
        ``render_mode="rgb_array"``)."""
        return self._call("render", "render", (), {}, None)

    # ------------------------------------------------------------ close
    @property
    def closed(self) -> bool:
        return self._state is State.CLOSED and not self._finalizer.alive

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
        self._obs_bufs = self._act_bufs = self._gather_out = ()
        self._rew = self._term = self._trunc = self._status = None
        self._ctrl = None
        self._write_actions = None
        self._resources.shutdown(timeout=timeout)

    def __del__(self):  # the finalizer does the work; keep GC cycles cheap
        pass

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


_VEC_KEYS = {
    "num_workers",
    "envs_per_worker",
    "batch_size",
    "context",
    "copy",
    "timeout",
    "start_timeout",
    "spin",
    "autoreset_mode",
    "cpu_affinity",
    "daemon",
}


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
