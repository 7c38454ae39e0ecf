"""Smoke test of the benchmark suite (benchmarks/run.py): a tiny run in a
subprocess writes a JSON report with machine info, versions and results.

No timing assertions: the numbers only have to exist and be positive.
"""

import importlib.util
import io
import json
import pathlib
import shutil
import subprocess
import sys
import warnings

import gymnasium
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench_run():
    """benchmarks/run.py as a module (its functions, no run)."""
    spec = importlib.util.spec_from_file_location("_bench_run", RUN)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _run(args, timeout):
    return subprocess.run(
        [sys.executable, str(RUN), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(300)
def test_quick_run_writes_report(tmp_path, bench_run):
    out = tmp_path / "res" / "bench.json"
    r = _run(
        [
            "--quick",
            "--envs",
            "noop",
            "--num-envs",
            "2",
            "--contenders",
            "vecenv,gym_sync",
            "--out",
            str(out),
        ],
        timeout=240,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads(out.read_text())
    # stdout is not a terminal here: still a line per finished cell, with the ETA,
    # and the conclusion comes last; the targets only with --targets.
    assert "about " in r.stdout and "(estimated;" in r.stdout
    assert "[1/1] noop x2 (" in r.stdout and "ETA 0 s" in r.stdout
    tail = r.stdout.split("Conclusion for this machine", 1)[1]
    assert "noop: Fastest: " in tail and "With vecenv use ShmemVecEnv(" in tail
    assert "SyncVectorEnv" in tail
    assert "targets" not in r.stdout and "short" not in r.stdout
    latency = r.stdout.split("latency per batch step", 1)[1].split("\n\n")[0]
    # No floor row in the table (a note may say the floor program was not built).
    rows = [ln for ln in latency.splitlines() if not ln.strip().startswith("note:")]
    assert not any("floor" in ln for ln in rows), latency
    assert report["estimated_s"] > 0 and report["elapsed_s"] > 0
    (row,) = report["conclusion"]
    assert row["fastest"] in {"vecenv", "gym_sync"} and row["vecenv_best"] == "vecenv"
    assert row["gym_sync_vs_vecenv"] > 0

    machine = report["machine"]
    assert machine["usable_cores"] >= 1
    assert isinstance(machine["cpu_model"], str) and machine["cpu_model"]
    assert machine["memory_bytes"] is None or machine["memory_bytes"] > 0
    assert report["versions"]["vecenv"]
    assert report["versions"]["gymnasium"]
    assert "commit" in report["git"]
    assert report["args"]["contenders"] == ["vecenv", "gym_sync"]

    by_name = {e["contender"]: e for e in report["results"]}
    assert set(by_name) == {"vecenv", "gym_sync"}
    for e in by_name.values():
        assert e["env"] == "noop" and e["num_envs"] == 2, e
        rate = e["env_steps_per_s"]
        assert rate["median"] > 0 and len(rate["rounds"]) == 1
        assert e["env_steps_per_call"] == 2
        assert e["latency_us_per_call"]["p50"] > 0
        assert e["vs_ideal"] > 0
        # gymnasium's AsyncVectorEnv was not run: no reference ratio.
        assert e["vs_reference"] is None
    assert by_name["vecenv"]["layout"]["num_workers"] >= 1

    (cell,) = report["cells"]
    assert cell["raw_env_steps_per_s"]["median"] > 0
    assert cell["ideal_env_steps_per_s"] >= cell["raw_env_steps_per_s"]["median"]

    # With a C compiler the wait/wake floor runs for vecenv's worker count.
    if report["versions"].get("cc"):
        workers = by_name["vecenv"]["layout"]["num_workers"]
        assert [f["workers"] for f in report["floor"]] == [workers]
        assert report["floor"][0]["p50_us"] > 0
        assert by_name["vecenv"]["floor"]["floor_p50_us"] > 0

    # The targets' cells were not measured; the statuses say so, and the
    # Markdown summary next to the JSON has them too.
    statuses = {t["status"] for t in report["targets"]}
    assert statuses == {"missing"}
    assert len(report["targets"]) == len(bench_run.TARGETS)
    md = out.with_suffix(".md").read_text()
    assert "| vecenv | " in md and "## Targets (issue 16)" in md

    if importlib.util.find_spec("matplotlib") is not None:
        assert out.with_suffix(".png").stat().st_size > 0
        assert (out.parent / "bench-all.png").stat().st_size > 0


@pytest.mark.timeout(60)
def test_unknown_contender_is_a_usage_error(tmp_path):
    r = _run(["--contenders", "nope", "--out", str(tmp_path / "x.json")], timeout=50)
    assert r.returncode == 2
    assert "unknown contenders ['nope']" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_a_users_run_goes_to_an_ignored_folder(bench_run):
    args = bench_run.parse_args([])
    assert args.out.parent == ROOT / "benchmarks" / "results" / "local"
    assert args.out.name.startswith("run-") and args.out.suffix == ".json"
    assert (
        bench_run.parse_args(["--publish"]).out == ROOT / "benchmarks" / "results" / "latest.json"
    )
    if shutil.which("git") and (ROOT / ".git").exists():
        r = subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "-q", str(args.out)], timeout=30
        )
        assert r.returncode == 0, f"{args.out} is not git-ignored"


def test_out_and_publish_together_is_a_usage_error(bench_run, capsys):
    with pytest.raises(SystemExit) as info:
        bench_run.parse_args(["--publish", "--out", "x.json"])
    assert info.value.code == 2
    assert "--out and --publish" in capsys.readouterr().err


def test_quick_is_small_and_its_estimate_says_so(bench_run):
    args = bench_run.parse_args(["--quick"])
    assert args.envs == ["cartpole"] and args.num_envs == [8] and args.rounds == 1
    assert args.contenders == ["vecenv", "vecenv_best", "gym_sync", "gym_async"]
    assert bench_run.estimate_cell_s(args, "cartpole", 8, 2) < 10
    # The default suite's estimate on 2 cores: minutes, as the README says.
    full = bench_run.parse_args([])
    cells = bench_run.suite_cells(full)
    total = sum(bench_run.estimate_cell_s(full, k, n, 2) for k, n in cells)
    assert 5 * 60 < total < 15 * 60
    # 64 and 256 envs only for the cheap envs (and every size --num-envs names).
    assert {n for k, n in cells if k in ("noop", "cartpole")} == {2, 4, 8, 16, 64, 256}
    assert {n for k, n in cells if k not in ("noop", "cartpole")} == {2, 4, 8, 16}
    given = bench_run.parse_args(["--envs", "pong", "--num-envs", "256"])
    assert bench_run.suite_cells(given) == [("pong", 256)]


def _entry(env, n, contender, rate, **layout):
    return {
        "env": env,
        "num_envs": n,
        "contender": contender,
        "env_steps_per_s": {"median": rate},
        "layout": layout,
    }


def test_conclusion_names_fastest_layout_and_where_sync_is_as_fast(bench_run):
    report = {
        "machine": {"usable_cores": 2},
        "envs": {"CartPole-v1": {}},
        "cells": [{"env": "CartPole-v1", "num_envs": n} for n in (2, 16)],
        "results": [
            _entry("CartPole-v1", 2, "vecenv", 50e3, num_workers=2, envs_per_worker=1),
            _entry("CartPole-v1", 2, "vecenv_best", 60e3, num_workers=1, envs_per_worker=2),
            _entry("CartPole-v1", 2, "gym_sync", 90e3),
            _entry("CartPole-v1", 16, "vecenv_best", 230e3, num_workers=1, envs_per_worker=16),
            _entry("CartPole-v1", 16, "gym_sync", 180e3),
            _entry("CartPole-v1", 16, "envpool_async", 390e3),
        ],
    }
    rows = bench_run.conclude(report)
    assert [(r["num_envs"], r["fastest"], r["vecenv_best"]) for r in rows] == [
        (2, "gym_sync", "vecenv_best"),
        (16, "envpool_async", "vecenv_best"),
    ]
    assert rows[0]["gym_sync_vs_vecenv"] == pytest.approx(1.5)
    assert rows[1]["best_peer"] == "envpool_async"
    report["conclusion"] = rows
    console = bench_run.Console()
    console.rich = None  # plain lines
    buf = io.StringIO()
    old, sys.stdout = sys.stdout, buf
    try:
        bench_run.print_conclusion(report, console)
    finally:
        sys.stdout = old
    text = buf.getvalue()
    assert "Fastest: gym_sync at num_envs 2; envpool_async at num_envs 16" in text
    assert "ShmemVecEnv(num_workers=1, 2 envs each) at num_envs 2" in text
    assert "SyncVectorEnv is faster at num_envs 2: a step of this env is too cheap" in text
    assert "as fast (within 5%)" not in text


class _WarningEnv(gymnasium.Env):
    """Warns when built, as MuJoCo's envs do (deprecations)."""

    observation_space = gymnasium.spaces.Discrete(2)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self):
        warnings.warn("this env is deprecated", DeprecationWarning, stacklevel=2)


def test_env_factory_silences_the_envs_warnings(bench_run):
    gymnasium.register("VecenvTestWarning-v0", entry_point=_WarningEnv, disable_env_checker=True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bench_run.make_env("VecenvTestWarning-v0", {}).close()
        assert caught == []
    finally:
        gymnasium.registry.pop("VecenvTestWarning-v0", None)
