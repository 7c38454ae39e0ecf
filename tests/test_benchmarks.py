"""Smoke test of the benchmark suite (benchmarks/run.py): a tiny run in a
subprocess writes a JSON report with machine info, versions and results.

No timing assertions: the numbers only have to exist and be positive.
"""

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

RUN = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


def _run(args, timeout):
    return subprocess.run(
        [sys.executable, str(RUN), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(300)
def test_quick_run_writes_report(tmp_path):
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

    # Targets at other sizes were not measured; the statuses say so.
    statuses = {t["status"] for t in report["targets"]}
    assert statuses == {"not measured"}
    assert {t["subject"] for t in report["targets"]} == {"vecenv"}

    if importlib.util.find_spec("matplotlib") is not None:
        assert out.with_suffix(".png").stat().st_size > 0


@pytest.mark.timeout(60)
def test_unknown_contender_is_a_usage_error(tmp_path):
    r = _run(["--contenders", "nope", "--out", str(tmp_path / "x.json")], timeout=50)
    assert r.returncode == 2
    assert "unknown contenders ['nope']" in r.stderr
    assert not (tmp_path / "x.json").exists()
