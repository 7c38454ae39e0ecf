"""Episode statistics computed in the workers (``episode_statistics=True``,
vecenv._episodes) equal what gymnasium's vector ``RecordEpisodeStatistics``
and SB3's ``VecMonitor`` report for the same envs, seeds and actions, step by
step: returns and lengths exactly, durations within a loose bound, in every
autoreset mode, in process and with one or two workers, on the compiled step
and on its fallback, on the compiled worker round and on its Python methods.
"""

from __future__ import annotations

import functools
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import vecenv
from vecenv import _layout
from vecenv.gymnasium_vector import AsyncVectorEnv

N_ENVS = 5
STEPS = 60
T_BOUND = 1.0  # seconds: durations measured in a worker and in the parent


class EpisodeEnv(gym.Env):
    """Rewards in steps of 0.25 drawn from the env's generator (exact in
    float32 too, as VecMonitor sums them), termination with probability
    ``p_end`` per step; wrapped in a TimeLimit, episodes also end by
    truncation. ``reward_type=np.float16`` makes the compiled worker round
    hand every env-step to the loop's Python methods. ``sleep_s``: each step
    takes at least this long."""

    metadata = {"render_modes": []}

    def __init__(self, p_end=0.2, reward_type=float, sleep_s=0.0):
        self.observation_space = spaces.Box(-10, 100, (3,), np.float32)
        self.action_space = spaces.Discrete(3)
        self.p_end, self.reward_type, self.sleep_s = p_end, reward_type, sleep_s
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        self.t += 1
        reward = 0.25 * int(self.np_random.integers(0, 8)) - 0.5 * (int(action) == 2)
        terminated = bool(self.np_random.random() < self.p_end)
        obs = np.array([self.t, reward, action], np.float32)
        return obs, self.reward_type(reward), terminated, False, {}


def make_env(i, **kwargs):
    return TimeLimit(EpisodeEnv(**kwargs), max_episode_steps=3 + i)


def env_fns(n=N_ENVS, **kwargs):
    return [functools.partial(make_env, i, **kwargs) for i in range(n)]


def actions(n=N_ENVS, steps=STEPS, seed=0):
    return list(np.random.default_rng(seed).integers(0, 3, size=(steps, n)))


# gymnasium's vector RecordEpisodeStatistics counted the reset step of a
# same-step autoreset into the next episode until 1.4 (Gymnasium #1624).
GYM_VERSION = tuple(int(x) for x in gym.__version__.split(".")[:2])


def gymnasium_reference(mode, fns, seed=7):
    """Per step: (infos, terminations, truncations) of RecordEpisodeStatistics
    over SyncVectorEnv; skips the test where that wrapper is wrong (same-step
    autoreset before gymnasium 1.4)."""
    if mode == "same_step" and GYM_VERSION < (1, 4):
        pytest.skip(
            f"gymnasium {gym.__version__}'s RecordEpisodeStatistics miscounts under same-step "
            "autoreset (fixed in 1.4, Gymnasium #1624): no reference to compare with"
        )
    ref = RecordEpisodeStatistics(SyncVectorEnv(fns, autoreset_mode=AutoresetMode[mode.upper()]))
    try:
        ref.reset(seed=seed)
        out = []
        for a in actions(len(fns)):
            _, _, term, trunc, infos = ref.step(a)
            out.append((infos, term, trunc))
        return out
    finally:
        ref.close()


def batched(per_env_infos):
    """ShmemVecEnv's per-env "episode" entries as gymnasium batches them."""
    mask = np.array(["episode" in info for info in per_env_infos])
    if not mask.any():
        return {}
    eps = [info.get("episode", {"r": 0.0, "l": 0, "t": 0.0}) for info in per_env_infos]
    return {
        "episode": {
            "r": np.array([e["r"] for e in eps], np.float64),
            "l": np.array([e["l"] for e in eps], dtype=int),
            "t": np.array([e["t"] for e in eps], np.float64),
        },
        "_episode": mask,
    }


def assert_same_episodes(got, want, step):
    """Equal "episode"/"_episode" entries (r, l, mask exactly; t loosely)."""
    assert ("episode" in got) == ("episode" in want), f"step {step}: {got} vs {want}"
    if "episode" not in want:
        assert "_episode" not in got
        return
    np.testing.assert_array_equal(got["_episode"], want["_episode"], err_msg=f"step {step}")
    g, w = got["episode"], want["episode"]
    assert set(g) == set(w) == {"r", "l", "t"}
    for key in ("r", "l", "t"):
        assert g[key].dtype == w[key].dtype and g[key].shape == w[key].shape, (step, key)
    np.testing.assert_array_equal(g["r"], w["r"], err_msg=f"step {step}")
    np.testing.assert_array_equal(g["l"], w["l"], err_msg=f"step {step}")
    assert np.all(g["t"][~want["_episode"]] == 0) and np.all(g["t"] >= 0)
    assert np.all(np.abs(g["t"] - w["t"]) < T_BOUND), (step, g["t"], w["t"])


def assert_both_ends_seen(reference):
    term = np.any([t for _, t, _ in reference])
    trunc = np.any([u for _, _, u in reference])
    assert term and trunc, "the test envs must end episodes by termination and by truncation"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_gymnasium_drop_in_reports_what_record_episode_statistics_reports(mode, num_workers):
    want = gymnasium_reference(mode, env_fns())
    assert_both_ends_seen(want)
    envs = AsyncVectorEnv(
        env_fns(), autoreset_mode=mode, episode_statistics=True, num_workers=num_workers
    )
    try:
        envs.reset(seed=7)
        for step, a in enumerate(actions()):
            _, _, term, trunc, infos = envs.step(a)
            w_infos, w_term, w_trunc = want[step]
            np.testing.assert_array_equal(term, w_term)
            np.testing.assert_array_equal(trunc, w_trunc)
            assert_same_episodes(infos, w_infos, step)
            # Last, as the wrapper adds them.
            if "episode" in infos:
                assert list(infos)[-2:] == ["episode", "_episode"]
    finally:
        envs.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("worker_path", ["compiled", "python"])
@pytest.mark.parametrize("fallback", [False, True], ids=["compiled_step", "fallback_step"])
@pytest.mark.parametrize("mode", ["sb3", "next_step", "same_step"])
def test_shmem_vec_env_infos_hold_what_record_episode_statistics_reports(
    mode, fallback, worker_path
):
    kwargs = {"reward_type": np.float16} if worker_path == "python" else {}
    # "sb3" autoreset resets in the step that ends an episode, as SAME_STEP.
    want = gymnasium_reference("same_step" if mode == "sb3" else mode, env_fns(**kwargs))
    assert_both_ends_seen(want)
    venv = vecenv.ShmemVecEnv(
        env_fns(**kwargs),
        num_workers=2,
        autoreset_mode=mode,
        episode_statistics=True,
        _fallback_for_testing=fallback,
    )
    try:
        assert (venv._steps.fast is None) == fallback
        venv.seed(7)
        venv.reset()
        for step, a in enumerate(actions()):
            _, _, dones, infos = venv.step(a)
            w_infos, w_term, w_trunc = want[step]
            np.testing.assert_array_equal(dones, w_term | w_trunc)
            assert_same_episodes(batched(infos), w_infos, step)
            for i, info in enumerate(infos):
                if "episode" in info:
                    ep = info["episode"]
                    assert [type(ep[k]) for k in ("r", "l", "t")] == [float, int, float]
                if mode == "sb3" and dones[i]:  # the terminal observation is still there
                    final = w_infos["final_obs"][i]
                    np.testing.assert_array_equal(info["terminal_observation"], final)
                    assert info["TimeLimit.truncated"] == bool(w_trunc[i] and not w_term[i])
    finally:
        venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_sb3_drop_in_reports_what_vec_monitor_reports(num_workers):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    from vecenv.sb3 import SubprocVecEnv

    ref = VecMonitor(DummyVecEnv(env_fns()))
    venv = SubprocVecEnv(env_fns(), episode_statistics=True, num_workers=num_workers)
    try:
        for v in (ref, venv):
            v.seed(7)
            v.reset()
        ended = 0
        for step, a in enumerate(actions()):
            ref.step_async(a)
            w_obs, w_rew, w_dones, w_infos = ref.step_wait()
            venv.step_async(a)
            obs, rew, dones, infos = venv.step_wait()
            np.testing.assert_array_equal(obs, w_obs)
            np.testing.assert_array_equal(dones, w_dones)
            for i, (info, w_info) in enumerate(zip(infos, w_infos)):
                assert set(info) == set(w_info), (step, i)  # episode, terminal_observation...
                if "terminal_observation" in w_info:
                    got_final = info["terminal_observation"]
                    np.testing.assert_array_equal(got_final, w_info["terminal_observation"])
                if "episode" not in w_info:
                    continue
                ended += 1
                got, exp = info["episode"], w_info["episode"]
                assert set(got) == set(exp) == {"r", "l", "t"}
                assert got["r"] == float(exp["r"]) and got["l"] == int(exp["l"])
                assert [type(got[k]) for k in ("r", "l", "t")] == [float, int, float]
                assert abs(got["t"] - exp["t"]) < T_BOUND, (step, got, exp)
        assert ended > 2 * N_ENVS
    finally:
        venv.close()
        ref.close()


@pytest.mark.timeout(60)
def test_sb3_drop_in_t_is_vec_monitors_time_since_start_and_gymnasiums_the_duration():
    pytest.importorskip("stable_baselines3")
    from vecenv.sb3 import SubprocVecEnv

    fns = env_fns(1, p_end=0.0, sleep_s=0.02)  # one env, 3 steps per episode
    sb3 = SubprocVecEnv(fns, episode_statistics=True, num_workers=1)
    gym_envs = AsyncVectorEnv(fns, episode_statistics=True, num_workers=1)
    try:
        time.sleep(0.3)  # after they were built, before the episode starts
        sb3.reset()
        gym_envs.reset(seed=0)
        t_sb3 = t_gym = None
        for _ in range(3):
            _, _, _, infos = sb3.step(np.zeros(1, np.int64))
            t_sb3 = infos[0].get("episode", {}).get("t")
            *_, gym_infos = gym_envs.step(np.zeros(1, np.int64))
            t_gym = gym_infos["episode"]["t"][0] if "episode" in gym_infos else None
        # VecMonitor: seconds since the vec env was built (past the sleep);
        # gymnasium: the episode's duration, from its reset (three steps of 20 ms).
        assert t_sb3 is not None and t_sb3 >= 0.3 + 0.06
        assert t_gym is not None and 0.06 <= t_gym < 0.3
    finally:
        sb3.close()
        gym_envs.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fallback", [False, True], ids=["compiled_step", "fallback_step"])
def test_partial_batches_report_each_episode_with_its_envs_done_flag(fallback):
    # recv(): envs come back in any order; each ended episode's statistics
    # are the sums of the rewards and steps recv() returned for that env.
    venv = vecenv.ShmemVecEnv(
        env_fns(6),
        num_workers=2,
        batch_size=3,
        episode_statistics=True,
        _fallback_for_testing=fallback,
    )
    try:
        venv.seed(3)
        venv.reset()  # recv() returns the resets first
        resets = set(range(6))
        sums = [[0.0, 0] for _ in range(6)]
        ended = 0
        for k in range(80):
            _, rew, dones, infos, ids = venv.recv()
            for r, done, info, i in zip(rew, dones, infos, ids):
                if i in resets:
                    resets.discard(i)
                    assert "episode" not in info
                    continue
                sums[i][0] += r
                sums[i][1] += 1
                assert ("episode" in info) == bool(done)
                if done:
                    ended += 1
                    ep = info["episode"]
                    assert (ep["r"], ep["l"]) == (sums[i][0], sums[i][1])
                    assert 0 < ep["t"] < T_BOUND
                    sums[i] = [0.0, 0]
            venv.send(np.full(len(ids), k % 3, np.int64), ids)
        assert ended > 10
    finally:
        venv.close()


class _KeepOptions(gym.vector.VectorWrapper):
    """Hands the vector env a copy of reset's options: gymnasium 1.4's
    SyncVectorEnv pops "reset_mask" from the caller's dict, after which
    RecordEpisodeStatistics, reading the same dict, restarts every env's
    statistics instead of the masked ones."""

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=None if options is None else dict(options))


@pytest.mark.timeout(60)
def test_a_reset_mask_restarts_the_statistics_of_the_envs_it_resets_only():
    fns = env_fns(p_end=0.05)
    mask = np.array([True, False, True, False, False])
    sync = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP)
    ref = RecordEpisodeStatistics(_KeepOptions(sync))
    envs = AsyncVectorEnv(fns, autoreset_mode="next_step", episode_statistics=True, num_workers=2)
    try:
        for v in (ref, envs):
            v.reset(seed=1)
        for step, a in enumerate(actions(steps=30)):
            if step in (2, 11):  # mid-episode for some envs
                for v in (ref, envs):
                    v.reset(options={"reset_mask": mask})
            *_, w_infos = ref.step(a)
            *_, infos = envs.step(a)
            assert_same_episodes(infos, w_infos, step)
    finally:
        envs.close()
        ref.close()


@pytest.mark.timeout(60)
def test_the_option_is_off_by_default_and_leaves_the_layout_as_it_was():
    venv = vecenv.ShmemVecEnv(env_fns(2), num_workers=1)
    try:
        assert venv.engine_options.episode_statistics is False
        assert venv._collector.layout.episode_offsets == ()
        venv.reset()
        for a in actions(2, 20):
            *_, dones, infos = venv.step(a)
            assert not any("episode" in info for info in infos)
    finally:
        venv.close()
    box, disc = spaces.Box(0, 1, (3,), np.float32), spaces.Discrete(2)
    off = _layout.BlockLayout.build(box, disc, 4, 2, final_obs=True)
    on = _layout.BlockLayout.build(box, disc, 4, 2, final_obs=True, episodes=True)
    assert on.final_offsets == off.final_offsets and on.obs_offsets == off.obs_offsets
    assert len(on.episode_offsets) == 3 and min(on.episode_offsets) >= off.final_offsets[-1]
    assert on.nbytes >= off.nbytes


def test_multi_agent_takes_the_option_itself_before_any_process_starts():
    # Its statistics are per agent row (tests/test_multi_agent.py); the engine's,
    # one per env, are refused, and so is a value that is not a bool.
    from vecenv.multi_agent import MultiAgentVecEnv

    with pytest.raises(vecenv.InvalidArgumentError, match=r"MultiAgentVecEnv\(\.\.\., episode"):
        MultiAgentVecEnv(
            [lambda: None], engine_options=vecenv.EngineOptions(episode_statistics=True)
        )
    with pytest.raises(vecenv.InvalidArgumentError, match="episode_statistics must be a bool"):
        MultiAgentVecEnv([lambda: None], episode_statistics="yes")
