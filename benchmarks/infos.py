"""What per-step infos cost: the same env with its infos, without them, and
with ``info_keys=()``, in interleaved rounds.

Each cell steps one env three ways in every round (the order rotates from
round to round): ``infos`` (the env returns its info dict every step),
``none`` (the same env returning ``{}``: for vecenv/Info-v0 ``infos=False``;
for an env that always returns infos, such as ALE, absent), and ``cut`` (the
env's infos, dropped in the worker by ``info_keys=()``). Each way runs in a
fresh vec env: warm-up, then env-steps/s over ``--seconds``. The machine is
never quiet, so the report gives, per cell, the median over rounds of the
paired per-round ratios ``infos/none`` and ``cut/none`` (or ``cut/infos``),
with their range, and writes JSON with every round.

Usage::

    python -P benchmarks/infos.py --rounds 5 --seconds 2 \\
        --out benchmarks/results/local/infos.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any, Callable, Dict, List

import numpy as np

import vecenv
import vecenv.envs

WARMUP_S = 0.3


def _info_env(infos: bool) -> Callable[[], Any]:
    return lambda: vecenv.envs.InfoEnv(infos=infos)


def _ale(env_id: str) -> Callable[[], Any]:
    def make():
        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
        return gym.make(env_id)

    return make


# cell -> (way -> (factory, ShmemVecEnv keywords)), num_envs
CELLS: Dict[str, Any] = {
    "Info-v0 x16 (10 us, 4 float infos), default layout": (
        {
            "infos": (_info_env(True), {}),
            "none": (_info_env(False), {}),
            "cut": (_info_env(True), {"info_keys": ()}),
        },
        16,
    ),
    "Info-v0 x16, num_workers=2": (
        {
            "infos": (_info_env(True), {"num_workers": 2}),
            "none": (_info_env(False), {"num_workers": 2}),
            "cut": (_info_env(True), {"num_workers": 2, "info_keys": ()}),
        },
        16,
    ),
    "ALE/Pong-v5 x16, num_workers=2": (
        {
            "infos": (_ale("ALE/Pong-v5"), {"num_workers": 2}),
            "cut": (_ale("ALE/Pong-v5"), {"num_workers": 2, "info_keys": ()}),
        },
        16,
    ),
}


def time_way(factory: Callable[[], Any], kwargs: Dict[str, Any], num_envs: int, seconds: float):
    """Env-steps per second of ``ShmemVecEnv([factory] * num_envs, **kwargs)``
    stepping random actions in lockstep for ``seconds``, after a warm-up."""
    with vecenv.ShmemVecEnv([factory] * num_envs, **kwargs) as venv:
        venv.action_space.seed(0)
        space = venv.action_space  # one env's (baselines' API): a batch stacks num_envs
        actions = [np.stack([space.sample() for _ in range(num_envs)]) for _ in range(64)]
        venv.reset()
        end = time.perf_counter() + WARMUP_S
        while time.perf_counter() < end:
            venv.step(actions[0])
        steps, start = 0, time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end:
            venv.step(actions[steps & 63])
            steps += 1
        return steps * num_envs / (time.perf_counter() - start)


def _ratio_text(values: List[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--cells", nargs="*", help="substrings of the cells to run (default: all)")
    ap.add_argument("--out", help="write every round as JSON here")
    args = ap.parse_args(argv)
    cells = {
        name: cell
        for name, cell in CELLS.items()
        if not args.cells or any(s.lower() in name.lower() for s in args.cells)
    }
    rounds: Dict[str, List[Dict[str, float]]] = {name: [] for name in cells}
    for r in range(args.rounds):
        for name, (ways, num_envs) in cells.items():
            order = list(ways)
            order = order[r % len(order) :] + order[: r % len(order)]
            rates = {w: time_way(*ways[w], num_envs, args.seconds) for w in order}
            rounds[name].append(rates)
            shown = ", ".join(f"{w} {rates[w]:,.0f}" for w in ways)
            print(f"round {r + 1}/{args.rounds}  {name}: {shown} env-steps/s", flush=True)
    print("\nmedian of paired per-round ratios (range), env-steps/s:")
    for name, rs in rounds.items():
        base = "none" if "none" in rs[0] else "infos"
        parts = [
            f"{w}/{base} {_ratio_text([x[w] / x[base] for x in rs])}" for w in rs[0] if w != base
        ]
        print(f"  {name}: {'; '.join(parts)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {
                    "machine": platform.platform(),
                    "vecenv": vecenv.__version__,
                    "seconds": args.seconds,
                    "rounds": rounds,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
