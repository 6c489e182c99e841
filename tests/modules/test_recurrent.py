"""Recurrent memory, hidden-state resets and the alignment of rollout and batch-mode hidden states."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch

from st_rl.algorithms import PPO, EstimatorPPO
from st_rl.modules import (
    ActorCriticRecurrent,
    LstmHiddenState,
    Memory,
    PrivilegeStateAcRecurrent,
    StateAcRecurrent,
)
from st_rl.storage.rollout_storage import RolloutStorage
from st_rl.utils.collections import tree_flatten


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def _state_leaves(memory: Memory) -> list[torch.Tensor]:
    h = memory.hidden_states
    return [h.hidden, h.cell] if isinstance(h, LstmHiddenState) else [h]


# ---------------------------------------------------------------------------- Memory
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_memory_rollout_equals_batch_mode(kind):
    torch.manual_seed(0)
    m = Memory(3, kind, num_layers=2, hidden_size=5)
    x = torch.randn(7, 4, 3)
    with torch.no_grad():
        rollout = torch.stack([m(x[t]) for t in range(7)])
        batch = m(x, None, m.initial_state(4))
        # an independent recurrence with the same weights
        ref_rnn = type(m.rnn)(3, 5, num_layers=2)
        ref_rnn.load_state_dict(m.rnn.state_dict())
        ref, _ = ref_rnn(x)
    assert rollout.shape == batch.shape == (7, 4, 5)
    torch.testing.assert_close(rollout, batch)
    torch.testing.assert_close(rollout, ref)
    assert isinstance(m.hidden_states, LstmHiddenState) == (kind == "lstm")
    assert _state_leaves(m)[0].shape == (2, 4, 5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_memory_batch_mode_with_masks_unpads(kind):
    torch.manual_seed(0)
    m = Memory(2, kind, num_layers=1, hidden_size=3)
    # env 0: one trajectory of 4 steps; env 1: trajectories of 1 and 3 steps (done at t=0)
    x = torch.randn(4, 2, 2)
    padded = torch.zeros(4, 3, 2)
    padded[:, 0] = x[:, 0]
    padded[0, 1] = x[0, 1]
    padded[:3, 2] = x[1:, 1]
    masks = torch.tensor([[1, 1, 1], [1, 0, 1], [1, 0, 1], [1, 0, 0]], dtype=torch.bool)
    h0 = m.initial_state(3)
    with torch.no_grad():
        out = m(padded, masks, h0)
        expected = torch.zeros(4, 2, 3)
        expected[:, 0] = m(x[:, 0:1], None, m.initial_state(1))[:, 0]
        expected[0, 1] = m(x[0:1, 1:2], None, m.initial_state(1))[0, 0]
        expected[1:, 1] = m(x[1:, 1:2], None, m.initial_state(1))[:, 0]
    assert out.shape == (4, 2, 3)
    torch.testing.assert_close(out, expected)


def test_memory_rejects_bad_type_and_lstm_without_cell():
    with pytest.raises(ValueError):
        Memory(2, "rnn")
    m = Memory(2, "lstm", hidden_size=3)
    with pytest.raises(ValueError):
        m(torch.randn(2, 1, 2), None, torch.zeros(1, 1, 3))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.long, torch.uint8, torch.float32])
@pytest.mark.parametrize("column", [False, True])
def test_memory_reset_zeroes_exactly_the_finished_rows(kind, dtype, column):
    torch.manual_seed(0)
    m = Memory(3, kind, num_layers=2, hidden_size=4)
    m.reset(torch.ones(5, dtype=torch.bool))  # no-op before the first step
    assert m.hidden_states is None
    m(torch.randn(5, 3))
    m(torch.randn(5, 3))
    before = [h.clone() for h in _state_leaves(m)]
    assert all(bool((h != 0).all()) for h in before)
    # rows 0 and 2 finished; as an index, a long [1, 0, 1, 0, 0] would wrongly hit rows 0 and 1
    dones = torch.tensor([1, 0, 1, 0, 0]).to(dtype)
    m.reset(dones.view(-1, 1) if column else dones)
    for b, a in zip(before, _state_leaves(m)):
        assert torch.all(a[:, [0, 2]] == 0)
        assert torch.equal(a[:, [1, 3, 4]], b[:, [1, 3, 4]])
    m.reset()
    assert all(bool((h == 0).all()) for h in _state_leaves(m))


def test_policy_reset_with_long_dones_resets_every_memory():
    torch.manual_seed(0)
    segments = OrderedDict([("a", (3,)), ("b", (2,))])
    ac = StateAcRecurrent(
        5,
        5,
        2,
        [8],
        [8],
        rnn_type="lstm",
        rnn_hidden_size=6,
        obs_segments=segments,
        estimator_obs_components=["a"],
        estimator_target_components=["b"],
        estimator_kwargs={"hidden_sizes": [4]},
    )
    obs = torch.randn(4, 5)
    with torch.no_grad():
        ac.act(obs)
        ac.evaluate(obs)
    before = [h.clone() for h in tree_flatten(ac.get_hidden_states())]
    assert len(before) == 6  # (estimator, actor, critic) x (hidden, cell)
    ac.reset(torch.tensor([0, 1, 0, 1]))
    for b, a in zip(before, tree_flatten(ac.get_hidden_states())):
        assert torch.all(a[:, [1, 3]] == 0)
        assert torch.equal(a[:, [0, 2]], b[:, [0, 2]])


# ---------------------------------------------------------------------------- rollout vs batch alignment
OBS_SEGMENTS = OrderedDict([("vel", (2,)), ("cmd", (2,)), ("proprio", (3,)), ("fric", (1,))])
CRITIC_SEGMENTS = OrderedDict(
    [("vel", (2,)), ("cmd", (2,)), ("proprio", (3,)), ("fric", (1,)), ("mass", (1,))]
)
N, T, A = 6, 12, 2
ESTIMATOR = {
    "estimator_obs_components": ["cmd", "proprio"],
    "estimator_target_components": ["vel"],
    "estimator_kwargs": {"hidden_sizes": [6], "rnn_hidden_size": 5},
    "replace_state_prob": 1.0,  # always substitute: the estimator memory then shapes the action mean
}
CASES = {
    "lstm-2-layers": (ActorCriticRecurrent, {"rnn_type": "lstm", "rnn_num_layers": 2}),
    "gru": (ActorCriticRecurrent, {"rnn_type": "gru"}),
    "StateAcRecurrent": (StateAcRecurrent, {"rnn_type": "gru", **ESTIMATOR}),
    "PrivilegeStateAcRecurrent": (
        PrivilegeStateAcRecurrent,
        {
            "rnn_type": "lstm",
            **ESTIMATOR,
            "adaptor_obs_components": ["vel", "proprio"],
            "adaptor_target_components": ["fric"],
            "adaptor_kwargs": {"hidden_sizes": [4], "rnn_hidden_size": 3},
            "privilege_replace_state_prob": 1.0,
        },
    ),
}


def _build(case: str):
    cls, kw = CASES[case]
    torch.manual_seed(0)
    return cls(
        8,
        9,
        A,
        [16],
        [16],
        rnn_hidden_size=7,
        obs_segments=OBS_SEGMENTS,
        privileged_obs_segments=CRITIC_SEGMENTS,
        **kw,
    )


def _collect(ac, seed: int = 0, alg_cls=PPO):
    """Roll out T steps through PPO.act / process_env_step with random (and some forced) dones."""
    g = torch.Generator().manual_seed(seed)
    alg = alg_cls(ac, num_learning_epochs=1, num_mini_batches=3, desired_kl=None, precision="fp32")
    alg.init_storage(N, T, [8], [9], [A])
    rec = {
        "obs": [],
        "critic": [],
        "hidden": [],
        "mean": [],
        "value": [],
        "dones": [],
        "est": [],
        "adapt": [],
    }
    for t in range(T):
        obs = torch.randn(N, 8, generator=g)
        critic = torch.randn(N, 9, generator=g)
        rec["hidden"].append([None if h is None else h.clone() for h in tree_flatten(ac.get_hidden_states())])
        with torch.no_grad():
            alg.act(obs, critic)
        rec["mean"].append(alg.transition.action_mean.clone())
        rec["value"].append(alg.transition.values.clone())
        if hasattr(ac, "estimated_state_") and ac.estimator is not None:
            rec["est"].append(ac.get_estimated_state().clone())
        if ac.adaptor is not None:
            rec["adapt"].append(ac.get_adapted_state().clone())
        dones = torch.rand(N, generator=g) < 0.2
        dones[1] = False  # env 1: a single trajectory
        dones[0] = t in (2, 3)  # env 0: a length-1 trajectory at t=3
        dones[2] = t == T - 1  # env 2: done on the last step only
        dones[3] = t == 0  # env 3: done on the first step
        rec["obs"].append(obs)
        rec["critic"].append(critic)
        rec["dones"].append(dones)
        with torch.no_grad():
            alg.process_env_step(torch.randn(N, generator=g), dones, {})
    # fill the step-0 (None) hidden states with the zeros the memories started from
    shapes = [h.shape for h in rec["hidden"][-1]]
    rec["hidden"] = [[torch.zeros(s) if h is None else h for h, s in zip(hs, shapes)] for hs in rec["hidden"]]
    out = {k: torch.stack(v) for k, v in rec.items() if k != "hidden" and v}
    out["hidden"] = rec["hidden"]
    return alg, out


def _trajectories(dones: torch.Tensor, envs: list[int]) -> list[tuple[int, int, int]]:
    """(env, first step, length) of every trajectory of ``envs``, env-major, from a plain scan."""
    out = []
    for e in envs:
        start = 0
        for t in range(T):
            if bool(dones[t, e]) or t == T - 1:
                out.append((e, start, t + 1 - start))
                start = t + 1
    return out


def _envs_of(mb, storage: RolloutStorage) -> list[int]:
    envs = []
    for j in range(mb.actions.shape[1]):
        hits = [e for e in range(N) if torch.equal(mb.actions[:, j], storage.actions[:, e])]
        assert len(hits) == 1
        envs.append(hits[0])
    return envs


def _unpad(x: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 0)[masks.transpose(1, 0)].view(-1, T, *x.shape[2:]).transpose(1, 0)


@pytest.mark.parametrize("case", list(CASES))
def test_batch_mode_on_padded_trajectories_matches_the_rollout(case):
    ac = _build(case)
    alg, rec = _collect(ac)
    storage = alg.storage
    dones = rec["dones"]
    assert int(dones[:-1].sum()) >= 3  # trajectories split mid-rollout
    batches = list(storage.recurrent_mini_batch_generator(3, num_epochs=2))
    assert len(batches) == 6
    for epoch in range(2):
        covered = []
        mask_total = 0
        traj_total = 0
        for mb in batches[3 * epoch : 3 * epoch + 3]:
            envs = _envs_of(mb, storage)
            assert envs == list(range(envs[0], envs[0] + 2))  # each minibatch: a contiguous slice of envs
            covered += envs
            trajs = _trajectories(dones, envs)
            n_traj = len(trajs)
            assert mb.obs.shape == (T, n_traj, 8) and mb.critic_obs.shape == (T, n_traj, 9)
            assert mb.masks.shape == (T, n_traj)
            mask_total += int(mb.masks.sum())
            traj_total += n_traj
            for j, (e, t0, length) in enumerate(trajs):
                assert mb.masks[:, j].tolist() == [t < length for t in range(T)]
                assert torch.equal(mb.obs[:length, j], rec["obs"][t0 : t0 + length, e])
                assert torch.equal(mb.critic_obs[:length, j], rec["critic"][t0 : t0 + length, e])
                assert torch.all(mb.obs[length:, j] == 0)
                # the initial hidden state of a trajectory is the one saved at its first step
                for leaf, saved in zip(tree_flatten(mb.hidden_states), rec["hidden"][t0]):
                    torch.testing.assert_close(leaf[:, j], saved[:, e], rtol=0, atol=0)
                if t0 > 0:  # ... which is zero: the memory was reset after the previous done
                    assert all(bool((saved[:, e] == 0).all()) for saved in rec["hidden"][t0])
            with torch.no_grad():
                ac.act(mb.obs, masks=mb.masks, hidden_states=mb.hidden_states.actor)
                value = ac.evaluate(mb.critic_obs, masks=mb.masks, hidden_states=mb.hidden_states.critic)
            assert ac.action_mean.shape == (T, 2, A)
            torch.testing.assert_close(ac.action_mean, rec["mean"][:, envs], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(value, rec["value"][:, envs], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(mb.old_mu, rec["mean"][:, envs])
            if "est" in rec:
                est = _unpad(ac.get_estimated_state(), mb.masks)
                torch.testing.assert_close(est, rec["est"][:, envs], atol=1e-5, rtol=1e-5)
            if "adapt" in rec:
                adapted = _unpad(ac.get_adapted_state(), mb.masks)
                torch.testing.assert_close(adapted, rec["adapt"][:, envs], atol=1e-5, rtol=1e-5)
        assert sorted(covered) == list(range(N))
        assert mask_total == T * N
        assert traj_total == N + int(dones[:-1].sum())


@pytest.mark.parametrize("case", ["StateAcRecurrent", "PrivilegeStateAcRecurrent"])
def test_recurrent_estimator_and_adaptor_losses_on_padded_minibatches(case):
    ac = _build(case)
    alg, rec = _collect(ac, alg_cls=EstimatorPPO)
    batches = list(alg.storage.recurrent_mini_batch_generator(3, num_epochs=1))
    for mb in batches:
        envs = _envs_of(mb, alg.storage)
        with torch.no_grad():
            losses, _, _ = alg.compute_losses(mb)
        # independent: rollout estimates against the critic's "vel" (columns 0:2) / "fric" (column 7)
        target = rec["critic"][:, envs, 0:2]
        expected = (rec["est"][:, envs] - target).square().sum(-1).mean()
        torch.testing.assert_close(losses["estimator_loss"], expected, atol=1e-5, rtol=1e-5)
        if "adapt" in rec:
            expected = (rec["adapt"][:, envs] - rec["critic"][:, envs, 7:8]).square().sum(-1).mean()
            torch.testing.assert_close(losses["adaptor_loss"], expected, atol=1e-5, rtol=1e-5)
        else:
            assert "adaptor_loss" not in losses


@pytest.mark.parametrize("case", list(CASES))
def test_set_hidden_states_restores_every_memory(case):
    ac = _build(case)
    obs, critic = torch.randn(N, 8), torch.randn(N, 9)
    with torch.no_grad():
        ac.act(obs)
        ac.evaluate(critic)
        saved = ac.clone_hidden_states()
        ac.act(obs)
        ac.evaluate(critic)
    moved = tree_flatten(ac.get_hidden_states())
    assert all(not torch.equal(m, s) for m, s in zip(moved, tree_flatten(saved)))
    ac.set_hidden_states(saved)
    restored = tree_flatten(ac.get_hidden_states())
    assert (
        len(restored) == len(tree_flatten(saved)) == {"lstm-2-layers": 4, "gru": 2}.get(case, len(restored))
    )
    for r, s in zip(restored, tree_flatten(saved)):
        assert torch.equal(r, s)


def test_reccurent_alias_is_the_recurrent_generator():
    assert RolloutStorage.reccurent_mini_batch_generator is RolloutStorage.recurrent_mini_batch_generator
    ac = _build("gru")
    alg, _ = _collect(ac)
    torch.manual_seed(3)
    a = list(alg.storage.reccurent_mini_batch_generator(3, 1))
    torch.manual_seed(3)
    b = list(alg.storage.recurrent_mini_batch_generator(3, 1))
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        assert torch.equal(x.obs, y.obs) and torch.equal(x.masks, y.masks)


@pytest.mark.parametrize("case", ["lstm-2-layers", "PrivilegeStateAcRecurrent"])
def test_compute_returns_does_not_advance_the_memories(case):
    ac = _build(case)
    alg, _ = _collect(ac)
    before = [h.clone() for h in tree_flatten(ac.get_hidden_states())]
    last_critic = torch.randn(N, 9)
    with (
        torch.no_grad()
    ):  # batch mode of one step from the stored critic state (the stored state is untouched)
        expected_last = ac.evaluate(last_critic[None], hidden_states=ac.get_hidden_states().critic)[0]
        alg.compute_returns(last_critic)
    after = tree_flatten(ac.get_hidden_states())
    assert len(after) == len(before)
    for a, b in zip(after, before):
        assert torch.equal(a, b)
    # the last step bootstraps from V(last_critic) computed from the pre-bootstrap memory
    storage = alg.storage
    not_done = 1.0 - storage.dones[-1].float()
    delta = storage.rewards[-1] + alg.gamma * not_done * expected_last - storage.values[-1]
    torch.testing.assert_close(storage.returns[-1], delta + storage.values[-1])
