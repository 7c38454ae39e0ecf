"""Host-to-device copies of a batch: page-locked shared block against pageable (issue 23).

Two measurements, in one run, for a device machine (one NVIDIA GPU):

1. **The copy of one batch.** Pong x16 frames (16 x 210 x 160 x 3 uint8, 1.6 MB) from
   a vec env's shared block to the GPU: ``.to(device, non_blocking=True)`` then
   ``torch.cuda.synchronize()``, from the block page-locked in place
   (``shared_tensors(venv, pin_memory=True)``), from the same block pageable
   (``shared_tensors(venv)``), and from the array ``step`` returns (``copy=True``, the
   default: pageable). Medians of ``--copies`` copies, in microseconds and GB/s; and
   how long the ``non_blocking`` call holds the caller (a pageable copy holds it for
   the whole copy, a pinned one returns at once).
2. **The loop with the policy on the GPU.** CleanRL's Nature CNN (ppo_atari.py) on
   Pong x16 frames (resized on the GPU): each step the batch goes to the GPU, the
   forward pass samples the actions, they come back, the vec env steps. Env-steps/s
   with the copy from the pinned block of a ``copy=False`` vec env (``non_blocking``)
   against the copy of the array a default vec env returns (``copy=True``), after a
   warm-up, in rounds of alternating order; and whether the pinned tensors report
   ``is_pinned()``.

``--device cpu`` runs the same code on the CPU (the copy is a ``clone``), as the
smoke test of a machine without CUDA; the figures that matter need ``cuda``.

Usage::

    python benchmarks/transfer.py                     # cuda, Pong x16 (ale-py)
    python benchmarks/transfer.py --device cpu --env CartPole-v1 --quick
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the suite package (not there under python -P)
    sys.path.insert(0, str(HERE))
from suite.machine import report_header  # noqa: E402

LOCAL_OUT = HERE / "results" / "local"


def make_env_fn(env_id: str) -> Callable[[], Any]:
    """A factory of ``env_id`` (ALE ids register ale-py's envs first)."""

    def make():
        import gymnasium as gym

        if env_id.startswith("ALE/"):
            import ale_py

            gym.register_envs(ale_py)
        return gym.make(env_id)

    return make


def time_copies(copy: Callable[[], Any], sync: Callable[[], None], n: int) -> Dict[str, float]:
    """Median microseconds of ``copy(); sync()`` and of the ``copy()`` call alone."""
    for _ in range(5):
        copy()
        sync()
    total: List[float] = []
    call: List[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        copy()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        call.append(1e6 * (t1 - t0))
        total.append(1e6 * (t2 - t0))
    return {"us": statistics.median(total), "call_us": statistics.median(call)}


def nature_cnn(torch: Any, channels: int, n_actions: int) -> Any:
    """CleanRL ppo_atari.py's network (Mnih et al. 2015), on 84x84 inputs."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(channels, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 512),
        nn.ReLU(),
        nn.Linear(512, n_actions),
    )


def loop_rate(venv: Any, act: Callable[[Any], np.ndarray], seconds: float) -> float:
    """Env-steps/s of ``act`` (observations in, actions out) around ``venv.step``."""
    obs = venv.reset()
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        obs, _, _, _ = venv.step(act(obs))
        steps += venv.num_envs
    return steps / (time.perf_counter() - t0)


def run(args: argparse.Namespace) -> Dict[str, Any]:
    import torch

    import vecenv
    from vecenv.tensors import shared_tensors

    torch.set_num_threads(1)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            f"transfer.py: --device cuda, but CUDA is not available (torch {torch.__version__}); "
            "use --device cpu for the smoke test"
        )
    on_gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    n = args.num_envs
    report: Dict[str, Any] = {
        **report_header(args),
        "benchmark": "transfer (issue 23)",
        "env": args.env,
        "num_envs": n,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(0) if on_gpu else None,
    }
    fns = [make_env_fn(args.env)] * n
    with vecenv.ShmemVecEnv(fns, num_workers=args.num_workers) as venv:
        pinned = shared_tensors(venv, pin_memory=on_gpu)
        venv.reset()
        returned, *_ = venv.step(np.zeros(n, dtype=np.int64))
        frame_bytes = int(returned.nbytes)

        def to_device(t: Any) -> Callable[[], Any]:
            if on_gpu:
                return lambda: t.to(device, non_blocking=True)
            return t.clone

        copies: Dict[str, Any] = {
            "pinned_block": time_copies(to_device(pinned.observations), sync, args.copies),
            "returned_array": time_copies(to_device(torch.from_numpy(returned)), sync, args.copies),
        }
    with vecenv.ShmemVecEnv(fns, num_workers=args.num_workers) as venv:
        t = shared_tensors(venv)  # another block, never pinned: a block stays pinned while
        venv.reset()  # any pinned tensor over it lives
        copies["pageable_block"] = time_copies(to_device(t.observations), sync, args.copies)
    for c in copies.values():
        c["GB_per_s"] = frame_bytes / c["us"] / 1e3
    report["batch_bytes"] = frame_bytes
    report["copies"] = copies

    # The loop: the policy on the device, fed from the pinned block of a copy=False vec
    # env (no copy out of the block at all) or from the array a default vec env returns.
    kinds = {"pinned_block": dict(copy=False), "returned_array": {}}
    venvs = {
        k: vecenv.ShmemVecEnv(fns, num_workers=args.num_workers, **kw) for k, kw in kinds.items()
    }
    try:
        space = venvs["pinned_block"].observation_space
        n_actions = int(venvs["pinned_block"].action_space.n)
        image = len(space.shape) == 3
        if image:  # RGB frames, resized on the device, then CleanRL's Nature CNN
            net = nature_cnn(torch, space.shape[-1], n_actions).to(device)
        else:
            d = int(np.prod(space.shape))
            net = torch.nn.Sequential(
                torch.nn.Linear(d, 64), torch.nn.Tanh(), torch.nn.Linear(64, n_actions)
            ).to(device)

        def forward(x: Any) -> np.ndarray:
            """Actions from observations on the device; ``.cpu()`` waits for the
            device, so the copy from the block is done before the next step."""
            with torch.no_grad():
                if image:
                    x = x.permute(0, 3, 1, 2).float() / 255.0
                    x = torch.nn.functional.interpolate(x, size=(84, 84))
                else:
                    x = x.float()
                a = torch.distributions.Categorical(logits=net(x)).sample()
            return a.cpu().numpy()

        t = shared_tensors(venvs["pinned_block"], pin_memory=on_gpu)
        report["pinned_is_pinned"] = bool(t.observations.is_pinned()) if on_gpu else None
        ways: Dict[str, Callable[[Any], np.ndarray]] = {
            "pinned_block": lambda obs: forward(t.observations.to(device, non_blocking=True)),
            "returned_array": lambda obs: forward(torch.from_numpy(obs).to(device)),
        }
        for name, act in ways.items():  # warm-up: cuDNN's choice, lazy loading
            loop_rate(venvs[name], act, min(0.5, args.seconds))
        rates: Dict[str, List[float]] = {name: [] for name in ways}
        names = list(ways)
        for r in range(args.rounds):
            for name in names[r % 2 :] + names[: r % 2]:  # the order alternates
                rates[name].append(loop_rate(venvs[name], ways[name], args.seconds))
        report["loop_env_steps_per_s"] = {
            k: {"median": statistics.median(v), "rounds": v} for k, v in rates.items()
        }
    finally:
        for v in venvs.values():
            v.close()
    return report


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (the measurement) or cpu (smoke test)")
    p.add_argument("--env", default="ALE/Pong-v5", help="a gymnasium id with a Discrete action")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--num-workers", type=int, default=2, help="the vec envs' worker processes")
    p.add_argument("--copies", type=int, default=200, help="timed copies per way")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the loop")
    p.add_argument("--seconds", type=float, default=3.0, help="seconds per loop round")
    p.add_argument("--quick", action="store_true", help="20 copies, 1 round of 0.3 s")
    p.add_argument("--out", type=Path, default=None, help="JSON path (default: results/local/)")
    args = p.parse_args(argv)
    if args.quick:
        args.copies, args.rounds, args.seconds = 20, 1, 0.3
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    report = run(args)
    out = args.out or LOCAL_OUT / time.strftime("transfer-%Y%m%d-%H%M%S.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(
        f"{report['env']} x{report['num_envs']}, batch {report['batch_bytes']} bytes, {report['device']}"
    )
    for name, c in report["copies"].items():
        print(
            f"  copy from {name:15s} {c['us']:9.1f} us  {c['GB_per_s']:6.2f} GB/s  "
            f"(the call holds the caller {c['call_us']:.1f} us)"
        )
    for name, r in report["loop_env_steps_per_s"].items():
        print(f"  loop, policy fed from {name:15s} {r['median']:10.0f} env-steps/s")
    if report["pinned_is_pinned"] is not None:
        print(f"  the pinned block's tensors report is_pinned(): {report['pinned_is_pinned']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
