"""The training loop: examples/ppo_cartpole.py learns CartPole on vecenv within
its step budget, and benchmarks/rollout.py (the policy in the loop) runs and
writes its JSON report. Both run as subprocesses against the installed vecenv."""

import json
import pathlib
import re
import subprocess

import pytest
from helpers import SAFE_PYTHON

ROOT = pathlib.Path(__file__).resolve().parent.parent
PPO = ROOT / "examples" / "ppo_cartpole.py"
ROLLOUT = ROOT / "benchmarks" / "rollout.py"

pytest.importorskip("torch")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ppo_example_reaches_the_target_return_within_its_budget():
    # 150k env-steps is the budget; the fixed seed reaches 195 in about 25k
    # (a few seconds on 2 cores), so the timeout leaves room for a loaded machine.
    r = subprocess.run(
        [*SAFE_PYTHON, str(PPO), "--seed", "1", "--total-timesteps", "150000",
         "--target-return", "195"],
        capture_output=True, text=True, timeout=220, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    progress = re.findall(r"^step +(\d+) ", r.stdout, re.M)
    assert progress and int(progress[-1]) <= 150_000
    final = re.search(r"^final mean return: ([0-9.]+)$", r.stdout, re.M)
    assert final is not None, r.stdout[-2000:]
    assert float(final.group(1)) >= 195.0


@pytest.mark.timeout(60)
def test_ppo_example_reports_failure_when_the_budget_is_too_small():
    r = subprocess.run(
        [*SAFE_PYTHON, str(PPO), "--total-timesteps", "2048", "--target-return", "195"],
        capture_output=True, text=True, timeout=50, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "did not reach 195" in r.stdout


@pytest.mark.timeout(180)
def test_rollout_benchmark_quick_writes_valid_json(tmp_path):
    out = tmp_path / "rollout.json"
    r = subprocess.run(
        [*SAFE_PYTHON, str(ROLLOUT), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=170, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["benchmark"] == "rollout"
    assert {"machine", "versions", "git", "method"} <= set(report)
    (cell,) = report["cells"]
    assert (cell["env"], cell["num_envs"]) == ("CartPole-v1", 8)
    bound = cell["bound"]
    assert bound["bound_env_steps_per_s"] <= bound["policy_alone_env_steps_per_s"]
    assert bound["lockstep_limit_env_steps_per_s"] > 0 and bound["halves_limit_env_steps_per_s"] > 0
    assert bound["policy_us_per_half_batch_step"] > 0
    (timed,) = bound["rounds"]  # the bound is timed in every round
    assert timed["bound_env_steps_per_s"] == bound["bound_env_steps_per_s"]
    assert timed["better_limit_env_steps_per_s"] == max(
        timed["lockstep_limit_env_steps_per_s"], timed["halves_limit_env_steps_per_s"]
    )
    assert {"vecenv", "gym_sync"} <= set(cell["contenders"])
    for c in cell["contenders"].values():
        (rnd,) = c["rounds"]  # --quick: one round
        assert rnd["env_steps"] > 0 and rnd["seconds"] > 0 and rnd["round"] == 0
        assert c["env_steps_per_s"] == pytest.approx(rnd["env_steps"] / rnd["seconds"])
        assert c["of_bound"] == pytest.approx(c["env_steps_per_s"] / timed["bound_env_steps_per_s"])
    assert cell["conclusion"].startswith("use vecenv")
    assert "conclusion: use vecenv" in r.stdout and "ETA" in r.stdout
    assert "with a vec env that costs nothing: lockstep" in r.stdout
    assert report["quiet"]["quiet"] is None  # one round: nothing to compare


def _rollout_module():
    import importlib.util
    import sys

    sys.path.insert(0, str(ROLLOUT.parent))  # rollout.py imports the suite package beside it
    try:
        spec = importlib.util.spec_from_file_location("rollout_under_test", ROLLOUT)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROLLOUT.parent))


def test_rollout_fractions_of_the_bound_pair_each_round_with_its_own_bound():
    rollout = _rollout_module()

    def bound(rate):  # a round's bound and the better of its schedules' limits
        return {"bound_env_steps_per_s": rate, "better_limit_env_steps_per_s": rate / 2}

    # The machine ran at 1x, 2x and 4x speed in the three rounds.
    bounds = [bound(100.0), bound(200.0), bound(400.0)]
    timing = {"batches": 1, "policy_s": 0.0, "env_s": 0.0, "parent_cpu_s": 0.0}
    rounds = [
        {"round": r, "env_steps": steps, "seconds": 1.0, **timing}
        for r, steps in enumerate([90, 100, 380])
    ]
    cell = {
        "bound": {**bound(200.0), "rounds": bounds},
        "contenders": {"vecenv": {"label": "vecenv", "rounds": rounds}},
    }
    rollout.summarize(cell)
    got = cell["contenders"]["vecenv"]
    assert got["env_steps_per_s"] == 100
    # 0.9, 0.5 and 0.95 of their own rounds' bounds; the ratio of the medians
    # (100 / 200) would read 0.5.
    assert got["of_bound"] == pytest.approx(0.9)
    assert got["of_limit"] == pytest.approx(1.8)
    assert "0.90 of the bound, 1.80 of the better schedule's limit" in cell["conclusion"]


def test_schedule_limits_charge_the_policy_per_call():
    limits = _rollout_module().schedule_limits
    # CartPole x64 on the 2-core VM (2026-12-06): env 13.4 us a step; the
    # policy 361 us a call on 64 observations and 373 us on 32.
    got = limits(64, 2, 13.4e-6, 361e-6, 373e-6, 373e-6)
    assert got["lockstep"] == pytest.approx(64 / (361e-6 + 32 * 13.4e-6))
    assert got["halves"] == pytest.approx(64 / ((2 * 373e-6 + 64 * 13.4e-6) / 2))
    bound = 2 / (13.4e-6 + 361e-6 / 64)  # the bound: the policy spread per env-step
    assert max(got.values()) < 0.8 * bound  # a fixed cost per call: 0.8 is out of reach
    # A policy that costs per observation and nothing per call: halves reach the bound.
    per_obs = 5e-6
    got = limits(64, 2, 13.4e-6, 64 * per_obs, 32 * per_obs, 32 * per_obs)
    assert got["halves"] == pytest.approx(2 / (13.4e-6 + per_obs))
    assert got["lockstep"] < got["halves"]
    # One core: lockstep's envs do not spread; the halves' policy calls in a row can bind.
    got = limits(4, 1, 1e-3, 1e-3, 10e-3, 1e-4)
    assert got["lockstep"] == pytest.approx(4 / (1e-3 + 4e-3))
    assert got["halves"] == pytest.approx(4 / 20e-3)


def test_rollout_gives_pufferlib_workers_that_divide_the_envs_and_leave_a_core():
    workers = _rollout_module().pufferlib_workers
    assert workers(16, 2) == 1  # two pollers and the policy on two cores was 8x slower
    assert workers(16, 1) == 1
    assert workers(16, 16) == 8  # 15 does not divide 16
    assert workers(64, 16) == 8
    assert workers(3, 16) == 3
    assert workers(7, 4) == 1


@pytest.mark.timeout(60)
def test_rollout_benchmark_rejects_an_unknown_contender(tmp_path):
    r = subprocess.run(
        [*SAFE_PYTHON, str(ROLLOUT), "--contenders", "nope", "--out", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=50, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 2
    assert "unknown contenders ['nope']" in r.stderr
