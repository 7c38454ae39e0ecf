#!/usr/bin/env python3
"""PPO on CartPole-v1 with vecenv: a single-file, CleanRL-style training loop.

Adapted from CleanRL's ``cleanrl/ppo.py`` (Shengyi Huang et al., MIT licence,
https://github.com/vwxyzjn/cleanrl), with its structure kept: a rollout of
``num_steps`` batch steps into torch buffers, GAE, then ``update_epochs``
epochs of minibatch updates of the clipped objective. What changes is the vec
env: ``vecenv.make("CartPole-v1", num_envs)`` steps the envs in worker
processes over shared memory, with SB3-style autoreset (``step`` returns
``obs, rewards, dones, infos``; an env whose episode ended is already reset).
Each env is wrapped in gymnasium's ``RecordEpisodeStatistics``, so the step on
which an episode ends has ``infos[i]["episode"]["r"]``, its return. As in
CleanRL, a truncated episode (500 steps) counts as done without bootstrapping.

The hyper-parameters are tuned for CartPole (8 envs, 128 steps, learning rate
1e-3 annealed, gamma 0.98, GAE lambda 0.8, 10 epochs): the mean return of
the last 20 episodes passes 195 within about 25k env-steps (seeds 1-4: 13k to
25k, a few seconds on 2 cores) and 450 within about 40k, well inside the
default budget of 150k.
The script exits with status 0 when that mean reaches ``--target-return``
within ``--total-timesteps``, else 1; its last line is ``final mean return:
X``.

Usage::

    python examples/ppo_cartpole.py                          # 150k steps, target 195
    python examples/ppo_cartpole.py --total-timesteps 300000 --target-return 450

The Atari variant (CleanRL's ``ppo_atari.py``) changes three things:

* the env: ``vecenv.make("ALE/Pong-v5", num_envs, frameskip=1, wrappers=[
  RecordEpisodeStatistics, lambda e: AtariPreprocessing(e, frame_skip=4,
  screen_size=84, grayscale_obs=True), lambda e: FrameStackObservation(e, 4)])``
  (``RecordEpisodeStatistics`` first, so it counts the raw game's returns;
  ``pip install "vecenv[atari]"``), with ``num_envs=8``;
* the network: the Nature CNN on the (4, 84, 84) uint8 frames scaled by
  1/255: ``Conv2d(4, 32, 8, stride=4)``, ``Conv2d(32, 64, 4, stride=2)``,
  ``Conv2d(64, 64, 3, stride=1)``, each with ReLU, ``Flatten``,
  ``Linear(3136, 512)``, ReLU, then the actor ``Linear(512, n_actions)`` and
  critic ``Linear(512, 1)`` heads (orthogonal init, gain sqrt(2); heads 0.01
  and 1), and a uint8 observation buffer;
* the hyper-parameters: learning rate 2.5e-4, gamma 0.99, GAE lambda 0.95,
  4 epochs, clip 0.1, 10M env-steps; rewards clipped to their sign (or
  ``gymnasium.wrappers.TransformReward(e, np.sign)`` after the statistics).
"""

from __future__ import annotations

import argparse
import time
from collections import deque

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical

import vecenv


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=150_000)
    p.add_argument(
        "--target-return",
        type=float,
        default=195.0,
        help="mean return of the last 20 episodes to reach (then stop, exit 0)",
    )
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="batch steps per rollout")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.98)
    p.add_argument("--gae-lambda", type=float, default=0.8)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=10)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument(
        "--num-workers",
        default=None,
        help='vecenv worker processes (an int, 0 for in process, or "auto"; default one per core)',
    )
    return p.parse_args(argv)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )  # fmt: skip
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )  # fmt: skip

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # the cores are the workers'
    workers = args.num_workers
    if workers is not None and workers != "auto":
        workers = int(workers)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size

    envs = vecenv.make(
        "CartPole-v1",
        args.num_envs,
        wrappers=[gym.wrappers.RecordEpisodeStatistics],
        num_workers=workers,
    )
    try:
        envs.seed(args.seed)
        obs_dim = int(np.prod(envs.observation_space.shape))
        agent = Agent(obs_dim, int(envs.action_space.n))
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

        obs = torch.zeros((args.num_steps, args.num_envs, obs_dim))
        actions = torch.zeros((args.num_steps, args.num_envs))
        logprobs = torch.zeros((args.num_steps, args.num_envs))
        rewards = torch.zeros((args.num_steps, args.num_envs))
        dones = torch.zeros((args.num_steps, args.num_envs))
        values = torch.zeros((args.num_steps, args.num_envs))

        returns_window: deque = deque(maxlen=20)  # the last 20 episodes' returns
        global_step = 0
        start = time.time()
        next_obs = torch.as_tensor(envs.reset(), dtype=torch.float32)
        next_done = torch.zeros(args.num_envs)
        mean_return = float("nan")
        for iteration in range(1, num_iterations + 1):
            frac = 1.0 - (iteration - 1.0) / num_iterations  # learning-rate annealing
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            for step in range(args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                dones[step] = next_done
                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob
                o, reward, done, infos = envs.step(action.numpy())
                rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
                next_obs = torch.as_tensor(o, dtype=torch.float32)
                next_done = torch.as_tensor(done, dtype=torch.float32)
                for i in np.flatnonzero(done):  # RecordEpisodeStatistics on the last step
                    returns_window.append(float(infos[i]["episode"]["r"]))

            # GAE (CleanRL's ppo.py, unchanged).
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages = torch.zeros_like(rewards)
                lastgaelam = 0
                for t in reversed(range(args.num_steps)):
                    if t == args.num_steps - 1:
                        nextnonterminal = 1.0 - next_done
                        nextvalues = next_value
                    else:
                        nextnonterminal = 1.0 - dones[t + 1]
                        nextvalues = values[t + 1]
                    delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                    lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                    advantages[t] = lastgaelam
                returns = advantages + values

            b_obs = obs.reshape(-1, obs_dim)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            for _epoch in range(args.update_epochs):
                for mb in torch.randperm(batch_size).split(minibatch_size):
                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                        b_obs[mb], b_actions.long()[mb]
                    )
                    ratio = (newlogprob - b_logprobs[mb]).exp()
                    mb_adv = b_advantages[mb]
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                    pg_loss = torch.max(
                        -mb_adv * ratio,
                        -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef),
                    ).mean()
                    v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb]) ** 2).mean()
                    loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()

            if returns_window:
                mean_return = float(np.mean(returns_window))
            sps = int(global_step / (time.time() - start))
            print(
                f"step {global_step:>7}  episodes' mean return (last {len(returns_window)}) "
                f"{mean_return:6.1f}  {sps} steps/s",
                flush=True,
            )
            if len(returns_window) == returns_window.maxlen and mean_return >= args.target_return:
                break
    finally:
        envs.close()
    reached = len(returns_window) == returns_window.maxlen and mean_return >= args.target_return
    print(
        f"{'reached' if reached else 'did not reach'} {args.target_return:g} after {global_step} "
        f"env-steps in {time.time() - start:.1f} s"
    )
    print(f"final mean return: {mean_return:.1f}")
    return 0 if reached else 1


if __name__ == "__main__":
    raise SystemExit(main())
