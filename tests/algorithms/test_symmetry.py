"""The symmetry extension's mirror loss: ``mse(mu(M_o o), M_a mu(o))``, the target ``M_a mu(o)`` held fixed."""

import torch
import torch.nn.functional as F  # noqa: N812

from st_rl.algorithms.extensions.symmetry import Symmetry
from st_rl.modules import ActorCritic
from st_rl.storage.rollout_storage import MiniBatch

OBS, ACTIONS = 4, 2


def _mirror_obs(x: torch.Tensor) -> torch.Tensor:  # swap the halves and negate the second coordinate of each
    return torch.cat([x[:, 2:], x[:, :2]], dim=1) * torch.tensor([1.0, -1.0, 1.0, -1.0])


def _mirror_actions(a: torch.Tensor) -> torch.Tensor:
    return a.flip(1)


def _setup(policy: ActorCritic) -> Symmetry:
    ext = Symmetry(mirror_obs=_mirror_obs, mirror_actions=_mirror_actions)
    ext.setup(policy, torch.device("cpu"))
    return ext


def _actor_grads(policy: ActorCritic, loss: torch.Tensor) -> list[torch.Tensor]:
    params = list(policy.actor.parameters())
    return list(torch.autograd.grad(loss, params))


def test_mirror_loss_matches_the_formula_and_trains_only_the_mirrored_forward():
    torch.manual_seed(0)
    policy = ActorCritic(OBS, OBS, ACTIONS, [8], [8])
    obs = torch.randn(16, OBS)
    ext = _setup(policy)
    output = policy.policy_output(obs)
    loss = ext.losses(MiniBatch(obs=obs), output)["symmetry_loss"]

    expected = F.mse_loss(
        policy.act_inference(_mirror_obs(obs)), _mirror_actions(policy.act_inference(obs).detach())
    )
    torch.testing.assert_close(loss, expected)
    for got, want in zip(_actor_grads(policy, loss), _actor_grads(policy, expected), strict=True):
        torch.testing.assert_close(got, want)


def test_mirror_loss_by_hand_on_a_constant_policy():
    policy = ActorCritic(OBS, OBS, ACTIONS, [8], [8])
    # mu(o) = (1, 3) for every o, so M_a mu = (3, 1) and the loss is ((1 - 3)^2 + (3 - 1)^2) / 2 = 4
    with torch.no_grad():
        for p in policy.actor.parameters():
            p.zero_()
        list(policy.actor.parameters())[-1].copy_(torch.tensor([1.0, 3.0]))  # the output bias
    obs = torch.randn(5, OBS)
    loss = _setup(policy).losses(MiniBatch(obs=obs), policy.policy_output(obs))["symmetry_loss"]
    assert float(loss.detach()) == 4.0
