"""vecenv.bench (python -m vecenv.bench / vecenv-bench): measures a user's env
with each vecenv layout and gymnasium's vector envs, and concludes.

No timing assertions: rates only have to exist and be positive, and the
conclusion has to name what the figures say.
"""

import json
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
from helpers import SAFE_PYTHON

from vecenv import _autolayout as al
from vecenv import bench

QUICK = ("--seconds", "0.1", "--warmup", "0.05")


def _cli(*args, cwd, timeout=150):
    return subprocess.run(
        [*SAFE_PYTHON, "-m", "vecenv.bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


@pytest.mark.timeout(160)
def test_cli_measures_every_layout_and_peer_and_recommends(tmp_path):
    out = tmp_path / "noop.json"
    r = _cli("vecenv/Noop-v0", "--num-envs", "4", *QUICK, "--json", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text())
    layouts = bench.layout_candidates(4, report["usable_cores"])
    names = [x["name"] for x in report["results"]]
    # Every mode: in process, the caller's share beside a worker per other
    # core, each layout, auto, partial batches (on the most workers and on one
    # core fewer); then the peers.
    cores = report["usable_cores"]
    partial = sorted({layouts[-1], max(1, min(layouts[-1], cores - 1))}, reverse=True)
    inline = [min(4, cores) - 1] if cores >= 2 else []
    n_vecenv = len(layouts) + 2 + len(inline) + len(partial)
    assert names == ["vecenv"] * n_vecenv + ["gym_sync", "gym_async"]
    options = [x["options"] for x in report["results"][:n_vecenv]]
    assert [o["num_workers"] for o in options] == [0, *inline, *layouts, "auto", *partial]
    assert [o.get("inline", False) for o in options[1 : 1 + len(inline)]] == [True] * len(inline)
    assert [o["batch_size"] for o in options[-len(partial) :]] == [2] * len(partial)
    for x in report["results"]:
        assert x["error"] is None and x["env_steps_per_s"] > 0, x
        # vecenv's where-the-time-went, from venv.stats(), for each of its modes.
        assert (x["stats"] is not None) == (x["name"] == "vecenv"), x
    # A progress line per contender, as it finishes, then the conclusion.
    progress = [ln for ln in r.stdout.splitlines() if ln.startswith("[")]
    assert len(progress) == len(names)
    assert progress[-1].startswith(f"[{len(names)}/{len(names)}] gymnasium AsyncVectorEnv")
    tail = r.stdout.split("On this machine", 1)[1]
    assert "fastest: " in tail and "vecenv: use num_workers=" in tail
    assert "vecenv.make('vecenv/Noop-v0', 4, num_workers=" in tail
    assert "where its time went: " in tail
    assert "gymnasium SyncVectorEnv (in-process) is" in tail
    assert report["recommendation"][0].startswith("fastest: ")


@pytest.mark.timeout(160)
def test_cli_takes_a_factory_in_a_file(tmp_path):
    (tmp_path / "my_env.py").write_text(
        textwrap.dedent(
            """
            import gymnasium as gym

            def make_env(length=5):
                return gym.wrappers.TimeLimit(gym.make("CartPole-v1"), length)
            """
        )
    )
    r = _cli(
        "my_env.py:make_env",
        "--num-envs",
        "2",
        "--contenders",
        "vecenv,gym_sync",
        "--env-kwargs",
        '{"length": 7}',
        *QUICK,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failed" not in r.stdout
    assert "vecenv.ShmemVecEnv([functools.partial(make_env, length=7)] * 2, num_workers=" in (
        r.stdout
    )


@pytest.mark.timeout(60)
def test_cli_names_an_env_it_cannot_make(tmp_path):
    r = _cli("CartPoel-v1", cwd=tmp_path, timeout=50)
    assert r.returncode == 2
    assert "cannot make 'CartPoel-v1'" in r.stderr and "NameNotFound" in r.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "env, what",
    [
        ("vecenv:no_such_factory", "module 'vecenv' has no 'no_such_factory'"),
        ("vecenv:__version__", "vecenv.__version__ is a str, not a factory"),
    ],
)
def test_cli_names_a_factory_it_cannot_find(tmp_path, env, what):
    r = _cli(env, cwd=tmp_path, timeout=50)
    assert r.returncode == 2
    assert f"cannot make {env!r}: ValueError: {what}" in r.stderr, r.stderr
    assert "is registered" in r.stderr and "NameNotFound" not in r.stderr


def test_layout_candidates():
    assert bench.layout_candidates(16, 2) == [1, 2]
    assert bench.layout_candidates(16, 16) == [1, 2, 4, 8, 15, 16]
    assert bench.layout_candidates(3, 16) == [1, 2, 3]  # one worker per env at most
    assert bench.layout_candidates(1, 1) == [1]
    with pytest.raises(ValueError, match="num_envs"):
        bench.layout_candidates(0, 2)


@pytest.mark.parametrize("num_envs", [1, 2, 3, 7, 16, 64, 256])
@pytest.mark.parametrize("cores", [1, 2, 3, 6, 16, 64])
def test_layout_candidates_are_layouts_the_auto_model_ranks(num_envs, cores):
    """What the CLI times is a few of what num_workers="auto" ranks for an env
    that computes: from 1 worker to the most the model considers."""
    ranked = al.candidate_workers(num_envs, cores)
    got = bench.layout_candidates(num_envs, cores)
    assert got == sorted(set(got)) and set(got) <= set(ranked)
    assert got[0] == 1 and got[-1] == ranked[-1] == min(num_envs, cores)
    # The model's choice for a costly env lies in the span that was timed.
    lay = al.choose_layout(1000.0, 16, num_envs, cores)
    assert 1 <= lay.num_workers <= got[-1]


def test_layouts_to_time_for_an_env_that_waits_oversubscribe_as_the_model_does():
    assert al.workers_to_time(16, 2, cpu_fraction=0.0) == [1, 2, 4, 8]
    assert al.workers_to_time(256, 2, cpu_fraction=0.0) == [1, 2, 4, 8]
    assert al.workers_to_time(16, 2, cpu_fraction=0.5) == [1, 2, 4]
    lay = al.choose_layout(1000.0, 16, 16, 2, cpu_fraction=0.01)
    assert lay.num_workers in al.workers_to_time(16, 2, cpu_fraction=0.0)
    with pytest.raises(ValueError, match="cpu_fraction"):
        al.workers_to_time(16, 2, cpu_fraction=1.5)


def _results(vec, sync, gasync=10.0):
    return [
        bench.Result(
            "vecenv",
            "vecenv num_workers=1 (4 envs each)",
            {"num_workers": 1, "envs_per_worker": 4},
            vec[0],
        ),
        bench.Result(
            "vecenv",
            "vecenv num_workers=2 (2 envs each)",
            {"num_workers": 2, "envs_per_worker": 2},
            vec[1],
        ),
        bench.Result("gym_sync", "gymnasium SyncVectorEnv (in-process)", {}, sync),
        bench.Result("gym_async", "gymnasium AsyncVectorEnv", {}, gasync),
    ]


def test_recommend_names_the_mode_its_verdict_and_when_in_process_is_as_fast():
    results = _results((100.0, 200.0), 50.0)
    results[1].stats = "env-bound: per batch, ..."
    lines = bench.recommend(results, lambda o: f"make(num_workers={o['num_workers']})")
    assert lines[0] == "fastest: vecenv num_workers=2 (2 envs each), 200 env-steps/s"
    assert "use num_workers=2 (2 envs each): 200 env-steps/s" in lines[1] and "20.0x" in lines[1]
    assert lines[2] == "  make(num_workers=2)"
    assert lines[3] == "  where its time went: env-bound: per batch, ..."
    assert "is slower here (0.25x" in lines[4]
    lines = bench.recommend(_results((100.0, 90.0), 97.0))
    assert lines[0].startswith("fastest: vecenv num_workers=1")
    assert any("as fast or faster here (0.97x vecenv's best)" in ln for ln in lines)
    lines = bench.recommend(_results((100.0, 90.0), 300.0))
    assert lines[0].startswith("fastest: gymnasium SyncVectorEnv")
    assert any("(3.00x vecenv's best): the env steps too cheaply" in ln for ln in lines)
    failed = [bench.Result("vecenv", "x", {"num_workers": 1}, None, error="boom")]
    assert bench.recommend(failed) == ["nothing could be measured: see the errors above"]


def test_recommend_says_when_the_partial_batches_a_policy_bound_verdict_advises_were_slower():
    def run(lockstep_rate, partial_rate, verdict):
        lock = bench.Result("vecenv", "vecenv num_workers=1", {"num_workers": 1}, lockstep_rate)
        lock.stats = f"{verdict}: per batch, ...; overlap them with partial batches"
        part = bench.Result(
            "vecenv", "vecenv num_workers=1, batch_size=8", {"num_workers": 1, "batch_size": 8},
            partial_rate, stats="env-bound: ...",
        )  # fmt: skip
        return bench.recommend([lock, part])

    lines = run(1700.0, 1500.0, "policy-bound")
    assert lines[0] == "fastest: vecenv num_workers=1, 1.7k env-steps/s"
    assert lines[-1] == (
        "  partial batches were measured here too and were slower (1.5k env-steps/s, 0.88x): "
        "keep lockstep on this machine"
    )
    # Not said when they were faster (they are the mode to use), or for another verdict.
    assert not any("were slower" in ln for ln in run(1500.0, 1700.0, "policy-bound"))
    assert not any("were slower" in ln for ln in run(1700.0, 1500.0, "env-bound"))


def test_console_script_is_installed():
    script = pathlib.Path(sys.executable).parent / "vecenv-bench"
    if not script.exists():
        pytest.skip(f"no {script}: vecenv not installed by pip into this interpreter's prefix")
    r = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "ENV" in r.stdout


@pytest.mark.timeout(160)
def test_cli_times_the_policy_in_the_loop_and_reads_policy_bound(tmp_path):
    (tmp_path / "my_policy.py").write_text(
        textwrap.dedent(
            """
            import time

            def forward(obs):
                assert obs.shape[1:] == (4,)  # CartPole observations reach the policy
                time.sleep(0.004)
            """
        )
    )
    out = tmp_path / "cp.json"
    r = _cli(
        "CartPole-v1",
        "--num-envs",
        "4",
        "--contenders",
        "vecenv",
        "--policy",
        "my_policy.py:forward",
        "--json",
        str(out),
        *QUICK,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "with my_policy.py:forward in the loop" in r.stdout
    report = json.loads(out.read_text())
    lockstep = [x for x in report["results"] if "batch_size" not in x["options"]]
    for x in lockstep:
        # 4 ms of policy per batch of 4: at most 1k env-steps/s, and those 4 ms
        # are the caller's in the mode's stats (the verdict depends on the
        # machine's load; tests/test_stats.py checks it).
        assert 0 < x["env_steps_per_s"] <= 1000, x
        caller_us = float(re.search(r"caller (\d+) us", x["stats"]).group(1))
        assert caller_us >= 4000 * 0.95, x


def test_busy_policy_spends_its_time():
    import time

    policy = bench.busy_policy(2000)
    t0 = time.perf_counter()
    policy(None)
    assert time.perf_counter() - t0 >= 0.002


@pytest.mark.timeout(60)
def test_cli_refuses_a_policy_that_is_not_module_function(tmp_path):
    r = _cli("CartPole-v1", "--policy", "nope", cwd=tmp_path, timeout=50)
    assert r.returncode == 2 and "--policy 'nope' is not module:function" in r.stderr
    r = _cli("CartPole-v1", "--policy-us", "-1", cwd=tmp_path, timeout=50)
    assert r.returncode == 2 and "--policy-us must be >= 0" in r.stderr


def test_the_recommended_line_builds_the_layout_it_names():
    env_fn = bench.EnvFactory("vecenv/Noop-v0")
    line = env_fn.code(4, 1, inline=True)
    assert line == "vecenv.make('vecenv/Noop-v0', 4, num_workers=1, inline=True)"
    assert env_fn.code(4, 2, 2) == "vecenv.make('vecenv/Noop-v0', 4, num_workers=2, batch_size=2)"
    import vecenv.envs  # noqa: F401 - the line names vecenv, and its ids

    with eval(line) as venv:  # the line runs as printed
        assert (venv.layout.num_workers, venv.layout.inline) == (1, True)
