#!/usr/bin/env python3
"""Per-batch overhead of RayVecEnv, local and across two nodes, vs ShmemVecEnv.

Starts a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``:
a head and a worker node, both on 127.0.0.1) and times one lockstep ``step()``
of the same envs through three contenders, in interleaved rounds:

* ``shmem``: a local :class:`vecenv.ShmemVecEnv` (the floor);
* ``ray_local``: a :class:`vecenv.ray.RayVecEnv` with one actor on the head
  node (the driver's node): Ray's task round trip, no transfer between nodes;
* ``ray_2nodes``: two actors, one per node (STRICT_SPREAD): what a
  cross-node step adds. On loopback, "across nodes" means two raylets and
  two object stores on one machine, so network latency and bandwidth are
  not in the figure; add your network's round trip on a real cluster.

The overhead per batch is the median step latency of a Ray contender minus
the median of ``shmem``. Runs only inside a loopback-only network namespace
(Ray would bind to the machine's address otherwise)::

    sudo unshare -n python -P benchmarks/ray_overhead.py            # a minute or two
    sudo unshare -n python -P benchmarks/ray_overhead.py --quick    # seconds

Writes JSON (machine, versions, commit, per-contender latencies) to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vecenv._cpus import usable_cpus

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the suite package (not there under python -P)
    sys.path.insert(0, str(HERE))
from suite.machine import cpu_model, git_info, package_versions  # noqa: E402


def _loopback_namespace() -> bool:
    """tests/loopback.py's check (test and benchmark support, not in the
    package): True in a loopback-only network namespace, with ``lo`` up."""
    path = Path(__file__).resolve().parents[1] / "tests" / "loopback.py"
    spec = importlib.util.spec_from_file_location("_vecenv_loopback", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.loopback_namespace()


ENVS = {"noop": "vecenv/Noop-v0", "bigobs": "vecenv/BigObs-v0"}


def _make(env_id):
    import gymnasium as gym

    import vecenv.envs  # noqa: F401  (registers the vecenv/... ids)

    return gym.make(env_id)


def _machine():
    return {
        "cpu_model": cpu_model(),
        "usable_cores": usable_cpus(),
        "load_average": list(os.getloadavg()),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def _versions():
    out = package_versions(("vecenv", "ray", "numpy", "gymnasium"))
    out["commit"] = git_info()["commit"]
    return out


def _time_steps(venv, actions, steps):
    lat = np.empty(steps)
    for t in range(steps):
        t0 = time.perf_counter()
        venv.step(actions[t % len(actions)])
        lat[t] = time.perf_counter() - t0
    return lat


def _summary(us):
    q = np.percentile(us, [10, 50, 90])
    return {"p10_us": round(q[0], 1), "median_us": round(q[1], 1), "p90_us": round(q[2], 1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", default="noop,bigobs", help=f"comma-separated, from {list(ENVS)}")
    ap.add_argument("--num-envs", type=int, default=8, help="envs per vec env (even)")
    ap.add_argument("--steps", type=int, default=300, help="timed steps per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--quick", action="store_true", help="a smoke test: few steps, one round")
    ap.add_argument("--out", default=str(HERE / "results" / "ray_overhead.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 30, 1
    if args.num_envs < 2 or args.num_envs % 2:
        ap.error("--num-envs must be even and >= 2 (two actors share the envs)")

    import ray
    from ray.cluster_utils import Cluster

    import vecenv
    from vecenv.ray import RayVecEnv

    if not _loopback_namespace():
        sys.exit(
            "refusing to start Ray outside a loopback-only network namespace: run "
            "`sudo unshare -n python -P benchmarks/ray_overhead.py`"
        )
    # Ray puts the driver's working directory on its workers' sys.path: keep a
    # source checkout (vecenv/ without its build) out of it.
    os.chdir(tempfile.mkdtemp(prefix="vecenv-ray-bench-"))
    node = dict(num_cpus=2, object_store_memory=100 * 2**20)
    cluster = Cluster(
        initialize_head=True,
        head_node_args=dict(node, include_dashboard=False, resources={"head": 1}),
    )
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    result = {
        "benchmark": "ray_overhead",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": _machine(),
        "versions": _versions(),
        "cluster": "2 simulated nodes (ray.cluster_utils.Cluster) on 127.0.0.1",
        "ray_env": {k: v for k, v in os.environ.items() if k.startswith("RAY_")},
        "num_envs": args.num_envs,
        "steps_per_round": args.steps,
        "rounds": args.rounds,
        "results": {},
    }
    n = args.num_envs
    try:
        for name in args.envs.split(","):
            fns = [lambda e=ENVS[name]: _make(e)] * n
            venvs = {
                "shmem": vecenv.ShmemVecEnv(fns, num_workers=2),
                "ray_local": RayVecEnv(
                    fns,
                    num_actors=1,
                    actor_options={"num_cpus": 1, "resources": {"head": 0.5}},
                    vec_kwargs={"num_workers": 2},
                ),
                "ray_2nodes": RayVecEnv(fns, num_actors=2, placement_strategy="STRICT_SPREAD"),
            }
            try:
                nodes = {i["node_id"] for i in venvs["ray_2nodes"].actor_info}
                if len(nodes) != 2:
                    raise RuntimeError("the two actors did not land on two nodes")
                space = venvs["shmem"].action_space
                rng = np.random.default_rng(0)
                actions = [rng.integers(0, space.n, n) for _ in range(64)]
                lat = {k: [] for k in venvs}
                for v in venvs.values():
                    v.seed(0)
                    v.reset()
                    _time_steps(v, actions, 20)  # warm-up
                order = list(venvs)
                for r in range(args.rounds):
                    for k in order[r % len(order) :] + order[: r % len(order)]:
                        lat[k].append(_time_steps(venvs[k], actions, args.steps))
                entry = {}
                for k, parts in lat.items():
                    us = np.concatenate(parts) * 1e6
                    entry[k] = _summary(us)
                    entry[k]["round_medians_us"] = [
                        round(float(np.median(p)) * 1e6, 1) for p in parts
                    ]
                floor = entry["shmem"]["median_us"]
                for k in ("ray_local", "ray_2nodes"):
                    entry[k]["overhead_per_batch_us"] = round(entry[k]["median_us"] - floor, 1)
                entry["obs_bytes_per_batch"] = int(
                    np.prod(venvs["shmem"].observation_space.shape)
                    * venvs["shmem"].observation_space.dtype.itemsize
                    * n
                )
                result["results"][name] = entry
            finally:
                for v in venvs.values():
                    v.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    result["machine"]["load_average_end"] = list(os.getloadavg())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'env':8} {'contender':11} {'median us':>10} {'p10':>8} {'p90':>8} {'overhead':>9}")
    for name, entry in result["results"].items():
        for k in ("shmem", "ray_local", "ray_2nodes"):
            e = entry[k]
            over = e.get("overhead_per_batch_us", "")
            print(
                f"{name:8} {k:11} {e['median_us']:10.1f} {e['p10_us']:8.1f} {e['p90_us']:8.1f} {over:>9}"
            )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
