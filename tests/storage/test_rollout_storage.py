"""RolloutStorage: filling, GAE, statistics and minibatch sampling."""

import pytest
import torch

from st_rl.algorithms.ppo import compute_returns
from st_rl.storage import RolloutStorage


def _transition(obs, critic_obs=None, actions=None, rewards=None, dones=None, values=None):
    n = obs.shape[0]
    tr = RolloutStorage.Transition()
    tr.observations = obs
    tr.critic_observations = critic_obs
    tr.actions = actions if actions is not None else torch.zeros(n, 2)
    tr.rewards = rewards if rewards is not None else torch.zeros(n)
    tr.dones = dones if dones is not None else torch.zeros(n, dtype=torch.bool)
    tr.values = values if values is not None else torch.zeros(n, 1)
    tr.actions_log_prob = torch.zeros(n)
    tr.action_mean = torch.zeros(n, 2)
    tr.action_sigma = torch.ones(n, 2)
    return tr


def _indexed_storage(T, N, privileged=None):
    """Storage whose obs[t, n, 0] = t * N + n (unique id of each sample)."""
    st = RolloutStorage(N, T, [3], privileged if privileged is not None else [None], [2])
    for t in range(T):
        obs = torch.zeros(N, 3)
        obs[:, 0] = torch.arange(N) + t * N
        crit = None if privileged is None else -obs[:, :1].repeat(1, privileged[0])
        st.add_transitions(_transition(obs, crit))
    return st


def test_overflow_raises_assertion_error():
    st = RolloutStorage(2, 2, [3], [None], [2])
    st.add_transitions(_transition(torch.zeros(2, 3)))
    st.add_transitions(_transition(torch.zeros(2, 3)))
    with pytest.raises(AssertionError, match="overflow"):
        st.add_transitions(_transition(torch.zeros(2, 3)))


def test_clear_resets_cursor_and_allows_refill():
    st = _indexed_storage(2, 2)
    assert st.step == 2
    st.clear()
    assert st.step == 0
    st.add_transitions(_transition(torch.full((2, 3), 7.0)))
    assert st.step == 1
    assert torch.all(st.observations[0] == 7.0)


def test_no_privileged_obs_means_no_critic_buffer_and_critic_obs_is_obs():
    st = _indexed_storage(3, 2, privileged=None)
    assert st.privileged_observations is None
    for mb in st.mini_batch_generator(2, 1):
        torch.testing.assert_close(mb.critic_obs, mb.obs)


def test_privileged_obs_buffer_used_for_critic_obs():
    st = _indexed_storage(3, 2, privileged=[4])
    assert st.privileged_observations is not None and st.privileged_observations.shape == (3, 2, 4)
    for mb in st.mini_batch_generator(2, 1):
        assert mb.critic_obs.shape == (3, 4)
        torch.testing.assert_close(mb.critic_obs, -mb.obs[:, :1].repeat(1, 4))


def test_tolerates_amp_obs_shape_kwarg():
    st = RolloutStorage(2, 3, [3], [None], [2], "cpu", amp_obs_shape=(10,))
    assert st.observations.shape == (3, 2, 3)


# GAE case of tests/algorithms/test_functional.py: T=3, N=2, gamma=lam=0.5
# env0: r=[1,0,2], V=[1,2,4], done after step 1, last V 8 -> A=[0.5,-2,2],      R=[1.5,0,6]
# env1: r=[0,0,4], V=[0,0,0], no done,           last V 2 -> A=[0.3125,1.25,5], R=[0.3125,1.25,5]
REWARDS = [[1.0, 0.0], [0.0, 0.0], [2.0, 4.0]]
VALUES = [[1.0, 0.0], [2.0, 0.0], [4.0, 0.0]]
DONES = [[False, False], [True, False], [False, False]]


def _gae_storage():
    st = RolloutStorage(2, 3, [1], [None], [2])
    for t in range(3):
        st.add_transitions(
            _transition(
                torch.zeros(2, 1),
                rewards=torch.tensor(REWARDS[t]),
                dones=torch.tensor(DONES[t]),
                values=torch.tensor(VALUES[t]).unsqueeze(-1),
            )
        )
    return st


def test_compute_returns_hand_gae_and_normalised_advantages():
    st = _gae_storage()
    compute_returns(st, torch.tensor([[8.0], [2.0]]), 0.5, 0.5)
    torch.testing.assert_close(st.returns[..., 0], torch.tensor([[1.5, 0.3125], [0.0, 1.25], [6.0, 5.0]]))
    raw = torch.tensor([[0.5, 0.3125], [-2.0, 1.25], [2.0, 5.0]])
    # raw mean = 7.0625/6 = 1.1770833; squared deviations sum to 26.597005, /5 -> std 2.3063827
    expected = (raw - 1.1770833) / 2.3063827
    torch.testing.assert_close(st.advantages[..., 0], expected)
    assert st.advantages.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert st.advantages.std().item() == pytest.approx(1.0, abs=1e-5)


def test_get_statistics_hand_case_does_not_mutate_dones():
    st = _gae_storage()
    dones_before = st.dones.clone()
    mean_len, mean_rew = st.get_statistics()
    # last step forced done: env0 [0,1,1], env1 [0,0,1]; env-major flat [0,1,1,0,0,1]
    # done indices 1,2,5 (after -1) -> lengths 2,1,3 -> mean 2
    assert mean_len.item() == pytest.approx(2.0)
    assert mean_rew.item() == pytest.approx(7.0 / 6.0)  # (1+0+0+0+2+4)/6
    assert torch.equal(st.dones, dones_before)
    assert st.dones[-1].sum().item() == 0


@pytest.mark.parametrize(("T", "N", "n_mb", "size"), [(5, 4, 3, 6), (3, 2, 2, 3), (4, 4, 1, 16)])
def test_minibatch_sizes_drop_remainder(T, N, n_mb, size):
    # size = N*T // n_mb: 20//3 = 6, 6//2 = 3, 16//1 = 16
    st = _indexed_storage(T, N)
    batches = list(st.mini_batch_generator(n_mb, num_epochs=2))
    assert len(batches) == 2 * n_mb
    for mb in batches:
        assert mb.obs.shape == (size, 3)
        assert mb.actions.shape == (size, 2)
        assert mb.values.shape == mb.returns.shape == mb.advantages.shape == (size, 1)
        assert mb.old_actions_log_prob.shape == (size, 1)
        assert mb.old_mu.shape == mb.old_sigma.shape == (size, 2)
        assert mb.hidden_states is None and mb.masks is None
    # within an epoch no sample appears twice
    ids = torch.cat([mb.obs[:, 0] for mb in batches[:n_mb]])
    assert len(set(ids.tolist())) == n_mb * size


def test_minibatches_cover_every_sample_each_epoch_and_reshuffle():
    torch.manual_seed(0)
    st = _indexed_storage(4, 3)  # 12 samples, ids 0..11
    batches = list(st.mini_batch_generator(3, num_epochs=3))
    orders = [torch.cat([mb.obs[:, 0] for mb in batches[e * 3 : (e + 1) * 3]]).tolist() for e in range(3)]
    for order in orders:
        assert sorted(order) == [float(i) for i in range(12)]
    assert orders[0] != orders[1] or orders[1] != orders[2]


def test_too_many_minibatches_raises():
    st = _indexed_storage(2, 2)
    with pytest.raises(ValueError, match="exceeds the batch size"):
        next(st.mini_batch_generator(5, 1))
