"""Smoke test of the benchmark suite (benchmarks/run.py): a tiny run in a
subprocess writes a JSON report with machine info, versions and results.

No timing assertions: the numbers only have to exist and be positive.
"""

import ast
import importlib
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

from vecenv import _autolayout

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
RUN = BENCHMARKS / "run.py"
SCALING = BENCHMARKS / "scaling.py"
TRANSFER = BENCHMARKS / "transfer.py"


@pytest.fixture(scope="module")
def suite():
    """benchmarks/suite, the package behind run.py (its modules, no run)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        importlib.import_module("suite.command")  # imports every module of the package
        yield importlib.import_module("suite")
    finally:
        sys.path.remove(str(BENCHMARKS))
        for name in [m for m in sys.modules if m == "suite" or m.startswith("suite.")]:
            del sys.modules[name]
        sys.modules.pop("multi_agent", None)


def _run(args, timeout):
    return subprocess.run(
        [sys.executable, str(RUN), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(300)
def test_quick_run_writes_report(tmp_path, suite):
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
    assert "noop: Fastest: " in tail and "With vecenv: `vecenv.ShmemVecEnv(env_fns" in tail
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
    # The default layout is "auto": the probe's choice, and why, are in the JSON.
    layout = by_name["vecenv"]["layout"]
    assert layout["num_workers"] >= 0 and layout["step_us"] > 0
    assert layout["why"].startswith("the default layout, num_workers='auto'"), layout

    (cell,) = report["cells"]
    assert cell["raw_env_steps_per_s"]["median"] > 0
    assert cell["ideal_env_steps_per_s"] >= cell["raw_env_steps_per_s"]["median"]
    # The batch's copy floor: the noop env's observation is 4 float32s.
    assert cell["obs_bytes"] == 16 and cell["batch_copy_floor_us"] > 0

    # With a C compiler the wait/wake floor runs for vecenv's worker count
    # (none in process: nothing waits or wakes).
    if report["versions"].get("cc"):
        workers = layout["num_workers"]
        assert [f["workers"] for f in report["floor"]] == ([workers] if workers else [])
        if workers:
            assert report["floor"][0]["p50_us"] > 0
            assert by_name["vecenv"]["floor"]["floor_p50_us"] > 0

    # The targets' cells were not measured; the statuses say so. They are the
    # project's, in the JSON only: a user's summary says what to use.
    statuses = {t["status"] for t in report["targets"]}
    assert statuses == {"missing"}
    assert len(report["targets"]) == len(suite.targets.TARGETS)
    md = out.with_suffix(".md").read_text()
    assert "| vecenv | " in md and "Targets" not in md and "issue" not in md
    # One round: nothing to say whether the machine held still.
    assert report["quiet"]["quiet"] is None and "quiet" not in md

    if importlib.util.find_spec("matplotlib") is not None:
        assert out.with_suffix(".png").stat().st_size > 0
        assert (out.parent / "bench-all.png").stat().st_size > 0


@pytest.mark.timeout(180)
def test_scaling_quick_run_writes_the_curve(tmp_path):
    """benchmarks/scaling.py (issue 25's many-core curve) in its smoke-test
    mode: CartPole-v1 x8 with 1 and 2 workers (capped at the usable cores)."""
    import os

    out = tmp_path / "res" / "scaling.json"
    r = subprocess.run(
        [sys.executable, str(SCALING), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "(estimated:" in r.stdout and "of ideal" in r.stdout and "of w raw procs" in r.stdout
    report = json.loads(out.read_text())
    assert report["complete"]
    cores = report["machine"]["usable_cores"]
    # The CPU quota beside the usable cores: cgroup v2's cpu.max as written, or None.
    quota, cpu_max = report["machine"]["cpu_max"], pathlib.Path("/sys/fs/cgroup/cpu.max")
    assert report["machine"]["logical_cores"] == os.cpu_count()
    assert quota == (cpu_max.read_text().strip() if cpu_max.exists() else None)
    assert cores >= 1 and report["versions"]["vecenv"] and "commit" in report["git"]
    assert report["args"]["quick"] and report["args"]["workers"] == [1, 2]
    assert report["elapsed_s"] > 0 and report["estimated_s"] > 0
    workers = sorted({min(w, cores) for w in (1, 2)})
    assert report["worker_counts"] == {"CartPole-v1 x8": workers}

    (curve,) = report["curves"]
    assert (curve["env"], curve["num_envs"]) == ("CartPole-v1", 8)
    assert curve["raw_env_steps_per_s"] > 0
    assert curve["ideal_env_steps_per_s"] == pytest.approx(
        min(cores, 8) * curve["raw_env_steps_per_s"]
    )
    assert [row["workers"] for row in curve["rows"]] == workers
    by_name = {e["contender"]: e for e in report["results"]}
    envpool = importlib.util.find_spec("envpool") is not None
    for row in curve["rows"]:
        w = row["workers"]
        assert row["vecenv"] > 0 and row["vecenv_vs_ideal"] > 0, row
        e = by_name[f"vecenv_w{w}"]
        assert (e["kind"], e["workers"], e["layout"]["num_workers"]) == ("vecenv", w, w)
        assert len(e["env_steps_per_s"]["rounds"]) == 1
        # The machine's ceiling for w workers: w plain processes, 8 / w envs each.
        assert row["raw_procs"] > 0 and row["vecenv_vs_raw_procs"] > 0, row
        assert row["vecenv_vs_raw_procs"] == pytest.approx(row["vecenv"] / row["raw_procs"])
        p = by_name[f"raw_procs_w{w}"]
        assert (p["kind"], p["workers"], p["layout"]["processes"]) == ("raw_procs", w, w)
        assert p["layout"]["envs_per_process"] == -(-8 // w)
        assert len(p["env_steps_per_s"]["rounds"]) == 1
        if envpool:
            assert row["envpool"] > 0, row
            assert by_name[f"envpool_t{w}"]["layout"]["config"]["num_threads"] == w
    # No gymnasium AsyncVectorEnv in --quick (it says so), and no Pong x64 cell
    # for the target.
    assert "gym_async" not in by_name and curve["gym_async"] is None
    assert any(
        s["contender"] == "gym_async" and "--quick" in s["reason"] for s in report["skipped"]
    )
    assert report["target"]["status"] == "missing"


@pytest.fixture
def scaling(suite):
    """benchmarks/scaling.py as a module (the suite's path set up by ``suite``)."""
    spec = importlib.util.spec_from_file_location("_vecenv_scaling", SCALING)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scaling_caps_workers_and_its_default_run_fits_in_minutes(scaling):
    assert scaling.worker_counts([1, 2, 4, 8, 16], 2, 64) == [1, 2]
    assert scaling.worker_counts([1, 2, 4, 8, 16], 12, 256) == [1, 2, 4, 8, 12]
    assert scaling.worker_counts([1, 2, 4, 8, 16], 16, 8) == [1, 2, 4, 8]
    assert scaling.parse_cells("pong:64,CartPole-v1:256") == [("pong", 64), ("cartpole", 256)]
    with pytest.raises(ValueError):
        scaling.parse_cells("pong")
    args = scaling.parse_args([])
    assert args.cells == [("pong", 64), ("cartpole", 256)] and args.workers == [1, 2, 4, 8, 16]
    assert (args.rounds, args.seconds, args.gym_async_max) == (3, 1.0, 64)
    assert args.out.parent == ROOT / "benchmarks" / "results" / "local"
    # CartPole x256 would start 256 processes for gymnasium's AsyncVectorEnv.
    assert scaling.gym_async_skip(args, 64) is None
    assert "256 processes" in scaling.gym_async_skip(args, 256)
    # The default run on 16 cores (Pong built in 0.2 s, CartPole in 1 ms; envpool
    # and the raw processes beside): minutes, under the 6 that the device run gives it.
    make_s = {"pong": 0.2, "cartpole": 0.001}
    total = scaling.STARTUP_S + sum(
        scaling.estimate_cell_s(
            args,
            n,
            scaling.worker_counts(args.workers, 16, n),
            16,
            make_s[key],
            envpool=True,
            gym=scaling.gym_async_skip(args, n) is None,
        )
        for key, n in args.cells
    )
    assert 60 < total < 6 * 60
    quick = scaling.parse_args(["--quick"])
    assert quick.cells == [("cartpole", 8)] and quick.workers == [1, 2]
    assert (quick.rounds, quick.seconds, quick.gym_async_max) == (1, 0.2, 0)
    assert scaling.estimate_cell_s(quick, 8, [1, 2], 2, 0.001, envpool=True, gym=False) < 10


@pytest.mark.timeout(60)
def test_unknown_contender_is_a_usage_error(tmp_path):
    r = _run(["--contenders", "nope", "--out", str(tmp_path / "x.json")], timeout=50)
    assert r.returncode == 2
    assert "unknown contenders ['nope']" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_a_users_run_goes_to_an_ignored_folder(suite):
    args = suite.command.parse_args([])
    assert args.out.parent == ROOT / "benchmarks" / "results" / "local"
    assert args.out.name.startswith("run-") and args.out.suffix == ".json"
    assert (
        suite.command.parse_args(["--publish"]).out
        == ROOT / "benchmarks" / "results" / "latest.json"
    )
    if shutil.which("git") and (ROOT / ".git").exists():
        r = subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "-q", str(args.out)], timeout=30
        )
        assert r.returncode == 0, f"{args.out} is not git-ignored"


def test_out_and_publish_together_is_a_usage_error(suite, capsys):
    with pytest.raises(SystemExit) as info:
        suite.command.parse_args(["--publish", "--out", "x.json"])
    assert info.value.code == 2
    assert "--out and --publish" in capsys.readouterr().err


def test_quick_is_small_and_its_estimate_says_so(suite):
    args = suite.command.parse_args(["--quick"])
    assert args.envs == ["cartpole"] and args.num_envs == [8] and args.rounds == 1
    assert args.contenders == ["vecenv", "vecenv_best", "gym_sync", "gym_async"]
    assert suite.command.estimate_cell_s(args, "cartpole", 8, 2) < 10
    # The default suite's estimate on 2 cores: minutes, as the README says.
    full = suite.command.parse_args([])
    cells = suite.command.suite_cells(full)
    total = sum(suite.command.estimate_cell_s(full, k, n, 2) for k, n in cells)
    assert 5 * 60 < total < 15 * 60
    # 64 and 256 envs only for the cheap envs (and every size --num-envs names).
    assert {n for k, n in cells if k in ("noop", "cartpole")} == {2, 4, 8, 16, 64, 256}
    assert {n for k, n in cells if k not in ("noop", "cartpole")} == {2, 4, 8, 16}
    given = suite.command.parse_args(["--envs", "pong", "--num-envs", "256"])
    assert suite.command.suite_cells(given) == [("pong", 256)]


def _entry(env, n, contender, rate, **layout):
    return {
        "env": env,
        "num_envs": n,
        "contender": contender,
        "env_steps_per_s": {"median": rate},
        "layout": layout,
    }


def test_conclusion_names_fastest_layout_and_where_sync_is_as_fast(suite):
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
    rows = suite.report.conclude(report)
    assert [(r["num_envs"], r["fastest"], r["vecenv_best"]) for r in rows] == [
        (2, "gym_sync", "vecenv_best"),
        (16, "envpool_async", "vecenv_best"),
    ]
    assert rows[0]["gym_sync_vs_vecenv"] == pytest.approx(1.5)
    assert rows[1]["best_peer"] == "envpool_async"
    report["conclusion"] = rows
    console = suite.console.Console()
    console.rich = None  # plain lines
    buf = io.StringIO()
    old, sys.stdout = sys.stdout, buf
    try:
        suite.report.print_conclusion(report, console)
    finally:
        sys.stdout = old
    text = buf.getvalue()
    assert "Fastest: gym_sync at num_envs 2; envpool_async at num_envs 16" in text
    assert "`vecenv.ShmemVecEnv(env_fns, num_workers=1)  # 1 worker x 2 envs` at num_envs 2" in text
    assert "SyncVectorEnv is faster at num_envs 2: a step of this env is too cheap" in text
    assert "as fast (within 5%)" not in text
    assert "SyncVectorEnv is slower at num_envs 16." in text  # the sizes, not "every size"
    # The line of Python is copyable: it builds what it names.
    inline = _entry("CartPole-v1", 2, "vecenv_inline", 1.0, num_workers=1, envs_per_worker=1)
    inline["layout"]["inline"] = True
    assert suite.report.layout_text(inline) == (
        "vecenv.ShmemVecEnv(env_fns, num_workers=1, inline=True)  # the caller and 1 worker, "
        "1 env each"
    )


class _WarningEnv(gymnasium.Env):
    """Warns when built, as MuJoCo's envs do (deprecations)."""

    observation_space = gymnasium.spaces.Discrete(2)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self):
        warnings.warn("this env is deprecated", DeprecationWarning, stacklevel=2)


def test_env_factory_silences_the_envs_warnings(suite):
    gymnasium.register("VecenvTestWarning-v0", entry_point=_WarningEnv, disable_env_checker=True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            suite.envs.make_env("VecenvTestWarning-v0", {}).close()
        assert caught == []
    finally:
        gymnasium.registry.pop("VecenvTestWarning-v0", None)


def _targets_report():
    """A fake run: noop x16 and x256, CartPole-v1 x16 (the numbers are made up)."""
    cells = [
        {"env": "noop", "num_envs": 16, "raw_env_steps_per_s": {"median": 3e6}},
        {"env": "noop", "num_envs": 256, "raw_env_steps_per_s": {"median": 2.5e6}},
        {
            "env": "CartPole-v1",
            "num_envs": 16,
            "raw_env_steps_per_s": {"median": 150e3},
            "ideal_env_steps_per_s": 300e3,
        },
    ]
    results = [
        _entry("noop", 16, "vecenv", 400e3, num_workers=2, envs_per_worker=8),
        _entry("noop", 16, "vecenv_auto", 540e3, num_workers=1, envs_per_worker=16),
        _entry("noop", 16, "gym_sync", 250e3),
        _entry(
            "noop",
            256,
            "vecenv_best",
            1.1e6,
            num_workers=2,
            envs_per_worker=128,
            trials_env_steps_per_s={"1": 1e6, "2": 1.1e6},
        ),
        _entry("noop", 256, "vecenv_auto", 1.0e6, num_workers=2, envs_per_worker=128),
        _entry("noop", 256, "gym_sync", 900e3),
        _entry("CartPole-v1", 16, "vecenv_best", 200e3, num_workers=2, envs_per_worker=8),
        _entry("CartPole-v1", 16, "vecenv_auto", 198e3, num_workers=2, envs_per_worker=8),
        _entry("CartPole-v1", 16, "vecenv_async", 220e3, num_workers=2, batch_size=8),
        _entry("CartPole-v1", 16, "gym_sync", 210e3),
    ]
    return {"machine": {}, "envs": {}, "cells": cells, "results": results, "contenders": {}}


def test_targets_pass_short_and_missing_from_the_runs_own_ratios(suite):
    got = {t["target"]: t for t in suite.targets.evaluate_targets(_targets_report())}
    assert len(got) == len(suite.targets.TARGETS)

    def one(prefix):
        (t,) = [t for text, t in got.items() if text.startswith(prefix)]
        return t

    t = one("noop x16: best vecenv / gym_sync >= 2x")  # vecenv_auto 540k / 250k
    assert t["status"] == "pass" and t["value"] == pytest.approx(2.16) and t["who"] == "vecenv_auto"
    t = one("noop x256: best vecenv / gym_sync >= 3x")  # 1.1M / 0.9M
    assert t["status"] == "short" and t["value"] == pytest.approx(1.1 / 0.9)
    assert one("bigobs x16")["status"] == "missing" and one("bigobs x16")["value"] is None
    # Async counts as vecenv's best against the ideal: 220k / 300k.
    t = one("CartPole-v1 x16: best vecenv / ideal")
    assert t["status"] == "short" and t["value"] == pytest.approx(220 / 300)
    assert one("CartPole-v1 x256")["status"] == "missing"
    # Against the fastest lockstep layout (vecenv_best 200k; auto 198k).
    t = one("CartPole-v1 x16: vecenv async")
    assert t["status"] == "pass" and t["value"] == pytest.approx(1.1)
    assert t["who"] == "vecenv_async / vecenv_best"
    assert one("ALE/Pong-v5 x16: best vecenv / envpool_async")["status"] == "missing"
    # auto's layout / the best layout, per cell: noop x16 auto's own (1 worker,
    # 540k against vecenv's 400k); noop x256 auto's layout is vecenv_best's
    # (2 workers of 128), one layout measured twice, 1.0; CartPole x16 the
    # same, (198k, 200k) pooled against gym_sync's 210k.
    t = one("every cell: vecenv_auto")
    assert t["status"] == "short" and t["value"] == pytest.approx(199 / 210)
    assert [(c["env"], c["num_envs"], c["best"], c["value"]) for c in t["cells"]] == [
        ("noop", 16, "vecenv_auto", 1.0),
        ("noop", 256, "vecenv_auto+vecenv_best", 1.0),
        ("CartPole-v1", 16, "gym_sync", pytest.approx(199 / 210)),
    ]
    # The contenders' own medians stay in the JSON: auto 1.0M / vecenv_best 1.1M.
    assert t["cells"][1]["contender_value"] == pytest.approx(1.0 / 1.1)
    assert t["cells"][1]["contender_best"] == "vecenv_best"
    assert "lowest at CartPole-v1 x16" in t["who"] and "1 of 3 cells below" in t["who"]
    # No measured 1-worker contender at noop x256: vecenv_best's trial of 1
    # worker, 1/1e6 - 1/2.5e6 s = 0.6 us per env-step.
    t = one("noop x256: worker overhead")
    assert t["status"] == "short" and t["value"] == pytest.approx(0.6) and t["unit"] == "us"
    assert t["who"] == "vecenv_best's trial of 1 worker"


def test_worker_overhead_prefers_a_measured_one_worker_contender(suite):
    report = _targets_report()
    report["results"].append(_entry("noop", 256, "vecenv", 2e6, num_workers=1, envs_per_worker=256))
    (target,) = [t for t in suite.targets.TARGETS if t.kind == "worker_overhead"]
    t = suite.targets.evaluate_target(report, target)
    assert t["value"] == pytest.approx(1e6 / 2e6 - 1e6 / 2.5e6)  # 0.1 us
    assert t["status"] == "pass" and t["who"] == "vecenv (1 worker)"


def test_auto_target_pools_the_rounds_of_one_layout(suite):
    """vecenv_auto and vecenv_best ran one layout: its rate is the median of
    both contenders' rounds, and it is compared with the other layouts, not
    with the luckier of its own two measurements."""

    def entry(contender, rounds, **layout):
        e = _entry("CartPole-v1", 8, contender, sorted(rounds)[len(rounds) // 2], **layout)
        e["env_steps_per_s"]["rounds"] = rounds
        return e

    same = dict(num_workers=2, envs_per_worker=4, spin_s=2e-4)
    report = {
        "cells": [{"env": "CartPole-v1", "num_envs": 8}],
        "results": [
            entry("vecenv_auto", [90e3, 100e3, 110e3], **same),
            entry("vecenv_best", [100e3, 105e3, 120e3], **same),
            entry("vecenv_inprocess", [95e3, 96e3, 97e3], num_workers=0, envs_per_worker=8),
            entry("gym_sync", [60e3, 61e3, 62e3]),
        ],
    }
    (target,) = [t for t in suite.targets.TARGETS if t.kind == "auto_vs_best"]
    t = suite.targets.evaluate_target(report, target)
    (c,) = t["cells"]
    assert c["contender_value"] == pytest.approx(100 / 105)  # the contenders alone: short
    assert c["value"] == 1.0 and c["best"] == "vecenv_auto+vecenv_best"
    assert t["status"] == "pass"
    # Had auto chosen in process: 96k (its rounds and vecenv_inprocess's)
    # against vecenv_best's 105k.
    report["results"][0] = entry(
        "vecenv_auto", [95e3, 96e3, 97e3], num_workers=0, envs_per_worker=8
    )
    t = suite.targets.evaluate_target(report, target)
    assert t["cells"][0]["value"] == pytest.approx(96 / 105) and t["status"] == "short"


def test_auto_target_is_missing_without_vecenv_auto(suite):
    report = _targets_report()
    report["results"] = [e for e in report["results"] if e["contender"] != "vecenv_auto"]
    (target,) = [t for t in suite.targets.TARGETS if t.kind == "auto_vs_best"]
    t = suite.targets.evaluate_target(report, target)
    assert (t["status"], t["value"], t["cells"]) == ("missing", None, [])


def test_markdown_summary_has_the_tables_and_leaves_the_targets_to_the_json(suite):
    report = _targets_report()
    report.update(
        envs={"noop": {}, "CartPole-v1": {}},
        contenders={"vecenv": {}, "vecenv_best": {}, "vecenv_auto": {}, "gym_sync": {}},
        machine={"cpu_model": "test cpu", "usable_cores": 2},
    )
    auto = next(e for e in report["results"] if e["contender"] == "vecenv_auto")
    auto["layout"].update(step_us=0.3, why="because")
    report["targets"] = suite.targets.evaluate_targets(report)
    md = suite.report.markdown_summary(report)
    assert "test cpu, 2 usable cores" in md
    assert "## noop" in md and "| contender | x16 | x256 |" in md
    assert "| vecenv_auto | 540.0k | 1.00M |" in md
    assert "| noop x16 | 1 x 16 | 0.3 | because |" in md
    assert "best vecenv / gym_sync" not in md  # the project's targets: in the JSON
    passed = {t["target"]: t["status"] for t in report["targets"]}
    assert passed["noop x16: best vecenv / gym_sync >= 2x"] == "pass"
    report["quiet"] = suite.measure.quiet({"noop x16": [1.0, 1.01]})
    assert "A quiet run: every raw env within ±5% over its rounds." in (
        suite.report.markdown_summary(report)
    )
    report["quiet"] = suite.measure.quiet({"noop x16": [1.0, 2.0]})
    assert "Note: not a quiet run: the machine's speed moved between rounds (at noop x16" in (
        suite.report.markdown_summary(report)
    )


def test_large_sizes_skip_the_process_per_env_peers(suite):
    assert suite.contenders.contender_fits("gym_async", 64) is None
    assert "one process per env" in suite.contenders.contender_fits("gym_async", 256)
    assert "one process per env" in suite.contenders.contender_fits("sb3", 256)
    assert suite.contenders.contender_fits("vecenv_auto", 256) is None


def test_vecenv_best_tries_every_count_the_auto_model_may_choose(suite):
    """vecenv_best is the bar for vecenv_auto: its trials span what the auto
    layout's model ranks for any env, up to 4 workers per core."""
    assert suite.contenders.best_layout_candidates(256, 2) == [1, 2, 4, 8]
    assert suite.contenders.best_layout_candidates(16, 2) == [1, 2, 4, 8]
    assert suite.contenders.best_layout_candidates(3, 2) == [1, 2, 3]
    for n, cores in [(2, 2), (16, 2), (64, 6), (256, 16)]:
        most = _autolayout.candidate_workers(n, cores, cpu_fraction=0.0)[-1]
        got = suite.contenders.best_layout_candidates(n, cores)
        assert got[0] == 1 and got[-1] == most and cores in got


def test_a_run_is_quiet_only_when_every_cells_reference_held_still(suite):
    quiet = suite.measure.quiet
    limit = suite.measure.QUIET_SPREAD_PCT
    # One round says nothing about the machine.
    assert quiet({"noop x2": [100.0]})["quiet"] is None
    assert quiet({})["note"] is None
    calm = quiet({"a x16": [100.0, 104.0, 98.0], "b x16": [50.0, 51.0]})
    assert calm["quiet"] is True and calm["note"] is None and calm["cell"] == "a x16"
    assert calm["spread_pct"] == pytest.approx(3.0) and calm["threshold_pct"] == limit
    # One cell whose raw env moved 1.5x between rounds: the run is not quiet,
    # and the note names the cell.
    noisy = quiet({"a x16": [100.0, 101.0], "CartPole-v1 x64": [90.0, 161.0, 101.0]})
    assert noisy["quiet"] is False and noisy["cell"] == "CartPole-v1 x64"
    assert noisy["spread_pct"] == pytest.approx(100 * 71 / (2 * 101))
    assert "not a quiet run" in noisy["note"] and "CartPole-v1 x64" in noisy["note"]
    assert f"±{limit:g}%" in noisy["note"]


def test_batch_copy_floor(suite):
    assert suite.measure.batch_copy_floor_us(0, 16) is None  # no array form: no floor
    small = suite.measure.batch_copy_floor_us(16, 8)
    big = suite.measure.batch_copy_floor_us(28224, 256)  # 256 Atari frames, 7 MB
    assert 0 < small < big


def _imports(path: pathlib.Path):
    """The benchmark modules ``path`` imports (``suite.X``, a relative ``.X``,
    or a script of benchmarks/), wherever the import statement is."""
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # from .X import ..., from . import X
                found.add(f"suite.{node.module}" if node.module else "suite")
            elif node.module and node.module.split(".")[0] in scripts | {"suite"}:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in scripts | {"suite"}}
    return found


def test_benchmark_modules_import_only_the_modules_below_them():
    """No import cycle: benchmarks/suite/__init__ lists its modules bottom up,
    and each one imports only modules listed above it; the scripts sit on top."""
    package = BENCHMARKS / "suite"
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    order = [ln.split()[0] for ln in doc.splitlines() if ln.startswith("    ") and ln.strip()]
    assert sorted(order) == sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    for k, name in enumerate(order):
        below = {f"suite.{m}" for m in order[:k]}
        got = _imports(package / f"{name}.py")
        # suite.command runs benchmarks/multi_agent.py, which imports suite.console, .machine
        # and suite.contenders only.
        extra = {"multi_agent"} if name == "command" else set()
        assert got <= below | extra, f"suite.{name} imports {sorted(got - below - extra)}"
    # run.py asks benchmarks/rollout.py, the script that bench.sh runs next, for its estimate.
    assert _imports(RUN) == {"suite.command", "rollout"}
    assert _imports(BENCHMARKS / "multi_agent.py") == {
        "suite.console",
        "suite.contenders",
        "suite.machine",
    }
    assert _imports(BENCHMARKS / "ray_overhead.py") == {"suite.machine"}


def test_the_wait_wake_floor_is_only_for_layouts_with_workers(suite):
    def session(**layout):
        s = suite.contenders.Session()
        s.layout = layout
        return s

    lockstep = suite.contenders.lockstep_vecenv
    assert lockstep("vecenv", session(num_workers=2, spin_s=2e-4))
    # In process (vecenv_inprocess, or vecenv_auto choosing it) nothing waits:
    # the floor program takes no 0-worker run.
    assert not lockstep("vecenv_inprocess", session(num_workers=0, spin_s=0.0))
    assert not lockstep("vecenv_auto", session(num_workers=0, spin_s=0.0))
    assert not lockstep("vecenv_async", session(num_workers=2, batch_size=4))
    assert not lockstep("gym_sync", session())


@pytest.mark.timeout(120)
def test_transfer_smoke_run_on_the_cpu_times_every_way(tmp_path):
    """benchmarks/transfer.py (issue 23's pinned-memory copy and GPU loop) with
    --device cpu: the same code, each copy a clone, on CartPole x16."""
    pytest.importorskip("torch")
    out = tmp_path / "transfer.json"
    cmd = [sys.executable, str(TRANSFER), "--device", "cpu", "--env", "CartPole-v1", "--quick"]
    r = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=100)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["num_envs"] == 16
    assert report["batch_bytes"] == 16 * 4 * 4  # CartPole: 4 float32 per env
    assert set(report["copies"]) == {"pinned_block", "pageable_block", "returned_array"}
    for way in report["copies"].values():
        assert way["us"] > 0 and way["GB_per_s"] > 0
    for way in report["loop_env_steps_per_s"].values():
        assert way["median"] > 0 and len(way["rounds"]) == 1
    assert "loop, policy fed from pinned_block" in r.stdout


@pytest.mark.timeout(60)
def test_transfer_on_cuda_without_cuda_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    r = subprocess.run(
        [sys.executable, str(TRANSFER), "--device", "cuda", "--quick"],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert r.returncode != 0 and "CUDA is not available" in r.stderr


@pytest.mark.timeout(60)
def test_device_check_without_prepared_wheels_says_what_to_run(tmp_path):
    """scripts/device_check.sh on a machine where --prepare's wheels did not come along."""
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "device_check.sh"
    shutil.copy(ROOT / "scripts" / "device_check.sh", script)
    r = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=50,
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")},
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "device_check.sh --prepare" in r.stderr and "carry .whl" in r.stderr
