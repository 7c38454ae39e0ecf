"""The engine base every backend shares (parent side).

:class:`EngineVecEnv` holds what ShmemVecEnv (workers on this machine) and
RayVecEnv (Ray actors) do the same way: the state machine's states and its
guard, the seeds and reset options kept for the next reset, the checks of
``indices`` and ``env_ids``, and the call verbs (``env_method``,
``get_attr``, ``set_attr``, ``env_is_wrapped``, ``get_images``, and the
public :meth:`~EngineVecEnv.call_async` / :meth:`~EngineVecEnv.call_wait`
that the drop-ins use) over a backend's ``_call_start`` / ``_call_finish``
pair, and :meth:`~EngineVecEnv.limit_waits`, a time limit for the waits
inside a block that leaves the call pending when it passes. A backend supplies the
transport: how a step, a reset and a call reach its envs.
"""

from __future__ import annotations

import contextlib
import enum
import weakref
from abc import abstractmethod
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from vecenv._options import check_seconds
from vecenv.base import Indices, VecEnv
from vecenv.errors import ClosedError, InvalidArgumentError, SpaceError, StateError


class State(enum.Enum):
    """Where the parent's state machine stands."""

    # Built, or a step failed (env error, dead or killed worker, timeout,
    # Ctrl-C): call reset(), which restarts dead workers first.
    NEEDS_RESET = "needs reset"
    IDLE = "idle"  # ready for step_async / send / reset
    STEP_PENDING = "step pending"  # step_async sent, step_wait not yet called
    RESET_PENDING = "reset pending"  # reset_async sent, reset_wait not yet called
    RUNNING = "running"  # envs in flight (send/recv API)
    CLOSED = "closed"


#: The kinds of remote call :meth:`EngineVecEnv.call_async` sends.
CALL_KINDS = ("env_method", "get_attr", "set_attr", "is_wrapped", "render", "call")

_HINTS = {
    State.NEEDS_RESET: "call reset() first",
    State.STEP_PENDING: "a step_async() is pending: call step_wait() first",
    State.RESET_PENDING: "a reset_async() is pending: call reset_wait() first",
    State.RUNNING: "envs are in flight from send(): call recv() until none is, or reset()",
    State.IDLE: "no step_async() is pending: call step_async(actions) first",
}


class EngineVecEnv(VecEnv):
    """What every vecenv backend shares; see the module docstring.

    A subclass sets, before any verb is used: ``num_envs``, ``batch_size``,
    ``_state`` (a :class:`State`), ``_seeds`` (num_envs ints or Nones) and
    ``_options`` (env index -> reset options), and defines ``_call_start``
    and ``_call_finish``.
    """

    batch_size: int
    timeout: Optional[float]
    _state: State
    _seeds: List[Optional[int]]
    _options: Dict[int, Any]
    _finalizer: weakref.finalize
    _resources: Any  # what the finalizer releases: .shutdown(timeout)
    _ranges: List[Tuple[int, int]]  # worker (or actor) w hosts envs [lo, hi)
    # Seconds for each wait inside limit_waits(); None: the ``timeout`` option.
    _wait_timeout: Optional[float] = None
    in_process: bool = False  # True: the envs step in this process (num_workers=0)

    @property
    def num_workers(self) -> int:
        """The processes that step the envs, each a contiguous range of them:
        worker processes (ShmemVecEnv) or Ray actors (RayVecEnv); 0 when the
        envs step in the calling process (``num_workers=0``); the caller's
        share of ``inline=True`` is not counted."""
        if self.in_process:
            return 0
        return len(self._ranges) - bool(getattr(getattr(self, "layout", None), "inline", False))

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has released every resource."""
        return self._state is State.CLOSED and not self._finalizer.alive

    def _check_given_spaces(self, spaces, obs_space, act_space) -> None:
        """At construction: close and raise SpaceError unless ``spaces`` (the
        constructor's argument; None: any) are the envs' own spaces."""
        if spaces is not None and (spaces[0] != obs_space or spaces[1] != act_space):
            self.close()
            raise SpaceError(
                f"spaces=({spaces[0]}, {spaces[1]}) differ from the envs' own "
                f"({obs_space}, {act_space})"
            )

    # ------------------------------------------------------------ reset, close
    @abstractmethod
    def reset_async(self, env_ids=None) -> None:
        """Start resetting the envs ``env_ids`` (default: all)."""

    @abstractmethod
    def reset_wait(self):
        """Wait for the resets of :meth:`reset_async`; the observations."""

    def reset(self):
        """Reset every env and return the first observations.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
            Shaped like ``observation_space`` with a leading num_envs axis, in
            env order: arrays the caller owns (views into shared memory for a
            ShmemVecEnv with ``copy=False``). When ``batch_size < num_envs``
            the resets are only started and None is returned: collect them
            with ``recv()``.

        Reset infos are kept in ``self.reset_infos`` (a list of dicts); with
        ``autoreset_mode="sb3"`` a step that resets env ``i`` replaces
        ``reset_infos[i]`` with the info of that reset, as SB3 does.

        Workers that died or were killed (after a WorkerDiedError or a
        timeout) are started again first, with new envs from their factories;
        in a ShmemVecEnv so is a worker that dies during the reset (once per
        call). Envs still in flight after a failed or interrupted step, or of
        a pending ``step_async`` (the seed's contract: that work is
        cancelled), are waited for and their results dropped.

        Raises
        ------
        WorkerError, WorkerDiedError, VecEnvTimeoutError
            The vec env still needs a reset afterwards.
        """
        self.reset_async()
        if self.batch_size < self.num_envs:
            return None
        return self.reset_wait()

    @abstractmethod
    def _forget_views(self) -> None:
        """At close, before the resources go: drop what refers to them."""

    def close(self, timeout: float = 5.0) -> None:
        """Stop the workers (processes or Ray actors) and release their
        memory. Idempotent; never hangs.

        Workers get a polite close (their envs' ``close()`` runs); after
        about ``timeout`` seconds the ones still alive are terminated, then
        killed. A ShmemVecEnv leaves no zombie or shared-memory segment; a
        RayVecEnv kills its actors and removes its placement group.
        """
        if not self._finalizer.alive:
            self._state = State.CLOSED
            return
        self._state = State.CLOSED
        self._finalizer.detach()
        self._forget_views()
        self._resources.shutdown(timeout=timeout)

    _WORKERS = "num_workers"  # what repr() calls the workers

    def __repr__(self) -> str:
        layout = getattr(self, "layout", None)  # ShmemVecEnv's: where the envs step
        if layout is not None and hasattr(self, "num_envs"):
            where = f"layout={layout.summary(self.num_envs)!r}"
        else:
            where = f"{self._WORKERS}={self.num_workers if hasattr(self, '_ranges') else '?'}"
        return (
            f"{type(self).__name__}(num_envs={getattr(self, 'num_envs', '?')}, {where}, "
            f"batch_size={getattr(self, 'batch_size', '?')}, state={self._state.value})"
        )

    # ------------------------------------------------------------ state
    def _guard(self, method: str, *allowed: State) -> None:
        """Raise unless the state is one of ``allowed``: ClosedError after
        close(), else StateError naming ``method``, the state and the fix."""
        state = self._state
        if state in allowed:
            return
        if state is State.CLOSED:
            raise ClosedError(f"{method}() called after close(); create a new vec env")
        raise StateError(f"{method}() is not allowed while {state.value}: {_HINTS[state]}")

    def _check_step_async(self) -> None:
        """Guard of step_async: idle, and lockstep (batch_size == num_envs)."""
        if self._state is not State.IDLE:
            self._guard("step_async", State.IDLE)
        if self.batch_size != self.num_envs:
            raise StateError(
                f"step_async() needs batch_size == num_envs; this vec env has batch_size="
                f"{self.batch_size}: use send(actions, env_ids) and recv()"
            )

    # ------------------------------------------------------------ seeds and options
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
        base = None if seed is None else int(seed)  # type: ignore[arg-type]
        self._seeds = [None if base is None else base + i for i in range(self.num_envs)]
        return list(self._seeds)

    def set_options(
        self, options: Union[Dict[str, Any], Sequence[Optional[Dict[str, Any]]], None] = None
    ) -> None:
        """Options passed to each env's ``reset`` at the next :meth:`reset`
        (one dict for all envs, or one per env).

        Raises
        ------
        InvalidArgumentError
            A sequence whose length is not num_envs.
        """
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

    # ------------------------------------------------------------ indices
    def _indices(self, indices: Indices) -> List[int]:
        """The call verbs' ``indices``: all envs for None, else a list of env
        indices (negative ones counted from the end). Raises InvalidArgumentError."""
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            indices = [int(indices)]
        out = []
        for i in indices:
            if not isinstance(i, (int, np.integer)) or not -self.num_envs <= i < self.num_envs:
                raise InvalidArgumentError(
                    f"indices must be env indices in [0, {self.num_envs}), got {i!r}"
                )
            out.append(int(i) % self.num_envs)
        return out

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

    # ------------------------------------------------------------ waits
    @property
    def waiting(self) -> bool:
        """True while a ``step_async`` or ``reset_async`` is pending: the next
        ``step_wait`` / ``reset_wait`` collects it (also after a
        :class:`~vecenv.errors.PendingTimeoutError`)."""
        return self._state in (State.STEP_PENDING, State.RESET_PENDING)

    @contextlib.contextmanager
    def limit_waits(self, timeout: Optional[float]) -> Iterator[None]:
        """Within the block, each wait (``step_wait``, ``reset_wait``,
        ``recv``, :meth:`call_wait`) gives up after ``timeout`` seconds,
        leaving its call pending.

        ``with venv.limit_waits(0.5): venv.step_wait()`` raises
        :class:`~vecenv.errors.PendingTimeoutError` if the step is not done
        within 0.5 s; nothing is killed, and a later ``step_wait()`` collects
        the same step. ``timeout=None`` changes nothing: waits end as the
        vec env's own ``timeout`` says.

        Parameters
        ----------
        timeout : float or None
            Seconds (>= 0; 0 only checks) per wait inside the block.

        Raises
        ------
        InvalidArgumentError
            ``timeout`` is not a number of seconds >= 0 or None.
        """
        check_seconds("timeout", timeout, zero_ok=True)
        prev = self._wait_timeout
        self._wait_timeout = None if timeout is None else float(timeout)
        try:
            yield
        finally:
            self._wait_timeout = prev

    # ------------------------------------------------------------ remote calls
    @abstractmethod
    def _call_start(self, what: str, name: str, args, kwargs, indices: Indices) -> Any:
        """Send the call ``what`` (one of :data:`CALL_KINDS`) of ``name`` to the
        envs ``indices``; return a pending handle for :meth:`_call_finish`."""

    @abstractmethod
    def _call_finish(self, pending: Any) -> List[Any]:
        """Collect the replies of :meth:`_call_start`, in the order of its
        indices. A time limit set by :meth:`limit_waits` applies."""

    def call_async(
        self,
        kind: str,
        name: str,
        args: Sequence[Any] = (),
        kwargs: Optional[Dict[str, Any]] = None,
        indices: Indices = None,
    ) -> Any:
        """Send a call to the envs ``indices`` without waiting for it;
        :meth:`call_wait` collects the replies.

        Several calls may be sent before the first is collected (replies are
        matched to their call); no step or reset may start in between.

        Parameters
        ----------
        kind : str
            One of :data:`CALL_KINDS`: ``"env_method"`` (call method ``name``),
            ``"get_attr"``, ``"set_attr"`` (``args`` is ``(value,)``),
            ``"is_wrapped"`` (``args`` is ``(wrapper_class,)``), ``"render"``, or
            ``"call"`` (gymnasium's ``call``: the attribute ``name``, called
            with ``args`` and ``kwargs`` when it is callable).
        name : str
            The method or attribute name (through wrappers).
        args : sequence, kwargs : dict, optional
            The call's arguments (pickled with cloudpickle).
        indices : int, sequence of int or None
            The envs (default all).

        Returns
        -------
        handle
            An opaque handle for :meth:`call_wait`.

        Raises
        ------
        InvalidArgumentError
            Unknown ``kind`` or bad ``indices``.
        StateError
            A step or reset is pending, or an env's worker is dead (reset first).
        """
        if kind not in CALL_KINDS:
            raise InvalidArgumentError(f"kind must be one of {CALL_KINDS}, got {kind!r}")
        return self._call_start(kind, name, tuple(args), dict(kwargs or {}), indices)

    def call_wait(self, handle: Any, timeout: Optional[float] = None) -> List[Any]:
        """Collect the replies of :meth:`call_async`, in the order of its
        ``indices``.

        Parameters
        ----------
        handle
            What :meth:`call_async` returned.
        timeout : float, optional
            Seconds to wait (>= 0). When they pass,
            :class:`~vecenv.errors.PendingTimeoutError` is raised and the
            call stays pending: ``call_wait(handle)`` again collects it.
            Default: the vec env's own ``timeout``.

        Raises
        ------
        WorkerError
            An env's call raised (names the env; the traceback is chained).
        PendingTimeoutError, VecEnvTimeoutError, WorkerDiedError, StateError
        """
        if timeout is None:
            return self._call_finish(handle)
        with self.limit_waits(timeout):
            return self._call_finish(handle)

    def _call(self, what: str, name: str, args, kwargs, indices: Indices) -> List[Any]:
        return self._call_finish(self._call_start(what, name, args, kwargs, indices))

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
