"""The reference's algorithm mixins, written the way reference users compose them.

``class MyAlgo(APPOAlgoMixin, PPO)`` must be APPO, ``(APPOAlgoMixin, TPPO)`` ATPPO and
``(EstimatorAlgoMixin, PPO)`` EstimatorPPO: the same extensions, and for one seed the same losses and parameters
after an update (APPO with the set-up of tests/algorithms/test_appo.py; the estimator through
``OnPolicyRunner`` on ``velocity_tracking`` with ``actor_dynamics_slots=True``).
"""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any

import pytest
import torch

from st_rl.algorithms import (
    APPO,
    ATPPO,
    PPO,
    TPPO,
    APPOAlgoMixin,
    EstimatorAlgoMixin,
    EstimatorPPO,
    EstimatorTPPO,
)
from st_rl.algorithms.extensions import AdversarialMotionPrior, StateEstimation
from st_rl.modules import ActorCritic, AmpActorCritic, AmpMixin, StateAc
from st_rl.runners import OnPolicyRunner
from st_rl.tasks import make_env
from st_rl.utils.checkpoint import save_checkpoint

NUM_OBS, NUM_ACT, AMP_DIM, N, T = 4, 2, 2, 4, 3


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


# ---------------------------------------------------------------------------- the user's classes
class MyAPPO(APPOAlgoMixin, PPO):
    """The reference's APPO, written by a user."""


class MyATPPO(APPOAlgoMixin, TPPO):
    """The reference's ATPPO, written by a user."""


class MyEstimatorPPO(EstimatorAlgoMixin, PPO):
    """The reference's EstimatorPPO, written by a user."""


class MyEstimatorTPPO(EstimatorAlgoMixin, TPPO):
    """The reference's EstimatorTPPO, written by a user."""


class AmpEstimatorPPO(APPOAlgoMixin, EstimatorAlgoMixin, PPO):
    """A combination no preset offers: AMP and the estimator loss."""


def test_reference_module_paths_and_presets():
    from st_rl.algorithms.appo import APPOAlgoMixin as from_appo
    from st_rl.algorithms.estimator import EstimatorAlgoMixin as from_estimator

    assert from_appo is APPOAlgoMixin and from_estimator is EstimatorAlgoMixin
    assert APPO.__bases__ == (APPOAlgoMixin, PPO) and ATPPO.__bases__ == (APPOAlgoMixin, TPPO)
    assert EstimatorPPO.__bases__ == (EstimatorAlgoMixin, PPO)
    assert EstimatorTPPO.__bases__ == (EstimatorAlgoMixin, TPPO)
    assert not issubclass(APPOAlgoMixin, PPO) and not issubclass(EstimatorAlgoMixin, PPO)


# ---------------------------------------------------------------------------- APPO
def _amp_policy() -> Any:
    return AmpActorCritic(
        NUM_OBS, NUM_OBS, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8],
        amp_discriminator={"input_dim": AMP_DIM, "hidden_dims": [], "discriminator_grad_pen": 10.0},
    )  # fmt: skip


def _appo_update(cls: type, **kwargs: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    """Build ``cls`` with the reference's keyword arguments, collect one rollout and update once."""
    torch.manual_seed(0)
    alg = cls(_amp_policy(), discriminator_loss_coef=1.0, mimic_loss_coef=0.5, amp_obs_dim=AMP_DIM,
              num_learning_epochs=2, num_mini_batches=2, **kwargs)  # fmt: skip
    alg.init_obs_norm(NUM_OBS, NUM_OBS)
    alg.init_storage(N, T, [NUM_OBS], [None], [NUM_ACT])
    gen = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for _ in range(T):
            obs = torch.randn(N, NUM_OBS, generator=gen)
            alg.act(obs, obs)
            infos = {
                "observations": {"ref_obs": torch.randn(N, AMP_DIM, generator=gen)},
                "ref_motion": torch.randn(N, AMP_DIM, generator=gen),
            }
            alg.process_env_step(torch.randn(N, generator=gen), torch.zeros(N, dtype=torch.bool), infos)
        alg.compute_returns(torch.randn(N, NUM_OBS, generator=gen))
    losses, _ = alg.update(0)
    return alg, losses


def test_appo_mixin_on_ppo_is_appo():
    mine, losses = _appo_update(MyAPPO)
    preset, preset_losses = _appo_update(APPO)
    assert isinstance(mine.amp, AdversarialMotionPrior) and list(mine.extensions) == list(preset.extensions)
    assert mine.amp.discriminator_loss_coef == 1.0 and mine.amp_obs_dim == AMP_DIM
    assert mine.ref_obs_normalizer is mine.ref_motion_normalizer is mine.amp_normalizer
    assert {"surrogate_loss", "discriminator_expert_loss", "discriminator_policy_loss", "mimic_loss"} <= set(
        losses
    )
    assert all(math.isfinite(float(v)) for v in losses.values()), losses
    assert set(losses) == set(preset_losses)
    for name in losses:
        torch.testing.assert_close(losses[name], preset_losses[name])
    for (ka, va), (kb, vb) in zip(
        mine.actor_critic.state_dict().items(), preset.actor_critic.state_dict().items()
    ):
        assert ka == kb and torch.equal(va, vb), ka


def test_appo_mixin_on_tppo_is_atppo(tmp_path):
    torch.manual_seed(5)
    teacher = ActorCritic(NUM_OBS, NUM_OBS, NUM_ACT, actor_hidden_dims=[8], critic_hidden_dims=[8])
    path = tmp_path / "teacher.pt"
    save_checkpoint(str(path), {"model_state_dict": teacher.state_dict()})
    teacher_policy = {"teacher_ac_path": str(path), "actor_hidden_dims": [8], "critic_hidden_dims": [8]}
    # st_gym's nested ppo dict carries PPO and AMP keys alike
    nested = {"ppo": {"discriminator_loss_coef": 0.5, "learning_rate": 1e-3}, "teacher_act_prob": 0.0}
    mine, losses = _appo_update(MyATPPO, teacher_policy=dict(teacher_policy), **copy.deepcopy(nested))
    preset, preset_losses = _appo_update(ATPPO, teacher_policy=dict(teacher_policy), **copy.deepcopy(nested))
    assert isinstance(mine, TPPO) and mine.teacher_actor_critic is not None
    assert list(mine.extensions) == list(preset.extensions) == ["distillation", "amp"]
    assert mine.amp.discriminator_loss_coef == 1.0  # the explicit keyword wins over the nested dict
    assert (
        mine.storage is not None
        and mine.storage.has_field("action_labels")
        and mine.storage.has_field("ref_obs")
    )
    assert set(losses) == set(preset_losses)
    for name in losses:
        torch.testing.assert_close(losses[name], preset_losses[name])


# ---------------------------------------------------------------------------- estimator
EST = {
    "estimator_obs_components": ["commands", "last_actions"],
    "estimator_target_components": ["base_lin_vel"],
    "estimator_kwargs": {"hidden_sizes": [8]},
}


def _estimator_runner(alg_class_name: str) -> OnPolicyRunner:
    cfg = {
        "seed": 0,
        "num_steps_per_env": 8,
        "save_interval": 1000,
        "logger": "none",
        "policy": {"class_name": "StateAc", "actor_hidden_dims": [16], "critic_hidden_dims": [16], **EST},
        "algorithm": {
            "class_name": alg_class_name,
            "num_learning_epochs": 1,
            "num_mini_batches": 2,
            "learning_rate": 1e-3,
            "schedule": "fixed",
            "estimator_loss_func": "l1_loss",  # the reference's keyword arguments
            "estimator_loss_kwargs": {},
        },
    }
    env = make_env("velocity_tracking", num_envs=N, seed=0, actor_dynamics_slots=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return OnPolicyRunner(env, cfg)


def _learn_once(runner: OnPolicyRunner) -> dict[str, float]:
    recorded = []
    update = runner.alg.update

    def recording_update(*a: Any, **kw: Any) -> Any:
        out = update(*a, **kw)
        recorded.append({k: float(v) for k, v in out[0].items()})
        return out

    runner.alg.update = recording_update  # type: ignore[method-assign]
    runner.learn(1)
    return recorded[0]


def test_estimator_mixin_on_ppo_is_estimator_ppo_through_the_runner():
    mine = _estimator_runner(f"{__name__}:MyEstimatorPPO")  # each runner seeds the RNGs when built
    losses = _learn_once(mine)
    preset = _estimator_runner("EstimatorPPO")
    preset_losses = _learn_once(preset)
    alg: Any = mine.alg
    assert type(alg) is MyEstimatorPPO and isinstance(alg.estimator, StateEstimation)
    assert alg.estimator_loss_func == "l1_loss" and alg.estimator_target_obs_components == ["base_lin_vel"]
    assert list(alg.extensions) == list(preset.alg.extensions) == ["estimator"]
    assert "estimator_loss" in losses and all(math.isfinite(v) for v in losses.values()), losses
    assert losses == pytest.approx(preset_losses)
    for (ka, va), (kb, vb) in zip(
        alg.actor_critic.state_dict().items(), preset.alg.actor_critic.state_dict().items()
    ):
        assert ka == kb and torch.equal(va, vb), ka


def test_mixins_stack_and_compose_with_tppo(tmp_path):
    env = make_env("velocity_tracking", num_envs=N, seed=0, actor_dynamics_slots=True)
    kwargs = dict(obs_segments=env.obs_segments, **copy.deepcopy(EST))

    class AmpStateAc(AmpMixin, StateAc):
        pass

    policy = AmpStateAc(env.num_obs, env.num_obs, env.num_actions, [8], [8],
                        amp_discriminator={"input_dim": AMP_DIM, "hidden_dims": [8]}, **kwargs)  # fmt: skip
    alg = AmpEstimatorPPO(policy, amp_obs_dim=AMP_DIM, estimator_loss_func="l1_loss")
    assert list(alg.extensions) == ["estimator", "amp"] and alg.estimator_loss_func == "l1_loss"
    assert alg.amp_obs_dim == AMP_DIM

    torch.manual_seed(5)
    teacher = StateAc(env.num_obs, env.num_obs, env.num_actions, [8], [8], **kwargs)
    path = tmp_path / "teacher.pt"
    save_checkpoint(str(path), {"model_state_dict": teacher.state_dict()})
    teacher_policy = {"class_name": "StateAc", "teacher_ac_path": str(path), "actor_hidden_dims": [8],
                      "critic_hidden_dims": [8], **kwargs}  # fmt: skip
    student = StateAc(env.num_obs, env.num_obs, env.num_actions, [8], [8], **kwargs)
    alg = MyEstimatorTPPO(student, teacher_policy=teacher_policy, ppo={"estimator_loss_func": "l1_loss"})
    assert isinstance(alg, TPPO) and list(alg.extensions) == ["distillation", "estimator"]
    assert alg.estimator_loss_func == "l1_loss"  # read from st_gym's nested ppo dict
