"""The command: ``benchmarks/run.py``'s arguments, the loop over cells, the estimate and the ETA (parent).

:func:`main` parses the arguments, :func:`run` measures every cell (env x
num_envs: every contender opened together, warmed up, then timed in
interleaved rounds) and builds the report dict, then the report is printed,
plotted and written (:mod:`suite.report`). With the default suite it also runs
``benchmarks/multi_agent.py``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import multiprocessing
import os
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from vecenv._cpus import usable_cpus

from .console import Console, fmt_duration
from .contenders import (
    CONTENDERS,
    QUICK_CONTENDERS,
    REFERENCE,
    Ctx,
    RawSession,
    Session,
    Skip,
    best_layout_candidates,
    contender_fits,
    lockstep_vecenv,
)
from .envs import (
    ACTION_POOL,
    ENV_ALIASES,
    ENVS,
    env_entry,
    probe_env,
    sample_actions,
    time_one_env,
)
from .machine import load_average, report_header
from .measure import Floor, measure, quiet
from .plots import plot_all, plot_summary
from .report import cell_summary, conclude, print_report, write
from .results import record_cell
from .targets import evaluate_targets

BENCHMARKS = Path(__file__).resolve().parents[1]  # benchmarks/
LOCAL_OUT = BENCHMARKS / "results" / "local"  # a user's runs (git-ignored)
PUBLISHED_OUT = BENCHMARKS / "results" / "latest.json"  # the committed run (--publish)


def parse_list(text: Optional[str], kind=str) -> Optional[List[Any]]:
    if text is None:
        return None
    return [kind(x.strip()) for x in text.split(",") if x.strip()]


def fill_defaults(args: argparse.Namespace, **defaults: Tuple[Any, Any]) -> None:
    """Set each argument still None to its (quick, full) default, by ``args.quick``."""
    for name, (quick, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="vecenv benchmark suite: env-steps/s of vecenv and its peers on real envs.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: cartpole x8, 4 contenders, 1 round of 0.2 s (about 10-20 s)",
    )
    p.add_argument(
        "--envs",
        help=f"comma-separated envs from {sorted(ENVS)} (default: all)",
    )
    p.add_argument(
        "--num-envs",
        help="comma-separated num_envs values (default 2,4,8,16,64,256; 64 and 256 only for the "
        "cheap envs noop and cartpole)",
    )
    p.add_argument(
        "--contenders",
        help=f"comma-separated contenders from {list(CONTENDERS)}, or 'all' "
        "(default: every contender but the opt-in ones)",
    )
    p.add_argument("--rounds", type=int, help="interleaved timed rounds (default 3; quick 1)")
    p.add_argument(
        "--seconds", type=float, help="seconds per timed round per contender (default 0.5)"
    )
    p.add_argument(
        "--warmup", type=float, help="seconds of warm-up per contender before the rounds"
    )
    p.add_argument(
        "--floor-iterations", type=int, help="round trips of the C wait/wake floor (default 3000)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out",
        type=Path,
        help="JSON path; the PNGs go next to it (default: a new file in "
        "benchmarks/results/local/, which git ignores)",
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="write the committed benchmarks/results/latest.json and latest.png",
    )
    p.add_argument(
        "--targets",
        action="store_true",
        help="also print the project's own targets as pass/short (always in the JSON)",
    )
    p.add_argument("--no-plot", action="store_true", help="skip the PNGs")
    p.add_argument(
        "--multi-agent",
        choices=("auto", "on", "off"),
        default="auto",
        help="also run benchmarks/multi_agent.py (simple_spread and a cheap env, agent-steps/s, "
        "vs SuperSuit and PufferLib); auto: in the default suite when pettingzoo is installed",
    )
    p.add_argument("--list", action="store_true", help="list envs and contenders, then exit")
    args = p.parse_args(argv)
    fill_defaults(
        args,
        rounds=(1, 3),
        seconds=(0.2, 0.5),
        warmup=(0.05, 0.2),
        floor_iterations=(300, 3000),
    )
    q = args.quick
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0 or args.floor_iterations < 1:
        p.error("--rounds, --seconds and --floor-iterations must be positive, --warmup >= 0")
    if args.out is not None and args.publish:
        p.error("--out and --publish both name the output: pick one")
    if args.publish:
        args.out = PUBLISHED_OUT
    elif args.out is None:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        args.out = LOCAL_OUT / f"run-{stamp}.json"
    envs = parse_list(args.envs) or (["cartpole"] if q else list(ENVS))
    keys = []
    for e in envs:
        k = e if e in ENVS else ENV_ALIASES.get(e.lower())
        if k is None:
            p.error(f"unknown env {e!r}; choose from {sorted(ENVS)}")
        keys.append(k)
    args.envs = keys
    args.num_envs_given = args.num_envs is not None
    try:
        args.num_envs = parse_list(args.num_envs, int) or ([8] if q else list(DEFAULT_NUM_ENVS))
    except ValueError:
        p.error("--num-envs takes comma-separated integers")
    if any(n < 1 for n in args.num_envs):
        p.error("--num-envs values must be >= 1")
    names = parse_list(args.contenders)
    if names == ["all"]:
        names = list(CONTENDERS)
    elif not names:
        names = QUICK_CONTENDERS if q else [c.name for c in CONTENDERS.values() if c.default]
    bad = [n for n in names if n not in CONTENDERS]
    if bad:
        p.error(f"unknown contenders {bad}; choose from {list(CONTENDERS)}")
    args.contenders = names
    return args


DEFAULT_NUM_ENVS = (2, 4, 8, 16, 64, 256)


def suite_cells(args) -> List[Tuple[str, int]]:
    """(env key, num_envs) of every cell the run measures: every env at every
    size, except that the default sizes stop at each env's
    ``max_default_num_envs`` (sizes given with --num-envs are all run)."""
    given = getattr(args, "num_envs_given", True)
    return [
        (k, n)
        for k in args.envs
        for n in args.num_envs
        if given or n <= ENVS[k].max_default_num_envs
    ]


def list_everything(console: Console) -> None:
    rows = []
    for key, spec in ENVS.items():
        _, why = probe_env(spec)
        rows.append([key, spec.gym_id, "yes" if why is None else f"no: {why}"])
    console.table("environments", ["name", "gymnasium id", "available"], rows)
    rows = []
    for c in CONTENDERS.values():
        rows.append([c.name, c.label, "yes" if c.default else "opt-in", c.note])
    console.table("contenders", ["name", "what", "default", "note"], rows)


# Seconds to open and close a contender with n envs, for the up-front estimate
# (a 2-core VM; the ETA after each cell rescales by what the run measured).
OPEN_CLOSE_S: Dict[str, Callable[[int], float]] = {
    "gym_sync": lambda n: 0.01,
    "gym_async": lambda n: 0.1 + 0.02 * n,  # one process per env (fork)
    "sb3": lambda n: 0.3 + 0.05 * n,  # one process per env (forkserver, SB3 preloaded)
    "vecenv_sb3": lambda n: 0.3,
    "vecenv_ray": lambda n: 8.0,
}


IN_PROCESS = ("gym_sync", "envpool_sync", "envpool_async")


def estimate_cell_s(args, key: str, n: int, cores: int, make_s: float = 0.0) -> float:
    """Predicted seconds for one cell: every session's warm-up and rounds, the
    layout trials of vecenv_best, opening and closing, and building the envs
    (``make_s`` seconds each, as the probe measured; in parallel on the cores
    for multiprocess contenders)."""
    per_session = args.warmup + args.rounds * (args.seconds + 0.01)
    total = per_session + make_s  # the raw env
    build = n * make_s / cores
    for name in args.contenders:
        if contender_fits(name, n) is not None:
            continue
        total += per_session + OPEN_CLOSE_S.get(name, lambda n: 0.15)(n)
        total += n * make_s if name in IN_PROCESS else build
        if name == "vecenv_auto":  # its probe: one env built and stepped
            total += make_s + 0.1
        if name == "vecenv_best":
            trial = max(args.seconds / 2, 0.05)
            total += len(best_layout_candidates(n, cores)) * (1.5 * trial + 0.15 + build)
    if key == "noop":
        total += args.rounds * 0.1  # the C floor
    return total


def _preload_sb3_in_forkserver(contenders: List[str]) -> None:
    """SB3's SubprocVecEnv starts one forkserver process per env, and each
    imported SB3 (and PyTorch) again: 16 envs took 30 s to open on 2 cores.
    Preloaded in the forkserver, each child starts with it (0.7 s for 16);
    the stepping is the same."""
    if any(c in ("sb3", "vecenv_sb3") for c in contenders):
        if importlib.util.find_spec("stable_baselines3") is not None:
            multiprocessing.set_forkserver_preload(
                ["__main__", "stable_baselines3.common.vec_env.subproc_vec_env"]
            )


def run(args) -> Dict[str, Any]:
    # The envs' warnings, here and in workers started with spawn or forkserver.
    warnings.filterwarnings("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"
    _preload_sb3_in_forkserver(args.contenders)
    console = Console()
    cores = usable_cpus()
    started = time.time()
    report: Dict[str, Any] = {
        **report_header(args, skip=("list",)),
        "method": {
            "seconds_per_round": args.seconds,
            "rounds": args.rounds,
            "warmup_s": args.warmup,
            "order": "interleaved: every round measures every contender of a cell, order rotated",
            "ideal": "min(usable cores, num_envs) x one raw env's steps/s in the same cell",
            "reference": REFERENCE,
            "action_pool": ACTION_POOL,
        },
        "contenders": {
            n: {"label": CONTENDERS[n].label, "note": CONTENDERS[n].note} for n in args.contenders
        },
        "envs": {},
        "results": [],
        "cells": [],
        "floor": [],
        "skipped": [],
        "notes": [],
    }
    console.print(
        f"[bold]vecenv benchmark[/bold]: {report['machine']['cpu_model']}, {cores} usable cores, "
        f"envs {args.envs}, num_envs {args.num_envs}, {args.rounds} round(s) x {args.seconds}s"
    )

    # Which envs and contenders can run at all.
    env_specs = []
    make_s: Dict[str, float] = {}  # seconds to build, reset and close one env
    for key in args.envs:
        spec = ENVS[key]
        spaces, why = probe_env(spec)
        if why is None:
            make_s[key] = time_one_env(spec)
        if why is not None:
            report["skipped"].append({"env": spec.label, "reason": why})
            console.print(f"[yellow]skip env {spec.label}[/yellow]: {why}")
            continue
        env_specs.append((spec, spaces))
        report["envs"][spec.label] = env_entry(spec, spaces)

    floor = Floor(args.floor_iterations)
    floor.build()
    if floor.note:
        report["notes"].append(floor.note)
        console.print(f"[yellow]{floor.note}[/yellow]")

    wanted = set(suite_cells(args))
    cells = [
        (spec, spaces, n)
        for spec, spaces in env_specs
        for n in args.num_envs
        if (spec.key, n) in wanted
    ]
    plan = [estimate_cell_s(args, spec.key, n, cores, make_s[spec.key]) for spec, _, n in cells]
    report["estimated_s"] = round(sum(plan), 1)
    parts = {"the suite": sum(plan), **getattr(args, "parts_after", {})}
    if len(parts) > 1:  # the whole job first: what bench.sh runs after this suite too
        console.print(
            f"the whole job: about {fmt_duration(sum(parts.values()))} (estimated: "
            + ", ".join(f"{k} {fmt_duration(v)}" for k, v in parts.items())
            + "; each part prints its own estimate and ETAs)"
        )
    console.print(
        f"{len(cells)} cells ({len(env_specs)} envs x up to {len(args.num_envs)} sizes), "
        f"{len(args.contenders)} contenders each: about {fmt_duration(sum(plan))} "
        "(estimated; each finished cell prints a line with the ETA)"
    )
    per_cell = (len(args.contenders) + 1) * (args.rounds + 1)
    progress = console.progress(len(cells) * per_cell)
    missing: Dict[Any, str] = {}  # contender, or (contender, env), that cannot run
    planned_done = 0.0
    try:
        for k, (spec, spaces, n) in enumerate(cells):
            t0 = time.time()
            run_cell(args, spec, spaces, n, cores, report, progress, missing, floor)
            planned_done += plan[k]
            elapsed = time.time() - started
            eta = sum(plan[k + 1 :]) * elapsed / max(planned_done, 1e-9)
            console.print(
                f"[{k + 1}/{len(cells)}] {spec.label} x{n} ({time.time() - t0:.0f} s): "
                f"{cell_summary(report, spec.label, n)}; elapsed {fmt_duration(elapsed)}, "
                f"ETA {fmt_duration(eta)}"
            )
    finally:
        progress.close()
        floor.close()
    if floor.note and floor.note not in report["notes"]:
        report["notes"].append(floor.note)
    report["machine"]["load_average_end"] = load_average()
    report["elapsed_s"] = round(time.time() - started, 1)
    report["targets"] = evaluate_targets(report)
    report["quiet"] = quiet(
        {
            f"{c['env']} x{c['num_envs']}": c["raw_env_steps_per_s"]["rounds"]
            for c in report["cells"]
            if c.get("raw_env_steps_per_s")
        }
    )
    if report["quiet"]["note"]:
        report["notes"].append(report["quiet"]["note"])
    report["conclusion"] = conclude(report)
    return report


def run_cell(args, spec, spaces, n, cores, report, progress, missing, floor) -> None:
    """Open every contender for (env, num_envs), warm up, measure in rounds."""
    actions = sample_actions(spaces[1], (ACTION_POOL, n), args.seed)
    ctx = Ctx(spec, n, actions, cores, trial_seconds=max(args.seconds / 2, 0.05), seed=args.seed)
    where = f"{spec.label} x{n}"
    sessions: Dict[str, Session] = {}
    per_cell = (len(args.contenders) + 1) * (args.rounds + 1)
    done = 0
    try:
        progress.describe(f"{where}: raw env")
        sessions["raw"] = RawSession(spec, args.seed)
        for name in args.contenders:
            c = CONTENDERS[name]
            progress.describe(f"{where}: open {name}")
            done += 1
            progress.advance()
            if name in missing or (name, spec.key) in missing:
                continue
            too_many = contender_fits(name, n)
            if too_many is not None:
                report["skipped"].append(
                    {"contender": name, "env": spec.label, "num_envs": n, "reason": too_many}
                )
                continue
            try:
                sessions[name] = c.open(ctx)
            except ImportError as exc:
                missing[name] = f"not installed ({exc})"
                report["skipped"].append({"contender": name, "reason": missing[name]})
            except Skip as exc:
                # The same for every num_envs: report it once.
                missing[(name, spec.key)] = str(exc)
                report["skipped"].append({"contender": name, "env": spec.label, "reason": str(exc)})
            except Exception as exc:
                record_start_failure(report, name, exc, env=spec.label, num_envs=n)
        # Warm-up (excluded): every session alone for args.warmup seconds.
        progress.describe(f"{where}: warm-up")
        for name, s in list(sessions.items()):
            try:
                measure(s, args.warmup, warmup_calls=3)
            except Exception as exc:
                drop_session(
                    sessions,
                    name,
                    report,
                    f"failed in warm-up: {exc!r}",
                    env=spec.label,
                    num_envs=n,
                )
        done += 1
        progress.advance()
        # Interleaved rounds, the order rotated each round.
        rates: Dict[str, List[float]] = {k: [] for k in sessions}
        lats: Dict[str, List[float]] = {k: [] for k in sessions}
        # The C wait/wake floor for each vecenv worker layout, on noop only,
        # measured once per round next to the contenders.
        floor_keys = set()
        if spec.key == "noop":
            for name, s in sessions.items():
                if lockstep_vecenv(name, s):
                    floor_keys.add((s.layout["num_workers"], s.layout.get("spin_s") or 0.0))
        floors: Dict[Tuple[int, float], List[Dict[str, Any]]] = {k: [] for k in floor_keys}
        for r in range(args.rounds):
            names = list(sessions)
            k = r % len(names)
            for name in names[k:] + names[:k]:
                if name not in sessions:
                    continue
                progress.describe(f"{where}: round {r + 1}/{args.rounds} {name}")
                try:
                    steps, elapsed, lat = measure(sessions[name], args.seconds)
                except Exception as exc:
                    drop_session(
                        sessions,
                        name,
                        report,
                        f"failed while timed: {exc!r}",
                        env=spec.label,
                        num_envs=n,
                    )
                    continue
                rates[name].append(steps / elapsed)
                lats[name].extend(lat)
            for key in sorted(floor_keys):
                progress.describe(f"{where}: round {r + 1}/{args.rounds} wait/wake floor {key[0]}")
                fl = floor.measure(*key)
                if fl is not None:
                    floors[key].append(fl)
            done += len(args.contenders) + 1
            progress.advance(len(args.contenders) + 1)
        record_cell(spec, n, cores, sessions, rates, lats, floors, report)
    finally:
        progress.describe(f"{where}: closing")
        for s in sessions.values():
            try:
                s.close()
            except Exception:
                pass
        progress.advance(max(0, per_cell - done))


def drop_session(sessions, name: str, report, why: str, **where: Any) -> None:
    """Close session ``name`` and record in ``report["skipped"]`` why it left the cell ``where``."""
    s = sessions.pop(name)
    try:
        s.close()
    except Exception:
        pass
    report["skipped"].append({"contender": name, **where, "reason": why})


def record_start_failure(report, name: str, exc: BaseException, **where: Any) -> None:
    """Record in ``report["skipped"]`` that contender ``name`` failed to open in cell ``where``
    (call it in the ``except`` block: the traceback is the current one)."""
    report["skipped"].append(
        {
            "contender": name,
            **where,
            "reason": f"failed to start: {type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=5),
        }
    )


def parse_cells(text: str, envs: Optional[Dict[str, Any]] = None) -> List[Tuple[str, int]]:
    """``"pong:64,cartpole:256"`` -> ``[("pong", 64), ("cartpole", 256)]``. Env
    names are the keys of ``envs``; without it, the suite's (:data:`ENVS`,
    gymnasium ids too). ValueError names a malformed cell or an unknown env."""
    cells = []
    for item in parse_list(text) or []:
        name, sep, num = item.rpartition(":")
        if not sep or not name or not num.strip().isdigit():
            raise ValueError(f"{item!r} is not ENV:NUM_ENVS")
        key = name if name in (envs or ENVS) else None
        if key is None and envs is None:
            key = ENV_ALIASES.get(name.lower())
        if key is None:
            raise ValueError(f"unknown env {name!r}; choose from {sorted(envs or ENVS)}")
        n = int(num)
        if n < 1:
            raise ValueError(f"num_envs must be >= 1 in {item!r}")
        cells.append((key, n))
    if not cells:
        raise ValueError("no cells")
    return cells


def main(argv=None, parts_after: Optional[Dict[str, float]] = None) -> int:
    """Run the suite. ``parts_after``: the estimates (seconds, by name) of what
    runs after it in the same job, for the whole job's estimate printed first."""
    args = parse_args(argv)
    console = Console()
    if args.list:
        list_everything(console)
        return 0
    args.parts_after = {}  # the parts of the job after this suite, by name: their estimates
    if _want_multi_agent(args, argv):
        import multi_agent

        args.parts_after["multi-agent"] = multi_agent.estimate_s(["--quick"] if args.quick else [])
    args.parts_after.update(parts_after or {})
    report = run(args)
    out: Path = args.out
    pngs = [out.with_suffix(".png"), out.with_name(out.stem + "-all.png")]
    if not args.no_plot:
        for draw, png in zip((plot_summary, plot_all), pngs):
            why = draw(report, png)
            if why:
                report["notes"].append(why)
                break
            report.setdefault("plots", []).append(str(png))
    print_report(report, console, targets=args.targets)
    md = write(report, out)
    console.print(
        f"took {fmt_duration(report['elapsed_s'])} (estimated {fmt_duration(report['estimated_s'])})"
        f"; wrote {out}, {md}" + "".join(f", {p}" for p in report.get("plots", []))
    )
    if _want_multi_agent(args, argv):
        import multi_agent

        console.print("\nmulti-agent cells (benchmarks/multi_agent.py, agent-steps/s):")
        ma_out = out.with_name(out.stem + "-multi-agent.json")
        return multi_agent.main(["--out", str(ma_out), *(["--quick"] if args.quick else [])])
    return 0


def _want_multi_agent(args, argv) -> bool:
    """``--multi-agent``: on, off, or (auto) in the default suite when
    PettingZoo and mpe2 can be imported."""
    if args.multi_agent != "auto":
        return args.multi_agent == "on"
    given = sys.argv[1:] if argv is None else list(argv)
    if args.quick or any(a.startswith(("--envs", "--num-envs", "--contenders")) for a in given):
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("pettingzoo", "mpe2"))
