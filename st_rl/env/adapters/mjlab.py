"""mjlab environments (``mjlab.rl.RslRlVecEnvWrapper``) for st_rl; needs ``pip install "st-rl[mjlab]"``."""

from __future__ import annotations

import importlib
from typing import Any

from st_rl.env.adapters.contract import require_attributes

__all__ = ["make_mjlab_env", "mjlab_obs_groups", "mjlab_train_config", "wrap_mjlab"]

_INSTALL_HINT = 'pip install "st-rl[mjlab]"  (or: pip install mjlab)'
DEFAULT_TASK = "Mjlab-Velocity-Flat-Unitree-Go1"
_FLOATS = ("value_loss_coef", "clip_param", "entropy_coef", "learning_rate", "gamma", "lam", "desired_kl")
_ALGORITHM_KEYS: dict[str, Any] = {**dict.fromkeys((*_FLOATS, "max_grad_norm"), float), "schedule": str}
_ALGORITHM_KEYS |= {"use_clipped_value_loss": bool, "num_learning_epochs": int, "num_mini_batches": int}


def _mjlab(module: str) -> Any:
    try:
        importlib.import_module("mjlab.tasks")  # registers the tasks
        return importlib.import_module(f"mjlab.{module}")
    except ImportError as exc:
        raise ImportError(f"The mjlab adapter needs the 'mjlab' package: {_INSTALL_HINT}") from exc


def _check_task(task_id: str) -> None:
    tasks = _mjlab("tasks.registry").list_tasks()
    if task_id not in tasks:
        raise ValueError(f"Unknown mjlab task {task_id!r}; registered tasks: {tasks}")


def wrap_mjlab(env: Any, clip_actions: float | None = None) -> Any:
    """Return ``env`` as an mjlab ``RslRlVecEnvWrapper`` (wrapping a raw ``ManagerBasedRlEnv`` with
    ``clip_actions``)."""
    if isinstance(env, _mjlab("envs").ManagerBasedRlEnv):
        env = _mjlab("rl").RslRlVecEnvWrapper(env, clip_actions=clip_actions)
    names = "num_envs num_actions max_episode_length episode_length_buf get_observations step"
    fix = "Create it with st_rl.env.adapters.make_mjlab_env(task_id) or mjlab.rl.RslRlVecEnvWrapper(env)."
    require_attributes(env, names, "an mjlab RslRlVecEnvWrapper", fix)
    return env


def make_mjlab_env(
    task_id: str = DEFAULT_TASK,
    num_envs: int | None = None,
    device: str = "cpu",
    seed: int | None = None,
    clip_actions: float | None = None,
    play: bool = False,
) -> Any:
    """Build a registered mjlab task and wrap it for st_rl (``None`` arguments: the task's values; ``play``:
    the task's "play" configuration)."""
    registry = _mjlab("tasks.registry")
    _check_task(task_id)
    env_cfg = registry.load_env_cfg(task_id, play=play)
    if num_envs is not None:
        env_cfg.scene.num_envs = int(num_envs)
    if seed is not None:
        env_cfg.seed = int(seed)
    if clip_actions is None:
        clip_actions = getattr(registry.load_rl_cfg(task_id), "clip_actions", None)
    env = _mjlab("envs").ManagerBasedRlEnv(cfg=env_cfg, device=device)
    return wrap_mjlab(env, clip_actions=clip_actions)


def mjlab_obs_groups(task_id: str = DEFAULT_TASK) -> dict[str, list[str]]:
    """The task's ``obs_groups`` in st_rl's form: ``{"policy": [...], "critic": [...]}``."""
    _check_task(task_id)
    groups = dict(_mjlab("tasks.registry").load_rl_cfg(task_id).obs_groups)
    out = {"policy": list(groups.get("actor", groups.get("policy", ("actor",))))}
    if "critic" in groups:
        out["critic"] = list(groups["critic"])
    return out


def mjlab_train_config(task_id: str = DEFAULT_TASK) -> dict[str, Any]:
    """A flat st_rl training config with the hyper-parameters of the task's registered rsl_rl config."""
    _check_task(task_id)
    rl = _mjlab("tasks.registry").load_rl_cfg(task_id)
    actor, critic, alg = rl.actor, rl.critic, rl.algorithm
    distribution = dict(actor.distribution_cfg or {})
    return {
        "seed": int(rl.seed),
        "num_steps_per_env": int(rl.num_steps_per_env),
        "max_iterations": int(rl.max_iterations),
        "save_interval": int(rl.save_interval),
        "experiment_name": str(rl.experiment_name),
        "empirical_normalization": bool(actor.obs_normalization or critic.obs_normalization),
        "obs_groups": mjlab_obs_groups(task_id),
        "logger": "tensorboard",
        "policy": {
            "class_name": "ActorCritic",
            "actor_hidden_dims": list(actor.hidden_dims),
            "critic_hidden_dims": list(critic.hidden_dims),
            "activation": actor.activation,
            "init_noise_std": float(distribution.get("init_std", 1.0)),
        },
        "algorithm": {
            "class_name": "PPO",
            **{key: cast(getattr(alg, key)) for key, cast in _ALGORITHM_KEYS.items()},
        },
    }
