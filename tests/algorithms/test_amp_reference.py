"""APPO against the reference (issue 16, item 7): ``bc_loss_coef`` weighs a real behaviour-cloning loss, the
reference's log key ``discriminator_grad_len_loss`` is logged, and the defaults are the reference's (no
replay, one gradient clip) with our settings behind ``amp_preset="st_rl"``."""

from __future__ import annotations

import pytest
import torch

from st_rl.algorithms import APPO
from st_rl.algorithms.extensions.amp import AMP_PRESETS, REFERENCE_GRAD_PEN_KEY
from st_rl.config.errors import ConfigError
from st_rl.configs import amp_train_config, get_preset
from st_rl.modules import AmpActorCritic
from st_rl.utils.config import resolve_train_cfg

NUM_OBS, NUM_ACT, AMP_DIM, NUM_ENVS, STEPS = 3, 2, 4, 4, 3


def make_appo(**kwargs) -> APPO:
    torch.manual_seed(0)
    ac = AmpActorCritic(
        NUM_OBS,
        NUM_OBS,
        NUM_ACT,
        actor_hidden_dims=[8],
        critic_hidden_dims=[8],
        amp_discriminator={"input_dim": AMP_DIM, "hidden_dims": [8], "discriminator_grad_pen": 10.0},
    )
    alg = APPO(ac, num_learning_epochs=1, num_mini_batches=1, **kwargs)
    alg.init_obs_norm(NUM_OBS, NUM_OBS)
    alg.init_storage(NUM_ENVS, STEPS, [NUM_OBS], [None], [NUM_ACT])
    return alg


def fill(alg: APPO, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(STEPS):
        obs = torch.randn(NUM_ENVS, NUM_OBS, generator=g)
        alg.act(obs, obs)
        infos = {
            "observations": {"ref_obs": torch.randn(NUM_ENVS, AMP_DIM, generator=g)},
            "ref_motion": torch.randn(NUM_ENVS, AMP_DIM, generator=g) + 1.0,
        }
        alg.process_env_step(
            torch.rand(NUM_ENVS, generator=g), torch.zeros(NUM_ENVS, dtype=torch.bool), infos
        )
    alg.compute_returns(torch.randn(NUM_ENVS, NUM_OBS, generator=g))


def minibatch_losses(alg: APPO) -> dict[str, torch.Tensor]:
    assert alg.storage is not None
    (minibatch,) = list(alg.storage.mini_batch_generator(1, 1))
    losses, _, _ = alg.compute_losses(minibatch)
    return losses


# ---------------------------------------------------------------------------- defaults
def test_defaults_are_the_references():
    alg = make_appo()
    assert alg.amp.amp_preset == "reference"
    assert alg.amp.replay_buffer_size == 0 and alg.amp_replay is None  # the reference has no replay
    assert alg.amp.clip_groups() == []  # one clip over the policy and its discriminator, as the reference
    groups = alg._grad_clip_groups()
    policy_and_disc = [*alg.actor_critic.parameters(), *alg.amp.discriminator.parameters()]
    assert len(groups) == 1 and len(groups[0]) == len(policy_and_disc)
    assert alg.amp.bc_loss_coef == 0.0


def test_st_rl_preset_and_explicit_keys():
    alg = make_appo(amp_preset="st_rl")
    assert alg.amp.replay_buffer_size == AMP_PRESETS["st_rl"]["amp_replay_buffer_size"] == 100_000
    assert alg.amp_replay is not None
    assert [id(p) for p in alg._grad_clip_groups()[1]] == [
        id(p) for p in alg.actor_critic.discriminator.parameters()
    ]
    # explicit keys win over the preset
    alg = make_appo(amp_preset="st_rl", amp_replay_buffer_size=0, amp_separate_clipping=False)
    assert alg.amp_replay is None and alg.amp.clip_groups() == []
    alg = make_appo(amp_replay_buffer_size=16, amp_separate_clipping=True)
    assert alg.amp_replay is not None and len(alg.amp.clip_groups()) == 1
    with pytest.raises(ValueError, match="amp_preset must be one of"):
        make_appo(amp_preset="fast")


def test_motion_path_requests_our_settings():
    cfg = amp_train_config(get_preset("velocity_tracking").train.to_dict(), 0.03)
    assert cfg["algorithm"]["amp_preset"] == "st_rl"
    resolved = resolve_train_cfg(cfg)
    assert resolved.algorithm["amp_preset"] == "st_rl"


# ---------------------------------------------------------------------------- bc_loss_coef
def test_bc_loss_is_weighted_by_bc_loss_coef():
    alg = make_appo(bc_loss_coef=0.5)
    fill(alg)
    assert alg.storage is not None
    (minibatch,) = list(alg.storage.mini_batch_generator(1, 1))
    losses, _, _ = alg.compute_losses(minibatch)
    expected = torch.norm(alg.actor_critic.action_mean - minibatch.actions, dim=-1).mean()
    torch.testing.assert_close(losses["bc_loss"], expected)
    assert alg.loss_weight("bc_loss") == 0.5
    # off by default: not computed
    off = make_appo()
    fill(off)
    assert "bc_loss" not in minibatch_losses(off)


def test_bc_loss_changes_the_update():
    def policy_after_update(coef: float) -> list[torch.Tensor]:
        alg = make_appo(bc_loss_coef=coef, learning_rate=1e-2)
        fill(alg)
        losses, _ = alg.update()
        assert ("bc_loss" in losses) == (coef > 0)
        return [p.detach().clone() for p in alg.actor_critic.actor.parameters()]

    base, with_bc = policy_after_update(0.0), policy_after_update(10.0)
    assert any(not torch.allclose(a, b) for a, b in zip(base, with_bc))


def test_bc_loss_coef_is_a_schema_key_with_a_rule():
    cfg = amp_train_config(get_preset("velocity_tracking").train.to_dict(), 0.03)
    cfg["algorithm"]["bc_loss_coef"] = 0.001
    assert resolve_train_cfg(cfg).algorithm["bc_loss_coef"] == 0.001
    cfg["algorithm"]["bc_loss_coef"] = -1.0
    with pytest.raises(ConfigError, match="bc_loss_coef"):
        resolve_train_cfg(cfg)
    cfg["algorithm"]["bc_loss_coef"] = 0.0
    cfg["algorithm"]["amp_preset"] = "fast"
    with pytest.raises(ConfigError, match="amp_preset"):
        resolve_train_cfg(cfg)


# ---------------------------------------------------------------------------- log key
def test_reference_log_key_of_the_gradient_penalty():
    alg = make_appo()
    fill(alg)
    losses = minibatch_losses(alg)
    assert REFERENCE_GRAD_PEN_KEY == "discriminator_grad_len_loss"
    torch.testing.assert_close(losses["discriminator_grad_len_loss"], losses["discriminator_grad_pen_loss"])
    assert not losses["discriminator_grad_len_loss"].requires_grad  # a logged copy, not counted twice
    assert alg.loss_weight("discriminator_grad_len_loss") == 0.0
    mean_losses, _ = alg.update()
    assert "discriminator_grad_len_loss" in mean_losses and "discriminator_grad_pen_loss" in mean_losses
    assert float(mean_losses["discriminator_grad_len_loss"]) == pytest.approx(
        float(mean_losses["discriminator_grad_pen_loss"])
    )
