"""Timing: a session's env-steps/s and per-call latency, medians and spread, the floors (parent).

:func:`measure` times any session (``call()`` advances it one batch step,
``env_steps_per_call`` env-steps). The two floors of one batch step are the
copy of its observations (:func:`batch_copy_floor_us`) and the wait/wake
round trip of vecenv's protocol with nothing else in it (:class:`Floor`,
``benchmarks/wakeup_floor.c``).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Protocol, Tuple

import numpy as np

FLOOR_SOURCE = Path(__file__).resolve().parents[1] / "wakeup_floor.c"


class Timed(Protocol):
    """What :func:`measure` times (:class:`suite.contenders.Session`)."""

    env_steps_per_call: int

    def call(self) -> None: ...


def measure(
    session: Timed, seconds: float, warmup_calls: int = 3
) -> Tuple[int, float, List[float]]:
    """Call ``session.call()`` for ``seconds`` after ``warmup_calls`` untimed calls.

    Returns (env_steps, elapsed_s, per_call_latencies_s: list of float).
    """
    call = session.call
    for _ in range(warmup_calls):
        call()
    perf = time.perf_counter
    lat: List[float] = []
    append = lat.append
    t0 = t = perf()
    deadline = t0 + seconds
    while t < deadline:
        call()
        t1 = perf()
        append(t1 - t)
        t = t1
    return len(lat) * session.env_steps_per_call, t - t0, lat


def summarize(values: List[float]) -> Dict[str, Any]:
    """Median, min, max, spread (half the range over the median, %) and the rounds."""
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {
        "median": med,
        "min": lo,
        "max": hi,
        "spread_pct": 100.0 * (hi - lo) / (2 * med) if med > 0 else 0.0,
        "rounds": values,
    }


# A run is quiet when the reference timing of every cell (one raw env in the
# suite, the bound in the rollout benchmark) moved by at most this much
# between rounds: half its range over its median, % (the issues' targets ask
# for "one quiet run").
QUIET_SPREAD_PCT = 5.0


def quiet(rounds: Dict[str, List[float]]) -> Dict[str, Any]:
    """Whether a run was quiet, from each cell's reference timing per round
    (``{cell label: [value per round]}``; cells of one round say nothing):
    ``{"quiet" (None without a cell of two rounds), "spread_pct" (the
    largest, see :func:`summarize`), "cell" (where), "threshold_pct",
    "note"}``. The note, None unless the run was not quiet, says so and why."""
    spreads = {k: summarize(v)["spread_pct"] for k, v in rounds.items() if len(v) >= 2}
    where = max(spreads, key=lambda k: spreads[k]) if spreads else None
    worst = spreads[where] if where is not None else None
    calm = None if worst is None else worst <= QUIET_SPREAD_PCT
    note = None
    if calm is False:
        note = (
            f"not a quiet run: the machine's speed moved between rounds (at {where} the "
            f"reference timing spread ±{worst:.0f}% over its rounds; a quiet run stays within "
            f"±{QUIET_SPREAD_PCT:g}%). Compare contenders within a cell, and rerun before "
            "trusting a ratio near a target"
        )
    return {
        "quiet": calm,
        "spread_pct": worst,
        "cell": where,
        "threshold_pct": QUIET_SPREAD_PCT,
        "note": note,
    }


def batch_copy_floor_us(obs_bytes: int, num_envs: int, reps: int = 51) -> Optional[float]:
    """The copy floor of one batch: median microseconds of one memcpy of
    ``num_envs`` observations of ``obs_bytes`` bytes (from a warm source into a
    warm buffer, as the parent's copy of the shared rows is), or None for an
    observation without an array form."""
    if obs_bytes <= 0:
        return None
    src = np.ones(obs_bytes * num_envs, np.uint8)
    dst = np.empty_like(src)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


class Floor:
    """The C wait/wake round trip (benchmarks/wakeup_floor.c), compiled once."""

    def __init__(self, iterations: int):
        self.iterations = iterations
        self.binary: Optional[str] = None
        self.note: Optional[str] = None
        self._tmp: Optional[tempfile.TemporaryDirectory] = None

    def build(self) -> None:
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            self.note = "no C compiler (cc): wait/wake floor skipped"
            return
        if not sys.platform.startswith("linux"):
            self.note = "the wait/wake floor uses Linux futexes: skipped on this platform"
            return
        self._tmp = tempfile.TemporaryDirectory(prefix="vecenv-bench-")
        out = os.path.join(self._tmp.name, "wakeup_floor")
        r = subprocess.run(
            [cc, "-O2", "-o", out, str(FLOOR_SOURCE)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode != 0:
            self.note = f"compiling wakeup_floor.c failed: {r.stderr.strip()[:300]}"
            return
        self.binary = out

    def measure(self, workers: int, spin_s: float) -> Optional[Dict[str, Any]]:
        """One run of ``iterations`` round trips with ``workers`` processes that
        spin ``spin_s`` seconds before they sleep; None when unavailable."""
        if self.binary is None:
            return None
        try:
            r = subprocess.run(
                [self.binary, str(workers), str(self.iterations), f"{spin_s * 1e6:.3f}"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if r.returncode != 0:
                raise subprocess.SubprocessError(r.stderr.strip()[:300])
            return json.loads(r.stdout)
        except (subprocess.SubprocessError, ValueError) as exc:
            self.note = f"wakeup_floor failed: {exc}"
            return None

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
