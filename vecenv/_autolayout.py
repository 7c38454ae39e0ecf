"""``num_workers="auto"``: time one env briefly, then choose the layout (parent side).

Two parts, kept apart so the decision can be tested without timing anything:

* :func:`probe` builds one env from a factory in this process, resets it and
  steps it with pre-sampled actions for at most ``max_seconds`` (or
  ``max_steps`` steps), then closes it. The probe env is a separate object:
  the vec env's own envs are built later, in the workers, and their seeded
  trajectories do not depend on it (the actions come from a copy of the
  action space, so not even a space shared by the factory is advanced).
* :func:`choose_layout` is a pure function from the measured cost of one
  ``env.step`` (microseconds), the bytes of one observation, ``num_envs`` and
  the usable cores to a :class:`Layout`: how many workers (0: in the calling
  process, a candidate only where the caller allows it: ShmemVecEnv leaves it
  out when ``timeout``, ``cpu_affinity`` or ``on_worker_death="restart"``
  needs worker processes), envs per worker, and whether to spin.

The cost model predicts the microseconds of one lockstep batch for each
candidate and takes the cheapest. Its constants are the figures of
``DESIGN.md`` and of a sweep on the project's 2-core VM (2026-12-01; noop,
CartPole-v1, bigobs at 16 and 256 envs; 1-4 workers with and without
spinning, gymnasium's SyncVectorEnv as the in-process loop):

* parent, per batch: about 8 us of Python plus about 0.15 us per env
  (rewards, flags, the list of infos);
* worker, per env-step beyond ``env.step``: about 1 us (read the action,
  write the observation, reward and flags);
* waking the workers: about 2 us plus 1 us per further worker while every
  poller has a core of its own (parent + workers <= cores), about 13 us more
  when the parent shares a core with a worker;
* observations: about 1.3e-4 us per byte through the workers (the worker's
  write into shared memory and the parent's copy), 6.4e-5 us per byte in
  process (one copy);
* in-process: about 6 us per batch plus 0.85 us per env-step beyond
  ``env.step``.

Worker layouts always spin (``spin=200e-6``, ShmemVecEnv's own default up to
two workers per core): candidates never have more workers than cores, and the
poll yields the CPU (``sched_yield``), so it never starves a worker, while a
polling core answers a wake in microseconds where a halted one takes tens.
The sweep found no cell where sleeping won (noop x16, 2 workers: 483k
env-steps/s spinning, 217k sleeping; CartPole x16 165k / 119k; Pong x16,
whose batches last far longer than the window, 7.1k / 6.3k; bigobs x256 a
tie). Fewer workers than cores win only when the env is so cheap that a
second wake costs more than the halved work.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import time
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from vecenv.errors import InvalidArgumentError

_log = logging.getLogger("vecenv")

#: Seconds the probe may step the env (after its reset), and at most this many steps.
PROBE_SECONDS = 0.1
PROBE_STEPS = 5000

#: The spin window chosen when spinning pays (ShmemVecEnv's own default).
SPIN_S = 200e-6

# The cost model, in microseconds (see the module docstring for the sources).
PARENT_BATCH_US = 8.0  # parent's Python per batch step (workers)
PARENT_ENV_US = 0.15  # parent's work per env per batch step
WORKER_ENV_US = 1.0  # worker's work per env-step beyond env.step
WAKE_SPIN_US = 2.0  # waking one polling worker and seeing its answer
WAKE_SPIN_PER_WORKER_US = 1.0  # each further polling worker
SHARED_CORE_US = 13.0  # the parent polls on a core a worker needs
COPY_WORKERS_US_PER_BYTE = 1.3e-4  # worker write + parent copy of an observation
INPROC_BATCH_US = 6.0  # the in-process loop's cost per batch step
INPROC_ENV_US = 0.85  # ... and per env-step beyond env.step
COPY_INPROC_US_PER_BYTE = 6.4e-5


@dataclasses.dataclass(frozen=True)
class Layout:
    """The worker layout a :class:`~vecenv.ShmemVecEnv` runs with
    (``venv.layout``).

    Attributes
    ----------
    num_workers : int
        Worker processes; 0 means the envs step in the calling process.
    envs_per_worker : int
        Envs of the busiest worker (all envs when ``num_workers`` is 0).
    spin : float
        Seconds a waiting process polls before it sleeps (0: it sleeps at once).
    step_us : float or None
        Mean microseconds of one ``env.step`` (autoresets included) that the
        probe measured; None when the layout was not chosen by ``"auto"``.
    why : str
        How the layout was chosen, in words.
    predicted_batch_us : float or None
        The cost model's microseconds per lockstep batch for this layout
        ("auto" only).
    """

    num_workers: int
    envs_per_worker: int
    spin: float
    step_us: Optional[float] = None
    why: str = ""
    predicted_batch_us: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Probe:
    """What :func:`probe` measured.

    Attributes
    ----------
    step_us : float
        Mean microseconds per ``env.step``, the resets of episodes that ended
        during the burst included (timed in chunks of 8 steps; the slowest 2%
        of chunks, preemptions by other processes, are left out).
    reset_us : float
        Microseconds of the first ``env.reset``.
    steps : int
        Timed steps.
    elapsed_s : float
        Seconds of the whole probe after the env was built (reset, steps, close).
    obs_bytes : int
        Bytes of one observation (the sum over its array leaves).
    """

    step_us: float
    reset_us: float
    steps: int
    elapsed_s: float
    obs_bytes: int


def _nbytes(obs: Any) -> int:
    """Bytes of an observation: the sum over the arrays of a (nested) tuple/dict."""
    if isinstance(obs, dict):
        return sum(_nbytes(v) for v in obs.values())
    if isinstance(obs, (tuple, list)):
        return sum(_nbytes(v) for v in obs)
    try:
        return int(np.asarray(obs).nbytes)
    except Exception:  # an object without an array form (Text, Graph...)
        return 0


def _trimmed_mean(chunks: List[Tuple[float, int]]) -> float:
    """Seconds per step over the chunks, the slowest 2% of chunks left out
    (from 50 chunks on): a preemption of the prober by another process (a
    millisecond on a busy machine) would otherwise count as the env's cost,
    while an env's own slow steps (heavy tails, resets) are in far more
    chunks than that and stay in."""
    if len(chunks) >= 50:
        chunks = sorted(chunks)[: len(chunks) - len(chunks) // 50]
    seconds = sum(c[0] for c in chunks)
    steps = sum(c[1] for c in chunks)
    return seconds / max(steps, 1)


def probe(
    env_fn: Callable[[], Any],
    *,
    max_seconds: float = PROBE_SECONDS,
    max_steps: int = PROBE_STEPS,
    seed: int = 0,
) -> Probe:
    """Build one env with ``env_fn()`` in this process, time a reset and a
    short burst of steps with sampled actions, and close it.

    Parameters
    ----------
    env_fn : callable
        An env factory (as one of ShmemVecEnv's ``env_fns``).
    max_seconds : float
        Seconds of stepping at most (checked between steps; a single step is
        never cut short, so a probe lasts at least one step).
    max_steps : int
        Timed steps at most.
    seed : int
        Seeds the probe env's reset and its copy of the action space.

    Returns
    -------
    Probe

    Raises
    ------
    Exception
        Whatever ``env_fn`` or the env raised (the env is closed first).
    """
    env = env_fn()
    try:
        t0 = time.perf_counter()
        obs, _ = env.reset(seed=seed)
        reset_s = time.perf_counter() - t0
        space = copy.deepcopy(env.action_space)  # never advance a space the factory shares
        space.seed(seed)
        actions = [space.sample() for _ in range(64)]
        step, reset = env.step, env.reset
        steps = 0
        chunks: List[Tuple[float, int]] = []  # (seconds, steps) per chunk
        deadline = time.perf_counter() + max_seconds
        t = time.perf_counter()
        while steps < max_steps:
            # Chunks of up to 8 steps between clock reads: the clock is no
            # small part of a step that costs a fraction of a microsecond.
            n = min(8, max_steps - steps)
            for _ in range(n):
                _, _, terminated, truncated, _ = step(actions[steps & 63])
                steps += 1
                if terminated or truncated:
                    reset()
            t_end = time.perf_counter()
            chunks.append((t_end - t, n))
            t = t_end
            if t >= deadline:
                break
        step_s = _trimmed_mean(chunks)
    finally:
        env.close()
    return Probe(
        step_us=step_s * 1e6,
        reset_us=reset_s * 1e6,
        steps=steps,
        elapsed_s=time.perf_counter() - t0,
        obs_bytes=_nbytes(obs),
    )


def _workers_cost(step_us: float, obs_bytes: int, num_envs: int, cores: int, w: int):
    """(predicted us per batch, spin seconds) for ``w <= cores`` worker processes."""
    per_worker = math.ceil(num_envs / w)
    env_us = step_us + WORKER_ENV_US + COPY_WORKERS_US_PER_BYTE * obs_bytes
    busy_us = per_worker * env_us  # the busiest worker's share of a batch
    parent_us = PARENT_BATCH_US + PARENT_ENV_US * num_envs
    wake_us = WAKE_SPIN_US + WAKE_SPIN_PER_WORKER_US * (w - 1)
    if w + 1 > cores:  # the parent polls on a core that a worker needs
        wake_us += SHARED_CORE_US
    return parent_us + wake_us + busy_us, SPIN_S


def _inprocess_cost(step_us: float, obs_bytes: int, num_envs: int) -> float:
    env_us = step_us + INPROC_ENV_US + COPY_INPROC_US_PER_BYTE * obs_bytes
    return INPROC_BATCH_US + num_envs * env_us


def choose_layout(
    step_us: float,
    obs_bytes: int,
    num_envs: int,
    cores: int,
    *,
    inprocess: bool = False,
) -> Layout:
    """The layout with the least predicted time per lockstep batch.

    Parameters
    ----------
    step_us : float
        Mean microseconds of one ``env.step`` (>= 0), as :func:`probe` measures.
    obs_bytes : int
        Bytes of one observation (>= 0).
    num_envs : int
        Envs of the vec env (>= 1).
    cores : int
        Usable CPU cores (``len(os.sched_getaffinity(0))``, >= 1).
    inprocess : bool
        Whether stepping in the calling process (``num_workers=0``) is
        available; when False only worker layouts are candidates.

    Returns
    -------
    Layout
        ``num_workers`` in ``[0, min(num_envs, cores)]`` (0 only with
        ``inprocess``), ``envs_per_worker = ceil(num_envs / num_workers)``,
        ``spin`` 0 or :data:`SPIN_S`, the step cost, the prediction and a
        sentence saying why (the runner-up's prediction included).

    Raises
    ------
    ValueError
        A negative cost or size, ``num_envs`` or ``cores`` below 1.
    """
    if not step_us >= 0 or obs_bytes < 0 or num_envs < 1 or cores < 1:
        raise ValueError(
            f"choose_layout needs step_us >= 0, obs_bytes >= 0, num_envs >= 1 and cores >= 1; "
            f"got {step_us}, {obs_bytes}, {num_envs}, {cores}"
        )
    # (predicted us, num_workers, spin); fewer workers first, so a tie keeps fewer.
    cands: List[Tuple[float, int, float]] = []
    if inprocess:
        cands.append((_inprocess_cost(step_us, obs_bytes, num_envs), 0, 0.0))
    for w in range(1, min(num_envs, cores) + 1):
        cost, spin = _workers_cost(step_us, obs_bytes, num_envs, cores, w)
        cands.append((cost, w, spin))
    ranked = sorted(cands, key=lambda c: c[0])
    cost, w, spin = ranked[0]
    per = num_envs if w == 0 else math.ceil(num_envs / w)

    def name(w_: int, spin_: float) -> str:
        if w_ == 0:
            return "in-process"
        per_ = math.ceil(num_envs / w_)
        return f"{w_} worker{'s' if w_ > 1 else ''} of {per_} env{'s' if per_ > 1 else ''}" + (
            ", spinning" if spin_ else ", sleeping"
        )

    why = (
        f"env.step {step_us:.1f} us, observation {obs_bytes} bytes, {num_envs} envs, "
        f"{cores} usable cores: {name(w, spin)}, predicted {cost:.0f} us per batch"
    )
    if len(ranked) > 1:
        c2, w2, s2 = ranked[1]
        why += f" (next best: {name(w2, s2)}, {c2:.0f} us)"
    if not inprocess:
        why += "; in-process (num_workers=0) not a candidate"
    return Layout(
        num_workers=w,
        envs_per_worker=per,
        spin=spin,
        step_us=float(step_us),
        why=why,
        predicted_batch_us=float(cost),
    )


def auto_layout(
    env_fn: Callable[[], Any],
    num_envs: int,
    cores: int,
    *,
    inprocess: bool = False,
    max_seconds: float = PROBE_SECONDS,
) -> Layout:
    """:func:`probe` ``env_fn``, then :func:`choose_layout`; logged (logger
    ``"vecenv"``, INFO). A probe that fails (the factory or the env raised)
    falls back to one worker per usable core, spinning, and logs a WARNING:
    the workers build the envs next and report such an error with the env's
    index."""
    try:
        p = probe(env_fn, max_seconds=max_seconds)
    except Exception as exc:
        w = min(num_envs, cores)
        layout = Layout(
            num_workers=w,
            envs_per_worker=math.ceil(num_envs / w),
            spin=SPIN_S,
            why=f"the probe of env_fns[0] failed ({type(exc).__name__}: {exc}): "
            "one worker per usable core",
        )
        _log.warning("num_workers='auto': %s", layout.why)
        return layout
    layout = choose_layout(p.step_us, p.obs_bytes, num_envs, cores, inprocess=inprocess)
    _log.info(
        "num_workers='auto': %s (probe: %d steps in %.3f s)", layout.why, p.steps, p.elapsed_s
    )
    return layout


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where a ShmemVecEnv's envs run: what :func:`plan_layout` decided."""

    in_process: bool  # no worker process: the envs step in the calling process
    ranges: List[Tuple[int, int]]  # each worker's [lo, hi) envs (one range in process)
    spin: float  # seconds the waits poll before sleeping
    cores: Any  # each worker's cores (cpu_affinity), or None
    layout: Layout  # what ``venv.layout`` reports


def plan_layout(
    env_fns: List[Callable[[], Any]],
    *,
    num_workers: Any,
    envs_per_worker: Optional[int],
    spin: Optional[float],
    timeout: Optional[float],
    cpu_affinity: Any,
    on_worker_death: str,
    check_affinity: Callable[[Any, int], Any],
) -> Plan:
    """Resolve ShmemVecEnv's layout options into a :class:`Plan`.

    ``num_workers=0`` runs in process, ``"auto"`` probes ``env_fns[0]``
    (:func:`auto_layout`; call this after every other argument check, since
    the probe builds an env), anything else goes to the worker plan
    (:func:`vecenv._pool.plan_workers`). ``spin=None`` becomes 200 us up to
    two workers per usable core, else 0 (0 in process: nothing waits).

    Raises
    ------
    InvalidArgumentError
        A bad ``num_workers``, ``envs_per_worker`` or ``cpu_affinity``, or an
        option the in-process engine cannot honour.
    """
    from vecenv import _inprocess
    from vecenv._options import check_auto_workers, in_process
    from vecenv._pool import _usable_cpus, plan_workers

    num_envs = len(env_fns)
    auto = check_auto_workers(num_workers, envs_per_worker)
    chosen = "default" if num_workers is None and envs_per_worker is None else "given"
    inproc = in_process(num_workers, envs_per_worker)
    if inproc:  # the envs step in this process, as one worker's
        _inprocess.check_options(timeout=timeout, cpu_affinity=cpu_affinity)
        ranges = [(0, num_envs)]
    else:
        given = None if isinstance(num_workers, str) else num_workers
        ranges = plan_workers(num_envs, given, envs_per_worker)
    cpus = _usable_cpus()
    if auto:
        check_affinity(cpu_affinity, 1)
        try:
            _inprocess.check_options(timeout=timeout, cpu_affinity=cpu_affinity)
            allowed = on_worker_death != "restart"
        except InvalidArgumentError:  # an option only worker processes honour
            allowed = False
        layout = auto_layout(env_fns[0], num_envs, cpus, inprocess=allowed)
        if layout.num_workers == 0:
            inproc, ranges = True, [(0, num_envs)]
        else:
            ranges = plan_workers(num_envs, layout.num_workers, None)
            spin = layout.spin if spin is None else spin
    workers = len(ranges)
    if spin is None:
        spin = 200e-6 if workers <= 2 * cpus else 0.0
    if inproc:
        spin = 0.0  # nothing waits: every dispatch runs its round at once
    cores = check_affinity(cpu_affinity, workers)
    if not auto:
        layout = Layout(workers, 0, float(spin), why=f"the {chosen} layout")
    layout = dataclasses.replace(
        layout,
        num_workers=0 if inproc else workers,
        envs_per_worker=max(hi - lo for lo, hi in ranges),
        spin=float(spin),
    )
    return Plan(inproc, ranges, float(spin), cores, layout)
