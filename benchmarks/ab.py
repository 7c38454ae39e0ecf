"""Two builds of vecenv against each other, cell by cell, in alternating rounds.

For a change to the engine: is any cell slower than before beyond the run's
own spread? Each build is a Python interpreter that imports its own vecenv
(a venv with that build installed). Every (round, cell) times the old build
then the new one (the order alternates between rounds), each in a fresh
process: warm-up, then env-steps/s over ``--seconds``. The report gives per
cell the median of each build, new/old, and the spread (max/min - 1 of each
build's rounds), and writes JSON with the machine, the builds and every round.

Usage::

    python benchmarks/ab.py --old .venv-old/bin/python --new .venv/bin/python \
        --rounds 5 --seconds 2 --out benchmarks/results/local/ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Dict, List

_INFO_ENV = """
import gymnasium as gym
class InfoEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (17,), np.float64)
    action_space = gym.spaces.Discrete(2)
    def reset(self, *, seed=None, options=None):
        return np.zeros(17), {"x_position": 0.0}
    def step(self, action):
        end = time.perf_counter() + 10e-6
        while time.perf_counter() < end:
            pass
        f = np.float64
        info = {"x_position": f(1), "x_velocity": f(2), "reward_forward": f(3), "reward_ctrl": f(4)}
        return np.zeros(17), 1.0, False, False, info
"""

# Each cell: (name, the code that builds `venv`, "lockstep", "loop" (lockstep with 200 us
# of policy per batch) or "async").
CELLS: Dict[str, tuple] = {
    "noop x16 (1 worker)": (
        "import vecenv.envs as E; E.register()\n"
        "venv = vecenv.make('vecenv/Noop-v0', 16, num_workers=1)",
        "lockstep",
    ),
    "noop x16 (in process)": (
        "import vecenv.envs as E; E.register()\n"
        "venv = vecenv.make('vecenv/Noop-v0', 16, num_workers=0)",
        "lockstep",
    ),
    "CartPole x16": ("venv = vecenv.make('CartPole-v1', 16)", "lockstep"),
    "CartPole x256": ("venv = vecenv.make('CartPole-v1', 256)", "lockstep"),
    "Pong x16": ("venv = vecenv.make('ALE/Pong-v5', 16)", "lockstep"),
    "CartPole x16 in a loop (200 us policy)": ("venv = vecenv.make('CartPole-v1', 16)", "loop"),
    # MuJoCo-style infos (4 float64 keys every step, about 10 us a step), defined
    # here so that builds without vecenv/Info-v0 run it too.
    "infos x16": (_INFO_ENV + "venv = vecenv.ShmemVecEnv([InfoEnv] * 16)", "lockstep"),
    "infos x16 in a loop (200 us policy)": (
        _INFO_ENV + "venv = vecenv.ShmemVecEnv([InfoEnv] * 16)",
        "loop",
    ),
    "CartPole x16 async (batch 8)": (
        "venv = vecenv.make('CartPole-v1', 16, batch_size=8)",
        "async",
    ),
}

_TIMER = r"""
import sys, time, json
import numpy as np
import vecenv
{build}
seconds, warmup = {seconds}, {warmup}
n = venv.num_envs
space = venv.action_space
rng = np.random.default_rng(0)
def acts(k):
    return np.asarray([space.sample() for _ in range(k)], dtype=space.dtype)
pool = [acts(n) for _ in range(8)]
def run(until):
    steps = 0
    if "{mode}" in ("lockstep", "loop"):
        i = 0
        while time.perf_counter() < until:
            venv.step(pool[i & 7]); i += 1; steps += n
            if "{mode}" == "loop":  # the policy's time between steps (200 us, busy)
                end = time.perf_counter() + 200e-6
                while time.perf_counter() < end:
                    pass
    else:
        k = venv.batch_size
        half = [a[:k] for a in pool]
        i = 0
        while time.perf_counter() < until:
            obs, rew, done, info, ids = venv.recv()
            venv.send(half[i & 7], ids); i += 1; steps += k
    return steps
venv.reset()
run(time.perf_counter() + warmup)
t0 = time.perf_counter()
steps = run(t0 + seconds)
rate = steps / (time.perf_counter() - t0)
venv.close()
print(json.dumps({{"rate": rate, "vecenv": vecenv.__file__}}))
"""


def time_cell(python: str, cell: str, seconds: float, warmup: float) -> float:
    build, mode = CELLS[cell]
    code = _TIMER.format(build=build, seconds=seconds, warmup=warmup, mode=mode)
    out = subprocess.run(
        [python, "-P", "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"{python} failed on {cell!r}:\n{out.stderr[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="Python of the old build")
    ap.add_argument("--new", required=True, help="Python of the new build")
    ap.add_argument("--cells", default=",".join(CELLS), help=f"comma-separated from {list(CELLS)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per run")
    ap.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds per run")
    ap.add_argument("--out", default=None, help="JSON path (default: print only)")
    args = ap.parse_args(argv)
    cells = [c.strip() for c in args.cells.split(",") if c.strip()]
    unknown = [c for c in cells if c not in CELLS]
    if unknown:
        ap.error(f"unknown cells {unknown}; choose from {list(CELLS)}")
    builds = {"old": args.old, "new": args.new}
    rates: Dict[str, Dict[str, List[float]]] = {c: {"old": [], "new": []} for c in cells}
    total = args.rounds * len(cells) * 2
    done, start = 0, time.monotonic()
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for cell in cells:
            for which in order:
                rates[cell][which].append(time_cell(builds[which], cell, args.seconds, args.warmup))
                done += 1
            eta = (time.monotonic() - start) / done * (total - done)
            print(
                f"round {r + 1}/{args.rounds} {cell}: old {rates[cell]['old'][-1]:,.0f} "
                f"new {rates[cell]['new'][-1]:,.0f} env-steps/s (ETA {eta:.0f} s)",
                file=sys.stderr,
            )
    print("| cell | old median | new median | new/old | spread old | spread new |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for cell in cells:
        old, new = rates[cell]["old"], rates[cell]["new"]
        mo, mn = statistics.median(old), statistics.median(new)
        so, sn = max(old) / min(old) - 1, max(new) / min(new) - 1
        summary[cell] = {"old": mo, "new": mn, "ratio": mn / mo, "spread_old": so, "spread_new": sn}
        print(f"| {cell} | {mo:,.0f} | {mn:,.0f} | {mn / mo:.3f} | {so:.1%} | {sn:.1%} |")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(
                {
                    "machine": {
                        "platform": platform.platform(),
                        "cpus": os.cpu_count(),
                        "python": sys.version.split()[0],
                    },
                    "builds": builds,
                    "rounds": rates,
                    "summary": summary,
                    "seconds": args.seconds,
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
