"""stable-baselines3 drop-in: :class:`SubprocVecEnv` on top of :class:`~vecenv.ShmemVecEnv`.

Runs in the parent process only. The class is a subclass of SB3's abstract
``VecEnv``, so every SB3 algorithm, wrapper (``VecNormalize``,
``VecFrameStack``, ``VecMonitor``, ``VecVideoRecorder``) and helper
(``make_vec_env``, ``evaluate_policy``) takes it where it takes SB3's own
``SubprocVecEnv``. The stepping is done by one :class:`~vecenv.ShmemVecEnv`
with ``autoreset_mode="sb3"``; this module only translates between the two APIs.

stable-baselines3 is an optional dependency (``pip install vecenv[sb3]``): it is
imported here and nowhere else in vecenv.

Behaviour follows SB3's ``common/vec_env/subproc_vec_env.py`` and
``base_vec_env.py`` (2.x): seeds and options are kept until the next
``reset()``, every step info has ``"TimeLimit.truncated"``, a finished
episode's last observation is ``info["terminal_observation"]`` and the
observation returned for that env is the first one of the next episode.
"""

from __future__ import annotations

import multiprocessing
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv as _SB3VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import tile_images as sb3_tile_images
except ImportError as _exc:
    # ModuleNotFoundError where the package is missing (what pytest.importorskip
    # and `except ImportError` both expect); ImportError where it is broken.
    _missing = ModuleNotFoundError if isinstance(_exc, ModuleNotFoundError) else ImportError
    raise _missing(
        f"vecenv.sb3 needs stable-baselines3 ({_exc}); install it with `pip install vecenv[sb3]`",
        name=_exc.name,
    ) from _exc

from vecenv._autolayout import Layout
from vecenv._episodes import monitor_times
from vecenv._options import ENGINE_OPTIONS, EngineOptions, check_env_fns
from vecenv._pool import RenderModesDiffer
from vecenv.base import check_frames
from vecenv.errors import InvalidArgumentError, ResultNotPicklableError, WorkerError
from vecenv.shmem_vec_env import ShmemVecEnv

__all__ = ["EnvAttributeError", "SubprocVecEnv"]

# The engine options a user may pass through: all but those SB3's API fixes.
_ENGINE_KEYS = tuple(
    k for k in ENGINE_OPTIONS if k not in ("context", "autoreset_mode", "batch_size")
)


class EnvAttributeError(WorkerError, AttributeError):
    """An env raised ``AttributeError`` in ``get_attr``, ``set_attr`` or
    ``env_method`` (the attribute or method does not exist).

    Also an ``AttributeError``, so SB3 code that probes attributes
    (``VecEnv.__init__`` reading ``render_mode``, ``has_attr``) works as with
    SB3's own vec envs.
    """


class _RenderModeAssertion(InvalidArgumentError, AssertionError):
    """Envs built with different ``render_mode``: the AssertionError SB3's
    ``VecEnv`` raises, naming the envs and their modes."""


class SubprocVecEnv(_SB3VecEnv):
    """SB3's ``SubprocVecEnv`` API, stepped by vecenv's shared-memory engine.

    Switch by changing one import::

        from vecenv.sb3 import SubprocVecEnv  # was: from stable_baselines3.common.vec_env import SubprocVecEnv

    Parameters
    ----------
    env_fns : sequence of callables
        One factory per env, each returning a ``gymnasium.Env``. Pickled with
        cloudpickle, so lambdas and closures work with every start method.
    start_method : {"forkserver", "spawn", "fork"}, optional
        multiprocessing start method of the workers. Default as in SB3:
        "forkserver" where available, else "spawn" (both are safe with
        threads, e.g. PyTorch, in the parent; "fork" starts fastest).
    **vecenv_options
        Passed to :class:`~vecenv.ShmemVecEnv`: ``num_workers``,
        ``envs_per_worker`` (default: every env in a worker process, how
        many workers chosen by a probe of env 0, at most 2 s; ``layout.why``
        says what it chose), ``copy``, ``timeout`` (seconds),
        ``start_timeout``, ``spin``, ``cpu_affinity``, ``daemon``,
        ``spaces``, ``on_worker_death``, ``max_restarts``, ``check_rewards``,
        ``check_actions``, ``check_observations``, ``episode_statistics``; or
        all of them as ``engine_options``, an :class:`~vecenv.EngineOptions`.
        With ``episode_statistics=True`` each ended episode's info gets
        ``"episode": {"r": float, "l": int, "t": float}`` as SB3's
        ``VecMonitor`` writes it (no need to wrap it), with its meaning of
        ``"t"``: seconds since this vec env was built. ``context`` is another name for ``start_method``.
        ``autoreset_mode`` may only be "sb3" and ``batch_size`` only
        ``num_envs``: SB3's API steps every env at once and resets in the step.

    Attributes
    ----------
    num_envs : int
    observation_space, action_space : gymnasium.spaces.Space
        The spaces of one env (SB3 does not batch them).
    reset_infos : list of num_envs dicts
        The info of each env's last reset: set by :meth:`reset`, and for an
        env whose episode ended by the step that reset it (as in SB3).
    render_mode : str or None
        The envs' common ``render_mode``.
    metadata : dict
        The first env's metadata (``render_fps``...) with SB3's
        ``"render_modes"`` of the vec env.
    waiting : bool
        A :meth:`step_async` is pending.
    engine : vecenv.ShmemVecEnv
        The engine doing the work (read-only; do not step it directly).

    Raises
    ------
    InvalidArgumentError
        Bad arguments: an unknown ``start_method``, ``start_method`` and
        ``context`` that disagree, ``autoreset_mode`` other than "sb3",
        ``batch_size`` other than ``num_envs``, or any
        :class:`~vecenv.ShmemVecEnv` argument error. A ``ValueError`` too.
    SpaceError
        A space that cannot live in shared memory (``Text``, ``Graph``,
        ``Sequence``), or envs that disagree on their spaces.
    AssertionError
        Envs built with different ``render_mode`` (SB3's message, then the
        envs and their modes; also an InvalidArgumentError).
    WorkerError
        An env factory raised (the message names the env; the worker's
        traceback is chained).

    Notes
    -----
    As in SB3's class, each env gets its action as the caller gave it (a row
    of an array of the space's dtype travels through shared memory, anything
    else pickled through the pipe, element types unchanged, nothing cast or
    range-checked); ``check_actions=True`` validates every batch first
    (shape, dtype, range of Discrete/MultiDiscrete/MultiBinary values:
    :class:`~vecenv.InvalidArgumentError`, nothing sent). Unlike SB3's
    class, an env that raises surfaces as :class:`~vecenv.WorkerError`
    naming the env instead of a dead pipe, and :meth:`reset` afterwards
    starts stepping again.
    """

    metadata: Dict[str, Any]  # the envs' metadata with SB3's keys

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        start_method: Optional[str] = None,
        **vecenv_options: Any,
    ):
        env_fns = check_env_fns(env_fns)
        spaces = vecenv_options.pop("spaces", None)
        context = vecenv_options.pop("context", None)
        if context is not None and start_method is not None and context != start_method:
            raise InvalidArgumentError(
                f"start_method={start_method!r} and context={context!r} disagree: pass only one"
            )
        start_method = start_method if start_method is not None else context
        available = multiprocessing.get_all_start_methods()
        if start_method is None:
            start_method = "forkserver" if "forkserver" in available else "spawn"
        elif start_method not in available:
            raise InvalidArgumentError(
                f"start_method: cannot find context for {start_method!r}; "
                f"use one of {available} or None"
            )
        mode = vecenv_options.pop("autoreset_mode", "sb3")
        if getattr(mode, "value", mode) != "sb3":
            raise InvalidArgumentError(
                f"autoreset_mode={mode!r}: SB3's VecEnv API resets envs inside step "
                "(autoreset_mode='sb3'); use vecenv.ShmemVecEnv for other modes"
            )
        batch_size = vecenv_options.pop("batch_size", None)
        if batch_size is not None and batch_size != len(env_fns):
            raise InvalidArgumentError(
                f"batch_size={batch_size!r}: SB3's VecEnv API steps all num_envs="
                f"{len(env_fns)} envs at once; use vecenv.ShmemVecEnv's send/recv for partial batches"
            )
        # Checked as ShmemVecEnv checks them, before anything starts.
        options = EngineOptions.from_kwargs(
            vecenv_options, caller="SubprocVecEnv()", allowed=_ENGINE_KEYS
        )
        self.waiting = False
        # VecMonitor's t_start: its "t" counts from here (episode_statistics).
        self._t_start = time.time() if options.episode_statistics else None
        try:
            self._engine = ShmemVecEnv(
                env_fns,
                spaces=spaces,
                context=start_method,
                autoreset_mode="sb3",
                _default_layout="workers",  # as SB3's: every env in a worker process
                **options.changed(),
            )
        except RenderModesDiffer as exc:  # SB3's VecEnv asserts it: its message, then ours
            raise _RenderModeAssertion(
                f"render_mode mode should be the same for all environments ({exc})"
            ) from None
        try:
            super().__init__(
                self._engine.num_envs, self._engine.observation_space, self._engine.action_space
            )
        except BaseException:
            self._engine.close()
            raise
        self._engine.allow_steps_before_reset()  # SB3 hands such a step to the envs
        env_metadata = {
            k: v
            for k, v in (self._engine.metadata or {}).items()
            if k not in ("render_mode", "env_spec_id")
        }
        self.metadata = {**env_metadata, **self.metadata}

    # ------------------------------------------------------------ properties
    @property
    def engine(self) -> ShmemVecEnv:
        """The :class:`~vecenv.ShmemVecEnv` doing the work."""
        return self._engine

    @property
    def layout(self) -> Optional[Layout]:
        """Where the envs step (:class:`vecenv.ShmemVecEnv`'s ``layout``):
        ``layout.why`` says how it was chosen. None on an engine without
        worker processes of its own (a :class:`vecenv.ray.RayVecEnv`)."""
        return self._engine.layout

    @property
    def num_workers(self) -> int:
        """Number of worker processes (each steps ``num_envs / num_workers`` envs)."""
        return self._engine.num_workers

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or construction failed)."""
        return self._engine.closed

    # ------------------------------------------------------------ stepping
    def reset(self):
        """Reset every env, with the seeds of :meth:`seed` and the options of
        :meth:`set_options` (used once, then forgotten, as in SB3).

        A pending :meth:`step_async` is waited for and its results dropped.

        Returns
        -------
        observations : ndarray, or dict / tuple of ndarrays
            Each of shape (num_envs, *space.shape) and the space's dtype;
            arrays the caller owns (unless ``copy=False`` was passed).
            Reset infos go to :attr:`reset_infos`.

        Raises
        ------
        WorkerError
            An env raised in ``reset`` (names the env).
        WorkerDiedError, VecEnvTimeoutError, ClosedError
        """
        engine = self._engine
        self.waiting = False  # a pending step is finished and dropped by the engine
        if len(self._seeds) != self.num_envs:
            raise InvalidArgumentError(
                f"{len(self._seeds)} seeds for num_envs={self.num_envs} envs"
            )
        # SB3 keeps seeds as a list (seed + i by default, but any list is
        # allowed), so hand the engine the list rather than one base seed.
        engine.seed([None if s is None else int(s) for s in self._seeds])
        engine.set_options([options or None for options in self._options])
        observations = engine.reset()
        self.reset_infos = engine.reset_infos
        self._reset_seeds()
        self._reset_options()
        return observations

    def step_async(self, actions: np.ndarray) -> None:
        """Start a step of every env.

        Parameters
        ----------
        actions : array-like, shape (num_envs, *action_space.shape)
            One action per env (an array, or a list of per-env actions). For
            Tuple and Dict action spaces, as in SB3, a sequence of num_envs
            per-env actions; a dict of batched arrays is taken as it is.
            Each env gets its action as given (see Notes); the caller may
            reuse ``actions`` as soon as this returns.

        Raises
        ------
        InvalidArgumentError
            Not num_envs actions; with ``check_actions=True`` also a wrong
            shape or dtype, or a value outside a Discrete/MultiDiscrete/
            MultiBinary space (nothing is sent).
        StateError
            A step is already pending, or a step failed and :meth:`reset`
            was not called since.
        """
        self._engine.step_async(actions)
        self.waiting = True

    def step_wait(self):
        """Wait for the step started by :meth:`step_async`.

        Returns
        -------
        observations : ndarray, or dict / tuple of ndarrays, each (num_envs, *shape)
            For an env whose episode ended: the first observation of the next
            episode (the last one is ``infos[i]["terminal_observation"]``).
        rewards : ndarray, shape (num_envs,), float64
        dones : ndarray, shape (num_envs,), bool
            ``terminated | truncated``.
        infos : list of num_envs dicts
            Each with ``"TimeLimit.truncated"`` (truncated and not
            terminated); ``"terminal_observation"`` where the episode ended,
            and with ``episode_statistics`` ``"episode"``.

        Raises
        ------
        StateError
            No :meth:`step_async` is pending.
        WorkerError
            An env raised (names the env; the worker's traceback is chained).
            Call :meth:`reset` before stepping again.
        WorkerDiedError, VecEnvTimeoutError
        """
        try:
            observations, rewards, terminated, truncated, infos = self._engine.step_wait_gym()
        finally:
            self.waiting = False
        for info, time_limit in zip(infos, (truncated & ~terminated).tolist()):
            info["TimeLimit.truncated"] = time_limit
        if self._t_start is not None:
            monitor_times(infos, self._t_start)
        self.reset_infos = self._engine.reset_infos
        return observations, rewards, terminated | truncated, infos

    def close(self) -> None:
        """Shut the workers down (each env's ``close()`` runs) and release the
        shared memory. Safe to call more than once."""
        self.waiting = False
        self._engine.close()

    # ------------------------------------------------------------ env access
    def get_attr(self, attr_name: str, indices=None) -> List[Any]:
        """Attribute ``attr_name`` of each env in ``indices`` (default all;
        negative indices count from the end), looked up through wrappers.

        Raises
        ------
        EnvAttributeError
            An env has no such attribute (also an ``AttributeError``).
        ResultNotPicklableError
            An env's value could not be sent back (names the env; also a
            ``TypeError``, never an ``AttributeError``).
        """
        return self._attribute_call(self._engine.get_attr, attr_name, indices=indices)

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        """Set ``attr_name`` to ``value`` on each env in ``indices`` (on the
        wrapper or env that has it, else on the outermost wrapper).

        Raises
        ------
        ArgumentNotPicklableError
            ``value`` does not pickle (names the envs; nothing was sent; also
            the ``TypeError`` SB3 raises).
        """
        self._attribute_call(self._engine.set_attr, attr_name, value, indices=indices)

    def env_method(
        self, method_name: str, *method_args, indices=None, **method_kwargs
    ) -> List[Any]:
        """Call ``method_name(*method_args, **method_kwargs)`` on each env in
        ``indices``; return the results in that order.

        Raises
        ------
        EnvAttributeError
            An env has no such method.
        WorkerError
            The method raised (names the env; the traceback is chained).
        ResultNotPicklableError
            Its result could not be sent back (names the env).
        """
        return self._attribute_call(
            self._engine.env_method, method_name, *method_args, indices=indices, **method_kwargs
        )

    def has_attr(self, attr_name: str) -> bool:
        """True if every env has ``attr_name`` (through wrappers); the value
        itself is not sent back, so unpicklable attributes count too."""
        try:
            return all(self._engine.env_method("has_wrapper_attr", attr_name))
        except WorkerError:  # not a gymnasium.Env: fall back on get_attr
            return super().has_attr(attr_name)

    def env_is_wrapped(self, wrapper_class, indices=None) -> List[bool]:
        """Whether each env in ``indices`` has a ``wrapper_class`` wrapper."""
        return self._engine.env_is_wrapped(wrapper_class, indices=indices)

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        """What each env's ``render()`` returned, ``None`` included (as SB3's
        ``SubprocVecEnv.get_images``).

        Returns ``[None] * num_envs`` with a warning unless the envs were
        made with ``render_mode="rgb_array"`` (as SB3 does). :meth:`render`
        (SB3's) tiles these frames into one image.

        Raises
        ------
        WorkerError
            An env's ``render()`` raised (names the env).
        ResultNotPicklableError
            A frame could not be sent back (names the env).
        """
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but get_images() needs "
                "render_mode='rgb_array' to obtain images",
                stacklevel=2,
            )
            return [None] * self.num_envs
        return self._engine.get_images()

    def render(self, mode: Optional[str] = None) -> Optional[np.ndarray]:
        """SB3's ``VecEnv.render``: with ``render_mode="rgb_array"`` the
        frames of every env tiled into one (H * rows, W * cols, 3) uint8
        image by SB3's ``tile_images``, once :func:`vecenv.base.check_frames`
        found one frame of one shape per env; every other case (warnings,
        ``"human"``) as SB3.

        Raises
        ------
        InvalidArgumentError
            An env's ``render()`` returned None, or frames of different
            shapes: names the envs (SB3 fails in NumPy there).
        """
        if self.render_mode == "rgb_array" and mode in (None, "rgb_array"):
            return sb3_tile_images(check_frames(self.get_images()))
        return super().render(mode)

    @staticmethod
    def _attribute_call(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except WorkerError as exc:
            # A value that did not pickle back is not a missing attribute,
            # whatever the pickling error's type (AttributeError for a lambda).
            if exc.exc_type != "builtins.AttributeError" or isinstance(
                exc, ResultNotPicklableError
            ):
                raise
            err = EnvAttributeError(
                exc.args[0],
                env_index=exc.env_index,
                exc_type=exc.exc_type,
                worker_traceback=exc.worker_traceback,
            )
            raise err from exc.__cause__

    # ------------------------------------------------------------ misc
    def __enter__(self) -> SubprocVecEnv:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        layout = self.layout
        where = "" if layout is None else f"layout={layout.summary(self.num_envs)!r}, "
        return f"vecenv.sb3.SubprocVecEnv(num_envs={self.num_envs}, {where}closed={self.closed})"
