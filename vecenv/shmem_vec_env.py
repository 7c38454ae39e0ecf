"""ShmemVecEnv: the shared-memory vectorized env (parent side).

This module is the state machine and the public verbs (``reset``,
``step_async`` / ``step_wait`` / ``step``, ``send`` / ``recv``, the calls,
``close``) with construction. The work is done by parts that the vec env
holds as members, each owning its state:

- ``_pool``: the workers, a :class:`vecenv._pool.WorkerPool` (processes, their
  start-up, pipes, deaths, restarts of one worker, shutdown) or, with
  ``num_workers=0``, a :class:`vecenv._inprocess.InprocPool` (the envs in
  this process) with the same interface;
- ``_collector``: a :class:`vecenv._collect.Collector`, the shared block as the
  parent sees it (buffers, the Control block, what is in flight, waits,
  results, the batch);
- ``_recovery``: a :class:`vecenv._collect.Recovery`, the fault policy (restart
  or raise, and the restart reports);
- ``_steps``: a :class:`vecenv._step.Steps`, the verbs' work, the compiled step
  or its one fallback, chosen in one place.

The path of one ``step(actions)``: the guard (IDLE, lockstep) and NEEDS_RESET
here; :meth:`Steps.step` picks the compiled step (no caller's wait limit, no
restart to report), which writes an exact action array into the shared rows,
dispatches every env's op and wakes each worker once (the Control block), waits
one slice (spin, then futex), collects and builds the batch; each worker's
compiled round steps its envs and writes their rows; the collector's Python
part adds the infos and errors that came through the pipes (only when an env
had any), terminal observations and restart reports; IDLE here.

Interrupts: every verb makes its state transition before the side effect
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

A worker's process: each worker sees the parent's ``os.environ`` as it was
when the worker was started (at construction, or at a restart), under every
start method; the working directory and ``sys.path`` are the parent's too.
Each worker reseeds the global generators (``random``, ``np.random``'s legacy
global ``RandomState``, and ``torch`` when imported) from fresh entropy when
it starts (before the factories run), so envs that draw from them do not
repeat each other's numbers (forked workers would otherwise all continue the
parent's stream). When a reset gives the worker's envs seeds (``seed()``, or
``reset(seed=...)`` in the façades), the worker reseeds them again from the
first of those seeds, just before those resets run: a seeded run draws the
same numbers again. The envs' own ``np_random`` is seeded by gymnasium from
the same seed, independently.
"""

from __future__ import annotations

import weakref
from multiprocessing import get_context
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from vecenv._calls import Calls, check_picklable
from vecenv._collect import Collector, Recovery
from vecenv._engine import EngineVecEnv, State
from vecenv._inprocess import InprocPool
from vecenv._options import ENGINE_OPTIONS, EngineOptions, check_env_fns
from vecenv._plan import plan_layout
from vecenv._pool import WorkerPool, _Resources, _shutdown, check_affinity
from vecenv._stats import Stats
from vecenv._step import Steps
from vecenv.base import Indices, check_batch_size
from vecenv.errors import (
    InvalidArgumentError,
    PendingTimeoutError,
    StateError,
    VecEnvTimeoutError,
)

# The states the step path sets, as globals (an Enum attribute costs about 0.1 us).
_IDLE, _NEEDS_RESET = State.IDLE, State.NEEDS_RESET
_STEP_PENDING, _RUNNING = State.STEP_PENDING, State.RUNNING


class ShmemVecEnv(EngineVecEnv):
    """Step ``num_envs`` gymnasium envs in worker processes over shared memory.

    OpenAI baselines' ``ShmemVecEnv`` API, what stable-baselines3 users expect
    (``seed``, ``env_method``, ``get_attr``, ``set_attr``), and EnvPool's
    partial batches (``send``/``recv``) when ``batch_size < num_envs``.

    Parameters
    ----------
    env_fns : sequence of callables
        One factory per env, returning a ``gymnasium.Env`` (or a legacy gym env
        with the ``legacy-gym`` extra); pickled with cloudpickle.
    spaces : (observation_space, action_space), optional
        The spaces every env must have; checked against the envs' own.
    num_workers, envs_per_worker : int (num_workers also "auto"), optional
        Worker layout (give one or neither); envs spread evenly, in order.
        Default: ``"auto"``, or with ``batch_size`` < num_envs one worker per
        usable core but one (at least one). ``"auto"``: time up to 0.1 s of steps of one env from
        ``env_fns[0]`` built here, then choose in-process, ``inline`` (neither
        with ``timeout``, ``cpu_affinity`` or ``on_worker_death="restart"``)
        or how many workers, and ``spin``: ``self.layout``, logged.
        ``num_workers=0``: no worker process; the same engine builds and
        steps the envs in the calling process (``in_process`` is then True),
        where ``step_async``, ``send`` and ``reset_async`` run them before
        they return. ``timeout`` and ``cpu_affinity`` are refused (nothing can
        stop or pin an env in the caller's thread); the process options have
        no effect; calls pass by reference, and reset seeds never reseed the
        global generators (they are the caller's).
    inline : bool
        True: the calling process steps the first of ``num_workers + 1``
        shares (default one per usable core) in each ``step``, or each
        ``send`` of a batch holding some of them, while the workers step
        the others. Refuses ``timeout`` and ``cpu_affinity`` as
        ``num_workers=0`` does; ``"auto"`` considers it in lockstep
        (docs/guides/layout.md). Default False.
    inline_envs : int, optional
        With ``inline=True``: the caller's share is envs ``[0, inline_envs)``
        (below num_envs; 0: none, as ``inline=False``), the workers (default
        one per usable core but one) share the rest; sized by
        :meth:`Stats.caller_share`.
    batch_size : int, optional
        Envs returned by :meth:`recv` (default num_envs: lockstep).
    context : str, optional
        multiprocessing start method: "fork", "spawn" or "forkserver" (the platform's default).
    copy : bool
        True (default): returned observations are arrays the caller owns. False:
        zero-copy views into shared memory, valid until the next ``step_async``,
        ``send``, ``reset`` or ``close``; copy to keep them.
        (:meth:`recv` then returns a gather buffer reused by the next ``recv``,
        or, when the batch's envs are consecutive, views of their shared rows
        in env order: no gather at all.) Rewards and done flags are always fresh arrays.
    timeout : float, optional
        Seconds to wait for a step, reset or call before raising
        :class:`~vecenv.errors.WatchdogTimeoutError` (default: no limit); the late
        workers are killed and :meth:`reset` starts them again. To wait less
        without killing anything, see :meth:`limit_waits`.
    start_timeout : float
        Seconds to wait for all workers to build their envs (default 60: enough
        for Atari ROMs, MuJoCo models or torch; a factory that never returns is
        reported, naming each worker, its factory, the start method and the
        likely fix). Past 10 s, progress is logged (logger ``"vecenv"``,
        WARNING) every 10 s.
    spin : float, optional
        Seconds a waiting process polls before sleeping on a futex. The poll
        yields the CPU (``sched_yield``), so it never starves a process on its
        core, and a polling core answers a wake in microseconds, not the tens
        of an idle halt in a VM. Default: 200e-6 up to two workers per usable
        core, else 0; and while the workers do not outnumber the cores, a
        worker polls through the caller's time between steps when that is
        under 1 ms (``venv.layout.follow``). The parent does not poll while as
        many workers as usable cores step (docs/internals.md has figures).
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
        multiprocessing's daemon flag of the workers (default True). Either way
        envs may start processes, which are theirs to stop in ``close()``; what
        they leave in their worker's process group dies with the worker.
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
        True (default): every env must have env 0's spaces and render_mode.
        False: only shapes and dtypes must agree (the gymnasium drop-in's).
    check_observations : bool
        False (default): an observation of another dtype is cast where
        NumPy's ``same_kind`` rule allows (float64 to float32; integers only
        when every value fits), as gymnasium and SB3 batch them. True: refused.
    episode_statistics : bool
        True: the workers keep each env's return, length and duration
        (seconds), and a step whose episode ended gives its info
        ``"episode": {"r": float, "l": int, "t": float}``. Default False.
    info_keys : collection of str, optional
        The keys of the envs' own step and reset infos to keep, in this
        order; the others are dropped in the worker, before anything is
        copied, pickled or sent (``()``: none, for loops that never read
        per-step infos). What vecenv adds stays: ``terminal_observation``,
        ``TimeLimit.truncated``, ``final_obs``, ``episode``, restart reports.
        Default None: every key. (SB3's ``Monitor`` names its kept keys
        ``info_keywords``.) Infos must be dicts with str keys either way:
        anything else is an :class:`~vecenv.errors.InfoError` naming the env.
    engine_options : EngineOptions, optional
        All of the options above as one :class:`~vecenv.EngineOptions`
        (then pass none of them as keywords). The options in use are the
        attribute ``engine_options``.

    Notes
    -----
    The workers' environment variables and global generators: see the
    module's docstring ("A worker's process").

    Raises
    ------
    InvalidArgumentError
        Bad arguments (before any process or shared memory exists), also
        ``timeout``/``cpu_affinity`` with ``num_workers=0``; envs of
        different ``render_mode`` (named; every process is stopped).
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
        num_workers: Union[int, str, None] = None,
        envs_per_worker: Optional[int] = None,
        inline: bool = False,
        inline_envs: Optional[int] = None,
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
        check_observations: bool = False,
        episode_statistics: bool = False,
        info_keys: Optional[Collection[str]] = None,
        engine_options: Optional[EngineOptions] = None,
        _fallback_for_testing: bool = False,
        _default_layout: str = "auto",
    ):
        # Every option checked in one place, as every front end checks them.
        keywords = EngineOptions(**{k: v for k, v in locals().items() if k in ENGINE_OPTIONS})
        if engine_options is not None:  # the same options, as keywords
            given = {"engine_options": engine_options, **keywords.changed()}
            opts = EngineOptions.from_kwargs(given, caller="ShmemVecEnv()").as_kwargs()
            opts.update(
                _fallback_for_testing=_fallback_for_testing, _default_layout=_default_layout
            )
            ShmemVecEnv.__init__(self, env_fns, spaces, **opts)
            return
        self.engine_options = keywords
        self._state = State.CLOSED  # until construction succeeds
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, _shutdown, self._resources)
        env_fns = check_env_fns(env_fns)
        num_envs = len(env_fns)
        batch_size = check_batch_size(batch_size, num_envs)
        if spaces is not None and (not isinstance(spaces, (tuple, list)) or len(spaces) != 2):
            raise InvalidArgumentError("spaces must be a pair (observation_space, action_space)")
        # After every other check: num_workers="auto" builds an env to time it.
        plan = plan_layout(
            env_fns,
            keywords,
            batch_size=batch_size,
            check_affinity=check_affinity,
            default=_default_layout,
        )
        #: The layout this vec env runs with (see :class:`vecenv._autolayout.Layout`).
        self.layout = plan.layout
        self.in_process = plan.in_process
        self.batch_size = int(batch_size)
        self.copy = bool(copy)
        self.timeout = timeout
        self.spin = float(plan.spin)
        self.autoreset_mode = autoreset_mode = keywords.autoreset_mode
        self.context = context
        self.on_worker_death = on_worker_death
        self.max_restarts = int(max_restarts)
        self.check_rewards = bool(check_rewards)
        self.check_actions = bool(check_actions)
        self.pickled_leaves = bool(pickled_leaves)
        self.check_spaces = bool(check_spaces)
        self.check_observations = bool(check_observations)
        self._seeds: List[Optional[int]] = [None] * num_envs
        self._options: Dict[int, Any] = {}
        self._wait_timeout: Optional[float] = None  # see EngineVecEnv.limit_waits
        self._ranges = plan.ranges
        pool = _make_pool(self._resources, env_fns, plan, self.engine_options, self.spin)
        self._pool = pool
        (obs_space, act_space), metadata = pool.start()
        self.metadata: Dict[str, Any] = metadata
        self._check_given_spaces(spaces, obs_space, act_space)
        super().__init__(num_envs, obs_space, act_space)
        try:
            parts = _wire_parts(
                self._resources,
                pool,
                (obs_space, act_space),
                self.engine_options,
                batch_size=self.batch_size,
                spin=self.spin,
                compiled=not _fallback_for_testing,
            )
        except BaseException:
            self.close()
            raise
        self._collector, self._recovery, self._steps, self._calls = parts
        self._state = State.NEEDS_RESET

    # ------------------------------------------------------------ what the parts hold
    @property
    def reset_infos(self) -> List[Dict[str, Any]]:
        """One dict per env: the info of its last reset (see :meth:`reset`)."""
        return self._collector.reset_infos

    @reset_infos.setter
    def reset_infos(self, infos: List[Dict[str, Any]]) -> None:
        self._collector.reset_infos = infos

    @property
    def restart_count(self) -> int:
        """Automatic restarts so far (``on_worker_death="restart"``)."""
        return self._recovery.restart_count

    def stats(self) -> Stats:
        """Where the time went: caller, step, workers; verdict (:class:`~vecenv.Stats`)."""
        return self._steps.stats()

    def allow_steps_before_reset(self) -> None:
        """Let the first step_async come before any reset (the envs then step
        from the state their factories left), as gymnasium's and SB3's vector
        envs do; the drop-ins call this right after construction."""
        idle = not self._collector.in_flight.any() and not self._pool.dead
        if self._state is State.NEEDS_RESET and idle:
            self._state = State.IDLE

    # ------------------------------------------------------------ reset
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
            Bad ``env_ids``, or reset options that do not pickle
            (:class:`~vecenv.errors.ArgumentNotPicklableError`, naming the envs).
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
        check_picklable("reset options", self._options, ids)  # before anything is sent
        entered = self._state
        self._state = State.NEEDS_RESET  # until the reset completes
        self._steps.start_reset(ids, entered is State.NEEDS_RESET, self._seeds, self._options)
        self._seeds = [None] * self.num_envs
        self._options = {}
        if self.batch_size < self.num_envs:
            self._state = State.RUNNING  # recv() collects the resets like steps
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
            :class:`~vecenv.errors.PendingTimeoutError` of a wait inside
            :meth:`limit_waits`, when the reset stays pending.
        """
        if self._state is not State.RESET_PENDING:
            self._guard("reset_wait", State.RESET_PENDING)
        self._state = State.NEEDS_RESET  # until the reset completes (see step_wait)
        try:
            obs = self._steps.finish_reset(self._wait_timeout)
        except PendingTimeoutError:
            self._state = State.RESET_PENDING
            raise
        self._state = State.IDLE
        return obs

    # ------------------------------------------------------------ lockstep steps
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
        if self._state is not _IDLE or self.batch_size != self.num_envs:
            self._check_step_async()
        self._state = _NEEDS_RESET  # before the dispatch: a Ctrl-C between is safe
        try:
            self._steps.start(actions)
        except BaseException:
            if self._steps.nothing_sent():
                self._state = _IDLE
            raise
        self._state = _STEP_PENDING

    def step(self, actions):
        """:meth:`step_async` then :meth:`step_wait`, without passing through
        STEP_PENDING: a Ctrl-C anywhere in it leaves NEEDS_RESET, from which
        :meth:`reset` recovers (see step_wait for what it returns and raises;
        inside :meth:`limit_waits` a wait that runs out leaves the step
        pending, for step_wait)."""
        if self._state is not _IDLE or self.batch_size != self.num_envs:
            self._check_step_async()
        self._state = _NEEDS_RESET  # before the dispatch: a Ctrl-C between is safe
        try:
            result = self._steps.step(actions, self._wait_timeout)
        except PendingTimeoutError:
            self._state = _STEP_PENDING
            raise
        except BaseException:
            if self._steps.nothing_sent():
                self._state = _IDLE
            raise
        self._state = _IDLE
        return result

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

        After any exception (Ctrl-C included) the vec env needs a reset(),
        except after the :class:`~vecenv.errors.PendingTimeoutError` of a wait
        inside :meth:`limit_waits`, when the step stays pending.
        """
        if self._state is not _STEP_PENDING:
            self._guard("step_wait", State.STEP_PENDING)
        self._state = _NEEDS_RESET  # until it completes: reset() then drains the envs in flight
        try:
            result = self._steps.finish(self._wait_timeout)
        except PendingTimeoutError:
            self._state = _STEP_PENDING
            raise
        self._state = _IDLE
        return result

    def step_wait_gym(self):
        """:meth:`step_wait` returning gymnasium's split flags:
        ``(observations, rewards, terminated, truncated, infos)``."""
        if self._state is not State.STEP_PENDING:
            self._guard("step_wait", State.STEP_PENDING)
        obs, rew, _, infos = self.step_wait()
        return obs, rew, self._collector.term.copy(), self._collector.trunc.copy(), infos

    # ------------------------------------------------------------ partial batches
    def send(self, actions, env_ids=None) -> None:
        """Start a step of the envs ``env_ids`` (EnvPool-style async API:
        ``envpool/core/async_envpool.h``).

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
        prev = self._state
        self._state = _NEEDS_RESET  # before the dispatch: a Ctrl-C between is safe
        try:
            self._steps.send(actions, env_ids)
        except BaseException:
            if self._steps.nothing_sent():
                self._state = prev
            raise
        self._state = _RUNNING

    def recv(self):
        """Collect the first ``batch_size`` envs that finished (FIFO order),
        so that a learner can act on some envs while the others still step.

        Returns
        -------
        observations : array, tuple or dict of arrays, each (batch_size, *shape)
            Rows for ``env_ids``: arrays the caller owns (one block copy when
            the envs are consecutive, as the whole envs of a worker are); with
            ``copy=False`` zero-copy views of their shared rows when the envs
            are consecutive (valid until they are sent again), else a buffer
            reused by the next recv. With batch_size == envs_per_worker each
            batch is one worker's envs, consecutive (a worker publishes the
            envs it was sent together, and the oldest come first).
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
        prev = self._state
        self._state = _NEEDS_RESET  # until this batch is collected (see step_wait)
        try:
            r = self._steps.recv(self._wait_timeout)
        except PendingTimeoutError:
            self._state = _RUNNING
            raise
        if r is None:
            self._state = prev
            pending = int(self._collector.in_flight.sum())
            raise StateError(
                f"recv() needs batch_size={self.batch_size} envs in flight but only {pending} "
                "are: send() actions for the env_ids of the last recv() first"
            )
        batch, left = r
        self._state = _RUNNING if left else _IDLE
        return batch

    # ------------------------------------------------------------ calls
    def _call_start(self, what: str, name: str, args, kwargs, indices: Indices):
        """Send a call to the envs ``indices`` (see :class:`vecenv._calls.Calls`);
        NEEDS_RESET while the frames are written (a Ctrl-C that cuts one
        leaves a state that needs the reset which restores the channel)."""
        self._guard(what, State.IDLE, State.NEEDS_RESET)
        ids = self._indices(indices)
        prev = self._state
        self._state = State.NEEDS_RESET  # until every frame is written
        try:
            pending = self._calls.start(what, name, args, kwargs, ids, prev is State.NEEDS_RESET)
        except BaseException:
            if self._calls.intact():
                self._state = prev
            raise
        self._state = prev
        return pending

    def _call_finish(self, pending) -> List[Any]:
        """Collect the replies of :meth:`_call_start`; NEEDS_RESET until every
        reply is read (a caller's wait limit that passes leaves it pending)."""
        self._calls.check(pending)
        prev = self._state
        self._state = State.NEEDS_RESET  # until every reply is read
        try:
            results = self._calls.finish(pending, self._wait_timeout)
        except VecEnvTimeoutError:
            if self._wait_timeout is not None:
                self._state = prev  # still pending: wait again
            raise
        self._state = prev
        errors = {i: v for i, (kind, v) in zip(pending["ids"], results) if kind != "ok"}
        if errors:
            raise self._pool.worker_error(errors[min(errors)])
        return [value for _, value in results]

    # ------------------------------------------------------------ close
    def _forget_views(self) -> None:
        """At close: drop the views of shared memory (before it is unmapped)."""
        for part in (getattr(self, "_steps", None), getattr(self, "_collector", None)):
            if part is not None:
                part.release()


def _wire_parts(
    resources: _Resources,
    pool: Union[WorkerPool, InprocPool],
    spaces: Tuple[Any, Any],
    options: EngineOptions,
    *,
    batch_size: int,
    spin: float,
    compiled: bool,
) -> Tuple[Collector, Recovery, Steps, Calls]:
    """The parts over a started ``pool``: the collector (which maps the
    shared block and attaches the workers), the fault policy, the steps and
    the calls, each handed what it reads."""
    collector = Collector(
        resources,
        pool,
        spaces[0],
        spaces[1],
        num_envs=len(pool.env_worker),
        batch_size=batch_size,
        copy=bool(options.copy),
        spin=spin,
        timeout=options.timeout,
        autoreset_mode=options.autoreset_mode,
        check_actions=bool(options.check_actions),
        pickled_leaves=bool(options.pickled_leaves),
        episode_statistics=bool(options.episode_statistics),
        compiled=compiled,
    )
    recovery = Recovery(
        pool,
        collector,
        spaces,
        on_worker_death=options.on_worker_death,
        max_restarts=int(options.max_restarts),
        autoreset_mode=options.autoreset_mode,
    )
    collector.bind_recovery(recovery)
    steps = Steps(collector, recovery, check_actions=bool(options.check_actions))
    return collector, recovery, steps, Calls(pool, collector, timeout=options.timeout)


def _make_pool(
    resources: _Resources, env_fns, plan: Any, options: EngineOptions, spin: float
) -> Union[WorkerPool, InprocPool]:
    """The pool that ``plan`` (the layout) asks for: the envs in this process
    (``num_workers=0``) or worker processes; neither is started yet."""
    kwargs: Dict[str, Any] = {
        "autoreset_mode": options.autoreset_mode,
        "check_rewards": bool(options.check_rewards),
        "check_spaces": bool(options.check_spaces),
        "check_observations": bool(options.check_observations),
        "info_keys": options.info_keys,
    }
    if plan.in_process:
        return InprocPool(resources, env_fns, **kwargs)
    return WorkerPool(
        resources,
        env_fns,
        plan.ranges,
        ctx=get_context(options.context),
        daemon=bool(options.daemon),
        start_timeout=float(options.start_timeout),
        timeout=options.timeout,
        cores=plan.cores,
        spin=spin,
        follow=plan.layout.follow,
        inline=plan.layout.inline,
        **kwargs,
    )


def make(
    env_id: Union[str, Callable[[], Any]],
    num_envs: int,
    *,
    vec_kwargs: Union[Dict[str, Any], EngineOptions, None] = None,
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
    vec_kwargs : dict or EngineOptions, optional
        Keyword arguments for ShmemVecEnv (``spaces`` and the engine options:
        num_workers, copy, timeout, ...; also accepted directly as keywords),
        or an :class:`~vecenv.EngineOptions`.
    wrappers : sequence of callables
        Applied to each env in order (``wrapper(env) -> env``).
    **kwargs
        Passed to ``gymnasium.make`` (only with a string ``env_id``).

    Raises
    ------
    InvalidArgumentError
        Bad ``num_envs``, bad engine options (checked before any env is
        built), or kwargs with a callable ``env_id``.
    """
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
        raise InvalidArgumentError(f"num_envs must be a positive int, got {num_envs!r}")
    if isinstance(vec_kwargs, EngineOptions):
        vec_kwargs = {"engine_options": vec_kwargs}
    vec_kwargs = dict(vec_kwargs or {})
    for key in list(kwargs):
        if key in _VEC_KEYS:
            vec_kwargs[key] = kwargs.pop(key)
    spaces = vec_kwargs.pop("spaces", None)
    options = EngineOptions.from_kwargs(vec_kwargs, caller="make(vec_kwargs=...)")
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

    return ShmemVecEnv([make_one] * int(num_envs), spaces, engine_options=options)


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
