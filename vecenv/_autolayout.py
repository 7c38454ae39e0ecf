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
candidate and takes the cheapest. Its constants come from sweeps on the
project's 2-core VM: first 2026-12-01 (with the compiled worker round and
the compiled parent step; noop, bigobs, CartPole-v1, HalfCheetah-v5,
heavytail at 2 and 16 envs; in process, 1, 2, 4 and 16 workers, gymnasium's
SyncVectorEnv; the VM loaded by other sessions, so ratios measured
alternately in one run), then refitted on 2026-12-05 to the benchmark suite's
28 cells (``benchmarks/run.py --contenders
vecenv,vecenv_best,vecenv_auto,vecenv_inprocess,gym_sync``: in process, 1
and 2 workers measured in every cell, the VM otherwise idle):

* parent, per batch: about 2.5 us (the compiled step) plus 0.05 us per env,
  plus 4e-5 us per observation byte (its copy out of shared memory);
* worker, per env-step beyond ``env.step``: about 0.1 us (the compiled
  round) plus 1e-4 us per observation byte (its write into shared memory);
* a step of one env among many: 1.12 times the probe's (one env, hot in
  the caches; in process, CartPole-v1 x64 ran 7.8 us per env-step where
  the probe measured 6.9, ALE/Pong-v5 x16 288 against 244);
* waking the workers: about 4 us plus 1 us per further worker, up to 22 us
  more when the parent shares a core with a worker, in proportion to the
  env's step up to 2 us (the measured excess over the rest of the model,
  2 workers on 2 cores, four suite runs: 4 to 30 us per batch for
  CartPole-v1 at 4 to 16 envs, whose steps take about 7 us, varying from
  run to run; 0 to 5 us for noop, 0.4 us a step, at 2 to 64 envs, which is
  why 2 workers ran noop x64 at 0.99 to 1.08 times in process), 5 us per
  worker beyond the cores (a context switch), 40 us per worker and busy
  core (below);
* in-process: about 4 us per batch (the engine's Python parent path) plus
  0.1 us per env-step beyond ``env.step`` and 6.4e-5 us per observation byte;
* infos, through workers (only those that are not all numbers: an info of
  numbers travels in the block's info rows, vecenv._infos, at no cost the
  model counts): pickling and unpickling each non-empty one, at
  half the round trip the probe times on one info alone (a worker pickles
  its round's infos as one list: HalfCheetah-v5's info of four NumPy
  scalars took 6.8 us a round trip in a list of 8, 15.2 alone), the
  worker's dumps and the parent's loads; plus 40 us per worker whose round
  has any (its message, received and unpickled: fitted to HalfCheetah-v5
  at 2 to 16 envs, 2 workers, in six suite runs, where 12 us chose in
  process at 16 envs, 0.85 of 2 workers, in one). In process, infos stay
  by reference: 1 us a batch.

The busiest worker's share of a batch is its envs' wall time, but no less
than the CPU time of all envs spread over the cores. The probe measures the
CPU fraction of its steps (process CPU seconds per wall second): an env
that waits (sleeps, I/O, or busy-waits on the wall clock while other
processes hold the CPU) is offered up to ``1 / fraction`` workers per core
(at most 4), whose waits overlap; an env that computes gets one per core.
Other runnable tasks (``/proc/loadavg``, sampled during the probe) count as
far as they took the CPU from the probe: the workers get their fair share of
the cores next to them, and each wake waits for a turn.

Worker layouts spin (``spin=200e-6``) up to two workers per core, as
ShmemVecEnv's own default does, and sleep beyond; the poll yields the CPU
(``sched_yield``), so it never starves a worker, while a polling core answers
a wake in microseconds where a halted one takes tens. An earlier sweep found
no cell with at most one worker per core where sleeping won (noop x16, 2
workers: 483k env-steps/s spinning, 217k sleeping; CartPole x16 165k / 119k;
Pong x16 7.1k / 6.3k; bigobs x256 a tie).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import pickle
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from vecenv._channel import encode
from vecenv._infos import fits_row

_log = logging.getLogger("vecenv")

#: Seconds the probe may step the env (after its reset), and at most this many steps.
PROBE_SECONDS = 0.1
PROBE_STEPS = 5000
#: Seconds between the probe's samples of the runnable tasks.
LOAD_SAMPLE_S = 0.005
#: Non-empty infos the probe keeps to time their pickling.
PROBE_INFOS = 16

#: The spin window chosen when spinning pays (ShmemVecEnv's own default).
SPIN_S = 200e-6
#: The longest caller's time between steps (a policy's forward pass) that a
#: waiting worker polls through (Layout.follow). In CleanRL's PPO rollout loop
#: on the 2-core VM (benchmarks/rollout.py, 2026-12-05) a policy of about
#: 200 us outlasted the 200 us poll; one worker polling 1 ms gave 58k
#: env-steps/s on CartPole x16 against 48k, and two workers 123k against
#: 90k on CartPole x64.
FOLLOW_S = 1e-3

# The cost model, in microseconds (see the module docstring for the sources).
PARENT_BATCH_US = 2.5  # parent's compiled step per batch (workers)
PARENT_ENV_US = 0.05  # parent's work per env per batch step
WORKER_ENV_US = 0.1  # worker's compiled round per env-step beyond env.step
WAKE_SPIN_US = 4.0  # waking one polling worker and seeing its answer
WAKE_SPIN_PER_WORKER_US = 1.0  # each further polling worker
INLINE_WAKE_US = 2.0  # inline=True: a polling worker starts after the dispatch (the rest overlaps)
SHARED_CORE_US = 22.0  # the parent polls on a core a worker needs, for envs whose
SHARED_CORE_STEP_US = 2.0  # ... step takes this long or more (shorter: in proportion)
OVERSUBSCRIBED_US = 5.0  # a context switch per worker beyond the cores
COPY_WORKER_US_PER_BYTE = 1.0e-4  # a worker's write of an observation
COPY_PARENT_US_PER_BYTE = 4.0e-5  # the parent's copy of one, for every env
INPROC_BATCH_US = 4.0  # the in-process loop's cost per batch step
INPROC_ENV_US = 0.1  # ... and per env-step beyond env.step
COPY_INPROC_US_PER_BYTE = 6.4e-5
# ... times this beyond this many bytes of observations a batch (in process,
# bigobs of 28 KB on the 2-core Intel VM, 2026-12-06: 2.4 us an env at 8
# envs, 5.8 at 64, where the batch outgrows the core's cache).
LARGE_BATCH_BYTES = 1 << 20
LARGE_BATCH_FACTOR = 2.9
STEP_SCALE = 1.12  # a step of one env among many, per step of the probe's one hot env
INFO_MSG_US = 40.0  # a worker's round message of infos: its send, the parent's receipt
# ... with inline=True, whose worker sends it while the caller steps its own
# share (HalfCheetah-v5 x2 to x16 on the 2-core VM, 2026-12-06: 11 to 33 us a
# batch below the model with 40; x2 ran 67 us a batch against 86 predicted,
# where in process ran 72 against 71).
INLINE_INFO_MSG_US = 15.0
INFO_BATCH_SHARE = 0.5  # an info pickled in its worker's round, per one pickled alone
INFO_MSG_INPROC_US = 1.0  # ... in process (kept, not sent)
INFO_DUMPS_SHARE = 0.75  # of an info's pickle round trip, the dumps (the worker's part)
CONTENDED_WAKE_US = 40.0  # per worker and busy core: a woken worker waits for its turn
MAX_OVERSUBSCRIPTION = 4  # workers at most this many times the cores
MIN_CPU_FRACTION = 0.05  # a probe's CPU fraction counted at least


@dataclasses.dataclass(frozen=True)
class Layout:
    """The worker layout a :class:`~vecenv.ShmemVecEnv` runs with
    (``venv.layout``).

    Attributes
    ----------
    num_workers : int
        Worker processes; 0 means the envs step in the calling process.
    envs_per_worker : int
        Envs of the busiest worker (all envs when ``num_workers`` is 0; with
        ``inline=True`` the caller's share counts, unless ``inline_envs`` sized it).
    spin : float
        Seconds a waiting process polls before it sleeps (0: it sleeps at once).
    inline : bool
        The calling process steps the first share of envs (``inline=True``):
        ``num_workers`` worker processes step the other shares.
    inline_envs : int or None
        The caller's share when ``inline_envs`` sized it (envs ``[0, k)``), else None.
    follow : float
        Seconds up to which a waiting worker's poll follows the caller's time
        between two steps (the policy's): 1.5 times its recent mean, when
        that is under ``follow`` (0: off). On by default (:data:`FOLLOW_S`)
        while ``spin`` was not given and the workers do not outnumber the
        usable cores.
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
    follow: float = 0.0
    inline: bool = False
    inline_envs: Optional[int] = None

    def summary(self, num_envs: int) -> str:
        """Where the ``num_envs`` envs step, in a few words (the reprs' and
        the CLI's): ``"in process"``, ``"2 workers x 8 envs"``, or ``"the
        caller 4 + 1 worker x 4 envs"``."""
        if self.num_workers == 0:
            return "in process"
        w = self.num_workers
        workers = f"{w} worker{'s' if w != 1 else ''}"
        if not self.inline:
            return f"{workers} x {self.envs_per_worker} envs"
        # Balanced shares (vecenv._pool.plan_workers): the caller's, the first, is the largest.
        caller = self.envs_per_worker if self.inline_envs is None else self.inline_envs
        per = math.ceil((num_envs - caller) / w)
        return f"the caller {caller} + {workers} x {per} envs"


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
    cpu_fraction : float
        CPU seconds of this process per wall second over the same chunks, in
        ``[0, 1]``: below 1 when a step waits (sleep, I/O, a GIL-free call in
        another process) or when other processes took the CPU from the probe.
    info_fraction : float
        Fraction of the timed steps whose info goes pickled: not empty, and
        not all numbers (those travel in the block's info rows,
        :mod:`vecenv._infos`), as the first :data:`PROBE_INFOS` non-empty
        ones say.
    info_us : float
        Median microseconds to pickle and unpickle one such info (a worker
        sends its round's infos pickled; the in-process engine keeps them by
        reference), timed after the steps on up to :data:`PROBE_INFOS` of them; 0
        when none was seen or one cannot be pickled.
    busy_cores : float
        Mean number of other runnable tasks while the probe ran (the
        kernel's count of runnable tasks in ``/proc/loadavg``, sampled about
        every :data:`LOAD_SAMPLE_S`, less the prober itself); 0 where that
        file does not exist.
    """

    step_us: float
    reset_us: float
    steps: int
    elapsed_s: float
    obs_bytes: int
    cpu_fraction: float = 1.0
    info_fraction: float = 0.0
    info_us: float = 0.0
    busy_cores: float = 0.0


def default_spin(num_workers: int, cores: int) -> float:
    """ShmemVecEnv's ``spin=None``: poll SPIN_S seconds while there are at most
    two workers per usable core, else sleep at once (0)."""
    return SPIN_S if num_workers <= 2 * cores else 0.0


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


def _kept(chunks: List[Tuple[float, int, float]]) -> List[Tuple[float, int, float]]:
    """The chunks ``(wall seconds, steps, CPU seconds)`` less the slowest 2%
    (from 50 chunks on): a preemption of the prober by another process (a
    millisecond on a busy machine) would otherwise count as the env's cost,
    while an env's own slow steps (heavy tails, resets) are in far more
    chunks than that and stay in."""
    if len(chunks) >= 50:
        return sorted(chunks)[: len(chunks) - len(chunks) // 50]
    return chunks


def _trimmed_mean(chunks: List[Tuple[float, int, float]]) -> float:
    """Wall seconds per step over the :func:`_kept` chunks."""
    kept = _kept(chunks)
    return sum(c[0] for c in kept) / max(sum(c[1] for c in kept), 1)


def _cpu_fraction(chunks: List[Tuple[float, int, float]]) -> float:
    """CPU seconds per wall second over the :func:`_kept` chunks, in [0, 1]."""
    kept = _kept(chunks)
    wall = sum(c[0] for c in kept)
    return min(1.0, max(0.0, sum(c[2] for c in kept) / wall)) if wall > 0 else 1.0


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
        chunks: List[Tuple[float, int, float]] = []  # (seconds, steps, CPU seconds)
        infos: List[Any] = []  # up to PROBE_INFOS non-empty infos, timed after the steps
        with_info = 0
        deadline = time.perf_counter() + max_seconds
        load: List[int] = []  # runnable tasks, the prober included
        next_sample = 0.0
        cpu = time.process_time()
        t = time.perf_counter()
        while steps < max_steps:
            # Chunks of up to 8 steps between clock reads: the clock is no
            # small part of a step that costs a fraction of a microsecond.
            n = min(8, max_steps - steps)
            for _ in range(n):
                _, _, terminated, truncated, info = step(actions[steps & 63])
                steps += 1
                if info:
                    with_info += 1
                    if len(infos) < PROBE_INFOS:
                        infos.append(info)
                if terminated or truncated:
                    reset()
            t_end = time.perf_counter()
            cpu_end = time.process_time()
            chunks.append((t_end - t, n, cpu_end - cpu))
            if t_end >= next_sample:  # outside the timed chunks
                n_run = _runnable()
                if n_run is not None:
                    load.append(n_run)
                next_sample = time.perf_counter() + LOAD_SAMPLE_S
                t_end = time.perf_counter()
                cpu_end = time.process_time()
            t, cpu = t_end, cpu_end
            if t >= deadline:
                break
        step_s = _trimmed_mean(chunks)
        cpu_fraction = _cpu_fraction(chunks)
        # Only infos that are not all numbers are pickled (vecenv._infos.InfoRows).
        pickled = [info for info in infos if not fits_row(info)]
        pickled_share = len(pickled) / len(infos) if infos else 0.0
        info_us = _pickle_us(pickled)
    finally:
        env.close()
    return Probe(
        step_us=step_s * 1e6,
        reset_us=reset_s * 1e6,
        steps=steps,
        elapsed_s=time.perf_counter() - t0,
        obs_bytes=_nbytes(obs),
        cpu_fraction=cpu_fraction,
        info_fraction=with_info / max(steps, 1) * pickled_share,
        info_us=info_us,
        busy_cores=max(0.0, float(np.mean(load)) - 1.0) if load else 0.0,
    )


def _runnable() -> Optional[int]:
    """Runnable tasks on the machine now (``/proc/loadavg``'s fourth field,
    ``running/total``), or None where it cannot be read."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _pickle_us(infos: List[Any]) -> float:
    """Median microseconds of ``pickle.loads(encode(info))`` (a worker's
    pickling, :func:`vecenv._channel.encode`, and the parent's) over
    ``infos`` (0 for none, or when one cannot be pickled: the engine then
    reports it as the env's error, whatever the layout)."""
    times = []
    try:
        for info in infos:
            t = time.perf_counter()
            pickle.loads(encode(info))
            times.append(time.perf_counter() - t)
    except Exception:
        return 0.0
    return float(np.median(times)) * 1e6 if times else 0.0


def _max_workers(num_envs: int, cores: int, cpu_fraction: float) -> int:
    """Most workers worth a candidate: one per core for an env that keeps
    the CPU busy; for one that waits (CPU fraction f < 1), up to ``1 / f``
    per core (at most :data:`MAX_OVERSUBSCRIPTION` per core): its waits
    overlap across processes, its CPU work still shares the cores."""
    f = max(cpu_fraction, MIN_CPU_FRACTION)
    per_core = min(MAX_OVERSUBSCRIPTION, max(1, math.floor(1.0 / f + 1e-9)))
    return min(num_envs, cores * per_core)


def candidate_workers(num_envs: int, cores: int, cpu_fraction: float = 1.0) -> range:
    """The worker counts :func:`choose_layout` ranks (in-process aside): 1 to
    :func:`_max_workers`, i.e. up to one per core for an env that computes
    (``cpu_fraction`` 1), up to :data:`MAX_OVERSUBSCRIPTION` per core for one
    that waits (``cpu_fraction`` at most ``1 / MAX_OVERSUBSCRIPTION``, 0
    included), never more than ``num_envs``."""
    return range(1, _max_workers(num_envs, cores, cpu_fraction) + 1)


def workers_to_time(num_envs: int, cores: int, cpu_fraction: float = 1.0) -> List[int]:
    """A few of the :func:`candidate_workers` to measure instead of predict:
    1, the powers of two, one fewer than the cores, one per core, and the
    most the model considers. The one rule by which ``vecenv.bench`` and the
    benchmark suite (``vecenv_best``, the multi-agent cells) pick the worker
    layouts they time.

    Parameters
    ----------
    num_envs : int
        Envs of the vec env (>= 1).
    cores : int
        Usable CPU cores (:func:`vecenv._cpus.usable_cpus`, >= 1).
    cpu_fraction : float
        As :func:`choose_layout` takes it, in ``[0, 1]``: 1 (the default) for
        the layouts of an env that computes, 0 for those the model considers
        for any env.

    Returns
    -------
    list of int
        Sorted, distinct, each in ``[1, min(num_envs, MAX_OVERSUBSCRIPTION * cores)]``.

    Raises
    ------
    ValueError
        ``num_envs`` or ``cores`` below 1, or ``cpu_fraction`` outside ``[0, 1]``.
    """
    if num_envs < 1 or cores < 1 or not 0.0 <= cpu_fraction <= 1.0:
        raise ValueError(
            f"workers_to_time needs num_envs >= 1, cores >= 1 and cpu_fraction in [0, 1]; "
            f"got {num_envs}, {cores}, {cpu_fraction}"
        )
    top = candidate_workers(num_envs, cores, cpu_fraction)[-1]
    picks = {1, cores - 1, cores, top}
    w = 2
    while w < top:
        picks.add(w)
        w *= 2
    return sorted(w for w in picks if 1 <= w <= top)


def _share(n: int, cores: int, busy_cores: float) -> float:
    """Cores that ``n`` busy processes of ours get next to ``busy_cores``
    other runnable tasks: one each while there are enough, else their fair
    share."""
    if n + busy_cores <= cores:
        return float(n)
    return cores * n / (n + busy_cores)


def _worker_overhead_us(obs_bytes: int, info_fraction: float, info_us: float) -> float:
    """A worker's microseconds per env-step beyond ``env.step``: its
    compiled round, the observation's write into the block, and its share
    of pickling the infos (a round's as one list)."""
    overhead_us = WORKER_ENV_US + COPY_WORKER_US_PER_BYTE * obs_bytes
    return overhead_us + info_fraction * INFO_DUMPS_SHARE * INFO_BATCH_SHARE * info_us


def _parent_us(
    num_envs: int,
    obs_bytes: int,
    w: int,
    per_worker: int,
    pickled_envs: int,
    info_fraction: float,
    info_us: float,
    msg_us: float,
) -> float:
    """The parent's microseconds of a batch: its compiled step and the copy
    of every env's observation out of the block; with infos, ``msg_us`` for
    each of ``w`` workers (``per_worker`` envs each) whose round has any, and
    the loads of the infos of ``pickled_envs`` envs."""
    parent_us = PARENT_BATCH_US + num_envs * (PARENT_ENV_US + COPY_PARENT_US_PER_BYTE * obs_bytes)
    if info_fraction > 0:
        any_info = 1.0 - (1.0 - info_fraction) ** per_worker  # a worker's round has an info
        parent_us += w * any_info * msg_us
        parent_us += (
            pickled_envs * info_fraction * (1.0 - INFO_DUMPS_SHARE) * INFO_BATCH_SHARE * info_us
        )
    return parent_us


def _workers_cost(
    step_us: float,
    obs_bytes: int,
    num_envs: int,
    cores: int,
    w: int,
    cpu_fraction: float,
    info_fraction: float = 0.0,
    info_us: float = 0.0,
    busy_cores: float = 0.0,
) -> Tuple[float, float]:
    """(predicted us per batch, spin seconds) for ``w`` worker processes.

    The busiest worker's share of a batch takes its envs' wall time, and no
    less than all envs' CPU time spread over the cores (which binds only with
    more workers than cores, or than the cores that ``busy_cores`` other
    runnable tasks leave: the kernel shares the cores fairly among all
    runnable tasks). Infos: the worker pickles its envs', the
    parent receives one message from each worker that has any and unpickles
    them."""
    per_worker = math.ceil(num_envs / w)
    overhead_us = _worker_overhead_us(obs_bytes, info_fraction, info_us)
    wall_us = per_worker * (step_us + overhead_us)
    cpu_us = num_envs * (step_us * cpu_fraction + overhead_us) / _share(w, cores, busy_cores)
    busy_us = max(wall_us, cpu_us)
    parent_us = _parent_us(
        num_envs, obs_bytes, w, per_worker, num_envs, info_fraction, info_us, INFO_MSG_US
    )
    wake_us = WAKE_SPIN_US + WAKE_SPIN_PER_WORKER_US * (w - 1)
    if w + 1 + round(busy_cores) > cores:  # the parent polls on a core that a worker needs
        wake_us += SHARED_CORE_US * min(1.0, step_us / SHARED_CORE_STEP_US)
    wake_us += OVERSUBSCRIBED_US * max(0, w - cores)
    wake_us += CONTENDED_WAKE_US * busy_cores * w
    return parent_us + wake_us + busy_us, default_spin(w, cores)


def _inline_cost(
    step_us: float,
    obs_bytes: int,
    num_envs: int,
    cores: int,
    w: int,
    cpu_fraction: float,
    info_fraction: float = 0.0,
    info_us: float = 0.0,
    busy_cores: float = 0.0,
) -> Tuple[float, float]:
    """(predicted us per batch, spin seconds) for ``inline=True`` with ``w``
    worker processes: ``w + 1`` shares; the caller steps its own at the
    in-process engine's cost (infos by reference) while the workers, woken
    first, step theirs, so the wake overlaps the caller's share. No parent
    polls on a worker's core while the caller and the workers fit on the
    cores."""
    per = math.ceil(num_envs / (w + 1))
    rest = num_envs - per
    own_us = per * (step_us + INPROC_ENV_US + COPY_INPROC_US_PER_BYTE * obs_bytes)
    overhead_us = _worker_overhead_us(obs_bytes, info_fraction, info_us)
    wake_us = INLINE_WAKE_US + WAKE_SPIN_PER_WORKER_US * (w - 1)
    wake_us += CONTENDED_WAKE_US * busy_cores * w + OVERSUBSCRIBED_US * max(0, w + 1 - cores)
    theirs_us = wake_us + per * (step_us + overhead_us)
    cpu_us = num_envs * (step_us * cpu_fraction + overhead_us) / _share(w + 1, cores, busy_cores)
    # The copy out of the block (copy=True) of every env, the caller's share too, after the wait.
    parent_us = _parent_us(
        num_envs, obs_bytes, w, per, rest, info_fraction, info_us, INLINE_INFO_MSG_US
    )
    return parent_us + max(own_us, theirs_us, cpu_us), default_spin(w + 1, cores)


def _inprocess_cost(
    step_us: float,
    obs_bytes: int,
    num_envs: int,
    info_fraction: float = 0.0,
    info_us: float = 0.0,
) -> float:
    # Infos stay in process by reference: no pickling (vecenv._inprocess).
    per_byte = COPY_INPROC_US_PER_BYTE
    if num_envs * obs_bytes > LARGE_BATCH_BYTES:  # one core writes and reads it all
        per_byte *= LARGE_BATCH_FACTOR
    env_us = step_us + INPROC_ENV_US + per_byte * obs_bytes
    return INPROC_BATCH_US + num_envs * env_us + (INFO_MSG_INPROC_US if info_fraction else 0.0)


def choose_layout(
    step_us: float,
    obs_bytes: int,
    num_envs: int,
    cores: int,
    *,
    inprocess: bool = False,
    inline_candidates: bool = True,
    cpu_fraction: float = 1.0,
    info_fraction: float = 0.0,
    info_us: float = 0.0,
    busy_cores: float = 0.0,
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
    inline_candidates : bool
        With ``inprocess``, whether the caller's share beside workers
        (``inline=True``, lockstep only) is a candidate too.
    cpu_fraction : float
        The probe's CPU seconds per wall second, in ``[0, 1]``
        (:attr:`Probe.cpu_fraction`); below 1, more workers than cores are
        candidates (up to ``1 / cpu_fraction`` per core, at most
        :data:`MAX_OVERSUBSCRIPTION`).
    info_fraction : float
        Fraction of steps that return a non-empty info, in ``[0, 1]``
        (:attr:`Probe.info_fraction`).
    info_us : float
        Microseconds to pickle and unpickle one such info (>= 0,
        :attr:`Probe.info_us`).
    busy_cores : float
        Other runnable tasks on the machine (>= 0, :attr:`Probe.busy_cores`):
        the workers share the cores with them.

    Returns
    -------
    Layout
        ``num_workers`` in ``[0, min(num_envs, cores)]`` with ``cpu_fraction``
        1, in ``[0, min(num_envs, MAX_OVERSUBSCRIPTION * cores)]`` below (0
        only with ``inprocess``), ``envs_per_worker = ceil(num_envs / num_workers)``,
        ``spin`` 0 or :data:`SPIN_S`, the step cost, the prediction and a
        sentence saying why (the runner-up's prediction included).

    Raises
    ------
    ValueError
        A negative cost or size, ``num_envs`` or ``cores`` below 1, or
        ``cpu_fraction`` or ``info_fraction`` outside ``[0, 1]``, a negative
        ``info_us``.
    """
    if not step_us >= 0 or obs_bytes < 0 or num_envs < 1 or cores < 1:
        raise ValueError(
            f"choose_layout needs step_us >= 0, obs_bytes >= 0, num_envs >= 1 and cores >= 1; "
            f"got {step_us}, {obs_bytes}, {num_envs}, {cores}"
        )
    if not 0.0 <= cpu_fraction <= 1.0:
        raise ValueError(f"choose_layout needs cpu_fraction in [0, 1]; got {cpu_fraction}")
    if not busy_cores >= 0:
        raise ValueError(f"choose_layout needs busy_cores >= 0; got {busy_cores}")
    if not 0.0 <= info_fraction <= 1.0 or not info_us >= 0:
        raise ValueError(
            f"choose_layout needs info_fraction in [0, 1] and info_us >= 0; "
            f"got {info_fraction}, {info_us}"
        )
    info = (info_fraction, info_us)
    env_us = step_us * STEP_SCALE  # the probe's one hot env, as one of many
    # Other tasks count as far as they took the CPU from the probe (a probe
    # that kept its core saw no contention, whatever the runnable count).
    busy_cores = min(busy_cores, cores * (1.0 / max(cpu_fraction, MIN_CPU_FRACTION) - 1.0))
    # (predicted us, num_workers, spin, inline); fewer processes first, so a
    # tie keeps fewer.
    cands: List[Tuple[float, int, float, bool]] = []
    if inprocess:
        cands.append((_inprocess_cost(env_us, obs_bytes, num_envs, *info), 0, 0.0, False))
        for w in range(1, min(cores, num_envs) if inline_candidates else 1):  # one per core
            cost, spin = _inline_cost(
                env_us, obs_bytes, num_envs, cores, w, cpu_fraction, *info, busy_cores
            )
            cands.append((cost, w, spin, True))
    for w in candidate_workers(num_envs, cores, cpu_fraction):
        cost, spin = _workers_cost(
            env_us, obs_bytes, num_envs, cores, w, cpu_fraction, *info, busy_cores
        )
        cands.append((cost, w, spin, False))
    ranked = sorted(cands, key=lambda c: c[0])
    cost, w, spin, inline = ranked[0]
    per = num_envs if w == 0 else math.ceil(num_envs / (w + inline))

    def name(w_: int, spin_: float, inline_: bool) -> str:
        if w_ == 0:
            return "in-process"
        per_ = math.ceil(num_envs / (w_ + inline_))
        envs = f"{per_} env{'s' if per_ > 1 else ''}"
        workers = f"{w_} worker{'s' if w_ > 1 else ''}"
        if inline_:
            return f"the caller and {workers}, {envs} each" + (", spinning" if spin_ else "")
        return f"{workers} of {envs}" + (", spinning" if spin_ else ", sleeping")

    infos = (
        f"pickled infos in {info_fraction:.0%} of steps ({info_us:.1f} us to pickle), "
        if info_fraction
        else ""
    )
    why = (
        f"env.step {step_us:.1f} us ({cpu_fraction:.0%} CPU), observation {obs_bytes} bytes, "
        f"{infos}{num_envs} envs, "
        f"{cores} usable cores"
        + (f" ({busy_cores:.1f} busy with other tasks)" if busy_cores >= 0.05 else "")
        + f": {name(w, spin, inline)}, predicted {cost:.0f} us per batch"
    )
    if len(ranked) > 1:
        c2, w2, s2, i2 = ranked[1]
        why += f" (next best: {name(w2, s2, i2)}, {c2:.0f} us)"
    if not inprocess:
        why += "; in-process (num_workers=0) and inline=True: not a candidate"
    return Layout(
        num_workers=w,
        envs_per_worker=per,
        spin=spin,
        step_us=float(step_us),
        why=why,
        predicted_batch_us=float(cost),
        inline=inline,
    )


def _probe_within(env_fn: Callable[[], Any], max_seconds: float, limit_s: Optional[float]) -> Probe:
    """:func:`probe` in a daemon thread, waited for at most ``limit_s``
    seconds (None: no limit), so that a factory or a reset that never
    returns cannot hang the vec env's constructor; such a probe is left
    behind and raises TimeoutError here. The probe's own exception is
    re-raised."""
    if limit_s is None:
        return probe(env_fn, max_seconds=max_seconds)
    out: List[Any] = []

    def run() -> None:
        try:
            out.append(probe(env_fn, max_seconds=max_seconds))
        except BaseException as exc:  # handed to the caller
            out.append(exc)

    thread = threading.Thread(target=run, name="vecenv-auto-probe", daemon=True)
    thread.start()
    thread.join(limit_s)
    if not out:
        raise TimeoutError(f"it did not finish within {limit_s:g} s (its limit: start_timeout)")
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def auto_layout(
    env_fn: Callable[[], Any],
    num_envs: int,
    cores: int,
    *,
    inprocess: bool = False,
    inline_candidates: bool = True,
    max_seconds: float = PROBE_SECONDS,
    limit_s: Optional[float] = None,
) -> Layout:
    """:func:`probe` ``env_fn``, then :func:`choose_layout`; logged (logger
    ``"vecenv"``, INFO). A probe that fails (the factory or the env raised,
    or it did not finish within ``limit_s`` seconds: ShmemVecEnv's
    ``start_timeout``) falls back to one worker per usable core, spinning,
    and logs a WARNING: the workers build the envs next and report such an
    error, or a factory that never returns, with the env's index."""
    try:
        p = _probe_within(env_fn, max_seconds, limit_s)
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
    layout = choose_layout(
        p.step_us,
        p.obs_bytes,
        num_envs,
        cores,
        inprocess=inprocess,
        inline_candidates=inline_candidates,
        cpu_fraction=p.cpu_fraction,
        info_fraction=p.info_fraction,
        info_us=p.info_us,
        busy_cores=p.busy_cores,
    )
    _log.info(
        "num_workers='auto': %s (probe: %d steps in %.3f s)", layout.why, p.steps, p.elapsed_s
    )
    return layout
