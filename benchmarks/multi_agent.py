#!/usr/bin/env python3
"""Multi-agent benchmark: PettingZoo envs vectorized as agent rows, vecenv against its peers.

Runs in the parent process (the contenders start their own workers). Cells:
mpe2's ``simple_spread_v3`` (N=3) and vecenv's cheap ``MatchEnv`` (8 agents),
16 envs each, random actions. Contenders, all in one run: one raw env in a
plain loop (the ideal is usable cores x its rate), vecenv's
``MultiAgentVecEnv`` (a few worker layouts; the best one counts), SuperSuit's
``concat_vec_envs_v1`` (serial and ``num_cpus`` = cores) and PufferLib 3's
``PettingZooPufferEnv`` with ``vector.Serial`` and ``vector.Multiprocessing``
(1 worker and one per core). Figures are agent-steps/s (rows x batch steps
per second), the median of a few rounds; each round opens, warms up, measures
and closes every contender in turn (the order rotates), so no idle contender
burns a core while another is measured and noise hits all alike.

Usage::

    python benchmarks/multi_agent.py                   # about two minutes
    python benchmarks/multi_agent.py --quick           # a smoke test
    python benchmarks/multi_agent.py --out benchmarks/results/multi_agent.json

Targets (printed as pass/short): vecenv >= 0.85 of the ideal on
simple_spread, and >= 3x SuperSuit's best on the cheap env.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from vecenv._cpus import usable_cpus

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the suite package (not there under python -P)
    sys.path.insert(0, str(HERE))
from suite.console import fmt_duration  # noqa: E402
from suite.contenders import best_layout_candidates  # noqa: E402
from suite.machine import git_info, load_average, machine_info, package_versions  # noqa: E402

warnings.filterwarnings("ignore")
ACTION_POOL = 64
PACKAGES = ("vecenv", "numpy", "gymnasium", "pettingzoo", "mpe2", "SuperSuit", "pufferlib-core")


# --------------------------------------------------------------------- envs
def simple_spread():
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=3)


def cheap():
    from vecenv.pettingzoo_envs import MatchEnv

    return MatchEnv(num_agents=8, obs_dim=4, episode_length=100)


CELLS = {"simple_spread": simple_spread, "cheap": cheap}


class _PufferCreator:
    """PufferLib's env creator (called with buf= and seed=)."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn

    def __call__(self, buf=None, seed=0):
        from pufferlib.emulation import PettingZooPufferEnv

        return PettingZooPufferEnv(env_creator=self.fn, buf=buf, seed=seed)


# --------------------------------------------------------------------- sessions
class Session:
    """An open contender: ``step(actions)`` for one batch; ``rows`` per batch."""

    rows: int

    def step(self, actions) -> int:
        """Step one batch; returns the agent rows that acted."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class RawSession(Session):
    """One env in a plain loop; one "step" is one env step (rows = agents acting)."""

    def __init__(self, fn):
        self.env = fn()
        self.env.reset(seed=0)
        self.rows = len(self.env.possible_agents)
        self.agents = list(self.env.possible_agents)

    def step(self, actions) -> int:
        env = self.env
        acting = list(env.agents)
        env.step({a: int(actions[self.agents.index(a)]) for a in acting})
        if not env.agents:
            env.reset()
        return len(acting)


class _VecSession(Session):
    """A vectorized contender: ``self.venv`` steps ``self.rows`` agent rows a call."""

    venv: Any
    rows: int

    def step(self, actions) -> int:
        self.venv.step(actions)
        return self.rows

    def close(self):
        self.venv.close()


class VecenvSession(_VecSession):
    def __init__(self, fn, num_envs, num_workers, **options):
        from vecenv import MultiAgentVecEnv

        self.venv = MultiAgentVecEnv(
            [fn] * num_envs, num_workers=num_workers, copy=False, **options
        )
        self.venv.reset(seed=0)
        self.rows = self.venv.num_envs


class SuperSuitSession(_VecSession):
    def __init__(self, fn, num_envs, num_cpus):
        import supersuit as ss

        env = ss.pettingzoo_env_to_vec_env_v1(fn())
        self.venv = ss.concat_vec_envs_v1(env, num_envs, num_cpus=num_cpus, base_class="gymnasium")
        self.venv.reset(seed=0)
        self.rows = self.venv.num_envs


class PufferSession(Session):
    def __init__(self, fn, num_envs, backend, num_workers=None):
        import pufferlib.vector as pv

        kwargs = {}
        if backend == "Multiprocessing":
            kwargs = {"num_workers": num_workers, "batch_size": num_envs, "overwork": True}
        self.venv = pv.make(
            _PufferCreator(fn), backend=getattr(pv, backend), num_envs=num_envs, **kwargs
        )
        self.venv.reset(seed=0)
        self.rows = self.venv.num_envs
        self._pv = pv

    def step(self, actions) -> int:
        self._pv.step(self.venv, actions)
        return self.rows

    def close(self):
        self.venv.close()


def contenders(num_envs: int, cores: int, quick: bool) -> Dict[str, Callable[[Any], Session]]:
    out: Dict[str, Callable[[Any], Session]] = {"raw": RawSession}
    layouts = best_layout_candidates(num_envs, cores)  # the suite's vecenv_best's
    if quick:
        layouts = [cores]
    for w in layouts:
        out[f"vecenv w={w}"] = lambda fn, w=w: VecenvSession(fn, num_envs, w)
    if not quick:  # the parent sleeps at once instead of polling (spin=0)
        out[f"vecenv w={cores} spin=0"] = lambda fn: VecenvSession(fn, num_envs, cores, spin=0.0)
    out["supersuit serial"] = lambda fn: SuperSuitSession(fn, num_envs, 0)
    out[f"supersuit num_cpus={cores}"] = lambda fn: SuperSuitSession(fn, num_envs, cores)
    out["pufferlib Serial"] = lambda fn: PufferSession(fn, num_envs, "Serial")
    mp_workers = sorted({w for w in (1, cores) if num_envs % w == 0})
    for w in mp_workers:
        out[f"pufferlib MP w={w}"] = lambda fn, w=w: PufferSession(
            fn, num_envs, "Multiprocessing", w
        )
    return out


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its live children."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def measure(session: Session, seconds: float, actions: np.ndarray):
    """(agent-steps/s, CPU microseconds of all processes per agent-step) over
    about ``seconds`` after a warm-up. The second figure is what the work
    costs, whatever else runs on the machine."""
    for k in range(5):
        session.step(actions[k % len(actions)])
    rows = 0
    k = 0
    cpu0 = _cpu_seconds()
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        rows += session.step(actions[k % len(actions)])
        k += 1
        if k % 8 == 0 and time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - t0
    return rows / elapsed, (_cpu_seconds() - cpu0) / rows * 1e6


def run_cell(name, fn, num_envs, cores, rounds, seconds, quick, only) -> Dict[str, Any]:
    probe = fn()
    n_agents = len(probe.possible_agents)
    n_actions = int(probe.action_space(probe.possible_agents[0]).n)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, n_actions, (ACTION_POOL, num_envs * n_agents))
    table = contenders(num_envs, cores, quick)
    if only:
        table = {k: v for k, v in table.items() if k == "raw" or any(o in k for o in only)}
    rates: Dict[str, List[float]] = {k: [] for k in table}
    cpu: Dict[str, List[float]] = {k: [] for k in table}
    errors: Dict[str, str] = {}
    names = list(table)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for key in order:
            if key in errors:
                continue
            try:
                session = table[key](fn)
            except Exception as exc:
                errors[key] = f"{type(exc).__name__}: {exc}"
                continue
            try:
                rate, cpu_us = measure(session, seconds, actions)
                rates[key].append(rate)
                cpu[key].append(cpu_us)
            except Exception as exc:
                errors[key] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
            finally:
                try:
                    session.close()
                except Exception:
                    pass
    result: Dict[str, Any] = {
        "num_envs": num_envs,
        "agents": n_agents,
        "rows": num_envs * n_agents,
        "contenders": {},
        "errors": errors,
    }
    for key, vals in rates.items():
        if vals:
            result["contenders"][key] = {
                "median": statistics.median(vals),
                "min": min(vals),
                "max": max(vals),
                "rounds": vals,
                "cpu_us_per_agent_step": statistics.median(cpu[key]),
            }
    med = {k: v["median"] for k, v in result["contenders"].items()}
    raw = med.get("raw")
    vec = {k: v for k, v in med.items() if k.startswith("vecenv")}
    ss = {k: v for k, v in med.items() if k.startswith("supersuit")}
    best_vec = max(vec.items(), key=lambda kv: kv[1]) if vec else None
    result["ideal"] = raw * cores if raw else None
    result["best_vecenv"] = best_vec[0] if best_vec else None
    if best_vec and raw:
        result["vecenv_vs_ideal"] = best_vec[1] / (raw * cores)
    if best_vec and ss:
        result["vecenv_vs_supersuit_best"] = best_vec[1] / max(ss.values())
    # What the work costs, whatever else runs: CPU per agent-step of the best
    # vecenv layout against one raw env (1.0 = no overhead) and SuperSuit's best.
    cpu_of = {k: v["cpu_us_per_agent_step"] for k, v in result["contenders"].items()}
    if best_vec and "raw" in cpu_of:
        result["raw_cpu_over_vecenv_cpu"] = cpu_of["raw"] / cpu_of[best_vec[0]]
    ss_cpu = [v for k, v in cpu_of.items() if k.startswith("supersuit")]
    if best_vec and ss_cpu:
        result["supersuit_cpu_over_vecenv_cpu"] = min(ss_cpu) / cpu_of[best_vec[0]]
    return result


def fmt(x: Optional[float]) -> str:
    return "-" if x is None else f"{x / 1e3:.1f}k"


def report(cells: Dict[str, Any]) -> List[str]:
    lines = []
    for name, cell in cells.items():
        lines.append(
            f"\n{name}: {cell['num_envs']} envs x {cell['agents']} agents = {cell['rows']} rows "
            f"(agent-steps/s, median [min-max]; CPU us per agent-step, all processes)"
        )
        for key, c in cell["contenders"].items():
            lines.append(
                f"  {key:<24} {fmt(c['median']):>9}  [{fmt(c['min'])}-{fmt(c['max'])}]"
                f"  {c['cpu_us_per_agent_step']:7.1f}"
            )
        lines.append(f"  {'ideal (cores x raw)':<24} {fmt(cell.get('ideal')):>9}")
        for key, err in cell["errors"].items():
            lines.append(f"  {key:<24} failed: {err[:100]}")
    lines.append("\ntargets:")
    spread = cells.get("simple_spread", {})
    if "vecenv_vs_ideal" in spread:
        v = spread["vecenv_vs_ideal"]
        lines.append(
            f"  simple_spread: vecenv {v:.2f} of ideal (target >= 0.85): "
            f"{'pass' if v >= 0.85 else 'short'}"
        )
    cheap_cell = cells.get("cheap", {})
    if "vecenv_vs_supersuit_best" in cheap_cell:
        v = cheap_cell["vecenv_vs_supersuit_best"]
        lines.append(
            f"  cheap: vecenv {v:.2f}x SuperSuit's best (target >= 3x): "
            f"{'pass' if v >= 3 else 'short'}"
        )
    for name, cell in cells.items():
        if "raw_cpu_over_vecenv_cpu" in cell:
            lines.append(
                f"  {name}: CPU per agent-step, raw env / vecenv = "
                f"{cell['raw_cpu_over_vecenv_cpu']:.2f}, SuperSuit's least / vecenv = "
                f"{cell.get('supersuit_cpu_over_vecenv_cpu', float('nan')):.2f} (info: what the "
                "work costs, independent of the machine's load)"
            )
    return lines


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="one round, short, one vecenv layout")
    p.add_argument("--cells", default="simple_spread,cheap", help="comma-separated cells")
    p.add_argument("--num-envs", type=int, default=16, help="PettingZoo envs per vec env")
    p.add_argument("--rounds", type=int, default=3, help="measurement rounds (medians)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    p.add_argument(
        "--only", default=None, help="comma-separated substrings of contender names (raw is kept)"
    )
    p.add_argument("--out", type=Path, default=None, help="write the JSON result here")
    return p.parse_args(argv)


# Seconds to open, then close, one contender (its processes) between two of
# its timings (2-core VM, 2026-12-07: the default run took 144 s for 132 s timed).
OPEN_S = 0.3


def _parsed(argv=None) -> argparse.Namespace:
    args = parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 1, 0.3
    return args


def _cell_estimate_s(args, cores: int) -> float:
    """Seconds of one cell: every installed contender in every round."""
    names = contenders(args.num_envs, cores, args.quick)
    if args.only:
        only = args.only.split(",")
        names = {k: v for k, v in names.items() if k == "raw" or any(o in k for o in only)}
    installed = {p: importlib.util.find_spec(p) is not None for p in ("supersuit", "pufferlib")}
    count = sum(1 for k in names if installed.get(k.split(" ")[0], True))
    return args.rounds * count * (args.seconds + OPEN_S)


def estimate_s(argv=None) -> float:
    """Seconds of a whole run with these arguments (what :func:`main` prints first)."""
    args = _parsed(argv)
    return len(args.cells.split(",")) * _cell_estimate_s(args, usable_cpus())


def main(argv=None) -> int:
    args = _parsed(argv)
    cores = usable_cpus()
    only = args.only.split(",") if args.only else None
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    machine = machine_info()  # before the run: its load average is the start's
    cells = {}
    names = args.cells.split(",")
    per_cell = _cell_estimate_s(args, cores)
    print(
        f"{len(names)} cells x {args.num_envs} PettingZoo envs, {args.rounds} round(s) x "
        f"{args.seconds} s per contender: about {fmt_duration(per_cell * len(names))} "
        "(estimated; each finished cell prints a line with the ETA)",
        flush=True,
    )
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        fn = CELLS[name]
        t_cell = time.perf_counter()
        cells[name] = run_cell(
            name, fn, args.num_envs, cores, args.rounds, args.seconds, args.quick, only
        )
        took = time.perf_counter() - t_cell
        left = (len(names) - i - 1) * per_cell
        print(
            f"[{i + 1}/{len(names)}] {name} took {fmt_duration(took)}; elapsed "
            f"{fmt_duration(time.perf_counter() - t0)}, ETA {fmt_duration(left)}",
            flush=True,
        )
    result = {
        "started": started,
        "load_average_end": load_average(),
        "machine": machine,
        "versions": package_versions(PACKAGES),
        "git": git_info(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "cells": cells,
    }
    lines = report(cells)
    print("\n".join(lines))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
