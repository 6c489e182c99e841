"""Writes the checkpoints in this folder with st_rl as it was at commit a558efc (before the policy owned its
observation normaliser). Kept so the fixtures can be regenerated from that commit:

    git worktree add /tmp/old a558efc && cd /tmp/old && pip install -e . && \
        python tests/data/legacy_main_a558efc/make_fixtures.py

Each ``<name>.pt`` is the runner's checkpoint after two iterations; ``<name>_expected.pt`` holds raw
observations and the actions ``runner.get_inference_policy()`` returned for them (three steps in a row, so
recurrent policies are checked through their memory).
"""

import os
import shutil
import tempfile

import torch

from st_rl.datasets import AmpObservationWrapper, MotionLoader
from st_rl.envs import make_env
from st_rl.runners import build_runner

HERE = os.path.dirname(os.path.abspath(__file__))
SLOTS = {"actor_dynamics_slots": True}


def amp_env(n):
    loader = MotionLoader.__new__(MotionLoader)
    loader.amp_obs_frame_num, loader.style_fields = 2, ["vx", "vy"]
    loader.sample_windows = lambda k: torch.full((k, 4), 0.5)
    return AmpObservationWrapper(
        make_env("velocity_tracking", num_envs=n, seed=0), loader, lambda e: e.base_lin_vel
    )


CASES = {
    "ppo_mlp": (
        {"class_name": "ActorCritic", "actor_hidden_dims": [16, 16], "critic_hidden_dims": [16, 16]},
        {"class_name": "PPO"},
        lambda n: make_env("velocity_tracking", num_envs=n, seed=0),
    ),
    "ppo_gru": (
        {
            "class_name": "ActorCriticRecurrent",
            "rnn_type": "gru",
            "rnn_hidden_size": 8,
            "actor_hidden_dims": [16],
            "critic_hidden_dims": [16],
        },
        {"class_name": "PPO"},
        lambda n: make_env("velocity_tracking", num_envs=n, seed=0),
    ),
    "estimator_lstm": (
        {
            "class_name": "StateAcRecurrent",
            "rnn_type": "lstm",
            "rnn_hidden_size": 8,
            "actor_hidden_dims": [16],
            "critic_hidden_dims": [16],
            "estimator_obs_components": ["base_lin_vel", "last_actions"],
            "estimator_target_components": ["mass", "friction"],
            "estimator_kwargs": {"hidden_sizes": [8], "rnn_type": "gru", "rnn_hidden_size": 4},
            "replace_state_prob": 1.0,
        },
        {"class_name": "EstimatorPPO"},
        lambda n: make_env("velocity_tracking", num_envs=n, seed=0, **SLOTS),
    ),
    "appo_mlp": (
        {
            "class_name": "AmpActorCritic",
            "actor_hidden_dims": [16],
            "critic_hidden_dims": [16],
            "amp_discriminator": {"input_dim": None, "hidden_dims": [16]},
        },
        {"class_name": "APPO", "amp_replay_buffer_size": 64},
        amp_env,
    ),
}


def main():
    torch.manual_seed(0)
    for name, (policy, algorithm, env_fn) in CASES.items():
        cfg = {
            "seed": 1,
            "num_steps_per_env": 8,
            "save_interval": 100,
            "empirical_normalization": True,
            "logger": "none",
            "policy": policy,
            "algorithm": {
                "num_learning_epochs": 2,
                "num_mini_batches": 2,
                "learning_rate": 1e-3,
                **algorithm,
            },
        }
        runner_cls = "AmpPolicyRunner" if algorithm["class_name"] == "APPO" else "OnPolicyRunner"
        log_dir = tempfile.mkdtemp()
        runner = build_runner(runner_cls, env_fn(16), cfg, log_dir=log_dir, device="cpu")
        runner.learn(2)
        shutil.copy(os.path.join(log_dir, "model_2.pt"), os.path.join(HERE, f"{name}.pt"))
        policy_fn = runner.get_inference_policy()
        for module in runner.alg.actor_critic.modules():
            if hasattr(module, "hidden_states"):
                module.hidden_states = None  # start the memories afresh at the test batch size
        gen = torch.Generator().manual_seed(3)
        obs = torch.randn(3, 5, runner.env_adapter.num_obs, generator=gen) * 2.0
        with torch.no_grad():
            actions = torch.stack([policy_fn(o) for o in obs])
        torch.save({"obs": obs, "actions": actions}, os.path.join(HERE, f"{name}_expected.pt"))
        print(name, tuple(actions.shape))
        shutil.rmtree(log_dir)


if __name__ == "__main__":
    main()
