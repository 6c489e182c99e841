"""The seed's minimal networks (``Actor``, ``Critic``, ``SimpleActorCritic``: reference document 003 section 1)
and ``evaluate_actions`` of the reference ``ActorCritic``, against closed-form Normal log-densities and
entropies worked by hand.

Hand-worked case used throughout: all weights zero, so the action mean is the last bias ``mu = (0.5, -1)``; the
standard deviation is ``sigma = (1, 2)``. With ``c = 0.5 * log(2 pi) = 0.9189385`` and ``log 2 = 0.6931472``:

* action ``(0.5, 3.0)``: z = (0, 2), log-density ``(-0 - 0 - c) + (-0.5 * 4 - log 2 - c) = -4.5310242``;
* entropy ``(0.5 + c + log 1) + (0.5 + c + log 2) = 3.5310242``.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal

from st_rl.modules import Actor, ActorCritic, ActorCriticRecurrent, Critic, SimpleActorCritic
from st_rl.modules.memory import ActorCriticHiddenState

MU = (0.5, -1.0)
SIGMA = (1.0, 2.0)
ACTION = (0.5, 3.0)
LOG_PROB = -4.5310242
ENTROPY = 3.5310242
VALUE = 0.7


def _zero(module: torch.nn.Module) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.zero_()


def _hand_actor(obs_dim: int = 3) -> Actor:
    actor = Actor(obs_dim, 2)
    _zero(actor)
    with torch.no_grad():
        actor.mean.bias.copy_(torch.tensor(MU))
        actor.log_std.copy_(torch.tensor(SIGMA).log())
    return actor


def _hand_critic(obs_dim: int = 3) -> Critic:
    critic = Critic(obs_dim)
    _zero(critic)
    with torch.no_grad():
        critic.fc[-1].bias.fill_(VALUE)
    return critic


def test_seed_structure_and_initial_std():
    actor, critic = Actor(3, 2), Critic(3)
    assert set(actor.state_dict()) == {
        "fc.0.weight", "fc.0.bias", "fc.2.weight", "fc.2.bias", "mean.weight", "mean.bias", "log_std"
    }  # fmt: skip
    assert [type(m) for m in actor.fc] == [torch.nn.Linear, torch.nn.Tanh] * 2
    assert actor.fc[0].weight.shape == (64, 3) and actor.mean.weight.shape == (2, 64)
    assert torch.equal(actor.log_std.detach(), torch.zeros(2))
    assert [type(m) for m in critic.fc] == [torch.nn.Linear, torch.nn.Tanh] * 2 + [torch.nn.Linear]
    assert critic.fc[-1].weight.shape == (1, 64)
    dist = actor(torch.randn(5, 3))
    assert isinstance(dist, Normal) and dist.mean.shape == (5, 2)
    torch.testing.assert_close(dist.stddev, torch.ones(5, 2))
    assert critic(torch.randn(5, 3)).shape == (5, 1)


def test_actor_and_critic_by_hand():
    obs = torch.randn(4, 3)
    dist = _hand_actor()(obs)
    torch.testing.assert_close(dist.mean, torch.tensor([MU] * 4))
    torch.testing.assert_close(dist.stddev, torch.tensor([SIGMA] * 4))
    actions = torch.tensor([ACTION] * 4)
    torch.testing.assert_close(dist.log_prob(actions).sum(-1), torch.full((4,), LOG_PROB))
    torch.testing.assert_close(dist.entropy().sum(-1), torch.full((4,), ENTROPY))
    torch.testing.assert_close(_hand_critic()(obs), torch.full((4, 1), VALUE))


def _hand_simple_ac() -> SimpleActorCritic:
    ac = SimpleActorCritic(3, 2)
    ac.actor, ac.critic = _hand_actor(), _hand_critic()
    return ac


def test_simple_actor_critic_forward_act_and_evaluate_actions_by_hand():
    ac = _hand_simple_ac()
    obs = torch.randn(4, 3)
    dist, value = ac(obs)
    torch.testing.assert_close(dist.mean, torch.tensor([MU] * 4))
    torch.testing.assert_close(value, torch.full((4, 1), VALUE))

    torch.manual_seed(0)
    actions, log_prob = ac.act(obs)
    assert actions.shape == (4, 2) and log_prob.shape == (4,)
    mu, sigma = torch.tensor(MU), torch.tensor(SIGMA)
    z = (actions - mu) / sigma
    by_formula = (-0.5 * z**2 - sigma.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    torch.testing.assert_close(log_prob, by_formula)

    log_probs, entropy, values = ac.evaluate_actions(obs, torch.tensor([ACTION] * 4))
    torch.testing.assert_close(log_probs, torch.full((4,), LOG_PROB))
    torch.testing.assert_close(entropy, torch.full((4,), ENTROPY))
    torch.testing.assert_close(values, torch.full((4, 1), VALUE))


def test_simple_actor_critic_gradients_reach_the_log_std():
    ac = SimpleActorCritic(3, 2)
    log_probs, entropy, values = ac.evaluate_actions(torch.randn(6, 3), torch.randn(6, 2))
    (log_probs.mean() + entropy.mean() + values.mean()).backward()
    assert ac.actor.log_std.grad is not None and ac.actor.log_std.grad.abs().sum() > 0
    assert ac.critic.fc[0].weight.grad is not None


# ---------------------------------------------------------------------------- reference ActorCritic
def test_reference_actor_critic_evaluate_actions_by_hand():
    ac = ActorCritic(3, 3, 2, [8], [8])
    _zero(ac)
    with torch.no_grad():
        ac.actor[-1].bias.copy_(torch.tensor(MU))
        ac.std.copy_(torch.tensor(SIGMA))
        ac.critic[-1].bias.fill_(VALUE)
    log_prob, entropy, values = ac.evaluate_actions(torch.randn(4, 3), torch.tensor([ACTION] * 4))
    torch.testing.assert_close(log_prob, torch.full((4,), LOG_PROB))
    torch.testing.assert_close(entropy, torch.full((4,), ENTROPY))
    torch.testing.assert_close(values, torch.full((4, 1), VALUE))


def test_reference_actor_critic_evaluate_actions_is_its_log_prob_entropy_and_evaluate():
    torch.manual_seed(0)
    ac = ActorCritic(5, 7, 2, [8], [8], init_noise_std=0.7)
    obs, critic_obs, actions = torch.randn(4, 5), torch.randn(4, 7), torch.randn(4, 2)
    log_prob, entropy, values = ac.evaluate_actions(obs, actions, critic_obs)
    ac.act(obs)
    torch.testing.assert_close(log_prob, ac.get_actions_log_prob(actions))
    torch.testing.assert_close(entropy, ac.entropy)
    torch.testing.assert_close(values, ac.evaluate(critic_obs))
    shared = ActorCritic(5, 5, 2, [8], [8])  # no critic observations: the critic reads the actor's
    torch.testing.assert_close(shared.evaluate_actions(obs, actions)[2], shared.evaluate(obs))
    log_prob.sum().backward()
    assert ac.std.grad is not None


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_recurrent_evaluate_actions_on_padded_trajectories(rnn_type):
    torch.manual_seed(0)
    ac = ActorCriticRecurrent(5, 6, 2, [8], [8], rnn_type=rnn_type, rnn_hidden_size=4)
    T, B = 3, 2
    obs, critic_obs, actions = torch.randn(T, B, 5), torch.randn(T, B, 6), torch.randn(T, B, 2)
    masks = torch.ones(T, B, dtype=torch.bool)  # two whole trajectories
    hidden = ActorCriticHiddenState(ac.memory_a.initial_state(B), ac.memory_c.initial_state(B))
    log_prob, entropy, values = ac.evaluate_actions(
        obs, actions, critic_obs, masks=masks, hidden_states=hidden
    )
    ac.act(obs, masks=masks, hidden_states=hidden.actor)
    torch.testing.assert_close(log_prob, ac.get_actions_log_prob(actions))
    torch.testing.assert_close(entropy, ac.entropy)
    torch.testing.assert_close(values, ac.evaluate(critic_obs, masks=masks, hidden_states=hidden.critic))
    assert values.shape == (T, B, 1) and log_prob.shape == (T, B)
