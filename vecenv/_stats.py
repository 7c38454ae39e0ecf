"""Where a vec env's time goes: the counters behind ``ShmemVecEnv.stats()``.

Runs in the parent. Each worker's compiled round (``csrc/_round.pxi``) adds
the nanoseconds of its rounds (its envs' steps and resets, their copies into
the block) to its slot's ``SlotWord.BUSY_NS`` word, which only it writes,
before it publishes them; the parent's ``vecenv._core.StepClock`` (held by the
``Steps`` part) times its own step verbs and the caller's time between them.
Nothing is sent for either: the parent reads the workers' words
(:func:`busy_view`) when ``stats()`` is called (:func:`stats_of`).

Costs: two ``clock_gettime`` calls per round in each worker and per step verb
in the parent, in C.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from vecenv._protocol import Region, SlotWord
from vecenv.errors import InvalidArgumentError


def busy_view(block, first: int, count: int) -> np.ndarray:
    """The ``BUSY_NS`` words of ``count`` worker slots from worker ``first``:
    a uint64 view of ``block`` (the shared block; the control region is at
    byte 0), shape (count,), one slot apart. A view: drop it before the block
    is unmapped."""
    offset = Region.HEADER_BYTES + Region.SLOT_BYTES * first + 4 * SlotWord.BUSY_NS
    return np.ndarray(
        (count,), np.uint64, buffer=block, offset=offset, strides=(Region.SLOT_BYTES,)
    )


@dataclasses.dataclass(frozen=True)
class Stats:
    """Where a vec env's time went since it was built.

    Attributes
    ----------
    batches : int
        Batches returned (``step``/``step_wait``, and ``recv`` with partial batches).
    env_steps : int
        Env-steps in those batches.
    caller_s : float
        Seconds the caller spent between the vec env's step calls (its policy,
        its learner, its logging): the time from one call's return to the next
        call. Time after a ``reset`` is not counted until the first step.
    in_call_s : float
        Seconds spent inside the step and reset calls: waiting for the
        workers, plus the parent's own work (actions, dispatch, collecting,
        copies). Resets count on both sides: here and in ``worker_busy_s``.
    worker_busy_s : tuple of float
        Per worker, seconds spent in its envs' steps and resets (with their
        copies into shared memory); with ``num_workers=0`` one entry, the
        envs stepped inside the calls; with ``inline=True`` entry 0 is the
        caller's own share (also inside the calls). Resets count from construction
        on; :meth:`since` leaves out what came before a later snapshot.
    in_process : bool
        The envs run in the calling process (``num_workers=0``).
    inline : bool
        The caller steps a share of the envs (``inline=True``): entry 0 of
        ``worker_busy_s`` is its own.
    """

    batches: int
    env_steps: int
    caller_s: float
    in_call_s: float
    worker_busy_s: Tuple[float, ...]
    in_process: bool
    inline: bool = False

    def since(self, earlier: Stats) -> Stats:
        """What went between ``earlier`` (a ``stats()`` of the same vec env,
        taken before) and this snapshot: each counter's difference. Take one
        after a warm-up, or after the first reset, to judge the steady state.
        Every counter only grows (a restarted worker adds to its slot's).

        Raises
        ------
        InvalidArgumentError
            ``earlier`` is not a :class:`Stats`, has another number of
            workers, or counts more batches than this one (it came later).
        """
        if not isinstance(earlier, Stats):
            raise InvalidArgumentError(f"earlier must be a Stats, got {type(earlier).__name__}")
        if len(earlier.worker_busy_s) != len(self.worker_busy_s):
            raise InvalidArgumentError(
                f"earlier has {len(earlier.worker_busy_s)} workers' times, this snapshot "
                f"{len(self.worker_busy_s)}: both must come from the same vec env"
            )
        if earlier.batches > self.batches or earlier.in_call_s > self.in_call_s:
            raise InvalidArgumentError(
                f"earlier counts {earlier.batches} batches, this snapshot {self.batches}: "
                "call later.since(earlier), the earlier snapshot as the argument"
            )
        return Stats(
            batches=self.batches - earlier.batches,
            env_steps=self.env_steps - earlier.env_steps,
            caller_s=self.caller_s - earlier.caller_s,
            in_call_s=self.in_call_s - earlier.in_call_s,
            worker_busy_s=tuple(
                now - before for now, before in zip(self.worker_busy_s, earlier.worker_busy_s)
            ),
            in_process=self.in_process,
            inline=self.inline,
        )

    def caller_share(self, num_envs: int, caller_cpu_s: Optional[float] = None) -> int:
        """How many envs the caller could step itself (``inline=True,
        inline_envs=k``) in the time it would wait otherwise, judged from a
        snapshot of a vec env with partial batches whose envs all run in
        worker processes (``inline=False``).

        Per pass over the ``num_envs`` envs the caller does ``C`` seconds of
        work: ``g`` batches (``g = num_envs`` over the env-steps per batch)
        of its policy (``caller_s`` per batch), or, with ``caller_cpu_s``,
        of its CPU time, the vec env's own work inside the calls included.
        The ``w`` workers spend ``E`` seconds per env-step (``worker_busy_s``
        per env-step). With ``k`` envs of its own the caller's part of a
        pass, ``C + k E``, equals each worker's, ``(num_envs - k) E / w``, at
        ``k = (num_envs E - w C) / ((w + 1) E)``, rounded down here. The case
        it serves: a policy that takes a fraction of a pass, beside envs that
        step in milliseconds (CleanRL-style PPO on Pong x16 with one worker,
        ``benchmarks/rollout.py``), where the caller would otherwise wait in
        ``recv`` while the worker steps every env.

        Parameters
        ----------
        num_envs : int
            The vec env's envs.
        caller_cpu_s : float, optional
            The calling process's CPU seconds over the same interval as this
            snapshot (``time.process_time()`` before and after; leave out
            your updates, as the snapshot should). Recommended: the vec env's
            own work in the caller (collecting, copying, dispatching) is tens
            of microseconds a batch, which beside envs of tens of
            microseconds a step leaves no share to take (HalfCheetah x16:
            ``caller_s`` alone asked for 2-3 envs, and each lost).

        Returns
        -------
        int
            ``k`` in ``[0, num_envs - 1]``: 0 when the policy fills the
            caller's share already (envs that step in microseconds, as a rule),
            and before any step.

        Raises
        ------
        InvalidArgumentError
            ``num_envs`` is not an int >= 1 or ``caller_cpu_s`` is negative;
            the snapshot has no worker processes (``num_workers=0``: there is
            nothing to share), has the caller's share already (``inline=True``: its env time is not the
            workers'), or is of lockstep batches (``num_envs`` env-steps per
            batch: the policy never overlaps the envs there, and
            ``inline=True`` alone gives the caller an equal share).
        """
        if (
            not isinstance(num_envs, (int, np.integer))
            or isinstance(num_envs, bool)
            or num_envs < 1
        ):
            raise InvalidArgumentError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if caller_cpu_s is not None and not float(caller_cpu_s) >= 0:
            raise InvalidArgumentError(f"caller_cpu_s must be >= 0 seconds, got {caller_cpu_s!r}")
        if self.in_process or self.inline:
            raise InvalidArgumentError(
                "caller_share() needs the stats of a vec env whose envs all step in worker "
                "processes; with num_workers=0 or inline=True the caller steps envs already"
            )
        busy = sum(self.worker_busy_s)
        if self.batches == 0 or self.env_steps == 0 or busy <= 0:
            return 0
        if self.env_steps >= num_envs * self.batches:
            raise InvalidArgumentError(
                f"caller_share() sizes a share for partial batches, and these stats count "
                f"{self.env_steps / self.batches:g} env-steps per batch of num_envs={num_envs} "
                "(lockstep): there, inline=True gives the caller an equal share"
            )
        w = len(self.worker_busy_s)
        env_s = busy / self.env_steps  # E: env time per env-step
        calls = num_envs * self.batches / self.env_steps  # g: policy calls per pass
        if caller_cpu_s is None:
            work = calls * self.caller_s / self.batches  # C: the policy, g times
        else:
            work = float(caller_cpu_s) * num_envs / self.env_steps  # C: its CPU per pass
        k = (num_envs * env_s - w * work) / ((w + 1) * env_s)
        return int(min(max(k + 1e-9, 0.0), num_envs - 1))  # 1e-9: 3.9999... is 4

    @property
    def verdict(self) -> str:
        """``"env-bound"``, ``"policy-bound"``, ``"overhead-bound"``, or
        ``"no steps yet"``.

        - policy-bound: the caller's time between calls is the larger share
          (in process: the caller's time exceeds the envs' own);
        - env-bound: the time inside the calls is mostly the busiest
          worker's env time (at least 70 %);
        - overhead-bound: otherwise, the waits and the parent's own work
          exceed what the workers did: wake-ups, copies, too many workers.
        """
        if self.batches == 0:
            return "no steps yet"
        busiest = max(self.worker_busy_s, default=0.0)
        # In process the envs run inside the calls: compare the caller with them.
        if self.caller_s > (busiest if self.in_process else self.in_call_s):
            return "policy-bound"
        return "env-bound" if busiest >= 0.7 * self.in_call_s else "overhead-bound"

    @property
    def advice(self) -> str:
        """What layout change would help, for :attr:`verdict`."""
        verdict = self.verdict
        if verdict == "policy-bound":
            if self.in_process:
                return "the policy dominates; envs in workers would overlap it only with partial batches"
            return (
                "the workers wait for the policy: overlap them with partial batches "
                "(batch_size=num_envs // 2, send/recv), or speed up the policy"
            )
        if verdict == "env-bound":
            if self.in_process:
                return "the envs dominate: worker processes (num_workers=2 or more) run them in parallel"
            return (
                "the envs dominate: more workers, up to the free cores, if cores are idle, "
                "or the caller stepping a share while it would wait (inline=True; with "
                "partial batches, inline_envs=stats().caller_share(num_envs) sizes it)"
            )
        if verdict == "overhead-bound":
            if self.in_process:
                return "the parent's own work dominates: check_actions/copy=False may help"
            return (
                "waking workers and copying cost more than the envs: fewer workers, "
                "or num_workers=0 for envs that step in microseconds"
            )
        return "step the vec env, then ask again"

    def __str__(self) -> str:
        if self.batches == 0:
            return "no steps yet"
        per = 1e6 / self.batches
        busy = "/".join(f"{b * per:.0f}" for b in self.worker_busy_s)
        return (
            f"{self.verdict}: per batch, caller {self.caller_s * per:.0f} us, in the step "
            f"{self.in_call_s * per:.0f} us, worker env time {busy} us "
            f"({self.batches} batches, {self.env_steps} env-steps); {self.advice}"
        )


def stats_of(clock: Any, busy_ns: Sequence[int], in_process: bool, inline: bool) -> Stats:
    """:class:`Stats` from the parent's clock (:class:`vecenv._core.StepClock`)
    and each worker's ``BUSY_NS`` word now."""
    return Stats(
        batches=int(clock.batches),
        env_steps=int(clock.env_steps),
        caller_s=clock.caller_ns / 1e9,
        in_call_s=clock.in_call_ns / 1e9,
        worker_busy_s=tuple(int(b) / 1e9 for b in busy_ns),
        in_process=in_process,
        inline=inline,
    )
