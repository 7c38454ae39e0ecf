"""num_workers="auto" (vecenv._autolayout): the decision from a step cost, the
bounded probe, and ShmemVecEnv's use of both (venv.layout, the log, the same
seeded trajectories as an explicit layout)."""

import functools
import logging
import math
import os
import time

import gymnasium as gym
import numpy as np
import pytest

import vecenv
import vecenv.envs  # registers the vecenv/ ids
from vecenv import _autolayout as al
from vecenv import _plan, _pool
from vecenv._options import EngineOptions
from vecenv.errors import InvalidArgumentError


# ---------------------------------------------------------------- the decision
@pytest.mark.parametrize(
    "step_us, obs_bytes, num_envs, cores, inprocess, workers, inline",
    [
        # A noop-like env (0.3 us) on 2 cores: the caller and one worker when
        # in process is a candidate (measured 2026-12-06 on the 2-core Intel
        # VM: noop x16 1.76M env-steps/s against 1.60M in process and 1.30M
        # for the best worker layout; x64 2.84M, 2.19M, 2.32M); otherwise one
        # worker at 16 envs, both cores at 256.
        (0.3, 16, 16, 2, True, 1, True),
        (0.3, 16, 16, 2, False, 1, False),
        (0.3, 16, 64, 2, True, 1, True),
        (0.3, 16, 256, 2, True, 1, True),
        (0.3, 16, 256, 2, False, 2, False),
        # CartPole-like (7 us): the caller and one worker from 4 envs (x8
        # 232k against 176k for the best worker layout and 148k in process;
        # x16 258k, 204k, 147k).
        (7.4, 16, 4, 2, True, 1, True),
        (7.4, 16, 8, 2, True, 1, True),
        (6.0, 16, 16, 2, True, 1, True),
        (6.0, 16, 256, 2, False, 2, False),
        # bigobs (28 KiB frames): in process up to 16 envs (x8 419k against
        # 256k with the caller's share; x16 371k against 344k): frames through
        # a worker are copied twice, in and out.
        (0.3, 28224, 2, 2, True, 0, False),
        (0.3, 28224, 16, 2, True, 0, False),
        (0.3, 28224, 256, 2, False, 2, False),
        # Pong-like (200 us): every core, up to one env each; the caller's
        # share where it can (Pong x16 7.2k against 6.9k with 2 workers).
        (200.0, 100800, 16, 2, True, 1, True),
        (200.0, 100800, 16, 16, True, 15, True),
        (200.0, 100800, 8, 16, False, 8, False),
        # One core: workers cannot add parallelism.
        (6.0, 16, 16, 1, True, 0, False),
        (6.0, 16, 16, 1, False, 1, False),
        (200.0, 16, 1, 8, False, 1, False),
    ],
)
def test_choose_layout_cases(step_us, obs_bytes, num_envs, cores, inprocess, workers, inline):
    lay = al.choose_layout(step_us, obs_bytes, num_envs, cores, inprocess=inprocess)
    assert (lay.num_workers, lay.inline) == (workers, inline), lay.why
    shares = workers + inline
    if workers:
        assert lay.envs_per_worker == math.ceil(num_envs / shares)
        assert lay.spin == al.SPIN_S
    else:
        assert lay.envs_per_worker == num_envs and lay.spin == 0.0
    assert lay.step_us == step_us and lay.predicted_batch_us > 0
    assert f"{num_envs} envs, {cores} usable cores:" in lay.why
    assert ("not a candidate" in lay.why) is (not inprocess)
    assert ("the caller and" in lay.why.split("(next best")[0]) is inline


@pytest.mark.parametrize(
    "step_us, cpu_fraction, num_envs, workers",
    [
        # An env that sleeps 1 ms a step: 4 workers per core (the most).
        (1000.0, 0.02, 16, 8),
        (1000.0, 0.02, 4, 4),
        # heavytail x16 under load (busy-waits on the wall clock, the probe
        # got half a core): 4 workers (measured 4.4 ms per batch, 2 workers
        # 6.1 ms, 16 workers 4.7 ms).
        (150.0, 0.5, 16, 4),
        # A cheap env's cost is the CPU work around its step: the caller and
        # one worker, one per core.
        (0.3, 0.2, 16, 1),
    ],
)
def test_choose_layout_oversubscribes_only_an_env_that_waits(
    step_us, cpu_fraction, num_envs, workers
):
    lay = al.choose_layout(step_us, 16, num_envs, 2, inprocess=True, cpu_fraction=cpu_fraction)
    assert lay.num_workers == workers, lay.why
    assert lay.inline is (step_us < 1), lay.why  # waits overlap in processes only
    assert f"({cpu_fraction:.0%} CPU)" in lay.why
    if workers > 4:  # more than two per core: they sleep, as ShmemVecEnv's default
        assert lay.spin == 0.0
    elif workers:
        assert lay.spin == al.SPIN_S


@pytest.mark.parametrize("cpu_fraction", [0.0, 0.01, 0.1, 0.3, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("num_envs", [1, 3, 16, 1000])
def test_choose_layout_bounds_with_a_cpu_fraction(cpu_fraction, num_envs):
    for step_us in [0.0, 1, 30, 1e3, 1e5]:
        lay = al.choose_layout(step_us, 64, num_envs, 2, cpu_fraction=cpu_fraction)
        cap = 2 * min(al.MAX_OVERSUBSCRIPTION, max(1, math.floor(1 / max(cpu_fraction, 0.05))))
        assert 1 <= lay.num_workers <= min(num_envs, cap), lay.why


@pytest.mark.parametrize("cores", [1, 2, 3, 4, 8, 16, 64])
@pytest.mark.parametrize("num_envs", [1, 2, 3, 7, 16, 64, 256, 1000])
@pytest.mark.parametrize("inprocess", [False, True])
def test_choose_layout_bounds_and_monotone_in_step_cost(cores, num_envs, inprocess):
    """Within bounds for every cost, and a costlier env never gets fewer
    workers once a step costs the parent's whole turn on a worker's core
    (al.SHARED_CORE_STEP_US; below it, that turn costs in proportion to the
    step, so a faster env may be spread over one more worker)."""
    last = -1
    for step_us in [0.0, 0.1, 0.5, 1, 2, 5, 10, 30, 100, 300, 1e3, 1e4, 1e5]:
        lay = al.choose_layout(step_us, 64, num_envs, cores, inprocess=inprocess)
        shares = lay.num_workers + lay.inline  # the caller's share counts (inline)
        assert 0 <= shares <= min(num_envs, cores)
        assert lay.num_workers > 0 or inprocess
        assert not lay.inline or (inprocess and lay.num_workers >= 1)
        if lay.num_workers:
            assert lay.envs_per_worker * shares >= num_envs
            assert lay.envs_per_worker * (shares - 1) < num_envs
        if step_us >= al.SHARED_CORE_STEP_US:
            assert shares >= last, (step_us, lay.why)
            last = shares
    # Expensive enough, the busiest worker has as few envs as the cores allow
    # (1000 envs on 64 cores: 63 workers of 16 envs, not 64: the same share,
    # and a core left for the parent).
    assert lay.envs_per_worker == math.ceil(num_envs / min(num_envs, cores))


@pytest.mark.parametrize(
    "args",
    [(-1.0, 0, 4, 2), (float("nan"), 0, 4, 2), (1.0, -1, 4, 2), (1.0, 0, 0, 2), (1.0, 0, 4, 0)],
)
def test_choose_layout_rejects_bad_inputs(args):
    with pytest.raises(ValueError, match="choose_layout needs"):
        al.choose_layout(*args)


def test_choose_layout_counts_the_pickling_of_infos():
    """Infos cost workers their pickling and a message each, while in process
    they stay by reference: a cheap env with a small info in every step stays
    in process (measured, 4 floats: in process 39 us per batch of 16 when
    they were still pickled, 1 worker 57 us, 2 workers 84 us), and a worker
    layout's prediction grows by the pickling at least."""
    plain = al.choose_layout(0.5, 16, 16, 2, inprocess=True)
    costly = al.choose_layout(0.5, 16, 16, 2, inprocess=True, info_fraction=1.0, info_us=2.5)
    assert costly.num_workers == 0, costly.why
    assert "pickled infos in 100% of steps (2.5 us to pickle)" in costly.why
    assert costly.predicted_batch_us >= plain.predicted_batch_us
    workers = al.choose_layout(0.5, 16, 16, 2)
    workers_costly = al.choose_layout(0.5, 16, 16, 2, info_fraction=1.0, info_us=2.5)
    assert workers_costly.predicted_batch_us >= workers.predicted_batch_us + 16 * 2.5
    # An env whose step dwarfs its infos still gets every core.
    assert al.choose_layout(500.0, 16, 16, 2, info_fraction=1.0, info_us=15.0).num_workers == 2
    with pytest.raises(ValueError, match="info_fraction in"):
        al.choose_layout(1.0, 0, 4, 2, info_fraction=2.0)
    with pytest.raises(ValueError, match="info_us >= 0"):
        al.choose_layout(1.0, 0, 4, 2, info_us=-1.0)


def test_choose_layout_shares_the_cores_with_other_busy_tasks():
    """Other runnable tasks that took the CPU from the probe take their fair
    share of the cores and delay each wake: HalfCheetah-v5 x2 probed at 56%
    CPU next to 2 runnable tasks is stepped in process (measured there: in
    process 10.7k env-steps/s, 2 workers 7.0k); a probe that kept its core
    saw no contention, and chooses as on an idle machine."""
    cheetah = dict(info_fraction=1.0, info_us=17.6, inprocess=True)
    idle = al.choose_layout(39.8, 136, 2, 2, **cheetah)
    busy = al.choose_layout(72.6, 136, 2, 2, busy_cores=2.0, cpu_fraction=0.56, **cheetah)
    assert busy.num_workers == 0, busy.why
    assert "(1.6 busy with other tasks)" in busy.why  # at most what the probe lost
    kept = al.choose_layout(39.8, 136, 2, 2, busy_cores=2.0, **cheetah)
    assert kept == idle and "busy" not in kept.why
    # Long steps still pay with every core.
    assert al.choose_layout(300.0, 16, 16, 2, busy_cores=1.0, cpu_fraction=0.7).num_workers >= 2
    with pytest.raises(ValueError, match="busy_cores >= 0"):
        al.choose_layout(1.0, 0, 4, 2, busy_cores=-1.0)


@pytest.mark.parametrize("cpu_fraction", [-0.1, 1.5, float("nan")])
def test_choose_layout_rejects_a_bad_cpu_fraction(cpu_fraction):
    with pytest.raises(ValueError, match="cpu_fraction in"):
        al.choose_layout(1.0, 0, 4, 2, cpu_fraction=cpu_fraction)


# ---------------------------------------------------------------- the probe
class _Counted(gym.Env):
    """Counts, in the process that builds it, the envs made and closed; each
    step busy-waits ``step_s`` seconds."""

    made = 0
    closed = 0
    observation_space = gym.spaces.Box(0, 1, (3, 5), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, step_s=0.0, episode_length=10):
        _Counted.made += 1
        self.step_s = step_s
        self.episode_length = episode_length
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros((3, 5), np.float32), {}

    def step(self, action):
        end = time.perf_counter() + self.step_s
        while time.perf_counter() < end:
            pass
        self._t += 1
        return np.zeros((3, 5), np.float32), 0.0, False, self._t >= self.episode_length, {}

    def close(self):
        _Counted.closed += 1


@pytest.fixture
def counted():
    _Counted.made = _Counted.closed = 0
    return _Counted


@pytest.mark.timeout(30)
def test_probe_is_bounded_in_time(counted):
    t0 = time.perf_counter()
    p = al.probe(lambda: counted(step_s=2e-3), max_seconds=0.05)
    took = time.perf_counter() - t0
    # 0.05 s of 2 ms steps, checked every 8 steps: at most 16 ms over.
    assert took < 0.5 and p.elapsed_s < 0.5
    assert 8 <= p.steps <= 40
    assert 1500 < p.step_us < 20000
    assert p.obs_bytes == 3 * 5 * 4
    assert (counted.made, counted.closed) == (1, 1)


@pytest.mark.timeout(30)
def test_probe_stops_at_max_steps_and_counts_resets(counted):
    p = al.probe(lambda: counted(episode_length=3), max_seconds=10.0, max_steps=100)
    assert p.steps == 100 and p.elapsed_s < 5
    assert p.step_us >= 0 and p.reset_us >= 0
    assert (counted.made, counted.closed) == (1, 1)


def test_probe_leaves_out_preemptions_but_keeps_heavy_tails():
    # 100 chunks of 8 steps at 1 us each; one chunk preempted for 10 ms.
    chunks = [(8e-6, 8, 8e-6)] * 99 + [(10e-3, 8, 8e-6)]
    assert al._trimmed_mean(chunks) == pytest.approx(1e-6)
    # A heavy tail in a third of the chunks (one 2 ms step in 8) stays in.
    tail = [(7 * 50e-6 + 2e-3, 8, 0.0)] * 34 + [(8 * 50e-6, 8, 0.0)] * 66
    mean = sum(c[0] for c in tail) / 800
    assert al._trimmed_mean(tail) == pytest.approx(mean, rel=0.05)
    assert al._trimmed_mean(tail) > 2 * 50e-6  # far above the median step
    # Few chunks: nothing is left out.
    assert al._trimmed_mean([(1e-3, 8, 0.0), (9e-3, 2, 0.0)]) == pytest.approx(1e-3)
    # The CPU fraction is over the same chunks: the preempted one is out.
    assert al._cpu_fraction(chunks) == pytest.approx(1.0)
    assert al._cpu_fraction([(1e-3, 8, 2.5e-4)] * 10) == pytest.approx(0.25)
    assert al._cpu_fraction([(1e-3, 8, 2e-3)]) == 1.0  # other threads' CPU: at most 1


@pytest.mark.timeout(30)
def test_probe_times_the_pickling_of_infos_that_are_not_all_numbers(counted):
    class Talkative(counted):
        def step(self, action):
            obs, r, term, trunc, _ = super().step(action)
            info = {"x": np.float64(self._t), "name": "pong"} if self._t % 2 else {}
            return obs, r, term, trunc, info

    p = al.probe(Talkative, max_seconds=10.0, max_steps=200)
    assert p.info_fraction == pytest.approx(0.5) and p.info_us > 0
    quiet = al.probe(counted, max_seconds=10.0, max_steps=200)
    assert (quiet.info_fraction, quiet.info_us) == (0.0, 0.0)

    class Numbers(counted):  # its infos travel in the block's info rows: nothing pickled
        def step(self, action):
            return (*super().step(action)[:4], {"x": np.float64(1.0), "lives": 3})

    assert (al.probe(Numbers, max_seconds=10.0, max_steps=200).info_fraction) == 0.0
    assert quiet.busy_cores >= 0.0  # whatever the machine's load

    class Unpicklable(counted):
        def step(self, action):
            return (*super().step(action)[:4], {"f": lambda: 0})

    # Not a probe failure: the engine reports such an info as the env's error.
    assert al.probe(Unpicklable, max_seconds=10.0, max_steps=20).info_us == 0.0


@pytest.mark.timeout(30)
def test_probe_sees_that_a_sleeping_env_leaves_the_cpu_idle():
    # Load can only lower the fraction, so this holds on a busy machine too.
    class Sleepy(_Counted):
        def step(self, action):
            time.sleep(1e-3)
            return super().step(action)

    p = al.probe(Sleepy, max_seconds=0.05)
    assert p.steps >= 1 and p.step_us >= 1000
    assert 0.0 <= p.cpu_fraction < 0.5


def test_probe_closes_its_env_when_a_step_raises(counted):
    class Boom(counted):
        def step(self, action):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        al.probe(Boom)
    assert (counted.made, counted.closed) == (1, 1)


def test_probe_leaves_a_shared_action_space_alone():
    shared = gym.spaces.Discrete(1000, seed=7)
    reference = gym.spaces.Discrete(1000, seed=7)

    class SharesSpace(_Counted):
        action_space = shared

    al.probe(SharesSpace, max_steps=50)
    assert [shared.sample() for _ in range(20)] == [reference.sample() for _ in range(20)]


def test_auto_layout_falls_back_and_warns_when_the_probe_fails(caplog):
    def broken():
        raise OSError("no display")

    with caplog.at_level(logging.WARNING, logger="vecenv"):
        lay = al.auto_layout(broken, 6, 4)
    assert (lay.num_workers, lay.envs_per_worker, lay.step_us) == (4, 2, None)
    assert "OSError: no display" in lay.why
    assert any("num_workers='auto'" in r.getMessage() for r in caplog.records)


def _hangs_in_the_parent(parent_pid, marker):
    """A factory that does not return in the test's process while ``marker``
    exists (at most 60 s), and builds a noop env in a worker."""
    import vecenv.envs  # noqa: F401  (registers vecenv/Noop-v0 where unpickled)

    deadline = time.monotonic() + 60
    while os.getpid() == parent_pid and os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    return gym.make("vecenv/Noop-v0")


@pytest.mark.timeout(60)
def test_the_default_probe_is_bounded_by_start_timeout(caplog, tmp_path):
    # Regression: the default "auto" built env_fns[0] in the caller with no
    # limit, so a factory that never returns hung the constructor, where the
    # worker layouts report it after start_timeout.
    marker = tmp_path / "hang"
    marker.touch()
    fn = functools.partial(_hangs_in_the_parent, os.getpid(), str(marker))
    t0 = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="vecenv"):
            venv = vecenv.ShmemVecEnv([fn] * 2, start_timeout=1.0, context="fork")
        try:
            assert time.monotonic() - t0 < 30
            assert venv.layout.num_workers >= 1 and venv.layout.step_us is None
            assert "did not finish within 1 s (its limit: start_timeout)" in venv.layout.why
            assert venv.reset().shape[0] == 2  # the workers built theirs
        finally:
            venv.close()
    finally:
        marker.unlink()  # the probe's thread builds its env, times it and closes it
    assert any("did not finish" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "options, num_envs, want",
    [
        ({}, 8, 3),  # the front ends' default: one worker per usable core
        ({}, 2, 2),  # at most one per env
        ({"num_workers": 2}, 8, 2),
        ({"envs_per_worker": 4}, 8, 2),
        ({"batch_size": 4}, 8, 2),  # the partial-batch default: cores but one
        ({"batch_size": 8}, 8, 3),
    ],
)
def test_the_per_core_default_fills_in_only_a_missing_lockstep_layout(
    monkeypatch, options, num_envs, want
):
    monkeypatch.setattr(_plan, "usable_cpus", lambda: 3)
    monkeypatch.setattr(_pool, "usable_cpus", lambda: 3)
    options = dict(options)
    batch_size = options.pop("batch_size", None)
    plan = _plan.plan_layout(
        [lambda: None] * num_envs,  # never built: no probe
        EngineOptions(**options),
        batch_size=batch_size,
        check_affinity=lambda affinity, workers: None,
        default="per_core",
    )
    assert plan.layout.num_workers == want and plan.layout.step_us is None


# ---------------------------------------------------------------- ShmemVecEnv
def _run(venv, steps=40):
    venv.seed(123)
    obs = [venv.reset()]
    rng = np.random.default_rng(0)
    out = []
    for _ in range(steps):
        o, r, d, _ = venv.step(rng.integers(0, 2, venv.num_envs))
        out.append((o, r, d))
    return obs, out


@pytest.mark.timeout(60)
def test_auto_runs_the_same_seeded_trajectories_as_an_explicit_layout(caplog):
    with caplog.at_level(logging.INFO, logger="vecenv"):
        auto = vecenv.make("CartPole-v1", 6, num_workers="auto")
    try:
        lay = auto.layout
        assert isinstance(lay, al.Layout)
        # In process or workers: the probe's figures (and the load) decide.
        assert 0 <= lay.num_workers <= 6 and lay.step_us > 0
        assert lay.envs_per_worker == math.ceil(6 / max(lay.num_workers + lay.inline, 1))
        assert auto.in_process == (lay.num_workers == 0)
        assert lay.spin == auto.spin
        assert any(r.name == "vecenv" and lay.why in r.getMessage() for r in caplog.records), (
            caplog.text
        )
        got = _run(auto)
    finally:
        auto.close()
    other = 1 if lay.num_workers != 1 else 3  # not auto's own choice
    explicit = vecenv.make("CartPole-v1", 6, num_workers=other)
    try:
        assert explicit.layout.step_us is None and explicit.layout.num_workers == other
        assert explicit.layout.why == "the given layout"
        want = _run(explicit)
    finally:
        explicit.close()
    np.testing.assert_array_equal(got[0][0], want[0][0])
    for (o1, r1, d1), (o2, r2, d2) in zip(got[1], want[1]):
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(d1, d2)


@pytest.mark.timeout(60)
def test_auto_builds_one_probe_env_in_the_parent_and_closes_it(counted):
    # timeout: only worker layouts (in-process cannot enforce it).
    venv = vecenv.ShmemVecEnv([counted] * 3, num_workers="auto", context="fork", timeout=60)
    try:
        # The workers build their envs in their own processes.
        assert venv.layout.num_workers >= 1 and not venv.in_process
        assert (counted.made, counted.closed) == (1, 1)
        venv.reset()
        venv.step(np.zeros(3, np.int64))
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_auto_keeps_a_given_spin():
    venv = vecenv.make("vecenv/Noop-v0", 2, num_workers="auto", spin=0.0)
    try:
        assert venv.spin == 0.0 and venv.layout.spin == 0.0 and venv.layout.step_us is not None
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_auto_steps_a_cheap_env_in_the_caller_unless_an_option_needs_workers(counted):
    # A sub-microsecond step and 4 envs: the caller steps them all, or its
    # share beside one worker (measured on 2 cores, noop x4: 926k env-steps/s
    # against 853k in process and 813k for the best worker layout); never a
    # parent that only waits.
    venv = vecenv.ShmemVecEnv([counted] * 4, num_workers="auto")
    lay = venv.layout
    try:
        assert venv.in_process or (lay.inline and lay.num_workers == 1), lay.why
        own = 4 if venv.in_process else 2  # the envs this process built
        assert lay.envs_per_worker == own and counted.made == 1 + own
        assert ("in-process" if venv.in_process else "the caller and 1 worker") in lay.why
        venv.reset()
        venv.step(np.zeros(4, np.int64))
    finally:
        venv.close()
    for kwargs in ({"timeout": 30.0}, {"on_worker_death": "restart"}):
        venv = vecenv.ShmemVecEnv([counted] * 4, num_workers="auto", **kwargs)
        try:
            assert not venv.in_process and not venv.layout.inline, kwargs
            assert venv.layout.num_workers >= 1
            assert "in-process (num_workers=0) and inline=True: not a candidate" in (
                venv.layout.why
            )
        finally:
            venv.close()


def test_in_process_layout_is_reported_with_no_workers():
    venv = vecenv.make("vecenv/Noop-v0", 3, num_workers=0)
    try:
        assert (venv.layout.num_workers, venv.layout.envs_per_worker) == (0, 3)
        assert venv.layout.why == "the given layout"
    finally:
        venv.close()


@pytest.mark.timeout(60)
def test_the_default_lockstep_layout_is_auto():
    # Neither num_workers nor envs_per_worker: the probe decides, and says so.
    for kwargs in ({}, {"num_workers": None}, {"batch_size": 3}):
        venv = vecenv.make("vecenv/Noop-v0", 3, **kwargs)
        try:
            why = venv.layout.why
            assert why.startswith("the default layout, num_workers='auto': env.step "), why
            assert venv.layout.step_us is not None and venv.layout.predicted_batch_us
            assert venv.layout.spin == venv.spin
        finally:
            venv.close()
    # With an option only workers honour, it chooses among worker layouts.
    venv = vecenv.make("vecenv/Noop-v0", 3, timeout=30)
    try:
        assert venv.layout.num_workers >= 1 and not venv.layout.inline
        assert "in-process (num_workers=0) and inline=True: not a candidate" in venv.layout.why
    finally:
        venv.close()


@pytest.mark.timeout(120)
def test_the_drop_ins_choose_among_worker_layouts_by_default():
    # The classes they replace run every env in a worker process: the probe
    # chooses how many workers, never in process nor the caller's share.
    from vecenv.gymnasium_vector import AsyncVectorEnv

    sb3 = pytest.importorskip("vecenv.sb3")
    fns = [lambda: gym.make("vecenv/Noop-v0")] * 3
    for make in (AsyncVectorEnv, functools.partial(sb3.SubprocVecEnv, start_method="fork")):
        venv = make(fns)
        try:
            lay = venv.layout
            assert lay.num_workers >= 1 and not lay.inline, lay
            assert lay.step_us is not None
            assert lay.why.startswith("the default layout, num_workers='auto': env.step "), lay
            assert "in-process (num_workers=0) and inline=True: not a candidate" in lay.why
            assert venv.engine.engine_options.num_workers is None  # the user's, as given
        finally:
            venv.close()
    venv = AsyncVectorEnv(fns[:1])
    try:
        assert venv.layout.num_workers == 1
    finally:
        venv.close()
    venv = AsyncVectorEnv(fns, num_workers="auto")  # asked for: every layout is a candidate
    try:
        assert venv.layout.step_us is not None and "not a candidate" not in venv.layout.why
    finally:
        venv.close()
    venv = AsyncVectorEnv(fns, num_workers=0)  # asked for: in process
    try:
        assert venv.layout.num_workers == 0 and venv.engine.in_process
    finally:
        venv.close()


@pytest.mark.parametrize("value", ["fast", "AUTO", ""])
def test_other_strings_are_refused_naming_the_argument(counted, value):
    with pytest.raises(
        InvalidArgumentError, match=r"num_workers must be an int >= 0 \(0: in-process\), 'auto'"
    ):
        vecenv.ShmemVecEnv([counted] * 2, num_workers=value)
    assert counted.made == 0


def test_auto_with_envs_per_worker_is_refused(counted):
    with pytest.raises(InvalidArgumentError, match="num_workers='auto' chooses envs_per_worker"):
        vecenv.ShmemVecEnv([counted] * 2, num_workers="auto", envs_per_worker=1)
    assert counted.made == 0


@pytest.mark.parametrize(
    "kwargs", [{"timeout": -1}, {"context": "nope"}, {"cpu_affinity": [10**6]}, {"spin": -1}]
)
def test_other_arguments_are_checked_before_the_probe(counted, kwargs):
    with pytest.raises(InvalidArgumentError):
        vecenv.ShmemVecEnv([counted] * 2, num_workers="auto", **kwargs)
    assert counted.made == 0


@pytest.mark.timeout(60)
def test_workers_follow_the_caller_only_when_the_spin_was_not_chosen(monkeypatch):
    # Layout.follow: on while the spin is the default and the workers do not
    # outnumber the usable cores; off for a given spin, more workers than
    # cores, and in process (nothing waits). Two cores, to hold on any machine.
    monkeypatch.setattr(_plan, "usable_cpus", lambda: 2)
    cases = [
        ({"num_workers": 2}, al.FOLLOW_S),
        ({"num_workers": 1}, al.FOLLOW_S),
        ({"num_workers": 2, "spin": 200e-6}, 0.0),
        ({"num_workers": 3}, 0.0),
        ({"num_workers": 0}, 0.0),
    ]
    for kwargs, follow in cases:
        venv = vecenv.make("vecenv/Noop-v0", 3, **kwargs)
        try:
            assert venv.layout.follow == follow, kwargs
            if venv.layout.num_workers:
                specs = venv._pool.specs  # what each worker process was told
                assert [s.follow_s for s in specs] == [follow] * len(specs), kwargs
        finally:
            venv.close()


@pytest.mark.timeout(60)
def test_partial_batches_leave_a_core_to_the_policy_by_default(monkeypatch):
    # batch_size < num_envs without a layout: one worker per core but one (at
    # least one); a given layout, or lockstep, is left as it was.
    for cores, want in ((4, 3), (2, 1), (1, 1)):
        monkeypatch.setattr(_plan, "usable_cpus", lambda c=cores: c)
        monkeypatch.setattr(_pool, "usable_cpus", lambda c=cores: c)
        venv = vecenv.make("vecenv/Noop-v0", 8, batch_size=4)
        try:
            assert venv.layout.num_workers == want, (cores, venv.layout)
            assert venv.layout.why == "the default partial-batch layout"
        finally:
            venv.close()
    monkeypatch.setattr(_plan, "usable_cpus", lambda: 2)
    monkeypatch.setattr(_pool, "usable_cpus", lambda: 2)
    venv = vecenv.make("vecenv/Noop-v0", 8, batch_size=4, num_workers=2)
    try:
        assert venv.layout.num_workers == 2
    finally:
        venv.close()
    venv = vecenv.make("vecenv/Noop-v0", 8, batch_size=8)  # lockstep: the auto default
    try:
        assert venv.layout.why.startswith("the default layout, num_workers='auto'")
    finally:
        venv.close()


class _StuckStepEnv(gym.Env):
    """Its step sleeps 30 s: what a probe in the calling process must not wait for."""

    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        time.sleep(30.0)
        return np.zeros(1, np.float32), 0.0, False, False, {}


@pytest.mark.timeout(60)
def test_the_drop_ins_probe_gives_way_to_one_worker_per_core_within_two_seconds():
    from vecenv.gymnasium_vector import AsyncVectorEnv

    t0 = time.monotonic()
    venv = AsyncVectorEnv([_StuckStepEnv] * 2)
    try:
        assert time.monotonic() - t0 < _plan.DROP_IN_PROBE_LIMIT_S + 15
        assert venv.layout.num_workers == min(2, os.cpu_count() or 1, len(os.sched_getaffinity(0)))
        assert "did not finish within 2 s" in venv.layout.why, venv.layout.why
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "kwargs, where",
    [
        ({"num_workers": 0}, "in process"),
        ({"num_workers": 2}, "2 workers x 4 envs"),
        ({"num_workers": 3}, "3 workers x 3 envs"),
        ({"num_workers": 1, "inline": True}, "the caller 4 + 1 worker x 4 envs"),
        ({"num_workers": 1, "inline": True, "inline_envs": 3}, "the caller 3 + 1 worker x 5 envs"),
    ],
)
def test_the_reprs_say_where_the_envs_step(kwargs, where):
    from vecenv.gymnasium_vector import AsyncVectorEnv

    fns = [lambda: gym.make("vecenv/Noop-v0")] * 8
    venv = vecenv.ShmemVecEnv(fns, **kwargs)
    try:
        assert repr(venv) == (
            f"ShmemVecEnv(num_envs=8, layout='{where}', batch_size=8, state=needs reset)"
        )
        assert venv.layout.summary(8) == where
    finally:
        venv.close()
    venv = AsyncVectorEnv(fns, **kwargs)
    try:
        assert repr(venv) == f"AsyncVectorEnv(num_envs=8, layout='{where}')"
        assert venv.layout.summary(8) == where
    finally:
        venv.close()
    sb3 = pytest.importorskip("vecenv.sb3")
    venv = sb3.SubprocVecEnv(fns, start_method="fork", **kwargs)
    try:
        assert repr(venv) == (
            f"vecenv.sb3.SubprocVecEnv(num_envs=8, layout='{where}', closed=False)"
        )
    finally:
        venv.close()
