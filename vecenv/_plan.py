"""The layout a ShmemVecEnv runs with: its layout options resolved (parent side).

:func:`plan_layout` turns ``num_workers``, ``envs_per_worker``, ``inline``,
``batch_size``, ``spin`` and the options that need worker processes into a
:class:`Plan`: each worker's envs, the cores to pin, and the
:class:`~vecenv._autolayout.Layout` that ``venv.layout`` reports. ``"auto"``
(the default in lockstep) asks :func:`vecenv._autolayout.auto_layout`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from vecenv._autolayout import FOLLOW_S, Layout, auto_layout, default_spin
from vecenv._cpus import usable_cpus
from vecenv._options import EngineOptions
from vecenv.errors import InvalidArgumentError


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where a ShmemVecEnv's envs run: what :func:`plan_layout` decided."""

    ranges: List[Tuple[int, int]]  # each worker's [lo, hi) envs (one range in process)
    cores: Any  # each worker's cores (cpu_affinity), or None
    layout: Layout  # what ``venv.layout`` reports

    @property
    def in_process(self) -> bool:
        """No worker process: the envs step in the calling process."""
        return self.layout.num_workers == 0

    @property
    def spin(self) -> float:
        """Seconds the waits poll before sleeping."""
        return self.layout.spin


def plan_layout(
    env_fns: List[Callable[[], Any]],
    options: EngineOptions,
    *,
    batch_size: Optional[int] = None,
    check_affinity: Callable[[Any, int], Any],
    default: str = "auto",
) -> Plan:
    """Resolve ShmemVecEnv's layout options (of ``options``, with
    ``batch_size`` checked against the envs) into a :class:`Plan`.

    ``num_workers=0`` runs in process, ``"auto"`` probes ``env_fns[0]``
    (:func:`auto_layout`; call this after every other argument check, since
    the probe builds an env), anything else goes to the worker plan
    (:func:`vecenv._pool.plan_workers`). Without a layout (neither
    ``num_workers`` nor ``envs_per_worker``) lockstep is ``default``:
    ``"auto"`` (the probe may choose the calling process, and builds one
    more env there), ``"workers"`` (the probe chooses among layouts of
    worker processes only: the default of the drop-ins for gymnasium's
    AsyncVectorEnv and SB3's SubprocVecEnv, which promise every env in a
    worker process), or ``"per_core"`` (one worker per usable core, at most
    one per env: the multi-agent engine's).
    ``spin=None`` becomes 200 us up to two workers per usable core, else 0
    (0 in process: nothing waits). Without a layout and with partial
    batches (``batch_size`` < the envs),
    one worker per usable core but one (at least one): the caller's policy
    runs while the workers step and keeps that core (CleanRL's PPO loop on
    2 cores, ``benchmarks/rollout.py``, 2026-12-05: one worker against two,
    CartPole x16 42.5k against 37.1k env-steps/s, x64 157k / 136k, Pong x16
    2.4k / 1.9k, HalfCheetah x16 23.7k / 15.0k).
    ``inline=True`` splits the envs into ``num_workers + 1`` shares (default
    one per usable core, at least two), the first the caller's; with
    ``inline_envs=k`` the caller's share is envs ``[0, k)`` and the workers
    (default one per usable core but one, at least one) share the rest.

    Raises
    ------
    InvalidArgumentError
        A bad ``num_workers``, ``envs_per_worker`` or ``cpu_affinity``, an
        option the in-process engine cannot honour, ``inline=True`` with
        ``"auto"``, or ``inline_envs`` that leaves no env to the workers.
    """
    from vecenv import _inprocess
    from vecenv._options import check_auto_workers, in_process
    from vecenv._pool import plan_workers

    num_workers, envs_per_worker = options.num_workers, options.envs_per_worker
    inline, inline_envs, spin = bool(options.inline), options.inline_envs, options.spin
    if inline_envs == 0:  # the caller steps no env: as inline=False
        inline, inline_envs = False, None
    timeout, cpu_affinity = options.timeout, options.cpu_affinity
    num_envs = len(env_fns)
    spin_given = spin is not None
    defaulted = num_workers is None and envs_per_worker is None and not inline
    lockstep = batch_size is None or batch_size >= num_envs
    # The default lockstep layout is the auto one: two runs of the benchmark
    # suite put it at 0.95 or more of the best fixed layout in every cell
    # (benchmarks/README.md).
    auto = check_auto_workers(num_workers, envs_per_worker)
    # "workers": the probe chooses among worker-process layouts only.
    workers_only = defaulted and lockstep and default == "workers"
    auto = auto or (defaulted and lockstep and default == "auto") or workers_only
    chosen = "default" if defaulted else "given"
    inproc = in_process(num_workers, envs_per_worker)
    cpus = usable_cpus()
    if inline and not inproc:
        _check_inline(auto)
        _inprocess.check_options(timeout=timeout, cpu_affinity=cpu_affinity, what="inline=True")
        if inline_envs is None:
            ranges = _inline_ranges(num_envs, num_workers, envs_per_worker, cpus)
        else:
            ranges = _caller_share(num_envs, int(inline_envs), num_workers, envs_per_worker, cpus)
        inproc = len(ranges) == 1  # one env: the caller steps it
    elif inproc:  # the envs step in this process, as one worker's
        _inprocess.check_options(timeout=timeout, cpu_affinity=cpu_affinity)
        ranges = [(0, num_envs)]
    else:
        given = None if isinstance(num_workers, str) else num_workers
        if defaulted and not lockstep:
            given, chosen = max(1, cpus - 1), "default partial-batch"
        ranges = plan_workers(num_envs, given, envs_per_worker)
    if auto:
        check_affinity(cpu_affinity, 1)
        try:
            _inprocess.check_options(timeout=timeout, cpu_affinity=cpu_affinity)
            allowed = options.on_worker_death != "restart" and not workers_only
        except InvalidArgumentError:  # an option only worker processes honour
            allowed = False
        layout = auto_layout(
            env_fns[0],
            num_envs,
            cpus,
            inprocess=allowed,
            inline_candidates=allowed and lockstep,  # the caller's share steps in each call
            limit_s=_probe_limit(options.start_timeout, workers_only),
        )
        inline = layout.inline
        if layout.num_workers == 0:
            inproc, ranges = True, [(0, num_envs)]
        else:
            ranges = plan_workers(num_envs, layout.num_workers + int(inline), None)
            spin = layout.spin if spin is None else spin
    inline = bool(inline) and not inproc
    workers = len(ranges)  # the caller's share included (inline)
    # The poll follows the caller unless the user chose the spin, or the
    # workers outnumber the cores (a polling worker would keep one waiting).
    follow = FOLLOW_S if not spin_given and workers <= cpus and not inproc else 0.0
    if spin is None:
        spin = default_spin(workers, cpus)
    if inproc:
        spin = 0.0  # nothing waits: every dispatch runs its round at once
    cores = check_affinity(cpu_affinity, workers)
    share = inline_envs if inline and inline_envs is not None else None  # the caller's, sized
    # envs_per_worker: the busiest process's envs, the caller's share only when not sized.
    sizes = [hi - lo for lo, hi in (ranges[1:] if share is not None else ranges)]
    n, per = 0 if inproc else workers - int(inline), max(sizes)
    if auto:  # the probe's layout, with what the options decided
        why = f"the default layout, num_workers='auto': {layout.why}" if defaulted else layout.why
        layout = dataclasses.replace(
            layout,
            num_workers=n,
            envs_per_worker=per,
            spin=float(spin),
            follow=follow,
            why=why,
            inline=inline,
        )
    else:
        why = f"the {chosen} layout"
        if inline:
            envs = "the first share" if share is None else f"envs [0, {share}) (inline_envs)"
            why += f", the caller stepping {envs}"
        layout = Layout(
            n, per, float(spin), why=why, follow=follow, inline=inline, inline_envs=share
        )
    return Plan(ranges, cores, layout)


# The drop-ins' probe waits at most this long (seconds): the classes they
# replace run no env step in the calling process, so a probe that outlasts it
# (a step that takes seconds, or never returns) gives way to one worker per
# usable core, their old default, at once.
DROP_IN_PROBE_LIMIT_S = 2.0


def _probe_limit(start_timeout: Optional[float], workers_only: bool) -> Optional[float]:
    """How long the probe of ``"auto"`` may take (its limit: start_timeout,
    as the probe's message says): ``start_timeout``, and for the drop-ins'
    ``"workers"`` at most :data:`DROP_IN_PROBE_LIMIT_S`."""
    if not workers_only:
        return start_timeout
    return min(DROP_IN_PROBE_LIMIT_S, start_timeout or DROP_IN_PROBE_LIMIT_S)


def _inline_ranges(
    num_envs: int, num_workers: Any, envs_per_worker: Optional[int], cpus: int
) -> List[Tuple[int, int]]:
    """The shares of ``inline=True``, the caller's first: ``num_workers``
    worker processes beside it (default one per usable core but one, at
    least one), or shares of ``envs_per_worker`` envs.

    Raises
    ------
    InvalidArgumentError
        ``num_workers`` not a positive int or None, or not the processes
        that ``envs_per_worker`` leaves beside the caller's share.
    """
    from vecenv._pool import plan_workers

    _check_share_workers(num_workers)
    if num_workers is not None and envs_per_worker is not None:
        need = -(-num_envs // envs_per_worker) - 1 if envs_per_worker >= 1 else None
        if need is not None and num_workers != need:
            raise InvalidArgumentError(
                f"num_workers={num_workers} and envs_per_worker={envs_per_worker} do not fit "
                f"num_envs={num_envs} with inline=True: {need + 1} shares of {envs_per_worker} "
                f"envs are the caller's and num_workers={need} worker processes'; pass only "
                "one of them"
            )
        return plan_workers(num_envs, None, envs_per_worker)
    if num_workers is None and envs_per_worker is None:
        return plan_workers(num_envs, max(2, cpus), None)
    return plan_workers(num_envs, None if num_workers is None else num_workers + 1, envs_per_worker)


def _caller_share(
    num_envs: int, k: int, num_workers: Any, envs_per_worker: Optional[int], cpus: int
) -> List[Tuple[int, int]]:
    """The shares of ``inline_envs=k``: envs ``[0, k)`` the caller's, the
    rest spread evenly over ``num_workers`` worker processes (default one
    per usable core but one, at least one) or in shares of
    ``envs_per_worker``.

    Raises
    ------
    InvalidArgumentError
        ``k`` leaves no env to the workers, or ``num_workers`` is not a
        positive int or None.
    """
    from vecenv._pool import plan_workers

    if k >= num_envs:
        raise InvalidArgumentError(
            f"inline_envs={k} leaves no env to the worker processes of num_envs={num_envs}: "
            f"pass inline_envs below {num_envs}, or num_workers=0 to step every env here"
        )
    _check_share_workers(num_workers)
    if num_workers is None and envs_per_worker is None:
        num_workers = max(1, cpus - 1)
    left = num_envs - k
    if num_workers is not None and num_workers > left:
        raise InvalidArgumentError(
            f"num_workers={num_workers} worker processes for the {left} envs that "
            f"inline_envs={k} leaves of num_envs={num_envs}: pass num_workers <= {left}"
        )
    try:
        rest = plan_workers(left, num_workers, envs_per_worker)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(
            f"{exc} (the workers' envs: num_envs={num_envs} less inline_envs={k})"
        ) from None
    return [(0, k)] + [(lo + k, hi + k) for lo, hi in rest]


def _check_share_workers(num_workers: Any) -> None:
    """Refuse a ``num_workers`` beside the caller's share that is not an int or None.

    Raises
    ------
    InvalidArgumentError
        Names ``num_workers`` and what it got.
    """
    if num_workers is not None and (
        not isinstance(num_workers, (int, np.integer)) or isinstance(num_workers, bool)
    ):
        raise InvalidArgumentError(
            f"num_workers must be a positive int or None, got {num_workers!r}"
        )


def _check_inline(auto: bool) -> None:
    """Refuse ``inline=True`` with ``num_workers="auto"``.

    Raises
    ------
    InvalidArgumentError
        The message names both arguments.
    """
    if auto:
        raise InvalidArgumentError(
            "inline=True and num_workers='auto' were both given: 'auto' chooses whether the "
            "caller steps a share of the envs; pass one of them"
        )
