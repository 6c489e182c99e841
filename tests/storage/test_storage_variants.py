"""QueueRolloutStorage (growth, ring wrap, untie), ActionLabelRollout and SarsaRolloutStorage contracts."""

import pytest
import torch

from st_rl.algorithms.ppo import compute_returns
from st_rl.storage.rollout_storage import ActionLabelRollout, QueueRolloutStorage, SarsaRolloutStorage
from st_rl.utils.buffer import buffer_expand, buffer_from_example, buffer_swap
from st_rl.utils.collections import namedarraytuple


def _fill(tr, obs, n, t_id, dones=None, labels=False):
    tr.observations = obs
    tr.critic_observations = None
    tr.actions = torch.full((n, 2), float(t_id))
    tr.rewards = torch.full((n,), float(t_id))
    tr.dones = dones if dones is not None else torch.zeros(n, dtype=torch.bool)
    tr.values = torch.zeros(n, 1)
    tr.actions_log_prob = torch.zeros(n)
    tr.action_mean = torch.zeros(n, 2)
    tr.action_sigma = torch.ones(n, 2)
    if labels:
        tr.action_labels = torch.full((n, 2), -float(t_id))
    return tr


def _collect(st, t_ids, n, labels=False):
    for t_id in t_ids:
        obs = torch.full((n, 3), float(t_id))
        tr = st.Transition()
        st.add_transitions(_fill(tr, obs, n, t_id, labels=labels))


def test_queue_grows_then_wraps_and_untie_orders_oldest_first():
    n, T = 2, 3
    st = QueueRolloutStorage(n, T, [3], [None], [2], buffer_dilation_ratio=2.0)
    assert st.max_length == 6 and st.num_transitions_per_env == 3
    _collect(st, [0, 1, 2], n)
    st.clear()  # grows once to 6 rows, the cursor stays after the collected data
    assert st.num_transitions_per_env == 6 and st.step == 3
    assert torch.equal(st.observations[:3, 0, 0], torch.tensor([0.0, 1.0, 2.0]))
    _collect(st, [3, 4, 5], n)
    st.clear()  # full: no more growth, the next write wraps
    assert st.num_transitions_per_env == 6 and st.step == 0
    _collect(st, [6, 7, 8], n)
    # Rows 0..2 hold the newest data before untying: a ring.
    assert torch.equal(st.observations[:, 0, 0], torch.tensor([6.0, 7.0, 8.0, 3.0, 4.0, 5.0]))
    st.untie_buffer_loop()
    assert torch.equal(st.observations[:, 0, 0], torch.tensor([3.0, 4.0, 5.0, 6.0, 7.0, 8.0]))
    assert torch.equal(st.rewards[:, 0, 0], torch.tensor([3.0, 4.0, 5.0, 6.0, 7.0, 8.0]))
    assert st.step == 6
    st.clear()
    _collect(st, [9], n)  # wraps to row 0 after untie
    assert st.observations[0, 0, 0] == 9.0


def test_queue_gae_honours_the_cursor():
    """Returns computed after a wrap equal those of the same data stored in time order."""
    n, T, gamma, lam = 1, 2, 0.9, 1.0
    st = QueueRolloutStorage(n, T, [3], [None], [2], buffer_dilation_ratio=2.0)
    _collect(st, [1, 2], n)
    st.clear()
    _collect(st, [3, 4], n)
    st.clear()
    _collect(st, [5, 6], n)  # buffer now holds rewards [5, 6, 3, 4] physically
    compute_returns(st, torch.zeros(1, 1), gamma, lam)
    # Time order 3, 4, 5, 6 with zero values and zero bootstrap: G_t = sum gamma^k r_{t+k}.
    expected = torch.tensor([3 + 0.9 * 4 + 0.81 * 5 + 0.729 * 6, 4 + 0.9 * 5 + 0.81 * 6, 5 + 0.9 * 6, 6.0])
    torch.testing.assert_close(st.returns[:, 0, 0], expected)
    # The feed-forward sampler sees all 4 rows (in untied order).
    seen = torch.cat([mb.obs[:, 0] for mb in st.mini_batch_generator(1, 1)])
    assert sorted(seen.tolist()) == [3.0, 4.0, 5.0, 6.0]


def test_queue_non_integer_ratio_wraps_inside_an_iteration():
    st = QueueRolloutStorage(1, 4, [3], [None], [2], buffer_dilation_ratio=1.5)
    _collect(st, [0, 1, 2, 3], 1)
    st.clear()
    assert st.num_transitions_per_env == 6
    _collect(st, [4, 5, 6, 7], 1)  # rows 4, 5 then wraps to rows 0, 1
    st.untie_buffer_loop()
    assert st.observations[:, 0, 0].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_queue_expands_hidden_states_and_recurrent_batches_untie():
    n, T = 2, 2
    st = QueueRolloutStorage(n, T, [3], [None], [2], buffer_dilation_ratio=2.0)
    Hidden = namedarraytuple("Hidden", ["actor", "critic"])
    for t_id in range(2):
        tr = _fill(st.Transition(), torch.full((n, 3), float(t_id)), n, t_id)
        tr.hidden_states = Hidden(torch.full((1, n, 4), float(t_id)), torch.full((1, n, 4), -float(t_id)))
        st.add_transitions(tr)
    st.clear()
    assert st.saved_hidden_states[0].shape == (4, 1, n, 4)
    for t_id in range(2, 6):
        if t_id == 4:
            st.clear()
        tr = _fill(st.Transition(), torch.full((n, 3), float(t_id)), n, t_id)
        tr.hidden_states = Hidden(torch.full((1, n, 4), float(t_id)), torch.full((1, n, 4), -float(t_id)))
        st.add_transitions(tr)
    mbs = list(st.recurrent_mini_batch_generator(1, 1))
    # One trajectory per env (no dones) whose first step is the oldest row (t_id 2).
    assert mbs[0].obs[:, 0, 0].tolist() == [2.0, 3.0, 4.0, 5.0]
    assert torch.all(mbs[0].hidden_states.actor == 2.0)
    assert torch.all(mbs[0].hidden_states.critic == -2.0)


def test_action_labels_in_both_generators_and_kept_through_growth():
    n, T = 4, 3
    st = ActionLabelRollout(n, T, [3], [None], [2], buffer_dilation_ratio=2.0)
    _collect(st, [0, 1, 2], n, labels=True)
    st.clear()
    _collect(st, [3, 4, 5], n, labels=True)
    for mb in st.mini_batch_generator(2, 1):
        assert mb.action_labels is not None
        torch.testing.assert_close(mb.action_labels, -mb.actions)
        torch.testing.assert_close(mb.action_labels[:, 0], -mb.obs[:, 0])
    for mb in st.recurrent_mini_batch_generator(2, 1):
        assert mb.action_labels.shape == (6, 2, 2)
        torch.testing.assert_close(mb.action_labels, -mb.actions)
    with pytest.raises(ValueError, match="action_labels"):
        st.add_transitions(_fill(st.Transition(), torch.zeros(n, 3), n, 0))


def test_sarsa_next_observations_align_in_both_generators():
    n, T = 2, 4
    st = SarsaRolloutStorage(n, T, [3], [2], [2])
    for t in range(T):
        tr = _fill(st.Transition(), torch.full((n, 3), float(t)), n, t)
        # Env 1 finishes at step 1: its trajectory splits there.
        tr.dones = torch.tensor([False, t == 1])
        tr.critic_observations = torch.full((n, 2), -float(t))
        if t == T - 1:
            tr.next_observations = torch.full((n, 3), float(T))
            tr.next_privileged_observations = torch.full((n, 2), -float(T))
        st.add_transitions(tr)
    for mb in st.mini_batch_generator(1, 1):
        torch.testing.assert_close(mb.next_obs[:, 0], mb.obs[:, 0] + 1)
        torch.testing.assert_close(mb.next_critic_obs[:, 0], mb.critic_obs[:, 0] - 1)
    (mb,) = list(st.recurrent_mini_batch_generator(1, 1))
    assert mb.next_obs.shape == mb.obs.shape == (4, 3, 3)  # 3 trajectories: env 0, env 1 split in two
    valid = mb.masks
    torch.testing.assert_close(mb.next_obs[..., 0][valid], mb.obs[..., 0][valid] + 1)
    torch.testing.assert_close(mb.next_critic_obs[..., 0][valid], mb.critic_obs[..., 0][valid] - 1)
    assert torch.all(mb.next_obs[~valid] == 0)


def test_sarsa_requires_next_obs_at_last_step():
    st = SarsaRolloutStorage(1, 1, [3], [None], [2])
    with pytest.raises(ValueError, match="next_observations"):
        st.add_transitions(_fill(st.Transition(), torch.zeros(1, 3), 1, 0))


def test_buffer_helpers_recursive():
    Pair = namedarraytuple("Pair", ["a", "b"])
    ex = Pair(torch.ones(3), (torch.ones(2, dtype=torch.int64),))
    buf = buffer_from_example(ex, (4,))
    assert buf.a.shape == (4, 3) and buf.b[0].dtype == torch.int64
    buf.a[:] = torch.arange(4.0).unsqueeze(-1)
    grown = buffer_expand(buf, 2)
    assert grown.a.shape == (6, 3) and torch.all(grown.a[4:] == 0)
    swapped = buffer_swap(buf, 1)
    assert swapped.a[:, 0].tolist() == [1.0, 2.0, 3.0, 0.0]
