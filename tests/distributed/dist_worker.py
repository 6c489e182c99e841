"""Worker script launched with torchrun by tests/distributed/test_distributed.py (one process per rank)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading

import torch
import torch.distributed as dist

from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env

FINISHED = "dist_worker: every rank has written its results; tearing down rank"
UPDATE_CFG = {
    "seed": 1,
    "num_steps_per_env": 8,
    "empirical_normalization": True,
    "logger": "none",
    "policy": {"class_name": "ActorCritic", "actor_hidden_dims": [32, 32], "critic_hidden_dims": [32, 32]},
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 2,
        "num_mini_batches": 1,
        "learning_rate": 1e-3,
        "schedule": "adaptive",
        "gamma": 0.99,
        "lam": 0.95,
        "precision": "fp32",  # the test compares two ranks with one to float32 rounding
        "entropy_coef": 0.01,
    },
}


class RecordingEnv:
    """Passes everything through and keeps the raw observations returned by step()."""

    def __init__(self, env):
        self.env = env
        self.obs, self.critic = [], []

    def __getattr__(self, name):
        return getattr(self.__dict__["env"], name)

    def step(self, actions):
        obs, rew, dones, extras = self.env.step(actions)
        self.obs.append(obs.clone())
        self.critic.append(extras["observations"]["critic"].clone())
        return obs, rew, dones, extras


def mode_update(out: str, rank: int) -> None:
    env = RecordingEnv(make_env("velocity_tracking", num_envs=8, seed=100 + rank))
    runner = OnPolicyRunner(env, UPDATE_CFG)
    pre = {k: v.clone() for k, v in runner.alg.actor_critic.state_dict().items()}
    snapshot = {}
    real_update = runner.alg.update

    def update(it):
        st = runner.alg.storage
        for name in (
            "observations",
            "privileged_observations",
            "actions",
            "values",
            "returns",
            "actions_log_prob",
            "mu",
            "sigma",
            "dones",
            "rewards",
        ):
            snapshot[name] = getattr(st, name).clone()
        return real_update(it)

    runner.alg.update = update
    runner.learn(1)
    torch.save(
        {
            "pre": pre,
            "post": runner.alg.actor_critic.state_dict(),
            "storage": snapshot,
            "lr": runner.alg.learning_rate,
            "obs_norm": runner.alg.obs_normalizer.state_dict(),
            "critic_norm": runner.alg.critic_obs_normalizer.state_dict(),
            "raw_obs": torch.stack(env.obs),
            "raw_critic": torch.stack(env.critic),
        },
        os.path.join(out, f"rank{rank}.pt"),
    )


def mode_learn(out: str, rank: int) -> None:
    from st_rl.configs import get_preset

    cfg = get_preset("velocity_tracking").train.to_dict()
    cfg.update(logger="tensorboard", log_interval=1000, save_interval=1000)
    log_dir = os.path.join(out, "run")
    runner = OnPolicyRunner(make_env("velocity_tracking", num_envs=128, seed=42 + rank), cfg, log_dir=log_dir)
    runner.learn(30, init_at_random_ep_len=True)
    # Resume every rank from the checkpoint rank 0 wrote and continue.
    resumed = OnPolicyRunner(
        make_env("velocity_tracking", num_envs=128, seed=42 + rank), cfg, log_dir=log_dir
    )
    resumed.load(os.path.join(log_dir, "model_30.pt"))
    resumed.learn(1)
    if rank == 0:
        policy = runner.get_inference_policy()
        env = make_env("velocity_tracking", num_envs=256, seed=123)
        obs, _ = env.get_observations()
        total = torch.zeros(env.num_envs)
        finished = torch.zeros(env.num_envs, dtype=torch.bool)
        with torch.inference_mode():
            for _ in range(int(env.max_episode_length)):
                obs, rew, dones, _ = env.step(policy(obs))
                total += torch.where(finished, torch.zeros_like(rew), rew)
                finished |= dones
        result = {
            "return": float(total.mean()),
            "files": sorted(os.listdir(log_dir)),
            "resumed_iteration": resumed.current_learning_iteration,
            "tot_timesteps": runner.tot_timesteps,
        }
        with open(os.path.join(out, "learn.json"), "w") as f:
            json.dump(result, f)


def mode_fail(out: str, rank: int) -> None:
    """Rank 1 raises in its second update. No short collective timeout: the job must end because a rank
    failed (torchrun stops the others, a gloo peer sees the connection close), never because a slow rank ran
    out of time (a 15 s timeout once made a busy machine's start-up skew look like this failure)."""
    runner = OnPolicyRunner(make_env("velocity_tracking", num_envs=8, seed=rank), UPDATE_CFG)
    if rank == 1:
        real_update = runner.alg.update

        def update(it):
            if it == 1:
                raise RuntimeError("rank 1 fails on purpose")
            return real_update(it)

        runner.alg.update = update
    runner.learn(3)


def mode_stuck(out: str, rank: int) -> None:
    """Rank 1 joins the process group and then never takes part in a collective; rank 0 must give up after
    ``distributed_timeout_s`` with a timeout error (written to ``stuck0.txt``) instead of waiting forever.
    The timeout is the expected outcome, whatever the machine's speed: rank 1 never arrives."""
    timeout_s = 5.0
    if rank == 1:
        from st_rl.utils.distributed import init_distributed

        init_distributed("cpu", timeout_s)
        threading.Event().wait()  # stopped by torchrun once rank 0 has failed
    cfg = dict(UPDATE_CFG, distributed_timeout_s=timeout_s)
    try:
        OnPolicyRunner(make_env("velocity_tracking", num_envs=8, seed=rank), cfg).learn(1)
    except Exception as e:
        with open(os.path.join(out, "stuck0.txt"), "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        raise
    with open(os.path.join(out, "stuck0.txt"), "w") as f:
        f.write("rank 0 finished without rank 1")


def mode_nan(out: str, rank: int, normalization: bool) -> None:
    """Rank 1's environment returns NaN observations: every rank must raise, none may be left waiting for the
    others. Without observation normalisation the environment adapter's check finds it (its flags are shared by
    all ranks at the end of the rollout); with it the normalisers, which merge the batches of all ranks, may
    find it first (then the ranks' messages may differ)."""
    env = make_env("velocity_tracking", num_envs=8, seed=rank)
    if rank == 1:
        real_step = env.step

        def step(actions):
            obs, rew, dones, extras = real_step(actions)
            return obs * float("nan"), rew, dones, extras

        env.step = step
    runner = OnPolicyRunner(env, dict(UPDATE_CFG, empirical_normalization=normalization))
    try:
        runner.learn(1)
    except ValueError as e:  # NonFiniteError (the adapter) or the normaliser's error: both ValueErrors
        with open(os.path.join(out, f"nan{rank}.txt"), "w") as f:
            f.write(f"{type(e).__name__}: {e}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["update", "learn", "fail", "stuck", "nan", "nan_norm"])
    parser.add_argument("out")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    modes = {
        "update": mode_update,
        "learn": mode_learn,
        "fail": mode_fail,
        "stuck": mode_stuck,
        "nan": lambda out, r: mode_nan(out, r, normalization=False),
        "nan_norm": lambda out, r: mode_nan(out, r, normalization=True),
    }
    modes[args.mode](args.out, rank)
    if dist.is_initialized():
        dist.barrier()  # no rank tears down before every rank has written its results
        print(f"{FINISHED} {rank}", file=sys.stderr, flush=True)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
