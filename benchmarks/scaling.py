#!/usr/bin/env python3
"""The many-core curve (issue 25): env-steps/s against the number of workers, with envpool's threads beside.

For every cell (env x num_envs; by default ALE/Pong-v5 x64 and CartPole-v1
x256) and every worker count (by default 1, 2, 4, 8 and 16, each capped at
the usable cores and at num_envs) it opens, together and once per cell:

* vecenv: ``ShmemVecEnv(env_fns, num_workers=w)`` in lockstep, one per count;
* the machine's ceiling for that count: w plain processes (the start method
  vecenv's workers use), each stepping its share of the envs (env i in process
  i mod w) in turn with pre-sampled actions, as the raw env below does, with
  no IPC while timed: they start together at a barrier, each times its own
  env-steps over the round's seconds, and the parent sums their rates;
* envpool (where it is installed and has the env): its sync mode,
  ``envpool.make(num_envs=n, batch_size=n, num_threads=w)``, one per count,
  Pong set as close to gymnasium's as the suite sets it (``suite/envs.py``);
* gymnasium's ``AsyncVectorEnv(shared_memory=True)`` once (one process per
  env: skipped with a note above ``--gym-async-max`` envs);
* one raw env in this process, for the ideal.

Then it times them in interleaved rounds (the order rotated each round; each
vec env is reused by every round, so 256 CartPole envs start once per count) as
the suite does (``benchmarks/README.md``, Method), with the suite's own
pieces: its env specs and factory, its sessions and :func:`suite.measure.measure`,
and :func:`suite.results.record_cell`, whose ideal is
``min(usable cores, num_envs) x one raw env's steps/s``. Per cell it prints a
table of the medians: per worker count vecenv's env-steps/s, its fraction of
the ideal and of ``min(w, cores, num_envs) x raw`` (linear scaling), the w raw
processes and vecenv's fraction of them (vecenv's own overhead, apart from the
machine's all-core limits: all-core clock, SMT siblings, memory bandwidth),
envpool with as many threads beside it, then gymnasium's and the ideal; and
the target of issue 25 (Pong x64 with 16 workers at >= 0.85 of ideal).

Usage::

    python benchmarks/scaling.py            # the default curve; it prints its estimate first (about 3 min on 16 cores)
    python benchmarks/scaling.py --quick    # a smoke test: cartpole x8, workers 1,2, one round of 0.2 s
    python benchmarks/scaling.py --cells pong:64 --workers 1,4,16 --rounds 5

Writes the JSON (the machine with its cgroup CPU quota, versions, commit,
arguments, every round) to ``benchmarks/results/local/scaling-<UTC time>.json``
(git-ignored; ``--out`` to choose), rewritten after every cell (``"complete":
false`` until the end), so a run stopped by a time limit keeps the cells it
finished. Run it on a quiet machine: every core is in the measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import importlib.util
import json
import multiprocessing
import multiprocessing.connection
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from vecenv._cpus import usable_cpus
from vecenv.bench import fmt_rate  # the installed vecenv

# benchmarks/ (this file's folder) heads sys.path when run as a script, but not
# under ``python -P`` or when a test loads this file: put it there for the
# suite package. Never the checkout's root, whose vecenv/ is unbuilt source.
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from suite.command import (  # noqa: E402
    LOCAL_OUT,
    OPEN_CLOSE_S,
    drop_session,
    fill_defaults,
    fmt_duration,
    parse_cells,
    parse_list,
    record_start_failure,
)
from suite.console import Console  # noqa: E402
from suite.contenders import (  # noqa: E402
    CONTENDERS,
    Ctx,
    RawSession,
    Session,
    Skip,
    _open_vecenv,  # the suite's vecenv contender, with an explicit num_workers
)
from suite.envs import (  # noqa: E402
    ACTION_POOL,
    ENVS,
    EnvSpec,
    env_entry,
    probe_env,
    sample_actions,
    time_one_env,
)
from suite.machine import load_average, report_header  # noqa: E402
from suite.measure import measure  # noqa: E402
from suite.results import cell, find, record_cell  # noqa: E402

DEFAULT_CELLS = "pong:64,cartpole:256"
DEFAULT_WORKERS = "1,2,4,8,16"
QUICK_CELLS = "cartpole:8"
QUICK_WORKERS = "1,2"
GYM_ASYNC_MAX = 64  # one process per env: gymnasium's AsyncVectorEnv up to this many envs

# Issue 25's target: this cell with this many workers at this fraction of the ideal.
TARGET_ENV, TARGET_NUM_ENVS, TARGET_WORKERS, TARGET_VS_IDEAL = "pong", 64, 16, 0.85

# For the estimate, from Pong x16 on the project's 2-core VM (time_one_env, the
# build, reset and close of one env in this process: 0.18 s; ShmemVecEnv opened
# in 1.5-3.0 s with 1 worker and 1.5 s with 2, envpool in 0.8 s with 1 or 2
# threads, the first one 1.5 s): the start of a vec env, and the share of
# time_one_env that building one env in a worker or an envpool thread costs.
VECENV_OPEN_S = 1.0  # worker processes start and import gymnasium (in parallel)
VECENV_BUILD_SHARE = 0.2  # per env, divided among the workers
ENVPOOL_OPEN_S = 0.1
ENVPOOL_BUILD_SHARE = 0.3  # per env, whatever the threads
STARTUP_S = 2.0  # once per run: importing envpool, vecenv's first worker start

RAW = "raw"
RAW_PROCS_START_S = 120.0  # the w raw processes build their envs within this
GYM_ASYNC = "gym_async"  # the suite's contender (and its reference name)


def vecenv_name(w: int) -> str:
    return f"vecenv_w{w}"


def envpool_name(w: int) -> str:
    return f"envpool_t{w}"


def raw_procs_name(w: int) -> str:
    return f"raw_procs_w{w}"


def _raw_proc_main(factory, env_ids: List[int], seed: int, barrier, conn) -> None:
    """One of the w raw processes: build envs ``env_ids``, say "ready", then
    per request of ``seconds`` wait at ``barrier`` for the others and step the
    envs in turn, each with its pre-sampled actions and reset when done, for
    ``seconds``, and send back ``(env_steps, elapsed_s)``; None stops it."""
    warnings.filterwarnings("ignore")
    try:
        envs = [factory() for _ in env_ids]
        steps, resets, actions = [], [], []
        for i, env in zip(env_ids, envs):
            env.reset(seed=seed + i)
            steps.append(env.step)
            resets.append(env.reset)
            actions.append(list(sample_actions(env.action_space, (1024,), seed + i)))
        m = len(envs)
        conn.send("ready")
        # The parent's end of this pipe may be open in its other children
        # (fork), so no EOF says that it died: its sentinel does.
        parent = multiprocessing.parent_process()
        c = 0  # env c % m takes its action (c // m) % 1024
        while True:
            if parent is not None and conn not in multiprocessing.connection.wait(
                [conn, parent.sentinel]
            ):
                break
            seconds = conn.recv()
            if seconds is None:
                break
            barrier.wait(timeout=RAW_PROCS_START_S)
            perf = time.perf_counter
            t0 = t = perf()
            deadline = t0 + seconds
            done = 0
            while t < deadline:
                j = c % m
                _, _, terminated, truncated, _ = steps[j](actions[j][(c // m) % 1024])
                if terminated or truncated:
                    resets[j]()
                c += 1
                done += 1
                t = perf()
            conn.send((done, t - t0))
        for env in envs:
            env.close()
    except BaseException as exc:
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except Exception:
            pass


class RawProcsSession(Session):
    """The machine's ceiling for w workers: w plain processes
    (:func:`_raw_proc_main`, started with the default start method, as
    vecenv's workers are), env i of ``n`` in process i mod w. :meth:`run`
    times one window and returns the sum of the processes' env-steps/s."""

    def __init__(self, spec: EnvSpec, n: int, w: int, seed: int):
        super().__init__()
        mp = multiprocessing.get_context()
        barrier = mp.Barrier(w)
        self.procs: List[Any] = []
        self.conns: List[Any] = []
        try:
            for k in range(w):
                parent, child = mp.Pipe()
                p = mp.Process(
                    target=_raw_proc_main,
                    args=(spec.factory(), list(range(k, n, w)), seed, barrier, child),
                    name=f"scaling-raw-{k}",
                    daemon=True,
                )
                p.start()
                child.close()
                self.procs.append(p)
                self.conns.append(parent)
            for k in range(w):
                self._recv(k, RAW_PROCS_START_S)
        except BaseException:
            self.close()
            raise
        self.env_steps_per_call = n
        self.layout = {
            "processes": w,
            "envs_per_process": -(-n // w),
            "start_method": mp.get_start_method(),
        }

    def _recv(self, k: int, timeout: float) -> Any:
        conn = self.conns[k]
        if not conn.poll(timeout):
            raise RuntimeError(f"raw process {k} did not answer in {timeout:.0f} s")
        msg = conn.recv()  # EOFError where it died
        if isinstance(msg, tuple) and msg[0] == "error":
            raise RuntimeError(f"raw process {k}: {msg[1]}")
        return msg

    def run(self, seconds: float) -> float:
        """Step all w processes for ``seconds`` from a common start: their summed env-steps/s."""
        for conn in self.conns:
            conn.send(seconds)
        total = 0.0
        for k in range(len(self.conns)):
            steps, elapsed = self._recv(k, seconds + RAW_PROCS_START_S)
            total += steps / elapsed
        return total

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        for conn in self.conns:
            conn.close()
        self.procs, self.conns = [], []


def timed(s: Session, seconds: float, warmup_calls: int = 0) -> Tuple[float, List[float]]:
    """One timed window of session ``s``: its env-steps/s and its per-call
    latencies (:func:`suite.measure.measure`; none for the raw processes)."""
    if isinstance(s, RawProcsSession):
        return s.run(seconds), []
    steps, elapsed, lat = measure(s, seconds, warmup_calls=warmup_calls)
    return steps / elapsed, lat


def worker_counts(wanted: List[int], cores: int, num_envs: int) -> List[int]:
    """The worker counts a cell runs: each of ``wanted`` capped at the usable
    cores and at ``num_envs``, without repeats, in order."""
    return sorted({min(w, cores, num_envs) for w in wanted})


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="The many-core curve (issue 25): vecenv's env-steps/s for each worker count, "
        "envpool's threads and gymnasium's AsyncVectorEnv beside, against the ideal.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke test: cells {QUICK_CELLS}, workers {QUICK_WORKERS}, 1 round of 0.2 s, "
        "no gymnasium AsyncVectorEnv",
    )
    p.add_argument(
        "--cells",
        help=f"comma-separated ENV:NUM_ENVS, ENV from {sorted(ENVS)} (default {DEFAULT_CELLS})",
    )
    p.add_argument(
        "--workers",
        help=f"comma-separated worker counts (envpool: threads), each capped at the usable cores "
        f"and at num_envs (default {DEFAULT_WORKERS})",
    )
    p.add_argument("--rounds", type=int, help="interleaved timed rounds (default 3; quick 1)")
    p.add_argument(
        "--seconds", type=float, help="seconds per timed round per contender (default 1.0)"
    )
    p.add_argument(
        "--warmup",
        type=float,
        help="untimed seconds per contender before the rounds (default 0.2; quick 0.05)",
    )
    p.add_argument(
        "--gym-async-max",
        type=int,
        help=f"run gymnasium's AsyncVectorEnv (one process per env) up to this many envs "
        f"(default {GYM_ASYNC_MAX}; quick 0: none)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the envs and the actions")
    p.add_argument(
        "--out",
        type=Path,
        help="the JSON (default: a new file in benchmarks/results/local/, which git ignores)",
    )
    args = p.parse_args(argv)
    fill_defaults(
        args,
        rounds=(1, 3),
        seconds=(0.2, 1.0),
        warmup=(0.05, 0.2),
        gym_async_max=(0, GYM_ASYNC_MAX),
    )
    q = args.quick
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0:
        p.error("--rounds and --seconds must be positive, --warmup >= 0")
    try:
        args.cells = parse_cells(args.cells or (QUICK_CELLS if q else DEFAULT_CELLS))
    except ValueError as exc:
        p.error(f"--cells: {exc}")
    try:
        args.workers = parse_list(args.workers or (QUICK_WORKERS if q else DEFAULT_WORKERS), int)
    except ValueError:
        p.error("--workers takes comma-separated integers")
    if not args.workers or any(w < 1 for w in args.workers):
        p.error("--workers values must be >= 1")
    if args.out is None:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        args.out = LOCAL_OUT / f"scaling-{stamp}.json"
    return args


def gym_async_skip(args: argparse.Namespace, n: int) -> Optional[str]:
    """None when gymnasium's AsyncVectorEnv runs ``n`` envs, else why not."""
    if n <= args.gym_async_max:
        return None
    if args.quick:
        return "not in --quick"
    return (
        f"one process per env: {n} processes; run up to --gym-async-max {args.gym_async_max} envs"
    )


def estimate_cell_s(
    args: argparse.Namespace,
    n: int,
    workers: List[int],
    cores: int,
    make_s: float,
    envpool: bool,
    gym: bool,
) -> float:
    """Predicted seconds for one cell: every session's warm-up and rounds, and
    opening them (``make_s``: one env built, reset and closed in this process).
    The w raw processes start and build their envs as vecenv's w workers do."""
    per_session = args.warmup + args.rounds * (args.seconds + 0.01)
    sessions = 1 + len(workers) * (3 if envpool else 2) + (1 if gym else 0)
    total = sessions * per_session + make_s  # the raw env
    for w in workers:
        total += 2 * (VECENV_OPEN_S + n * make_s * VECENV_BUILD_SHARE / min(w, cores))
        if envpool:
            total += ENVPOOL_OPEN_S + n * make_s * ENVPOOL_BUILD_SHARE
    if gym:
        total += OPEN_CLOSE_S[GYM_ASYNC](n) + n * make_s / cores
    return total


def _open(
    name: str,
    open_fn: Callable[[], Session],
    sessions: Dict[str, Session],
    opened_s: Dict[str, float],
    report,
    where,
) -> None:
    """Open one session into ``sessions``; a failure goes to ``report["skipped"]``."""
    t0 = time.perf_counter()
    try:
        sessions[name] = open_fn()
    except (ImportError, Skip) as exc:
        report["skipped"].append({"contender": name, **where, "reason": str(exc)})
        return
    except Exception as exc:
        record_start_failure(report, name, exc, **where)
        return
    opened_s[name] = time.perf_counter() - t0


def run_cell(
    args: argparse.Namespace,
    spec: EnvSpec,
    spaces: Tuple[Any, Any],
    n: int,
    workers: List[int],
    cores: int,
    envpool: bool,
    report: Dict[str, Any],
    console: Console,
) -> None:
    """Open every session of cell ``(spec, n)``, warm them up, time them in
    interleaved rounds, record the cell (:func:`suite.results.record_cell`)
    and its curve."""
    actions = sample_actions(spaces[1], (ACTION_POOL, n), args.seed)
    ctx = Ctx(spec, n, actions, cores, trial_seconds=args.seconds / 2, seed=args.seed)
    where = {"env": spec.label, "num_envs": n}
    sessions: Dict[str, Session] = {}
    opened_s: Dict[str, float] = {}
    # name -> (what, workers or threads, how to open it)
    openers: Dict[str, Tuple[str, Optional[int], Callable[[], Session]]] = {
        RAW: ("raw", None, functools.partial(RawSession, spec, args.seed))
    }
    for w in workers:
        openers[vecenv_name(w)] = ("vecenv", w, functools.partial(_open_vecenv, ctx, num_workers=w))
        openers[raw_procs_name(w)] = (
            "raw_procs",
            w,
            functools.partial(RawProcsSession, spec, n, w, args.seed),
        )
    gym_why = gym_async_skip(args, n)
    if gym_why is None:
        openers[GYM_ASYNC] = ("gym_async", None, functools.partial(CONTENDERS[GYM_ASYNC].open, ctx))
    else:
        report["skipped"].append({"contender": GYM_ASYNC, **where, "reason": gym_why})
    # envpool last, as in the suite: the processes above start before its threads do.
    if envpool:
        for w in workers:
            # The suite's envpool contender (its kwargs, Pong's included), with w threads.
            threaded = dataclasses.replace(
                spec, envpool_kwargs={**spec.envpool_kwargs, "num_threads": w}
            )
            open_fn = functools.partial(
                CONTENDERS["envpool_sync"].open, dataclasses.replace(ctx, spec=threaded)
            )
            openers[envpool_name(w)] = ("envpool_sync", w, open_fn)
    try:
        t0 = time.perf_counter()
        for name, (_, _, open_fn) in openers.items():
            _open(name, open_fn, sessions, opened_s, report, where)
        console.print(
            f"  opened {len(sessions)} sessions in {time.perf_counter() - t0:.1f} s; "
            f"{args.rounds} round(s) of {len(sessions)} x {args.seconds} s"
        )
        # Warm-up (excluded), every session alone.
        for name, s in list(sessions.items()):
            try:
                timed(s, args.warmup, warmup_calls=3)
            except Exception as exc:
                drop_session(sessions, name, report, f"failed in warm-up: {exc!r}", **where)
        # Interleaved rounds, the order rotated each round.
        rates: Dict[str, List[float]] = {k: [] for k in sessions}
        lats: Dict[str, List[float]] = {k: [] for k in sessions}
        for r in range(args.rounds):
            names = list(sessions)
            k = r % len(names) if names else 0
            for name in names[k:] + names[:k]:
                if name not in sessions:
                    continue
                try:
                    rate, lat = timed(sessions[name], args.seconds)
                except Exception as exc:
                    drop_session(sessions, name, report, f"failed while timed: {exc!r}", **where)
                    continue
                rates[name].append(rate)
                lats[name].extend(lat)
        record_cell(spec, n, cores, sessions, rates, lats, {}, report)
    finally:
        for s in sessions.values():
            try:
                s.close()
            except Exception:
                pass
        sessions.clear()
    for e in report["results"]:
        if e["env"] == spec.label and e["num_envs"] == n and e["contender"] in openers:
            e["kind"], e["workers"], _ = openers[e["contender"]]
            e["open_s"] = opened_s.get(e["contender"])
    report["curves"].append(curve(report, spec.label, n, workers, cores))


def _ratio(x: Optional[float], y: Optional[float]) -> Optional[float]:
    return x / y if x is not None and y else None


def _median(report, env: str, n: int, name: str) -> Optional[float]:
    e = find(report, env, n, name)
    return e["env_steps_per_s"]["median"] if e else None


def curve(report, env: str, n: int, workers: List[int], cores: int) -> Dict[str, Any]:
    """The cell's curve: per worker count, vecenv's and envpool's medians and
    their fractions of the ideal and of linear scaling."""
    c = cell(report, env, n) or {}
    raw = (c.get("raw_env_steps_per_s") or {}).get("median")
    ideal = c.get("ideal_env_steps_per_s")
    rows = []
    for w in workers:
        linear = raw * min(w, cores, n) if raw else None
        v, p = _median(report, env, n, vecenv_name(w)), _median(report, env, n, envpool_name(w))
        procs = _median(report, env, n, raw_procs_name(w))
        rows.append(
            {
                "workers": w,
                "linear_env_steps_per_s": linear,
                "vecenv": v,
                "vecenv_vs_ideal": _ratio(v, ideal),
                "vecenv_vs_linear": _ratio(v, linear),
                "raw_procs": procs,
                "raw_procs_vs_ideal": _ratio(procs, ideal),
                "vecenv_vs_raw_procs": _ratio(v, procs),
                "envpool": p,
                "envpool_vs_ideal": _ratio(p, ideal),
            }
        )
    gym = _median(report, env, n, GYM_ASYNC)
    return {
        "env": env,
        "num_envs": n,
        "raw_env_steps_per_s": raw,
        "ideal_env_steps_per_s": ideal,
        "gym_async": gym,
        "gym_async_vs_ideal": _ratio(gym, ideal),
        "rows": rows,
    }


def _spread(report, env: str, n: int, name: str) -> str:
    e = find(report, env, n, name)
    if e is None:
        return "-"
    s = e["env_steps_per_s"]
    return f"{fmt_rate(s['median'])} ±{s['spread_pct']:.0f}%"


def _frac(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_curve(console: Console, report, cv: Dict[str, Any], args, cores: int) -> None:
    env, n = cv["env"], cv["num_envs"]
    rows = []
    for r in cv["rows"]:
        w = r["workers"]
        rows.append(
            [
                str(w),
                _spread(report, env, n, vecenv_name(w)),
                _frac(r["vecenv_vs_ideal"]),
                _frac(r["vecenv_vs_linear"]),
                _spread(report, env, n, raw_procs_name(w)),
                _frac(r["vecenv_vs_raw_procs"]),
                _spread(report, env, n, envpool_name(w)),
                _frac(r["envpool_vs_ideal"]),
            ]
        )
    gym = find(report, env, n, GYM_ASYNC)
    rows.append(
        [
            f"gymnasium AsyncVectorEnv ({n} processes)",
            _spread(report, env, n, GYM_ASYNC) if gym else "skipped",
            _frac(cv["gym_async_vs_ideal"]),
            *[""] * 5,
        ]
    )
    rows.append(["one raw env (in process)", fmt_rate(cv["raw_env_steps_per_s"]), *[""] * 6])
    rows.append(
        [
            f"ideal: {min(cores, n)} x one raw env",
            fmt_rate(cv["ideal_env_steps_per_s"]),
            "1.00",
            *[""] * 5,
        ]
    )
    console.table(
        f"{env} x{n}: env-steps/s, median ±half-range over {args.rounds} round(s) of "
        f"{args.seconds} s; {report['machine']['cpu_model']}, {cores} usable cores",
        [
            "workers",
            "vecenv",
            "of ideal",
            "of w x raw",
            "w raw processes",
            "of w raw procs",
            "envpool sync (threads)",
            "of ideal",
        ],
        rows,
    )


def evaluate_target(report) -> Dict[str, Any]:
    """Issue 25's target, from this run's medians: pass, short or missing."""
    label = ENVS[TARGET_ENV].label
    text = (
        f"{label} x{TARGET_NUM_ENVS}, {TARGET_WORKERS} workers: vecenv / ideal >= {TARGET_VS_IDEAL}"
    )
    out: Dict[str, Any] = {"target": text, "value": None, "status": "missing", "why": ""}
    cv = next(
        (c for c in report["curves"] if c["env"] == label and c["num_envs"] == TARGET_NUM_ENVS),
        None,
    )
    if cv is None:
        out["why"] = "the cell was not measured"
        return out
    row = next((r for r in cv["rows"] if r["workers"] == TARGET_WORKERS), None)
    if row is None or row["vecenv_vs_ideal"] is None:
        cores = report["machine"]["usable_cores"]
        out["why"] = f"{TARGET_WORKERS} workers not measured ({cores} usable cores)"
        return out
    out["value"] = row["vecenv_vs_ideal"]
    out["status"] = "pass" if row["vecenv_vs_ideal"] >= TARGET_VS_IDEAL else "short"
    return out


def run(args: argparse.Namespace, console: Console) -> Dict[str, Any]:
    # The envs' warnings, here and in workers started with spawn or forkserver.
    warnings.filterwarnings("ignore")
    os.environ["PYTHONWARNINGS"] = "ignore"
    cores = usable_cpus()
    started = time.time()
    report: Dict[str, Any] = {
        **report_header(args),  # before the run: the machine's load average is the start's
        "benchmark": "scaling (issue 25)",
        "method": {
            "seconds_per_round": args.seconds,
            "rounds": args.rounds,
            "warmup_s": args.warmup,
            "order": "interleaved: every round measures every session of a cell, order rotated",
            "ideal": "min(usable cores, num_envs) x one raw env's steps/s in the same cell",
            "linear": "min(workers, usable cores, num_envs) x one raw env's steps/s",
            "vecenv": "ShmemVecEnv(env_fns, num_workers=w), lockstep step(actions)",
            "raw_procs": "w plain processes (the default start method), env i of num_envs in "
            "process i mod w, each stepping its envs in turn with pre-sampled actions, no IPC "
            "while timed: started together at a barrier, the sum of their env-steps/s",
            "envpool": "envpool.make(num_envs=n, batch_size=n, num_threads=w), step(actions)",
            "gym_async": "gymnasium AsyncVectorEnv(shared_memory=True), one process per env",
            "action_pool": ACTION_POOL,
        },
        "envs": {},
        "worker_counts": {},
        "results": [],
        "cells": [],
        "curves": [],
        "skipped": [],
        "notes": [],
        "complete": False,
    }
    m = report["machine"]
    console.print(
        f"[bold]vecenv many-core curve[/bold]: {m['cpu_model']}, "
        f"{cores} usable cores (os.cpu_count() {m['logical_cores']}, cgroup cpu.max "
        f"{m['cpu_max'] or '-'}), cells "
        + ", ".join(f"{ENVS[k].label} x{n}" for k, n in args.cells)
        + f", workers {args.workers}, {args.rounds} round(s) x {args.seconds} s"
    )
    envpool = importlib.util.find_spec("envpool") is not None
    if not envpool:
        why = "envpool is not installed (pip install envpool): its column stays empty"
        report["notes"].append(why)
        console.print(f"[yellow]note[/yellow]: {why}")

    plan = []  # (spec, spaces, n, workers, with envpool, estimate)
    make_s: Dict[str, float] = {}
    for key, n in args.cells:
        spec = ENVS[key]
        spaces, why = probe_env(spec)
        if why is not None:
            report["skipped"].append({"env": spec.label, "num_envs": n, "reason": why})
            console.print(f"[yellow]skip {spec.label} x{n}[/yellow]: {why}")
            continue
        if key not in make_s:
            make_s[key] = time_one_env(spec)
        report["envs"][spec.label] = {**env_entry(spec, spaces), "make_s": make_s[key]}
        workers = worker_counts(args.workers, cores, n)
        report["worker_counts"][f"{spec.label} x{n}"] = workers
        capped = [w for w in args.workers if w not in workers]
        if capped:
            note = (
                f"{spec.label} x{n}: workers {capped} capped at {min(cores, n)} "
                f"({cores} usable cores, {n} envs)"
            )
            report["notes"].append(note)
            console.print(f"[yellow]note[/yellow]: {note}")
        with_envpool = envpool and spec.envpool_id is not None
        if envpool and not with_envpool:
            report["skipped"].append(
                {
                    "contender": "envpool_sync",
                    "env": spec.label,
                    "reason": f"envpool has no {spec.label}",
                }
            )
        gym = gym_async_skip(args, n) is None
        if not gym and not args.quick:
            console.print(
                f"[yellow]note[/yellow]: {spec.label} x{n}: gymnasium AsyncVectorEnv skipped "
                f"(one process per env would start {n} processes; --gym-async-max "
                f"{args.gym_async_max})"
            )
        est = estimate_cell_s(args, n, workers, cores, make_s[key], with_envpool, gym)
        plan.append((spec, spaces, n, workers, with_envpool, est))
    report["estimated_s"] = round(STARTUP_S + sum(p[-1] for p in plan), 1)
    console.print(
        f"{len(plan)} cell(s): about {fmt_duration(report['estimated_s'])} "
        "(estimated: sessions x (warm-up + rounds x seconds), and opening them)"
    )

    planned_done = STARTUP_S
    for i, (spec, spaces, n, workers, with_envpool, est) in enumerate(plan):
        t0 = time.time()
        console.print(f"[{i + 1}/{len(plan)}] {spec.label} x{n}: workers {workers}")
        run_cell(args, spec, spaces, n, workers, cores, with_envpool, report, console)
        planned_done += est
        elapsed = time.time() - started
        report["elapsed_s"] = round(elapsed, 1)
        report["target"] = evaluate_target(report)
        write_report(report, args.out)  # the cells so far, should a time limit stop the run
        eta = sum(p[-1] for p in plan[i + 1 :]) * elapsed / max(planned_done, 1e-9)
        console.print(
            f"[{i + 1}/{len(plan)}] {spec.label} x{n} done ({time.time() - t0:.0f} s); "
            f"elapsed {fmt_duration(elapsed)}, ETA {fmt_duration(eta)}"
        )
    report["machine"]["load_average_end"] = load_average()
    report["elapsed_s"] = round(time.time() - started, 1)
    report["target"] = evaluate_target(report)
    report["complete"] = True
    return report


def write_report(report: Dict[str, Any], out: Path) -> None:
    """Write ``report`` to ``out`` whole or not at all (a new file renamed over it)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, out)


def print_report(report: Dict[str, Any], console: Console, args: argparse.Namespace) -> None:
    cores = report["machine"]["usable_cores"]
    for cv in report["curves"]:
        print_curve(console, report, cv, args, cores)
    for s in report["skipped"]:
        where = " ".join(str(s[k]) for k in ("contender", "env", "num_envs") if k in s)
        console.print(f"[yellow]skipped[/yellow] {where}: {s['reason']}")
    t = report["target"]
    color = {"pass": "green", "short": "red"}.get(t["status"], "yellow")
    value = "-" if t["value"] is None else f"{t['value']:.2f}"
    console.print(
        f"target (issue 25): {t['target']}: {value} [{color}]{t['status']}[/{color}]"
        + (f" ({t['why']})" if t["why"] else "")
    )


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    console = Console()
    report = run(args, console)
    print_report(report, console, args)
    out: Path = args.out
    write_report(report, out)
    console.print(
        f"took {fmt_duration(report['elapsed_s'])} (estimated "
        f"{fmt_duration(report['estimated_s'])}); wrote {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
