"""namedarraytuple and the tree helpers of ``st_rl.utils.collections``."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
import torch

from st_rl.utils.collections import (
    AttrDict,
    get_leading_dims,
    is_namedarraytuple,
    is_namedtuple,
    namedarraytuple,
    namedarraytuple_like,
    tree_flatten,
    tree_map,
    tree_unflatten,
)

Inner = namedarraytuple("Inner", ["hidden", "cell"])
Outer = namedarraytuple("Outer", "actor, critic extra")


def _example() -> Outer:
    actor = torch.arange(12.0).reshape(4, 3)
    inner = Inner(torch.arange(8.0).reshape(4, 2), torch.arange(4.0) * 10)
    return Outer(actor, inner, None)


def test_fields_from_string_and_list():
    assert Outer._fields == ("actor", "critic", "extra")
    assert Inner._fields == ("hidden", "cell")
    assert is_namedarraytuple(_example()) and is_namedtuple(_example())
    assert not is_namedarraytuple(namedtuple("P", "a")(1)) and is_namedtuple(namedtuple("P", "a")(1))
    assert not is_namedtuple((1, 2))


def test_indexing_applies_to_every_field_including_nested_and_none():
    x = _example()
    y = x[1:3]
    assert type(y) is Outer and type(y.critic) is Inner
    assert y.actor.tolist() == [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
    assert y.critic.hidden.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert y.critic.cell.tolist() == [10.0, 20.0]
    assert y.extra is None
    z = x[torch.tensor([True, False, False, True])]
    assert z.actor[:, 0].tolist() == [0.0, 9.0] and z.critic.cell.tolist() == [0.0, 30.0]
    w = x[2]
    assert w.actor.tolist() == [6.0, 7.0, 8.0] and w.critic.cell.item() == 20.0
    full = Outer(x.actor, x.critic, torch.arange(4.0) + 100)
    assert full[1:3].extra.tolist() == [101.0, 102.0]
    assert full[-1].extra.item() == 103.0


def test_index_error_names_the_field():
    x = Outer(torch.zeros(4, 2), torch.zeros(2), None)
    with pytest.raises(IndexError, match="critic"):
        x[3]


def test_scalar_assignment_hits_every_field_and_skips_none():
    x = _example()
    x[1] = -1.0
    assert x.actor[1].tolist() == [-1.0, -1.0, -1.0]
    assert x.critic.hidden[1].tolist() == [-1.0, -1.0]
    assert x.critic.cell[1].item() == -1.0
    assert x.actor[0].tolist() == [0.0, 1.0, 2.0] and x.critic.cell[2].item() == 20.0
    assert x.extra is None


def test_fieldwise_assignment_from_the_same_structure():
    x = _example()
    value = Outer(torch.full((2, 3), 7.0), Inner(torch.full((2, 2), 8.0), torch.full((2,), 9.0)), None)
    x[2:4] = value
    assert x.actor[2:].eq(7.0).all() and x.critic.hidden[2:].eq(8.0).all() and x.critic.cell[2:].eq(9.0).all()
    assert x.actor[:2].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert x.critic.cell[:2].tolist() == [0.0, 10.0]
    # a mask over the env dim, as resets use
    x[torch.tensor([True, False, False, False])] = Outer(
        torch.full((1, 3), 5.0), Inner(torch.full((1, 2), 6.0), torch.full((1,), 4.0)), None
    )
    assert x.actor[0].tolist() == [5.0, 5.0, 5.0] and x.critic.cell[0].item() == 4.0


def test_assignment_with_numpy_fields():
    Pair = namedarraytuple("Pair", ["a", "b"])
    p = Pair(np.zeros((3, 2)), np.zeros(3))
    p[1] = 2.0
    assert p.a[1].tolist() == [2.0, 2.0] and p.b.tolist() == [0.0, 2.0, 0.0]


def test_contains_get_and_items():
    x = _example()
    assert "actor" in x and "extra" in x
    assert "hidden" not in x  # field names, not nested ones
    assert x.get(0) is x.actor and x.get(2) is None
    assert x.get(1) is x.critic
    names = [k for k, _ in x.items()]
    assert names == ["actor", "critic", "extra"]
    assert dict(x.items())["critic"] is x.critic


@pytest.mark.parametrize("bad", ["get", "items"])
def test_reserved_field_names_raise(bad):
    with pytest.raises(ValueError, match=bad):
        namedarraytuple("Bad", ["a", bad])


def test_get_leading_dims_function():
    x = Inner(torch.zeros(4, 3, 2), torch.zeros(4, 3, 5))
    assert get_leading_dims(x) == (4, 3)
    assert get_leading_dims(x, n_dim=1) == (4,)
    # every dim of every field matches
    same = Inner(torch.zeros(4, 3), torch.zeros(4, 3))
    assert get_leading_dims(same) == (4, 3)
    # nested
    nested = Outer(torch.zeros(5, 2), Inner(torch.zeros(5, 7), torch.zeros(5)), torch.zeros(5, 2))
    assert get_leading_dims(nested) == (5,)
    assert get_leading_dims(Inner(torch.zeros(4, 3), torch.zeros(2, 3))) == ()
    with pytest.raises(ValueError):
        get_leading_dims(_example())  # a None field


def test_get_leading_dims_method():
    x = Inner(torch.zeros(4, 3, 2), torch.zeros(4, 3, 5))
    assert x.get_leading_dims() == (4, 3)
    assert Inner(torch.zeros(4, 3), torch.zeros(4, 3)).get_leading_dims() == (4, 3)
    with pytest.raises(ValueError):
        _example().get_leading_dims()


def test_tree_flatten_unflatten_round_trip():
    x = _example()
    structure = (x, (torch.ones(2), None), torch.zeros(3))
    leaves = tree_flatten(structure)
    assert len(leaves) == 7  # actor, hidden, cell, extra(None), ones, None, zeros
    assert leaves[0] is x.actor and leaves[1] is x.critic.hidden and leaves[2] is x.critic.cell
    assert leaves[3] is None and leaves[4] is structure[1][0] and leaves[5] is None
    assert leaves[6] is structure[2]
    rebuilt = tree_unflatten(structure, leaves)
    assert type(rebuilt) is tuple and type(rebuilt[0]) is Outer and type(rebuilt[0].critic) is Inner
    assert rebuilt[0].actor is x.actor and rebuilt[0].critic.cell is x.critic.cell
    assert rebuilt[1][1] is None and rebuilt[2] is structure[2]
    doubled = tree_unflatten(structure, [None if v is None else v * 2 for v in leaves])
    assert torch.equal(doubled[0].critic.hidden, x.critic.hidden * 2)
    assert tree_flatten(torch.ones(1))[0].shape == (1,)


def test_tree_map_keeps_structure_and_none():
    x = _example()
    y = tree_map(lambda t: t + 1, x)
    assert type(y) is Outer and type(y.critic) is Inner and y.extra is None
    assert torch.equal(y.critic.cell, x.critic.cell + 1)


def test_namedarraytuple_like_and_attrdict():
    P = namedtuple("P", ["a", "b"])
    Q = namedarraytuple_like(P(1, 2))
    assert Q._fields == ("a", "b") and Q.__name__ == "P"
    q = Q(torch.zeros(2), torch.zeros(2, 1))
    assert q[0].b.shape == (1,)
    assert namedarraytuple_like(Inner) is Inner
    d = AttrDict(a=1)
    d.b = 2
    assert d["b"] == 2 and d.a == 1
    with pytest.raises(AttributeError):
        _ = d.c
