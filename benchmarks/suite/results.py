"""The run's measurements in its JSON: cells, results, floors; recorded and looked up (parent).

A report (the dict that becomes the JSON) has ``cells`` (one per env x
num_envs: the raw env's rate, the ideal, the copy floor), ``results`` (one
entry per contender and cell: env-steps/s over the rounds, latency per call,
layout, ratios) and ``floor`` (the wait/wake floor runs). :func:`record_cell`
writes them; the lookups below read them for the targets and the report.
"""

from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

import numpy as np

from vecenv._autolayout import _nbytes

from .contenders import REFERENCE, lockstep_vecenv
from .measure import batch_copy_floor_us, summarize


def record_cell(spec, n, cores, sessions, rates, lats, floors, report) -> None:
    """Append cell ``(spec, n)``'s measurements to ``report``: ``rates`` and
    ``lats`` (env-steps/s per round, seconds per call) per session name,
    ``floors`` (the wait/wake runs per ``(workers, spin_s)``)."""
    raw = rates.get("raw") or []
    raw_med = statistics.median(raw) if raw else None
    ideal = raw_med * min(cores, n) if raw_med else None
    ref = rates.get(REFERENCE) or []
    ref_med = statistics.median(ref) if ref else None
    cell = {
        "env": spec.label,
        "num_envs": n,
        "raw_env_steps_per_s": summarize(raw) if raw else None,
        "ideal_env_steps_per_s": ideal,
    }
    raw_env = getattr(sessions.get("raw"), "env", None)
    if raw_env is not None:  # the floors of one batch: its copy (the wake's is report["floor"])
        obs_bytes = _nbytes(raw_env.observation_space.sample())
        cell["obs_bytes"] = obs_bytes
        cell["batch_copy_floor_us"] = batch_copy_floor_us(obs_bytes, n)
    report["cells"].append(cell)
    floor_p50 = {}
    for (workers, spin_s), runs in floors.items():
        if runs:
            floor_p50[(workers, spin_s)] = statistics.median(f["p50_us"] for f in runs)
            report["floor"].append(
                {
                    "env": spec.label,
                    "num_envs": n,
                    "workers": workers,
                    "spin_us": spin_s * 1e6,
                    "p50_us": floor_p50[(workers, spin_s)],
                    "rounds": runs,
                }
            )
    for name, values in rates.items():
        if name == "raw" or not values:
            continue
        s = sessions.get(name)
        med = statistics.median(values)
        lat = np.asarray(lats[name]) * 1e6 if lats[name] else None
        entry = {
            "env": spec.label,
            "num_envs": n,
            "contender": name,
            "env_steps_per_s": summarize(values),
            "env_steps_per_call": s.env_steps_per_call if s else None,
            "latency_us_per_call": None
            if lat is None
            else {
                "p50": float(np.percentile(lat, 50)),
                "p90": float(np.percentile(lat, 90)),
                "p99": float(np.percentile(lat, 99)),
            },
            "layout": s.layout if s else {},
            "vs_reference": med / ref_med if ref_med else None,
            "vs_ideal": med / ideal if ideal else None,
        }
        key = None
        if s is not None and lockstep_vecenv(name, s):
            key = (s.layout["num_workers"], s.layout.get("spin_s") or 0.0)
        fl = floor_p50.get(key) if key is not None else None
        if s is not None and key is not None and fl and entry["latency_us_per_call"] and raw_med:
            # Env work on the critical path: the busiest worker steps its envs in turn.
            work_us = s.layout.get("envs_per_worker", 1) * 1e6 / raw_med
            overhead = entry["latency_us_per_call"]["p50"] - work_us
            entry["floor"] = {
                "workers": key[0],
                "spin_us": key[1] * 1e6,
                "floor_p50_us": fl,
                "env_work_us": work_us,
                "overhead_p50_us": overhead,
                "overhead_vs_floor": overhead / fl,
            }
        report["results"].append(entry)


def cell_entries(report, env, n) -> List[Dict[str, Any]]:
    """Every result of cell ``(env, n)``."""
    return [e for e in report["results"] if e["env"] == env and e["num_envs"] == n]


def rate(e) -> float:
    """A result's median env-steps/s."""
    return e["env_steps_per_s"]["median"]


def fastest(entries) -> Optional[Dict[str, Any]]:
    """The result with the highest median, None for none."""
    return max(entries, key=rate) if entries else None


def find(report, env, n, contender) -> Optional[Dict[str, Any]]:
    """``contender``'s result in cell ``(env, n)``, or None."""
    for e in report["results"]:
        if e["env"] == env and e["num_envs"] == n and e["contender"] == contender:
            return e
    return None


def cell(report, env, n) -> Optional[Dict[str, Any]]:
    """Cell ``(env, n)`` of ``report["cells"]``, or None."""
    return next((c for c in report["cells"] if c["env"] == env and c["num_envs"] == n), None)


def raw_rate(report, env, n) -> Optional[float]:
    """The raw env's median env-steps/s in cell ``(env, n)``, or None."""
    c = cell(report, env, n)
    raw = c and c.get("raw_env_steps_per_s")
    return raw["median"] if raw else None
