"""Observation layout helpers and trajectory padding (imported through ``st_rl.utils.utils``)."""

import pytest
import torch

from st_rl.utils.utils import (
    get_obs_slice,
    get_subobs_by_components,
    get_subobs_size,
    split_and_pad_trajectories,
    substitute_estimated_state,
    unpad_trajectories,
)

# columns: a -> 0:2, img -> 2:8 (2x3), dof_pos -> 8:11, pos -> 11:12
SEGMENTS = {"a": 2, "img": [2, 3], "dof_pos": (3,), "pos": [1]}


def _obs(*lead):
    return torch.arange(12, dtype=torch.float32).expand(*lead, 12).clone()


# ---------------------------------------------------------------------------- get_obs_slice / size
@pytest.mark.parametrize(
    ("name", "sl", "shape"),
    [
        ("a", slice(0, 2), (2,)),
        ("img", slice(2, 8), (2, 3)),
        ("dof_pos", slice(8, 11), (3,)),
        ("pos", slice(11, 12), (1,)),
    ],
)
def test_get_obs_slice_int_list_tuple_shapes(name, sl, shape):
    got_sl, got_shape = get_obs_slice(SEGMENTS, name)
    assert got_sl == sl
    assert got_shape == shape and isinstance(got_shape, tuple)


def test_get_obs_slice_missing_lists_names():
    with pytest.raises(AssertionError, match="nope") as info:
        get_obs_slice(SEGMENTS, "nope")
    for name in SEGMENTS:
        assert name in str(info.value)


def test_get_subobs_size():
    assert get_subobs_size(SEGMENTS, ["img", "pos"]) == 7  # 6 + 1
    assert get_subobs_size(SEGMENTS, "dof_pos") == 3  # bare string is one name, not "pos" as well
    assert get_subobs_size(SEGMENTS, ("a",)) == 2
    with pytest.raises(AssertionError):
        get_subobs_size(SEGMENTS, ["missing"])


# ---------------------------------------------------------------------------- get_subobs_by_components
def test_get_subobs_follows_segment_order():
    obs = _obs(2)
    out = get_subobs_by_components(obs, ["pos", "a"], SEGMENTS)
    # segment order: a (cols 0,1) then pos (col 11), whatever order the names are given in
    assert out.tolist() == [[0.0, 1.0, 11.0]] * 2


def test_get_subobs_leading_dims():
    obs = torch.randn(4, 5, 12)
    out = get_subobs_by_components(obs, ["img", "pos"], SEGMENTS)
    assert out.shape == (4, 5, 7)
    torch.testing.assert_close(out, torch.cat([obs[..., 2:8], obs[..., 11:12]], dim=-1))


def test_get_subobs_bare_string_no_substring_match():
    out = get_subobs_by_components(_obs(1), "dof_pos", SEGMENTS)
    assert out.tolist() == [[8.0, 9.0, 10.0]]  # not [8, 9, 10, 11] ("pos" is a substring of "dof_pos")
    assert get_subobs_by_components(_obs(1), "pos", SEGMENTS).tolist() == [[11.0]]


def test_get_subobs_missing_name_raises():
    with pytest.raises(AssertionError, match="velocity"):
        get_subobs_by_components(_obs(1), ["a", "velocity"], SEGMENTS)


# ---------------------------------------------------------------------------- substitute_estimated_state
def test_substitute_in_place_in_segment_order():
    obs = _obs(2)
    est = torch.tensor([[100.0, 101.0, 200.0, 201.0, 202.0]] * 2)
    out = substitute_estimated_state(obs, ["dof_pos", "a"], est, SEGMENTS)
    assert out is obs
    # first chunk (2 cols) goes to "a" (first in the layout), next 3 to "dof_pos"
    assert obs[0].tolist() == [100.0, 101.0, 2, 3, 4, 5, 6, 7, 200.0, 201.0, 202.0, 11]
    assert torch.equal(obs[0], obs[1])


def test_substitute_bare_string_and_leading_dims():
    obs = _obs(2, 3)
    substitute_estimated_state(obs, "pos", torch.full((2, 3, 1), -1.0), SEGMENTS)
    assert (obs[..., 11] == -1).all()
    assert (obs[..., 8:11] == torch.tensor([8.0, 9.0, 10.0])).all()  # dof_pos untouched


def test_substitute_wrong_width_raises():
    obs = _obs(2)
    with pytest.raises(ValueError, match="columns"):
        substitute_estimated_state(obs, ["a", "pos"], torch.zeros(2, 2), SEGMENTS)  # needs 3
    assert torch.equal(obs, _obs(2))


# ---------------------------------------------------------------------------- trajectory padding
def test_split_and_pad_hand_example():
    # T=4, N=2, x[t, n] = 1 + t + 10 n ; env0 done after step 1, env1 never done
    x = (1 + torch.arange(4).unsqueeze(1) + 10 * torch.arange(2).unsqueeze(0)).float().unsqueeze(-1)
    dones = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 0]])
    padded, masks = split_and_pad_trajectories(x, dones)
    # trajectories (env-major): [1,2], [3,4], [11,12,13,14]; padded with zeros to T=4
    assert padded.shape == (4, 3, 1)
    assert padded[..., 0].T.tolist() == [[1, 2, 0, 0], [3, 4, 0, 0], [11, 12, 13, 14]]
    assert masks.dtype == torch.bool
    assert masks.T.tolist() == [[True, True, False, False], [True, True, False, False], [True] * 4]
    assert torch.equal(unpad_trajectories(padded, masks), x)
    assert torch.equal(dones, torch.tensor([[0, 0], [1, 0], [0, 0], [0, 0]]))  # input untouched


def test_split_and_pad_done_at_first_and_last_step():
    # T=3, N=2: env0 dones [1,0,1] -> lengths 1, 2 ; env1 dones [0,0,0] -> length 3
    x = torch.tensor([[5.0, 7.0], [6.0, 8.0], [9.0, 4.0]])
    dones = torch.tensor([[True, False], [False, False], [True, False]])
    padded, masks = split_and_pad_trajectories(x, dones)
    assert padded.T.tolist() == [[5.0, 0.0, 0.0], [6.0, 9.0, 0.0], [7.0, 8.0, 4.0]]
    assert masks.sum(0).tolist() == [1, 2, 3]


def test_padding_is_zero_not_garbage():
    torch.manual_seed(0)
    x = torch.randn(6, 3, 2) + 10  # no exact zeros in the data
    dones = torch.zeros(6, 3, dtype=torch.bool)
    dones[0, 0] = dones[2, 1] = dones[3, 2] = True
    padded, masks = split_and_pad_trajectories(x, dones)
    assert (padded[~masks] == 0).all()
    assert (padded[masks] != 0).all()


def test_unpad_exact_inverse_random():
    g = torch.Generator().manual_seed(123)
    for _ in range(5):
        x = torch.randn(7, 5, 3, 2, generator=g)
        dones = torch.rand(7, 5, 1, generator=g) < 0.3
        padded, masks = split_and_pad_trajectories(x, dones)
        # one column per trajectory: number of dones (last step forced) summed over envs
        d = dones[..., 0].clone()
        d[-1] = True
        assert padded.shape == (7, int(d.sum()), 3, 2)
        assert masks.sum().item() == 7 * 5
        assert torch.equal(unpad_trajectories(padded, masks), x)
