"""Training configs written the way legged_gym and the parkour fork of legged_gym write them, for client tests.

These are the public field names and default values of legged_gym's ``LeggedRobotCfgPPO`` and of parkour's
``LeggedRobotCfgPPO`` / Go2 configs (``legged_gym/envs/base/legged_robot_config.py``,
``legged_gym/envs/go2/go2_{,field_,distill_}config.py``), restated: plain classes with nested classes, deriving
from a ``BaseConfig`` whose constructor turns every nested class into an instance, as legged_gym's does. Task
registries hold *instances* (``task_registry.register(name, Env, EnvCfg(), TrainCfgPPO())``) and scripts turn
them into the dict given to the runner with :func:`class_to_dict`.

Nothing here is tuned for st_rl: a test that needs a different value (fewer iterations, a path of its own run)
sets it on the instance, as a user edits the config file or passes ``--max_iterations`` / ``--load_run``.

Import it as ``clients.legged_gym_cfg`` (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import inspect
import os.path as osp
from collections import OrderedDict
from typing import Any

__all__ = [
    "BaseConfig",
    "Go2DistillCfgPPO",
    "Go2FieldCfgPPO",
    "Go2RoughCfgPPO",
    "LOGS_ROOT",
    "LeggedRobotCfgPPO",
    "LeggedRobotRecurrentCfgPPO",
    "ParkourLeggedRobotCfgPPO",
    "class_to_dict",
]

# parkour's configs name their log directories below ``<repository>/logs``; tests replace every such path.
LOGS_ROOT = osp.join(osp.dirname(osp.abspath(__file__)), "logs")


class BaseConfig:
    """legged_gym's config base: the constructor replaces every nested class by an instance, recursively."""

    def __init__(self) -> None:
        self.init_member_classes(self)

    @staticmethod
    def init_member_classes(obj: Any) -> None:
        for key in dir(obj):
            if key == "__class__":
                continue
            var = getattr(obj, key)
            if inspect.isclass(var):
                instance = var()
                setattr(obj, key, instance)
                BaseConfig.init_member_classes(instance)


def class_to_dict(obj: Any) -> Any:
    """legged_gym's ``class_to_dict``: every public attribute (``dir(obj)``, names starting with "_" skipped) of
    anything with a ``__dict__`` becomes a dict entry, recursively; lists are converted element-wise; dicts and
    values without a ``__dict__`` are returned as they are (not copied).

    Like legged_gym's, it does not skip methods: a function has a ``__dict__`` and no public attribute, so
    ``BaseConfig.init_member_classes`` becomes ``"init_member_classes": {}`` at the top level of every config
    that derives from ``BaseConfig`` -- what legged_gym and parkour scripts hand to the runner.
    """
    if not hasattr(obj, "__dict__") or isinstance(obj, dict):
        return obj
    result: dict[str, Any] = {}
    for key in dir(obj):
        if key.startswith("_"):
            continue
        val = getattr(obj, key)
        if isinstance(val, list):
            result[key] = [class_to_dict(item) for item in val]
        else:
            result[key] = class_to_dict(val)
    return result


# ---------------------------------------------------------------------------------------------- legged_gym
class LeggedRobotCfgPPO(BaseConfig):
    """legged_gym's (leggedrobotics/legged_gym) training config."""

    seed = 1
    runner_class_name = "OnPolicyRunner"

    class policy:
        init_noise_std = 1.0
        actor_hidden_dims = [512, 256, 128]
        critic_hidden_dims = [512, 256, 128]
        activation = "elu"  # can be elu, relu, selu, crelu, lrelu, tanh, sigmoid
        # only for 'ActorCriticRecurrent':
        # rnn_type = 'lstm'
        # rnn_hidden_size = 512
        # rnn_num_layers = 1

    class algorithm:
        # training params
        value_loss_coef = 1.0
        use_clipped_value_loss = True
        clip_param = 0.2
        entropy_coef = 0.01
        num_learning_epochs = 5
        num_mini_batches = 4  # mini batch size = num_envs*nsteps / nminibatches
        learning_rate = 1.0e-3
        schedule = "adaptive"  # could be adaptive, fixed
        gamma = 0.99
        lam = 0.95
        desired_kl = 0.01
        max_grad_norm = 1.0

    class runner:
        policy_class_name = "ActorCritic"
        algorithm_class_name = "PPO"
        num_steps_per_env = 24  # per iteration
        max_iterations = 1500  # number of policy updates

        # logging
        save_interval = 50  # check for potential saves every this many iterations
        experiment_name = "test"
        run_name = ""
        # load and resume
        resume = False
        load_run = -1  # -1 = last run
        checkpoint = -1  # -1 = last saved model
        resume_path = None  # updated from load_run and chkpt


class LeggedRobotRecurrentCfgPPO(LeggedRobotCfgPPO):
    """A legged_gym task config that switches to ``ActorCriticRecurrent`` with the commented-out keys set."""

    class policy(LeggedRobotCfgPPO.policy):
        rnn_type = "lstm"
        rnn_hidden_size = 512
        rnn_num_layers = 1

    class runner(LeggedRobotCfgPPO.runner):
        policy_class_name = "ActorCriticRecurrent"
        experiment_name = "rough_recurrent"


# ------------------------------------------------------------------------------------------------- parkour
class ParkourLeggedRobotCfgPPO(LeggedRobotCfgPPO):
    """parkour's ``LeggedRobotCfgPPO``: legged_gym's plus ``algorithm.clip_min_std``."""

    class algorithm(LeggedRobotCfgPPO.algorithm):
        clip_min_std = 1e-15


class Go2RoughCfgPPO(ParkourLeggedRobotCfgPPO):
    """parkour's Go2 walking config: an estimator + height-map encoder GRU policy trained with EstimatorPPO."""

    class algorithm(ParkourLeggedRobotCfgPPO.algorithm):
        entropy_coef = 0.01
        clip_min_std = 0.2
        learning_rate = 1e-4
        optimizer_class_name = "AdamW"

    class policy(ParkourLeggedRobotCfgPPO.policy):
        # configs for estimator module
        estimator_obs_components = [
            "ang_vel",
            "projected_gravity",
            "commands",
            "dof_pos",
            "dof_vel",
            "last_actions",
        ]
        estimator_target_components = ["lin_vel"]
        replace_state_prob = 1.0

        class estimator_kwargs:
            hidden_sizes = [128, 64]
            nonlinearity = "CELU"

        # configs for (critic) encoder
        encoder_component_names = ["height_measurements"]
        encoder_class_name = "MlpModel"

        class encoder_kwargs:
            hidden_sizes = [128, 64]
            nonlinearity = "CELU"

        encoder_output_size = 32
        critic_encoder_component_names = ["height_measurements"]
        init_noise_std = 0.5
        # configs for policy: using recurrent policy with GRU
        rnn_type = "gru"
        mu_activation = None

    class runner(ParkourLeggedRobotCfgPPO.runner):
        policy_class_name = "EncoderStateAcRecurrent"
        algorithm_class_name = "EstimatorPPO"
        experiment_name = "rough_go2"

        resume = False
        load_run = None

        run_name = "Go2Rough_pEnergy-2e-5_pDofErr-1e-2_pDofErrN-1e+0_pStand-2e+0_noResume"

        max_iterations = 2000
        save_interval = 2000
        log_interval = 100


class Go2FieldCfgPPO(Go2RoughCfgPPO):
    """parkour's Go2 parkour-skills config: the rough policy, resumed from a trained walking run."""

    class algorithm(Go2RoughCfgPPO.algorithm):
        entropy_coef = 0.0

    class runner(Go2RoughCfgPPO.runner):
        experiment_name = "field_go2"

        resume = True
        load_run = osp.join(LOGS_ROOT, "rough_go2", "{Your trained walking model directory}")

        run_name = "Go2_10skills_pEnergy2.00e-07_pTorques-1.00e-07_pLazyStop-3.00e+00_fromRough"

        max_iterations = 38000
        save_interval = 10000
        log_interval = 100


class Go2DistillCfgPPO(Go2FieldCfgPPO):
    """parkour's Go2 distillation config: a depth-camera student distilled (DAgger, no PPO loss) from the field
    policy, pretrained from a collected dataset (``TwoStageRunner``), initialised from the field run with its
    first encoder replaced (``ckpt_manipulator="replace_encoder0"``)."""

    class algorithm(Go2FieldCfgPPO.algorithm):
        entropy_coef = 0.0
        using_ppo = False
        num_learning_epochs = 8
        num_mini_batches = 2
        distill_target = "l1"
        learning_rate = 3e-4
        optimizer_class_name = "AdamW"
        teacher_act_prob = 0.0
        distillation_loss_coef = 1.0
        # update_times_scale = 100
        action_labels_from_sample = False

        teacher_policy_class_name = "EncoderStateAcRecurrent"
        teacher_ac_path = osp.join(
            LOGS_ROOT,
            "field_go2",
            "{Your trained oracle parkour model directory}",
            "{The latest model filename in the directory}",
        )

        class teacher_policy(Go2FieldCfgPPO.policy):
            num_actor_obs = 48 + 21 * 11
            num_critic_obs = 48 + 21 * 11
            num_actions = 12
            obs_segments = OrderedDict(
                [
                    ("lin_vel", (3,)),
                    ("ang_vel", (3,)),
                    ("projected_gravity", (3,)),
                    ("commands", (3,)),
                    ("dof_pos", (12,)),
                    ("dof_vel", (12,)),
                    ("last_actions", (12,)),  # till here: 3+3+3+3+12+12+12 = 48
                    ("height_measurements", (1, 21, 11)),
                ]
            )

    class policy(Go2RoughCfgPPO.policy):
        # configs for estimator module
        estimator_obs_components = [
            "ang_vel",
            "projected_gravity",
            "commands",
            "dof_pos",
            "dof_vel",
            "last_actions",
        ]
        estimator_target_components = ["lin_vel"]
        replace_state_prob = 1.0

        class estimator_kwargs:
            hidden_sizes = [128, 64]
            nonlinearity = "CELU"

        # configs for visual encoder
        encoder_component_names = ["forward_depth"]
        encoder_class_name = "Conv2dHeadModel"

        class encoder_kwargs:
            channels = [16, 32, 32]
            kernel_sizes = [5, 4, 3]
            strides = [2, 2, 1]
            hidden_sizes = [128]
            use_maxpool = True
            nonlinearity = "LeakyReLU"

        # configs for critic encoder
        critic_encoder_component_names = ["height_measurements"]
        critic_encoder_class_name = "MlpModel"

        class critic_encoder_kwargs:
            hidden_sizes = [128, 64]
            nonlinearity = "CELU"

        encoder_output_size = 32

        init_noise_std = 0.1

    runner_class_name = "TwoStageRunner"

    class runner(Go2FieldCfgPPO.runner):
        policy_class_name = "EncoderStateAcRecurrent"
        algorithm_class_name = "EstimatorTPPO"
        experiment_name = "distill_go2"
        num_steps_per_env = 32

        pretrain_iterations = -1

        class pretrain_dataset:
            data_dir = "{A temporary directory to store collected trajectory}"
            dataset_loops = -1
            random_shuffle_traj_order = True
            keep_latest_n_trajs = 1500
            starting_frame_range = [0, 50]

        resume = True
        load_run = osp.join(LOGS_ROOT, "field_go2", "{Your trained oracle parkour model directory}")
        ckpt_manipulator = "replace_encoder0"

        run_name = "Go2_10skills_fromField"

        max_iterations = 60000
        log_interval = 100
