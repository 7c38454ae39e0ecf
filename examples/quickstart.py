"""The README example, runnable: step CartPole-v1 and ALE/Pong-v5 with vecenv
and print env-steps/s.

    python examples/quickstart.py            # both envs, 3 seconds each
    python examples/quickstart.py --seconds 10 --envs CartPole-v1
"""

import argparse
import time

import gymnasium as gym
import numpy as np

import vecenv


def run(env_id: str, num_envs: int, seconds: float, **vec_kwargs) -> float:
    """Step ``num_envs`` copies of ``env_id`` with random actions for about
    ``seconds`` seconds; return env-steps per second."""
    with vecenv.make(env_id, num_envs, **vec_kwargs) as venv:
        obs = venv.reset()
        shape = obs.shape if isinstance(obs, np.ndarray) else "structured"
        print(f"{env_id}: {venv!r}, observations {shape}")
        rng = np.random.default_rng(0)
        n = venv.action_space.n
        actions = rng.integers(0, n, size=(256, num_envs))
        for t in range(20):  # warm-up
            venv.step(actions[t])
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for t in range(64):
                venv.step(actions[t])
            steps += 64
        return steps * num_envs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "ALE/Pong-v5"])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()

    # Show the seed API on CartPole exactly as in the README.
    venv = vecenv.ShmemVecEnv([lambda: gym.make("CartPole-v1")] * 8, envs_per_worker=4)
    obs = venv.reset()
    obs, rewards, dones, infos = venv.step(np.zeros(8, dtype=np.int64))
    print(f"ShmemVecEnv on CartPole-v1: obs {obs.shape} {obs.dtype}, rewards {rewards.dtype}")
    venv.close()

    for env_id in args.envs:
        rate = run(env_id, args.num_envs, args.seconds)
        print(f"{env_id}: {rate:,.0f} env-steps/s with {args.num_envs} envs")


if __name__ == "__main__":
    main()
