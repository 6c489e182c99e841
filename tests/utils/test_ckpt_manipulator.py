"""ckpt_manipulator: replace_encoder0 by hand, and the runner applying it on load."""

import copy

import pytest
import torch

from st_rl.modules import EncoderActorCritic
from st_rl.utils.ckpt_manipulator import get_manipulator, replace_encoder0

SEGMENTS = {"proprio": (3,), "scan": (4,)}


def _model(seed):
    torch.manual_seed(seed)
    return EncoderActorCritic(
        7,
        7,
        2,
        obs_segments=SEGMENTS,
        encoder_component_names=["scan"],
        critic_encoder_component_names=["scan"],
        actor_hidden_dims=[8],
        critic_hidden_dims=[8],
    )


def test_replace_encoder0_keeps_fresh_actor_encoder_and_copies_the_rest():
    trained, fresh = _model(0), _model(1)
    src = {
        "model_state_dict": trained.state_dict(),
        "optimizer_state_dict": {"x": 1},
        "iter": 42,
        "infos": {"a": 1},
    }
    out = replace_encoder0(src, {"model_state_dict": fresh.state_dict()})
    assert set(out) == {"model_state_dict", "iter", "infos"}  # no optimizer state
    assert out["iter"] == 42
    for key, value in out["model_state_dict"].items():
        if key.startswith("encoders.0."):
            assert torch.equal(value, fresh.state_dict()[key]), key
        else:
            assert torch.equal(value, trained.state_dict()[key]), key
    assert any(k.startswith("critic_encoders.0.") for k in out["model_state_dict"])


def test_replace_encoder0_reports_missing_keys():
    trained, fresh = _model(0), _model(1)
    sd = {k: v for k, v in trained.state_dict().items() if not k.startswith("critic.")}
    with pytest.raises(KeyError, match="lacks"):
        replace_encoder0({"model_state_dict": sd}, {"model_state_dict": fresh.state_dict()})


def test_get_manipulator_by_name_path_or_callable():
    assert get_manipulator("replace_encoder0") is replace_encoder0
    assert get_manipulator("st_rl.utils.ckpt_manipulator:replace_encoder0") is replace_encoder0
    assert get_manipulator(replace_encoder0) is replace_encoder0
    with pytest.raises(ValueError, match="available"):
        get_manipulator("nope")


def test_runner_applies_manipulator_on_load(tmp_path, small_cfg):
    from st_rl.runners import OnPolicyRunner
    from st_rl.tasks import make_env

    cfg = copy.deepcopy(small_cfg)
    cfg["logger"] = "none"
    cfg["policy"] = {
        "class_name": "EncoderActorCritic",
        "encoder_component_names": ["commands"],
        "critic_encoder_component_names": ["commands"],
        "actor_hidden_dims": [8],
        "critic_hidden_dims": [8],
    }
    env = make_env("velocity_tracking", num_envs=4, seed=0)
    first = OnPolicyRunner(env, cfg, log_dir=str(tmp_path / "a"))
    first.learn(1)
    trained = {k: v.clone() for k, v in first.alg.actor_critic.state_dict().items()}
    cfg2 = copy.deepcopy(cfg)
    cfg2["ckpt_manipulator"] = "replace_encoder0"
    cfg2["seed"] = 5
    second = OnPolicyRunner(
        make_env("velocity_tracking", num_envs=4, seed=0), cfg2, log_dir=str(tmp_path / "b")
    )
    fresh = {k: v.clone() for k, v in second.alg.actor_critic.state_dict().items()}
    second.load(str(tmp_path / "a" / "model_1.pt"))
    now = second.alg.actor_critic.state_dict()
    for key in now:
        expected = fresh[key] if key.startswith("encoders.0.") else trained[key]
        assert torch.equal(now[key], expected), key
    assert (tmp_path / "b" / "loaded_1_manipulated.pt").exists()
    assert second.current_learning_iteration == 1


def _ppo_and_appo(hidden=(8,)):
    from st_rl.algorithms import APPO, PPO
    from st_rl.modules import ActorCritic, AmpActorCritic

    torch.manual_seed(0)
    ppo = PPO(
        ActorCritic(5, 5, 2, actor_hidden_dims=list(hidden), critic_hidden_dims=[8]),
        empirical_normalization=True,
    )
    ppo.init_obs_norm(5, 5)
    ppo.obs_normalizer.update(torch.randn(64, 5) * 3 + 2)
    ppo.critic_obs_normalizer.update(torch.randn(64, 5) - 1)
    torch.manual_seed(1)
    amp = AmpActorCritic(
        5,
        5,
        2,
        actor_hidden_dims=[8],
        critic_hidden_dims=[8],
        amp_discriminator={"input_dim": 4, "hidden_dims": [6]},
    )
    appo = APPO(amp, empirical_normalization=True)
    appo.init_obs_norm(5, 5)
    return ppo, appo


def test_add_amp_discriminator_takes_the_policy_and_keeps_a_fresh_discriminator():
    from st_rl.utils.ckpt_manipulator import add_amp_discriminator

    ppo, appo = _ppo_and_appo()
    src = {**ppo.state_dict(), "iter": 600, "infos": None}
    fresh = copy.deepcopy(appo.state_dict())
    out = add_amp_discriminator(src, appo.state_dict())
    assert "optimizer_state_dict" not in out and out["iter"] == 600
    appo.load_state_dict(out, load_optimizer=False)
    for key, value in appo.actor_critic.state_dict().items():
        assert torch.equal(value, src["model_state_dict"][key]), key
    for key, value in appo.amp.discriminator.state_dict().items():  # the AMP extension's fresh discriminator
        assert torch.equal(value, fresh["amp_discriminator_state_dict"][key]), key
    torch.testing.assert_close(appo.obs_normalizer.mean, ppo.obs_normalizer.mean)
    torch.testing.assert_close(appo.critic_obs_normalizer.mean, ppo.critic_obs_normalizer.mean)
    assert int(appo.amp_normalizer.count) == 0  # the AMP statistics start fresh
    assert get_manipulator("add_amp_discriminator") is add_amp_discriminator


def test_add_amp_discriminator_rejects_mismatches():
    from st_rl.utils.ckpt_manipulator import add_amp_discriminator

    ppo, appo = _ppo_and_appo(hidden=(16,))
    with pytest.raises(
        RuntimeError, match="size mismatch"
    ):  # same keys, other shapes: load_state_dict says so
        appo.load_state_dict(add_amp_discriminator(ppo.state_dict(), appo.state_dict()), load_optimizer=False)
    ppo, appo = _ppo_and_appo(hidden=(8, 8))
    with pytest.raises(KeyError, match="does not match"):
        add_amp_discriminator(ppo.state_dict(), appo.state_dict())
    with pytest.raises(ValueError, match="already has a discriminator"):
        add_amp_discriminator(appo.state_dict(), appo.state_dict())
    with pytest.raises(ValueError, match="no AMP discriminator"):
        add_amp_discriminator(ppo.state_dict(), ppo.state_dict())
