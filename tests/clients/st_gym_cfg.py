"""st_gym's st_rl config classes, as a st_gym user writes and sends them.

Written from the public field lists of st_gym's ``wrappers/st_rl/rl_cfg.py`` (names, types and defaults) and
its ``lus2`` agent config (``Lus2RoughPPORunnerCfg``), not copied. What matters is what st_rl receives:
``agent_cfg.to_dict()`` of Isaac Lab's ``configclass``, emulated here by :class:`ConfigClass`:

* every public class attribute is a field, annotated or not, with a deep-copied default per instance;
* attributes set later (``__post_init__`` writes ``algorithm.class_name``, ``bc_loss_coef``, ...) are
  exported too;
* a field left at ``MISSING`` is exported as an empty mapping ``{}`` (Isaac Lab's ``class_to_dict`` turns
  the ``MISSING`` sentinel into the dict of its attributes; st_gym's saved ``params/agent.yaml`` shows
  ``amp_obs_dim: {}``), tuples stay tuples, mappings become plain dicts.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import MISSING
from typing import Any


def class_to_dict(obj: Any) -> Any:
    """Isaac Lab's ``class_to_dict``: the instance ``__dict__``, recursively."""
    data = obj if isinstance(obj, dict) else vars(obj)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key.startswith("__"):
            continue
        if callable(value) and not isinstance(value, type):
            out[key] = f"{value.__module__}:{value.__qualname__}"
        elif isinstance(value, dict) or hasattr(value, "__dict__"):
            out[key] = class_to_dict(value)
        elif isinstance(value, (list, tuple)):
            out[key] = type(value)(class_to_dict(v) if hasattr(v, "__dict__") else v for v in value)
        else:
            out[key] = value
    return out


class ConfigClass:
    """A ``configclass``: public class attributes become instance fields; keyword arguments override them."""

    def __init__(self, **kwargs: Any) -> None:
        for klass in reversed(type(self).__mro__):
            for name, value in vars(klass).items():
                if name.startswith("_") or callable(value) or isinstance(value, (classmethod, staticmethod)):
                    continue
                setattr(self, name, copy.deepcopy(value))
        for name in getattr(type(self), "__annotations__", {}):
            if not hasattr(self, name):
                setattr(self, name, MISSING)
        for name, value in kwargs.items():
            if not hasattr(self, name):
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            setattr(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        pass

    def to_dict(self) -> dict[str, Any]:
        return class_to_dict(self)


# ------------------------------------------------------------------------------------ st_gym's classes
class StRlPpoActorCriticCfg(ConfigClass):
    class_name: str = "ActorCritic"
    init_noise_std: float = MISSING  # type: ignore[assignment]
    actor_hidden_dims: list[int] = MISSING  # type: ignore[assignment]
    critic_hidden_dims: list[int] = MISSING  # type: ignore[assignment]
    activation: str = MISSING  # type: ignore[assignment]
    rnn_type: str = MISSING  # type: ignore[assignment]
    teacher_ac_path = None
    num_actor_obs = None
    num_critic_obs = None
    num_actions = None
    encoder_component_names = None
    obs_segments = None
    critic_encoder_component_names = None
    critic_obs_segments = None
    amp_discriminator = None
    mu_activation = None


class StRlAmpCfg(ConfigClass):
    input_dim: int = MISSING  # type: ignore[assignment]
    style_reward_coef: float = MISSING  # type: ignore[assignment]
    discriminator_grad_pen: float = MISSING  # type: ignore[assignment]
    hidden_dims: list[int] = MISSING  # type: ignore[assignment]
    task_reward_lerp: float = MISSING  # type: ignore[assignment]
    amp_obs_dim: int = MISSING  # type: ignore[assignment]


class StRlPpoAlgorithmCfg(ConfigClass):
    class_name: str = "PPO"
    value_loss_coef: float = MISSING  # type: ignore[assignment]
    use_clipped_value_loss: bool = MISSING  # type: ignore[assignment]
    clip_param: float = MISSING  # type: ignore[assignment]
    entropy_coef: float = MISSING  # type: ignore[assignment]
    num_learning_epochs: int = MISSING  # type: ignore[assignment]
    num_mini_batches: int = MISSING  # type: ignore[assignment]
    learning_rate: float = MISSING  # type: ignore[assignment]
    schedule: str = MISSING  # type: ignore[assignment]
    gamma: float = MISSING  # type: ignore[assignment]
    lam: float = MISSING  # type: ignore[assignment]
    desired_kl: float = MISSING  # type: ignore[assignment]
    max_grad_norm: float = MISSING  # type: ignore[assignment]
    empirical_normalization: bool = MISSING  # type: ignore[assignment]
    mimic_loss_coef: float = 0.0
    discriminator_loss_coef: float = 0.0
    amp_obs_dim: int = 2


class StRlTppoAlgorithmCfg(ConfigClass):
    ppo: Any = None
    teacher_policy: Any = MISSING
    label_action_with_critic_obs: bool = True
    teacher_act_prob: Any = "exp"
    update_times_scale: int = 100
    using_ppo: bool = True
    distillation_loss_coef: Any = 1.0
    distill_target: str = "real"
    distill_latent_coef: float = 1.0
    distill_latent_target: str = "real"
    distill_latent_obs_component_mapping: Any = None
    buffer_dilation_ratio: float = 1.0
    lr_scheduler_class_name: Any = None
    lr_scheduler: dict = {}  # a configclass default: copied per instance
    hidden_state_resample_prob: float = 0.0
    action_labels_from_sample: bool = False


class StRlOnPolicyRunnerCfg(ConfigClass):
    seed: int = 42
    device: str = "cuda:0"
    num_steps_per_env: int = MISSING  # type: ignore[assignment]
    max_iterations: int = MISSING  # type: ignore[assignment]
    empirical_normalization: bool = MISSING  # type: ignore[assignment]
    policy: Any = MISSING
    algorithm: Any = MISSING
    save_interval: int = MISSING  # type: ignore[assignment]
    experiment_name: str = MISSING  # type: ignore[assignment]
    run_name: str = ""
    logger: str = "tensorboard"
    neptune_project: str = "isaaclab"
    wandb_project: str = "isaaclab"
    resume: bool = False
    load_run: str = ".*"
    load_checkpoint: str = "model_.*.pt"


# ---------------------------------------------------------------- a task's agent config, lus2-style
# st_gym's agent configs pick the algorithm, policy and runner by module-level names and finish the config in
# __post_init__; these are the same settings, with the lus2 values (the network sizes and iteration counts are
# the test's choice where a test passes them).
def st_gym_runner_cfg(
    algorithm_name: str = "PPO",
    policy_name: str = "ActorCriticRecurrent",
    runner_name: str = "OnPolicyRunner",
    *,
    hidden_dims: list[int] | None = None,
    rnn_type: str | None = "lstm",
    style_width: int = 6,
    teacher_policy: StRlPpoActorCriticCfg | None = None,
    obs_segments: dict[str, int] | None = None,
    encoder_component_names: list[str] | None = None,
    critic_obs_segments: dict[str, int] | None = None,
    critic_encoder_component_names: list[str] | None = None,
    num_steps_per_env: int = 24,
) -> StRlOnPolicyRunnerCfg:
    """A st_gym agent config (``Lus2RoughPPORunnerCfg``'s body and ``__post_init__``)."""
    dims = [512, 256, 128] if hidden_dims is None else hidden_dims
    amp_discriminator = StRlAmpCfg(
        input_dim=style_width,
        style_reward_coef=1.0,
        discriminator_grad_pen=10.0,
        hidden_dims=[512, 512, 512] if hidden_dims is None else hidden_dims,
        task_reward_lerp=0.0,
    )
    bc_loss_coef, amp_obs_dim = 0.001, style_width
    discriminator_loss_coef = 1.0 if "A" in algorithm_name else 0.0

    class Cfg(StRlOnPolicyRunnerCfg):
        max_iterations = 1000
        save_interval = 100
        experiment_name = "client_rough"
        empirical_normalization = True
        policy = StRlPpoActorCriticCfg(
            init_noise_std=1.2,
            actor_hidden_dims=dims,
            critic_hidden_dims=dims,
            activation="elu",
            rnn_type=rnn_type,
        )
        algorithm = StRlPpoAlgorithmCfg(
            value_loss_coef=1.0,
            use_clipped_value_loss=True,
            clip_param=0.2,
            entropy_coef=0.01,
            num_learning_epochs=5,
            num_mini_batches=4,
            learning_rate=1.0e-3,
            schedule="adaptive",
            gamma=0.99,
            lam=0.95,
            desired_kl=0.01,
            max_grad_norm=1.0,
            empirical_normalization=True,
        )
        if "TPPO" in algorithm_name:
            algorithm = StRlTppoAlgorithmCfg(  # type: ignore[assignment]
                ppo=algorithm,
                teacher_policy=teacher_policy,
                label_action_with_critic_obs=True,
                teacher_act_prob="exp",
                update_times_scale=100,
                using_ppo=True,
                distillation_loss_coef=1.0,
                distill_target="real",
                distill_latent_coef=1.0,
                distill_latent_target="real",
                distill_latent_obs_component_mapping=None,
                buffer_dilation_ratio=1.0,
                lr_scheduler_class_name=None,
                lr_scheduler=dict(),
                hidden_state_resample_prob=0.0,
                action_labels_from_sample=False,
            )
        storage = OrderedDict(amp_obs_shape=(style_width,))
        log_interval = 10
        logger = "tensorboard"
        neptune_project = "lus2-rl"

        def __post_init__(self) -> None:
            self.num_steps_per_env = num_steps_per_env
            self.algorithm.class_name = algorithm_name
            self.policy.class_name = policy_name
            self.runner_class_name = runner_name
            if "A" in self.algorithm.class_name:
                self.policy.amp_discriminator = amp_discriminator
                self.algorithm.bc_loss_coef = bc_loss_coef
                self.algorithm.discriminator_loss_coef = discriminator_loss_coef
                self.algorithm.amp_obs_dim = amp_obs_dim
            if "Encoder" in self.policy.class_name:
                self.policy.encoder_component_names = encoder_component_names
                self.policy.obs_segments = obs_segments
                self.policy.critic_encoder_component_names = critic_encoder_component_names
                self.policy.critic_obs_segments = critic_obs_segments

    cfg = Cfg()
    cfg.device = "cpu"  # st_gym's --device argument (cli_args.update_st_rl_cfg)
    return cfg
