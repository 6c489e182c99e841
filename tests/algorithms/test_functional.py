"""PPO math of ``st_rl.algorithms.functional`` checked against numbers worked out by hand."""

import math

import pytest
import torch

from st_rl.algorithms import functional as F


def _t(values):
    return torch.tensor(values, dtype=torch.float32)


# ---------------------------------------------------------------------------- compute_gae
# T=3, N=2, gamma=0.5, lam=0.5 (so gamma*lam = 0.25).
# env0: r=[1, 0, 2], V=[1, 2, 4], done after step 1, last value 8
# env1: r=[0, 0, 4], V=[0, 0, 0], no done,           last value 2
GAE_REWARDS = [[1.0, 0.0], [0.0, 0.0], [2.0, 4.0]]
GAE_VALUES = [[1.0, 0.0], [2.0, 0.0], [4.0, 0.0]]
GAE_DONES = [[0, 0], [1, 0], [0, 0]]
GAE_LAST = [8.0, 2.0]
# env0, t=2: delta = 2 + 0.5*8 - 4 = 2                 -> A = 2
#       t=1: done -> delta = 0 + 0 - 2 = -2, no carry   -> A = -2
#       t=0: delta = 1 + 0.5*2 - 1 = 1; A = 1 + 0.25*(-2) = 0.5
# env1, t=2: delta = 4 + 0.5*2 - 0 = 5                  -> A = 5
#       t=1: delta = 0; A = 0.25*5 = 1.25
#       t=0: delta = 0; A = 0.25*1.25 = 0.3125
GAE_ADV = [[0.5, 0.3125], [-2.0, 1.25], [2.0, 5.0]]
# returns = A + V
GAE_RET = [[1.5, 0.3125], [0.0, 1.25], [6.0, 5.0]]


@pytest.mark.parametrize("dones_dtype", [torch.float32, torch.bool, torch.uint8])
def test_compute_gae_hand_numbers(dones_dtype):
    returns, adv = F.compute_gae(
        _t(GAE_REWARDS), _t(GAE_VALUES), torch.tensor(GAE_DONES).to(dones_dtype), _t(GAE_LAST), 0.5, 0.5
    )
    torch.testing.assert_close(adv, _t(GAE_ADV))
    torch.testing.assert_close(returns, _t(GAE_RET))


def test_compute_gae_lam_one_is_discounted_return_minus_value():
    # T=2, N=1, gamma=0.5, lam=1: A_t = sum_k gamma^k r_{t+k} + gamma^{T-t} V_last - V_t
    # t=1: 4 + 0.5*2 - 1 = 4 ; t=0: 2 + 0.5*4 + 0.25*2 - 3 = 1.5
    returns, adv = F.compute_gae(_t([[2.0], [4.0]]), _t([[3.0], [1.0]]), _t([[0], [0]]), _t([2.0]), 0.5, 1.0)
    torch.testing.assert_close(adv, _t([[1.5], [4.0]]))
    torch.testing.assert_close(returns, _t([[4.5], [5.0]]))


def test_compute_gae_done_at_last_step_ignores_bootstrap():
    # done after the last step: the last value (100) must not leak in. A = r - V = 1 - 0.5
    _, adv = F.compute_gae(_t([[1.0]]), _t([[0.5]]), _t([[1.0]]), _t([100.0]), 0.9, 0.9)
    torch.testing.assert_close(adv, _t([[0.5]]))


# ---------------------------------------------------------------------------- normalize_advantages
def test_normalize_advantages_hand_numbers():
    # [1,2,3,4]: mean 2.5, unbiased std sqrt((2.25+0.25+0.25+2.25)/3) = sqrt(5/3) = 1.2909944
    # 1.5/1.2909944 = 1.1618950, 0.5/1.2909944 = 0.3872983
    out = F.normalize_advantages(_t([1.0, 2.0, 3.0, 4.0]))
    torch.testing.assert_close(out, _t([-1.1618950, -0.3872983, 0.3872983, 1.1618950]))


def test_normalize_advantages_constant_input_is_finite():
    out = F.normalize_advantages(_t([3.0, 3.0, 3.0]))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.zeros(3))


# ---------------------------------------------------------------------------- bootstrap_time_outs
def test_bootstrap_time_outs_hand_numbers():
    # gamma = 0.5: env0 timed out: 1 + 0.5*4 = 3 ; env1 not: 2 ; env2 timed out: -1 + 0.5*(-2) = -2
    rewards = _t([1.0, 2.0, -1.0])
    values = _t([[4.0], [6.0], [-2.0]])  # (N, 1) as the critic returns them
    time_outs = torch.tensor([True, False, True])
    out = F.bootstrap_time_outs(rewards, values, time_outs, 0.5)
    torch.testing.assert_close(out, _t([3.0, 2.0, -2.0]))
    torch.testing.assert_close(rewards, _t([1.0, 2.0, -1.0]))  # input untouched


# ---------------------------------------------------------------------------- clipped_surrogate_loss
def test_clipped_surrogate_loss_hand_numbers_and_gradient():
    # clip 0.2 -> ratio clamped to [0.8, 1.2]; per element max(-A r, -A clip(r)):
    #  r=1.1, A= 2: inside          -> -2.2
    #  r=1.5, A= 2: clip wins       -> max(-3.0, -2.4) = -2.4 (no gradient)
    #  r=0.5, A=-1: clip wins       -> max( 0.5,  0.8) =  0.8 (no gradient)
    #  r=1.5, A=-1: unclipped wins  -> max( 1.5,  1.2) =  1.5
    #  r=0.5, A= 2: unclipped wins  -> max(-1.0, -1.6) = -1.0
    # mean = (-2.2 - 2.4 + 0.8 + 1.5 - 1.0) / 5 = -0.66
    ratios = _t([1.1, 1.5, 0.5, 1.5, 0.5])
    adv = _t([2.0, 2.0, -1.0, -1.0, 2.0])
    log_prob = torch.log(ratios).requires_grad_(True)
    old = torch.zeros(5, 1)  # reshaped to log_prob's shape
    loss, extra = F.clipped_surrogate_loss(log_prob, old, adv.unsqueeze(-1), 0.2)
    assert loss.item() == pytest.approx(-0.66, abs=1e-6)
    torch.testing.assert_close(extra["ratio"], ratios)
    torch.testing.assert_close(extra["surrogate"], _t([-2.2, -3.0, 0.5, 1.5, -1.0]))
    torch.testing.assert_close(extra["surrogate_clipped"], _t([-2.2, -2.4, 0.8, 1.2, -1.6]))
    loss.backward()
    # d/dlogp(-A r) = -A r for unclipped elements, 0 for clipped ones; divided by 5 (mean)
    torch.testing.assert_close(log_prob.grad, _t([-2.2 / 5, 0.0, 0.0, 1.5 / 5, -1.0 / 5]))


def test_clipped_surrogate_ratio_one_is_minus_mean_advantage():
    loss, _ = F.clipped_surrogate_loss(_t([0.3, -0.2]), _t([0.3, -0.2]), _t([1.0, 3.0]), 0.1)
    assert loss.item() == pytest.approx(-2.0)  # -(1 + 3) / 2


# ---------------------------------------------------------------------------- value_function_loss
VF_VALUES = [1.0, 1.0]
VF_OLD = [0.0, 0.5]
VF_RETURNS = [2.0, 0.0]


def test_value_function_loss_clipped_hand_numbers():
    # clip 0.2: value_clipped = old + clamp(v - old, -0.2, 0.2) = [0.2, 0.7]
    # elem0: (1-2)^2 = 1 vs (0.2-2)^2 = 3.24 -> 3.24 ; elem1: (1-0)^2 = 1 vs 0.7^2 = 0.49 -> 1
    # mean = (3.24 + 1) / 2 = 2.12
    loss, clipped = F.value_function_loss(_t(VF_VALUES), _t(VF_OLD), _t(VF_RETURNS), 0.2, True)
    assert loss.item() == pytest.approx(2.12, abs=1e-6)
    torch.testing.assert_close(clipped, _t([0.2, 0.7]))


def test_value_function_loss_unclipped_hand_numbers():
    # ((1-2)^2 + (1-0)^2) / 2 = 1
    loss, clipped = F.value_function_loss(_t(VF_VALUES), _t(VF_OLD), _t(VF_RETURNS), 0.2, False)
    assert loss.item() == pytest.approx(1.0)
    assert clipped is None


# ---------------------------------------------------------------------------- gaussian_kl
def test_gaussian_kl_equal_distributions_is_the_1e5_term():
    mu = _t([[0.3, -1.0, 2.0]])
    sigma = _t([[0.5, 1.0, 2.0]])
    kl = F.gaussian_kl(mu, sigma, mu.clone(), sigma.clone())
    assert kl.shape == (1,)
    # each dim: log(1 + 1e-5) + 1/2 - 1/2 = 9.99995e-6 -> 3 dims
    assert kl.item() == pytest.approx(3 * math.log(1 + 1e-5), abs=1e-7)
    assert abs(kl.item()) < 1e-4


def test_gaussian_kl_hand_case():
    # dim0: old N(0,1), new N(1,1): log(1+1e-5) + (1 + 1)/2 - 0.5 = 0.5 + 1e-5
    # dim1: old N(0,1), new N(0,2): log(2+1e-5) + 1/8 - 0.5 = 0.6931472 - 0.375 = 0.3181472 (+5e-6)
    # sum = 0.8181622
    kl = F.gaussian_kl(_t([[0.0, 0.0]]), _t([[1.0, 1.0]]), _t([[1.0, 0.0]]), _t([[1.0, 2.0]]))
    assert kl.item() == pytest.approx(0.8181622, abs=2e-6)


# ---------------------------------------------------------------------------- adaptive_learning_rate
@pytest.mark.parametrize(
    ("lr", "kl", "expected"),
    [
        (1e-3, 0.03, 1e-3 / 1.5),  # kl > 2 * 0.01 -> divide
        (1e-3, 0.004, 1.5e-3),  # 0 < kl < 0.005 -> multiply
        (1e-3, 0.01, 1e-3),  # in band
        (1e-3, 0.02, 1e-3),  # exactly 2*target: not above
        (1e-3, 0.005, 1e-3),  # exactly target/2: not below
        (1e-3, 0.0, 1e-3),  # kl == 0: unchanged
        (1e-3, -0.001, 1e-3),  # kl < 0: unchanged
        (1.2e-5, 1.0, 1e-5),  # 1.2e-5 / 1.5 = 0.8e-5 -> floor 1e-5
        (8e-3, 1e-4, 1e-2),  # 8e-3 * 1.5 = 1.2e-2 -> cap 1e-2
    ],
)
def test_adaptive_learning_rate(lr, kl, expected):
    assert F.adaptive_learning_rate(lr, kl, 0.01) == pytest.approx(expected, rel=1e-12)
