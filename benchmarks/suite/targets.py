"""The project's targets, evaluated as pass / short / missing from a run's own ratios (parent)."""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Dict, List, Optional, Tuple

from .contenders import is_vecenv
from .results import cell, cell_entries, fastest, find, rate, raw_rate


@dataclasses.dataclass(frozen=True)
class Target:
    """One row of the targets table (issue 16), a ratio (or microseconds) from
    this run's own medians.

    kind: "best_vs" (vecenv's fastest contender / ``other``), "best_vs_ideal",
    "async_vs_lockstep" (vecenv_async / vecenv's fastest lockstep layout),
    "auto_vs_best" (the layout vecenv_auto chose / the fastest of every
    other vecenv lockstep layout and gym_sync, in every cell that has
    vecenv_auto; the value is the lowest; a layout's rate pools the rounds
    of every contender that ran it, see :func:`_layout_rates`) and
    "worker_overhead" (microseconds per env-step beyond env.step
    with 1 worker: 1/vecenv rate - 1/raw rate; at most ``threshold``).
    """

    kind: str
    env: Optional[str] = None
    num_envs: Optional[int] = None
    other: Optional[str] = None
    threshold: float = 1.0

    def text(self) -> str:
        where = f"{self.env} x{self.num_envs}"
        t = self.threshold
        if self.kind == "best_vs":
            return f"{where}: best vecenv / {self.other} >= {t:g}x"
        if self.kind == "best_vs_ideal":
            return f"{where}: best vecenv / ideal >= {t:g}"
        if self.kind == "async_vs_lockstep":
            return f"{where}: vecenv async (batch n/2) / best vecenv lockstep >= {t:g}x"
        if self.kind == "auto_vs_best":
            return (
                f"every cell: vecenv_auto's layout / the best layout (vecenv's, gym_sync) >= {t:g}x"
            )
        if self.kind == "worker_overhead":
            return f"{where}: worker overhead per env-step beyond env.step (1 worker) <= {t:g} us"
        raise ValueError(f"unknown target kind {self.kind!r}")


TARGETS = [
    Target("best_vs", "noop", 16, "gym_sync", 2.0),
    Target("best_vs", "noop", 256, "gym_sync", 3.0),
    Target("best_vs", "bigobs", 16, "gym_sync", 1.5),
    Target("best_vs_ideal", "CartPole-v1", 16, threshold=0.75),
    Target("best_vs_ideal", "CartPole-v1", 256, threshold=0.85),
    Target("best_vs_ideal", "ALE/Pong-v5", 16, threshold=0.9),
    Target("best_vs", "ALE/Pong-v5", 16, "envpool_async", 1.1),
    Target("async_vs_lockstep", "CartPole-v1", 16, threshold=1.0),
    Target("async_vs_lockstep", "ALE/Pong-v5", 16, threshold=1.05),
    Target("async_vs_lockstep", "heavytail", 16, threshold=1.3),
    Target("auto_vs_best", threshold=0.95),
    Target("worker_overhead", "noop", 256, threshold=0.5),
]
AUTO = "vecenv_auto"


def _layout_key(e: Dict[str, Any]) -> Tuple[Any, ...]:
    """What a lockstep contender ran: gymnasium's SyncVectorEnv, or vecenv's
    (workers, envs per worker, spin); contenders with one key ran the same thing."""
    if not is_vecenv(e["contender"]):
        return (e["contender"],)
    lay = e.get("layout") or {}
    key = ("vecenv", lay.get("num_workers"), lay.get("envs_per_worker"), lay.get("spin_s"))
    return key + (("inline",) if lay.get("inline") else ())


def _layout_rates(entries) -> Dict[Tuple[Any, ...], Tuple[float, str]]:
    """Per layout: (the median of every round of the contenders that ran it,
    their names). Two contenders that ran one layout (vecenv_auto's choice
    and vecenv_best's, say) measure one thing: on a 2-core VM their medians
    differed by up to 10% within a run, so the fastest of several such
    medians would be that noise, not a better layout."""
    rounds: Dict[Tuple[Any, ...], List[float]] = {}
    names: Dict[Tuple[Any, ...], List[str]] = {}
    for e in entries:
        key = _layout_key(e)
        rounds.setdefault(key, []).extend(e["env_steps_per_s"].get("rounds") or [rate(e)])
        names.setdefault(key, []).append(e["contender"])
    return {k: (float(statistics.median(v)), "+".join(names[k])) for k, v in rounds.items()}


def _is_lockstep_layout(e: Dict[str, Any]) -> bool:
    """A vecenv contender stepping the whole batch per call (not send/recv)."""
    return is_vecenv(e["contender"]) and "batch_size" not in (e.get("layout") or {})


def _one_worker_rate(entries) -> Tuple[Optional[float], str]:
    """env-steps/s of a 1-worker vecenv lockstep layout in a cell: a measured
    contender with 1 worker, else vecenv_best's short trial of 1 worker."""
    ones = [
        e
        for e in entries
        if _is_lockstep_layout(e)
        and (e.get("layout") or {}).get("num_workers") == 1
        and not (e.get("layout") or {}).get("inline")
    ]
    if ones:
        e = max(ones, key=rate)
        return rate(e), f"{e['contender']} (1 worker)"
    for e in entries:
        trials = (e.get("layout") or {}).get("trials_env_steps_per_s") or {}
        if "1" in trials:
            return float(trials["1"]), f"{e['contender']}'s trial of 1 worker"
    return None, ""


def evaluate_target(report, t: Target) -> Dict[str, Any]:
    """One target against the run: value, status ("pass", "short" or
    "missing", when the run lacks what it needs) and where the value comes from."""
    value: Optional[float] = None
    who = ""
    extra: Dict[str, Any] = {}
    if t.kind == "auto_vs_best":
        cells = []
        for c in report["cells"]:
            entries = cell_entries(report, c["env"], c["num_envs"])
            auto = next((e for e in entries if e["contender"] == AUTO), None)
            others = [
                e
                for e in entries
                if e["contender"] != AUTO
                and (_is_lockstep_layout(e) or e["contender"] == "gym_sync")
            ]
            best = fastest(others)
            if auto is None or best is None:
                continue
            rates = _layout_rates([auto, *others])
            best_rate, best_names = max(rates.values())
            cells.append(
                {
                    "env": c["env"],
                    "num_envs": c["num_envs"],
                    "value": rates[_layout_key(auto)][0] / best_rate,
                    "best": best_names,
                    "auto_layout": (auto.get("layout") or {}).get("num_workers"),
                    # The contenders alone: auto's median over the fastest other's.
                    "contender_value": rate(auto) / rate(best),
                    "contender_best": best["contender"],
                }
            )
        extra["cells"] = cells
        if cells:
            worst = min(cells, key=lambda x: x["value"])
            value = worst["value"]
            below = sum(x["value"] < t.threshold for x in cells)
            who = (
                f"lowest at {worst['env']} x{worst['num_envs']} (against {worst['best']}); "
                f"{below} of {len(cells)} cells below"
            )
    else:
        entries = cell_entries(report, t.env, t.num_envs)
        ours = [e for e in entries if is_vecenv(e["contender"])]
        best = fastest(ours)
        if t.kind == "best_vs" and best is not None:
            other = find(report, t.env, t.num_envs, t.other)
            if other is not None:
                value = rate(best) / rate(other)
                who = best["contender"]
        elif t.kind == "best_vs_ideal" and best is not None:
            c = cell(report, t.env, t.num_envs)
            ideal = c and c.get("ideal_env_steps_per_s")
            if ideal:
                value = rate(best) / ideal
                who = best["contender"]
        elif t.kind == "async_vs_lockstep":
            lock = fastest([e for e in ours if _is_lockstep_layout(e)])
            asyn = find(report, t.env, t.num_envs, "vecenv_async")
            if lock is not None and asyn is not None:
                value = rate(asyn) / rate(lock)
                who = f"vecenv_async / {lock['contender']}"
        elif t.kind == "worker_overhead":
            one, who = _one_worker_rate(entries)
            raw = raw_rate(report, t.env, t.num_envs)
            if one and raw:
                value = 1e6 / one - 1e6 / raw
    if value is None:
        status = "missing"
    elif t.kind == "worker_overhead":
        status = "pass" if value <= t.threshold else "short"
    else:
        status = "pass" if value >= t.threshold else "short"
    return {
        "target": t.text(),
        "kind": t.kind,
        "env": t.env,
        "num_envs": t.num_envs,
        "value": value,
        "unit": "us" if t.kind == "worker_overhead" else "x",
        "threshold": t.threshold,
        "status": status,
        "who": who,
        **extra,
    }


def evaluate_targets(report) -> List[Dict[str, Any]]:
    """Every target of :data:`TARGETS` against this run."""
    return [evaluate_target(report, t) for t in TARGETS]


def fmt_target_value(t: Dict[str, Any]) -> str:
    v = t["value"]
    if v is None:
        return "-"
    return f"{v:.2f} us" if t["unit"] == "us" else f"{v:.2f}x"
