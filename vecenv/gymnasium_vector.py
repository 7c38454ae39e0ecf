"""A drop-in for ``gymnasium.vector.AsyncVectorEnv`` on vecenv's engine (parent side).

:class:`AsyncVectorEnv` is a ``gymnasium.vector.VectorEnv`` with the
constructor, methods, return values, info batching, autoreset modes and
exceptions of gymnasium's ``AsyncVectorEnv`` (gymnasium 1.1 and later,
``gymnasium/vector/async_vector_env.py``). It owns a
:class:`~vecenv.ShmemVecEnv` and translates: it adds no second engine, and
every step, reset and call runs in vecenv's workers over shared memory.

:func:`make_vec` has the signature of ``gymnasium.make_vec`` and builds this
class for ``vectorization_mode="async"``.
"""

from __future__ import annotations

import contextlib
import copy as copy_module
import dataclasses
import enum
import functools
import importlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import gymnasium
import numpy as np
from gymnasium import Space, logger
from gymnasium import error as gym_error
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_differing_spaces, batch_space
from gymnasium.vector.vector_env import AutoresetMode

from vecenv._episodes import batch_episodes
from vecenv._gym_errors import (
    AlreadyPendingCallError,
    ArgumentTypeError,
    ClosedEnvironmentError,
    NoAsyncCallError,
    NoSharedLayoutError,
    PendingWaitTimeout,
    SpacesDifferError,
    WaitTimeoutError,
    WatchdogWaitTimeout,
    argument_error,
    check_reset_mask,
    check_shared_memory_space,
    log_worker_errors,
)
from vecenv._infos import gym_infos
from vecenv._options import ENGINE_OPTIONS, EngineOptions, autoreset_mode_name
from vecenv.errors import (
    ActionTypeError,
    ArgumentNotPicklableError,
    InvalidArgumentError,
    PendingTimeoutError,
    SpaceError,
    StateError,
    VecEnvTimeoutError,
    WorkerError,
)
from vecenv.errors import as_env_exception as _as_env_exception
from vecenv.shmem_vec_env import ShmemVecEnv

__all__ = [
    "AlreadyPendingCallError",
    "AsyncVectorEnv",
    "ClosedEnvironmentError",
    "NoAsyncCallError",
    "WaitTimeoutError",
    "make_vec",
    "register_vector_entry_point",
]


class _Pending(enum.Enum):
    # Values are gymnasium's AsyncState values: they appear in error messages
    # and name the *_wait method that finishes the call.
    DEFAULT = "default"
    WAITING_RESET = "reset"
    WAITING_STEP = "step"
    WAITING_CALL = "call"


_AUTORESET_NAMES = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "same_step",
    AutoresetMode.DISABLED: "disabled",
}
_AUTORESET_MODES = {name: mode for mode, name in _AUTORESET_NAMES.items()}

# The engine options a user may pass through: all but those this drop-in sets.
_SET_HERE = (
    "batch_size",
    "context",
    "copy",
    "autoreset_mode",
    "daemon",
    "pickled_leaves",
    "check_spaces",
)
_ENGINE_KEYS = tuple(k for k in ENGINE_OPTIONS if k not in _SET_HERE)


class AsyncVectorEnv(VectorEnv):
    """Step ``len(env_fns)`` envs in vecenv's worker processes, with the API of
    ``gymnasium.vector.AsyncVectorEnv``.

    Parameters
    ----------
    env_fns : sequence of callables
        One factory per env returning a ``gymnasium.Env``; all envs must have
        equal observation and action spaces. Pickled with cloudpickle.
    shared_memory : bool
        As in gymnasium, which spaces may be used: True (default) refuses a
        Graph or Sequence observation space (TypeError) and a custom
        ``Space`` subclass (ValueError) with gymnasium's messages; False
        takes any space. Fixed-size leaves (Box, Discrete, MultiDiscrete,
        MultiBinary, inside Tuple/Dict too) always travel through vecenv's
        shared memory; the others (Text, OneOf, Graph, Sequence, custom)
        pickled through the worker pipes, batched as gymnasium batches them
        (a tuple of per-env values).
    copy : bool
        True: ``reset``/``step`` return observations the caller owns. False:
        views into shared memory, overwritten by the next step or reset.
    context : {"fork", "spawn", "forkserver"}, optional
        multiprocessing start method (default: the platform's).
    daemon : bool
        multiprocessing's daemon flag of the workers, accepted as gymnasium's
        is; unlike gymnasium's, envs may start processes of their own with
        either value (see :class:`~vecenv.ShmemVecEnv`).
    worker : None
        Must be None: vecenv runs its own worker loop. Anything else raises
        :class:`~vecenv.InvalidArgumentError` (a ValueError).
    observation_mode : "same", "different" or (observation_space, single_observation_space)
        As in gymnasium: "same" (every env has env 0's observation space;
        ``batch_space`` of it), "different" (the envs' spaces may differ in
        bounds but share shapes and dtypes; ``batch_differing_spaces`` of
        them), or the given pair (the envs' spaces must have its single
        space's shapes and dtypes). Else RuntimeError, gymnasium's message.
    autoreset_mode : AutoresetMode or str
        NEXT_STEP (default), SAME_STEP or DISABLED, as in gymnasium.
    max_concurrency : int, optional
        At most this many envs run at once: vecenv starts this many workers,
        each stepping its envs in turn. Default: every env in a worker
        process, how many workers chosen by a probe of env 0 in this process
        (at most 2 s; ``layout.why`` says what it chose).
    num_workers, envs_per_worker, timeout, start_timeout, spin, cpu_affinity
        vecenv's own options, passed to :class:`~vecenv.ShmemVecEnv`
        (keyword only; or all of them as ``engine_options``, an
        :class:`~vecenv.EngineOptions`, checked as ShmemVecEnv checks them). ``timeout`` (seconds) is a watchdog on every wait: the
        late workers are killed and a ``reset()`` starts them again; a
        ``*_wait(timeout=...)`` only stops waiting (the call stays pending).
    on_worker_death, max_restarts, check_rewards, check_observations, episode_statistics
        vecenv's fault handling, as in :class:`~vecenv.ShmemVecEnv` (keyword only);
        ``episode_statistics=True`` adds the infos of gymnasium's vector
        ``RecordEpisodeStatistics`` (``"episode"``, ``"_episode"``), computed in the workers.
    check_actions : bool
        False (default): each env gets its action as gymnasium's ``iterate``
        hands it out (a float64 batch on a float32 Box arrives as
        ``np.float64``, a list's items unchanged), nothing range-checked; a
        batch already of the space's dtype goes through shared memory, any
        other through the worker pipes. True (vecenv's strict mode, keyword
        only): every batch is checked against ``action_space`` (count,
        shape, dtype, Discrete/MultiDiscrete/MultiBinary range) and cast to
        its dtype before anything is sent; a bad one raises
        :class:`~vecenv.InvalidArgumentError` (a ValueError).

    Attributes
    ----------
    single_observation_space, observation_space : gymnasium.spaces.Space
        One env's space, and ``batch_space(single, num_envs)``.
    single_action_space, action_space : gymnasium.spaces.Space
    metadata : dict
        The first env's metadata plus ``"autoreset_mode"`` (an AutoresetMode).
    render_mode : str or None

    Raises
    ------
    InvalidArgumentError
        A custom ``worker``, bad ``max_concurrency`` or engine options (ValueError).
    SpaceError
        With ``shared_memory=True``, a custom observation space (ValueError)
        or a Graph/Sequence one (also a TypeError); envs whose spaces
        disagree raise a subclass that is also a RuntimeError.
    WorkerError
        An env factory raised.

    Notes
    -----
    Worker errors are logged through ``gymnasium.logger.error`` with
    gymnasium's texts and re-raised as the env's exception type. Differences
    from gymnasium, all deliberate: after a ``*_wait`` timeout the call stays
    pending (call the wait again, or ``close()``), where gymnasium forgets it
    and leaves stale replies in its pipes; ``options`` given to ``reset`` is
    not modified (gymnasium pops ``"reset_mask"`` from it); a worker error
    leaves the vector env usable after a ``reset()`` (gymnasium shuts the
    worker down); no custom ``worker``; the env factories run only in the
    workers (gymnasium also builds env 0 in the parent, and every env for
    ``observation_mode="different"``).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        shared_memory: bool = True,
        copy: bool = True,
        context: Optional[str] = None,
        daemon: bool = True,
        worker: Optional[Callable[..., None]] = None,
        observation_mode: Union[str, Tuple[Space, Space]] = "same",
        autoreset_mode: Union[str, AutoresetMode] = AutoresetMode.NEXT_STEP,
        max_concurrency: Optional[int] = None,
        **engine_options: Any,
    ):
        # The engine; None before it starts and after close() (every use is
        # behind _assert_is_running).
        self._venv: ShmemVecEnv = None  # type: ignore[assignment]
        self._state = _Pending.DEFAULT
        self._pending_call: Any = None
        self.num_envs = len(env_fns) if hasattr(env_fns, "__len__") else 0  # for repr()
        if worker is not None:
            raise InvalidArgumentError(
                "AsyncVectorEnv(worker=...): vecenv runs its own worker loop over shared "
                "memory and cannot run a custom worker; wrap the env (gymnasium.Wrapper) or "
                "choose an autoreset_mode instead"
            )
        options = EngineOptions.from_kwargs(
            engine_options, caller="AsyncVectorEnv()", allowed=_ENGINE_KEYS
        )
        mode = _AUTORESET_MODES[autoreset_mode_name(autoreset_mode, tuple(_AUTORESET_MODES))]
        if max_concurrency is not None:
            if not isinstance(max_concurrency, (int, np.integer)) or isinstance(
                max_concurrency, bool
            ):
                raise InvalidArgumentError(
                    f"`max_concurrency` must be an integer or None, got {type(max_concurrency)}."
                )
            if max_concurrency < 1:
                raise InvalidArgumentError(
                    f"`max_concurrency` must be a positive or None, got {max_concurrency}."
                )
            if options.num_workers is None and options.envs_per_worker is None:
                options = options.replace(num_workers=int(max_concurrency))
        custom_spaces = None
        if isinstance(observation_mode, tuple) and len(observation_mode) == 2:
            if not all(isinstance(s, Space) for s in observation_mode):
                raise argument_error(
                    ArgumentTypeError,
                    "Expected both elements of observation_mode to be Spaces, got "
                    f"{type(observation_mode[0])} and {type(observation_mode[1])}",
                    "",  # gymnasium before 1.4: a bare assert
                )
            custom_spaces = observation_mode
        elif not (isinstance(observation_mode, str) and observation_mode in ("same", "different")):
            raise InvalidArgumentError(
                "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single "
                f"and batch observation space, actual got {observation_mode}"
            )

        # The arguments, as gymnasium's AsyncVectorEnv keeps them.
        self.env_fns, self.shared_memory, self.copy = env_fns, shared_memory, copy
        self.context, self.daemon, self.worker = context, daemon, worker
        self.observation_mode = observation_mode
        self.autoreset_mode = mode
        self.max_concurrency = max_concurrency
        try:
            # Spaces checked below (gymnasium's rules); leaves without a fixed layout go pickled.
            venv = ShmemVecEnv(
                env_fns,
                context=context,
                copy=copy,
                daemon=daemon,
                autoreset_mode=_AUTORESET_NAMES[mode],
                pickled_leaves=True,
                check_spaces=False,
                _default_layout="workers",  # as gymnasium's: every env in a worker process
                **options.changed(),
            )
        except SpaceError as exc:
            raise NoSharedLayoutError(str(exc)) from exc
        except WorkerError as exc:
            raise _as_env_exception(exc) from None
        try:
            (
                self.single_observation_space,
                self.observation_space,
                self.single_action_space,
                self.action_space,
            ) = _gymnasium_spaces(venv, observation_mode, custom_spaces, shared_memory)
        except BaseException:
            venv.close()
            raise
        venv.allow_steps_before_reset()  # gymnasium steps envs that were never reset
        self._venv = venv
        #: Where the envs step (the engine's :attr:`vecenv.ShmemVecEnv.layout`;
        #: ``layout.why`` says how it was chosen). None on an engine without
        #: worker processes of its own (a :class:`vecenv.ray.RayVecEnv`).
        self.layout = venv.layout
        self.num_envs = venv.num_envs
        engine_md = dict(venv.metadata)
        self.render_mode = engine_md.pop("render_mode", None)
        engine_md.pop("env_spec_id", None)
        self.metadata = engine_md
        self.metadata["autoreset_mode"] = mode

    def __repr__(self) -> str:
        """gymnasium's repr (``AsyncVectorEnv(CartPole-v1, num_envs=8)``) with
        the layout: ``AsyncVectorEnv(CartPole-v1, num_envs=8, layout='2
        workers x 4 envs')``."""
        text = super().__repr__()
        layout = getattr(self, "layout", None)  # None: the engine never started
        return text if layout is None else f"{text[:-1]}, layout={layout.summary(self.num_envs)!r})"

    # ------------------------------------------------------------ helpers
    @property
    def engine(self) -> ShmemVecEnv:
        """The :class:`~vecenv.ShmemVecEnv` that runs the envs (for its
        statistics and options; calling its step/reset directly desynchronizes
        this object)."""
        self._assert_is_running()
        return self._venv

    def _assert_is_running(self) -> None:
        if self.closed or self._venv is None:
            raise ClosedEnvironmentError(
                f"Trying to operate on `{type(self).__name__}`, after a call to `close()`."
            )

    def _no_pending(self, method: str, sep: str = ".") -> None:
        if self._state is not _Pending.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `{method}` while waiting for a pending call to "
                f"`{self._state.value}` to complete{sep}",
                str(self._state.value),
            )

    def _expect(self, state: _Pending, method: str, starter: str) -> None:
        if self._state is not state:
            raise NoAsyncCallError(
                f"Calling `{method}` without any prior call to `{starter}`.", state.value
            )

    @contextlib.contextmanager
    def _waiting(self, method: str, timeout: Optional[float]):
        """Run a wait with ``timeout`` (None: the engine's own timeout) and
        turn engine errors into gymnasium's."""
        venv = self._venv
        # A timeout of this wait only: on expiry nothing is killed.
        limit = None if timeout is None else max(float(timeout), 0.0)
        try:
            with venv.limit_waits(limit):
                yield
        except VecEnvTimeoutError as exc:
            shown = timeout if timeout is not None else venv.timeout
            if timeout is None:  # the engine's watchdog killed the late workers
                self._state = _Pending.DEFAULT
                self._pending_call = None
            cls = (
                PendingWaitTimeout if isinstance(exc, PendingTimeoutError) else WatchdogWaitTimeout
            )
            raise cls(
                f"The call to `{method}` has timed out after {shown} second(s).",
                env_indices=exc.env_indices,
            ) from exc
        except WorkerError as exc:
            self._state = _Pending.DEFAULT
            self._pending_call = None
            log_worker_errors(exc)
            raise _as_env_exception(exc) from None
        except BaseException:
            # Ctrl-C, a state error...: the call stays pending only if the
            # engine still waits for it (a later *_wait may finish it).
            if not venv.waiting:
                self._state = _Pending.DEFAULT
                self._pending_call = None
            raise

    def _batch_infos(self, infos) -> Dict[str, Any]:
        out = gym_infos(infos, self.num_envs)  # the common case a key at a time
        if out is not None:
            return out
        out = {}
        for i, info in enumerate(infos):
            if info:
                out = self._add_info(out, info, i)
        return out

    # ------------------------------------------------------------ reset
    def reset(
        self,
        *,
        seed: Union[int, Sequence[Optional[int]], None] = None,
        options: Optional[Dict[str, Any]] = None,
    ):
        """Reset the envs (all, or those of ``options["reset_mask"]``).

        Parameters
        ----------
        seed : int, sequence of int/None, or None
            An int seeds env ``i`` with ``seed + i``; a sequence gives one seed
            per env.
        options : dict, optional
            Passed to every env's ``reset``. ``options["reset_mask"]`` (bool
            array, shape (num_envs,), at least one True) resets only those envs;
            the others keep their last observation and report no info.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
        infos : dict
            Batched the gymnasium way: each key holds an array over envs and
            ``"_key"`` a bool mask of the envs that reported it.

        Raises
        ------
        ValueError, TypeError
            Bad ``seed`` or ``reset_mask`` (gymnasium's messages).
        AlreadyPendingCallError, ClosedEnvironmentError
        """
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(
        self,
        seed: Union[int, Sequence[Optional[int]], None] = None,
        options: Optional[Dict[str, Any]] = None,
    ) -> None:
        """Start :meth:`reset` (same arguments); :meth:`reset_wait` collects it."""
        self._assert_is_running()
        seeds: List[Optional[int]]
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)  # type: ignore[arg-type]  # a bool raises TypeError here
        if len(seeds) != self.num_envs:
            raise argument_error(
                InvalidArgumentError,
                "If seeds are passed as a list the length must match num_envs="
                f"{self.num_envs} but got length={len(seeds)}.",
            )
        self._no_pending("reset_async", sep="")
        env_ids = None
        if options is not None and "reset_mask" in options:
            options = dict(options)
            mask = options.pop("reset_mask")
            check_reset_mask(mask, self.num_envs)
            env_ids = np.flatnonzero(mask)
        venv = self._venv
        venv.seed(seeds)
        venv.set_options(options)
        venv.reset_async(env_ids)
        self._state = _Pending.WAITING_RESET

    def reset_wait(self, timeout: Optional[float] = None):
        """Wait for :meth:`reset_async`; return ``(observations, infos)`` as :meth:`reset`.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait (default: the ``timeout`` given at construction,
            else no limit).

        Raises
        ------
        NoAsyncCallError
            No reset_async() is pending.
        WaitTimeoutError
            The time ran out (a ``multiprocessing.TimeoutError``); the reset
            stays pending.
        Exception
            What an env raised, as its own type (also a vecenv.WorkerError).
        """
        self._assert_is_running()
        self._expect(_Pending.WAITING_RESET, "reset_wait", "reset_async")
        with self._waiting("reset_wait", timeout):
            obs = self._venv.reset_wait()
        self._state = _Pending.DEFAULT
        return obs, self._batch_infos(self._venv.reset_infos)

    # ------------------------------------------------------------ step
    def step(self, actions):
        """Step every env with ``actions[i]``.

        Parameters
        ----------
        actions : element of ``action_space``
            Shape (num_envs, *single_action_space.shape), or a list of one
            action per env; tuple/dict of such for Tuple/Dict spaces.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (num_envs, *shape)
        rewards : float64 array, shape (num_envs,)
        terminations, truncations : bool arrays, shape (num_envs,)
        infos : dict
            Batched as in :meth:`reset`. With SAME_STEP, ``"final_obs"`` (object
            array) and ``"final_info"`` hold the last observation and info of the
            episodes that ended, taken before the env was reset.

        Raises
        ------
        ActionTypeError
            One scalar instead of a batch (a TypeError, as in gymnasium).
        InvalidArgumentError
            Not num_envs actions; with ``check_actions=True`` also actions
            that do not fit ``action_space`` (a ValueError; nothing sent).
        AlreadyPendingCallError, ClosedEnvironmentError
        """
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions) -> None:
        """Start :meth:`step`; :meth:`step_wait` collects it."""
        self._assert_is_running()
        self._no_pending("step_async")
        if not isinstance(actions, (tuple, dict)) and np.ndim(actions) == 0:
            raise ActionTypeError(
                f"step_async(actions={actions!r}): expected one action per env "
                f"(num_envs={self.num_envs}), an element of {self.action_space}"
            )
        self._venv.step_async(actions)
        self._state = _Pending.WAITING_STEP

    def step_wait(self, timeout: Optional[float] = None):
        """Wait for :meth:`step_async`; return what :meth:`step` returns.

        Raises
        ------
        NoAsyncCallError
            No step_async() is pending.
        WaitTimeoutError
            The time ran out; the step stays pending.
        """
        self._assert_is_running()
        self._expect(_Pending.WAITING_STEP, "step_wait", "step_async")
        with self._waiting("step_wait", timeout):
            obs, rewards, terminations, truncations, infos = self._venv.step_wait_gym()
        self._state = _Pending.DEFAULT
        batch = self._batch_infos
        if self._venv.engine_options.episode_statistics:  # then "episode", "_episode"
            batch = functools.partial(batch_episodes, batch, terminations | truncations)
        return obs, rewards, terminations, truncations, batch(infos)

    # ------------------------------------------------------------ calls
    def call(self, name: str, *args: Any, **kwargs: Any) -> Tuple[Any, ...]:
        """``getattr(env, name)(*args, **kwargs)`` in each env (through wrappers),
        or the attribute itself when it is not callable; a tuple over envs."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Send :meth:`call` to every env; :meth:`call_wait` collects the results.

        Raises
        ------
        ValueError
            ``name`` is reset, step, close, _setattr or _check_spaces.
        """
        self._assert_is_running()
        self._no_pending("call_async")
        if name in ("reset", "step", "close", "_setattr", "_check_spaces"):
            raise InvalidArgumentError(
                f"Trying to call function `{name}` with `call`, use `{name}` directly instead."
            )
        self._pending_call = self._venv.call_async("call", name, args, kwargs)
        self._state = _Pending.WAITING_CALL

    def call_wait(self, timeout: Optional[float] = None) -> Tuple[Any, ...]:
        """Wait for :meth:`call_async`; the results, one per env, as a tuple.

        Raises
        ------
        NoAsyncCallError, WaitTimeoutError
        Exception
            What an env raised, as its own type (also a vecenv.WorkerError).
        """
        self._assert_is_running()
        self._expect(_Pending.WAITING_CALL, "call_wait", "call_async")
        with self._waiting("call_wait", timeout):
            results = self._venv.call_wait(self._pending_call)
        self._state = _Pending.DEFAULT
        self._pending_call = None
        return tuple(results)

    def get_attr(self, name: str) -> Tuple[Any, ...]:
        """The attribute ``name`` of each env, as :meth:`call` does it."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` of each env (through wrappers).

        Parameters
        ----------
        values : list, tuple or any value
            One value per env, or one value for all envs.

        Raises
        ------
        ValueError
            A list/tuple whose length is not num_envs.
        ArgumentNotPicklableError
            An env's value does not pickle (a ``TypeError``, as gymnasium
            raises; names the env): the envs before it are set, it and the
            ones after it are not.
        AlreadyPendingCallError
        """
        self._assert_is_running()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise InvalidArgumentError(
                "Values must be a list or tuple with length equal to the number of environments. "
                f"Got `{len(values)}` values for {self.num_envs} environments."
            )
        self._no_pending("set_attr")
        venv = self._venv
        # One call per env, all sent before any reply is read: replies from one
        # worker come back in the order they were sent.
        pending = []
        try:
            for i, v in enumerate(values):
                pending.append(venv.call_async("set_attr", name, (v,), indices=[i]))
        except ArgumentNotPicklableError:
            # Env i's value does not pickle: nothing was sent to it; the envs
            # before it were set (their replies are collected first).
            with self._waiting("set_attr", None):
                for p in pending:
                    venv.call_wait(p)
            raise
        with self._waiting("set_attr", None):
            for p in pending:
                venv.call_wait(p)

    def render(self) -> Optional[Tuple[Any, ...]]:
        """Each env's ``render()`` (a tuple of frames, one per env)."""
        return self.call("render")

    @property  # per env, as gymnasium's AsyncVectorEnv: not the base's one value
    def np_random_seed(self) -> Tuple[Any, ...]:  # type: ignore[override]
        """Each env's ``np_random_seed``."""
        return self.get_attr("np_random_seed")

    @property  # type: ignore[misc]  # per env, as gymnasium's AsyncVectorEnv
    def np_random(self) -> Tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each env's ``np_random`` generator (copies from the workers)."""
        return self.get_attr("np_random")

    # ------------------------------------------------------------ close
    def close_extras(self, timeout: Optional[float] = None, terminate: bool = False) -> None:
        """Finish a pending call (within ``timeout`` seconds), then stop the
        workers and release shared memory; ``terminate=True`` does not wait.

        Called by ``close(**kwargs)``; closing twice is a no-op.
        """
        venv = self._venv
        if venv is None:
            return
        try:
            if self._state is not _Pending.DEFAULT:
                logger.warn(
                    f"Calling `close` while waiting for a pending call to `{self._state.value}` to complete."
                )
                if not terminate:
                    try:
                        getattr(self, f"{self._state.value}_wait")(timeout)
                    except (WaitTimeoutError, WorkerError, StateError):
                        terminate = True
        finally:
            self._venv = None  # type: ignore[assignment]
            self._state = _Pending.DEFAULT
            self._pending_call = None
            if terminate:
                venv.close(timeout=0.0)
            elif timeout is not None:
                venv.close(timeout=timeout)
            else:
                venv.close()

    def __del__(self):  # vecenv's finalizer releases the workers and memory
        pass


def _gymnasium_spaces(
    venv: ShmemVecEnv, mode: Any, custom_spaces: Any, shared_memory: bool
) -> Tuple[Space, Space, Space, Space]:
    """The drop-in's ``(single_observation_space, observation_space,
    single_action_space, action_space)`` from the envs' spaces, checked as
    gymnasium checks them: its shared-memory errors for spaces it cannot lay
    out, then RuntimeError (with gymnasium's messages) for envs whose spaces
    disagree under ``observation_mode`` ``mode``."""
    n = venv.num_envs
    obs_spaces = venv.get_attr("observation_space") if n > 1 else [venv.observation_space]
    act_spaces = venv.get_attr("action_space") if n > 1 else [venv.action_space]
    single_act = act_spaces[0]
    if custom_spaces is not None:
        obs, single = custom_spaces
    elif mode == "same":
        single, obs = obs_spaces[0], batch_space(obs_spaces[0], n)
    else:
        single, obs = obs_spaces[0], batch_differing_spaces(obs_spaces)
    if shared_memory:
        check_shared_memory_space(single)
    if mode == "same":
        same_obs = all(space == single for space in obs_spaces)
    else:
        same_obs = all(is_space_dtype_shape_equiv(single, space) for space in obs_spaces)
    if not same_obs:
        if mode == "same":
            raise SpacesDifferError(
                "AsyncVectorEnv(..., observation_mode='same') however some of the "
                "sub-environments observation spaces are not equivalent. If this is "
                "intentional, use `observation_mode='different'` instead."
            )
        raise SpacesDifferError(
            "AsyncVectorEnv(..., observation_mode='different' or custom space) however the "
            "sub-environment's observation spaces do not share a common shape and dtype."
        )
    if not all(space == single_act for space in act_spaces):
        raise SpacesDifferError(
            f"Some environments have an action space different from "
            f"`{single_act}`. In order to batch actions, the action spaces "
            "from all environments must be equal."
        )
    return single, obs, single_act, batch_space(single_act, n)


def make_vec(
    id: Union[str, Any],
    num_envs: int = 1,
    vectorization_mode: Union[str, Any, None] = None,
    vector_kwargs: Optional[Dict[str, Any]] = None,
    wrappers: Optional[Sequence[Callable[[Any], Any]]] = None,
    **kwargs: Any,
) -> VectorEnv:
    """``gymnasium.make_vec`` with vecenv's :class:`AsyncVectorEnv` for async mode.

    Parameters
    ----------
    id : str or gymnasium.envs.registration.EnvSpec
        A registered id (``"module:Id"`` imports ``module`` first; ``"ALE/..."``
        imports ale_py) or a spec.
    num_envs : int
    vectorization_mode : "async", "sync", "vector_entry_point" or None
        "async" and None build :class:`AsyncVectorEnv`; "sync" and
        "vector_entry_point" are handed to ``gymnasium.make_vec`` unchanged.
    vector_kwargs : dict, optional
        Keyword arguments of the vector env (``AsyncVectorEnv(..., **vector_kwargs)``;
        vecenv's engine options such as ``num_workers`` are allowed).
    wrappers : sequence of callables, optional
        Applied in order to each env.
    **kwargs
        Passed to ``gymnasium.make`` for each env.

    Returns
    -------
    gymnasium.vector.VectorEnv
        With ``spec`` set as gymnasium sets it.
    """

    mode = (
        "async"
        if vectorization_mode is None
        else getattr(vectorization_mode, "value", vectorization_mode)
    )
    if mode != "async":
        return gymnasium.make_vec(
            id, num_envs, vectorization_mode, vector_kwargs, wrappers, **kwargs
        )
    env_spec = copy_module.deepcopy(_spec_of(id))
    spec_kwargs = dict(env_spec.kwargs)
    env_spec.kwargs = {}
    num_envs = spec_kwargs.pop("num_envs", num_envs)
    spec_kwargs.pop("vectorization_mode", None)
    vector_kwargs = dict(spec_kwargs.pop("vector_kwargs", vector_kwargs) or {})
    wrappers = list(spec_kwargs.pop("wrappers", wrappers) or [])
    spec_kwargs.update(kwargs)
    if env_spec.entry_point is None:
        raise gym_error.Error(
            f"Cannot create vectorized environment for {env_spec.id} because it doesn't have an "
            "entry point defined."
        )
    make_one = _SpecMake(env_spec, spec_kwargs, tuple(wrappers))
    envs = AsyncVectorEnv([make_one] * int(num_envs), **vector_kwargs)
    vec_spec = copy_module.deepcopy(env_spec)
    vec_spec.kwargs = dict(spec_kwargs)
    if num_envs != 1:
        vec_spec.kwargs["num_envs"] = num_envs
    vec_spec.kwargs["vectorization_mode"] = "async"
    if vector_kwargs:
        vec_spec.kwargs["vector_kwargs"] = vector_kwargs
    if wrappers:
        vec_spec.kwargs["wrappers"] = wrappers
    envs.spec = vec_spec
    return envs


def _spec_of(id: Union[str, Any]) -> Any:
    """The registered spec of ``id`` (``"module:Id"`` imports ``module``
    first, ``"ALE/..."`` imports ale_py), or ``id`` itself when it is a spec.

    Raises
    ------
    gymnasium.error.Error
        An unknown id (gymnasium's NameNotFound and its kin).
    """
    if not isinstance(id, str):
        return id
    name = id
    if ":" in name:
        module, name = name.split(":", 1)
        importlib.import_module(module)
    elif name.startswith("ALE/"):
        gymnasium.register_envs(importlib.import_module("ale_py"))
    return gymnasium.spec(name)


def register_vector_entry_point(id: str, **vector_kwargs: Any) -> None:
    """Make ``gymnasium.make_vec(id, num_envs)`` build vecenv's :class:`AsyncVectorEnv`.

    For libraries that build their envs through ``gymnasium.make_vec``
    themselves (RLlib's env runners, for one) and so never call
    :func:`make_vec`: this sets the ``vector_entry_point`` of ``id``'s
    registered spec, which ``gymnasium.make_vec`` uses with
    ``vectorization_mode=None`` (its default when a spec has one) or
    ``"vector_entry_point"``; ``"sync"`` and ``"async"`` still build
    gymnasium's own classes. Call it in every process that builds the vec
    env (the registry is per process).

    Parameters
    ----------
    id : str
        A registered env id (``"module:Id"`` and ``"ALE/..."`` as in :func:`make_vec`).
    **vector_kwargs
        Keyword arguments of every :class:`AsyncVectorEnv` it builds
        (``autoreset_mode``, ``num_workers``, ...). The env's own keyword
        arguments come from ``gymnasium.make_vec(id, num_envs, **kwargs)``.

    Raises
    ------
    gymnasium.error.Error
        ``id`` is not registered.

    Examples
    --------
    ::

        import gymnasium

        import vecenv

        if __name__ == "__main__":
            vecenv.register_vector_entry_point("CartPole-v1", autoreset_mode="same_step")
            envs = gymnasium.make_vec("CartPole-v1", num_envs=4)  # vecenv.AsyncVectorEnv
            obs, infos = envs.reset(seed=0)
            envs.close()
    """
    registered = _spec_of(id)
    registered.vector_entry_point = _VectorEntryPoint(registered, vector_kwargs)


class _VectorEntryPoint:
    """What ``gymnasium.make_vec`` calls for a spec's ``vector_entry_point``:
    ``(num_envs=..., **env_kwargs)`` to a vecenv :class:`AsyncVectorEnv`
    (picklable, so a spec holding it can still be copied)."""

    def __init__(self, registered: Any, vector_kwargs: Dict[str, Any]):
        # The spec each env is made from: gymnasium.make_vec merges the
        # registered kwargs into the env_kwargs it passes, so it has none.
        self.env_spec = dataclasses.replace(registered, kwargs={}, vector_entry_point=None)
        self.vector_kwargs = dict(vector_kwargs)

    def __call__(self, num_envs: int = 1, **env_kwargs: Any) -> AsyncVectorEnv:
        make_one = _SpecMake(self.env_spec, env_kwargs, ())
        return AsyncVectorEnv([make_one] * int(num_envs), **self.vector_kwargs)


class _SpecMake:
    """Picklable ``gymnasium.make(spec, **kwargs)`` followed by the wrappers."""

    def __init__(self, env_spec, kwargs: Dict[str, Any], wrappers: Tuple[Callable, ...]):
        self.env_spec = env_spec
        self.kwargs = kwargs
        self.wrappers = wrappers

    def __call__(self):

        env = gymnasium.make(self.env_spec, **dict(self.kwargs))
        for wrap in self.wrappers:
            env = wrap(env)
        return env
