"""``namedarraytuple``: named tuples of tensors that index and assign across all fields at once.

``x[idx]`` returns the same tuple type with every field indexed; ``x[idx] = value`` assigns to every field
(field by field when ``value`` has the same structure). Fields may be tensors, arrays, ``None`` or nested
namedarraytuples. Hidden states use them: ``LstmHiddenState(hidden, cell)``,
``ActorCriticHiddenState(actor, critic)``.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

RESERVED_NAMES = ("get", "items")


def _index(value: Any, loc: Any) -> Any:
    return None if value is None else value[loc]


class NamedArrayTuple:
    """Marker base of every class made by :func:`namedarraytuple` (``isinstance`` tells them from plain
    namedtuples)."""

    __slots__ = ()


def namedarraytuple(typename: str, field_names: str | list[str] | tuple[str, ...]) -> type:
    """Create a namedtuple class whose indexing applies to every field.

    Raises:
        ValueError: a field is named ``get`` or ``items``.
    """
    if isinstance(field_names, str):
        field_names = field_names.replace(",", " ").split()
    field_names = tuple(field_names)
    for name in field_names:
        if name in RESERVED_NAMES:
            raise ValueError(f"Field name '{name}' is reserved in namedarraytuple")
    base = namedtuple(typename, field_names)  # type: ignore[misc]

    def __getitem__(self, loc):  # noqa: N807
        try:
            return type(self)(*(_index(v, loc) for v in self))
        except (IndexError, TypeError) as e:
            for field, value in zip(self._fields, self):
                try:
                    _index(value, loc)
                except Exception:
                    raise type(e)(f"Occurred in {typename} at field '{field}'") from e
            raise

    def __setitem__(self, loc, value):  # noqa: N807
        same_structure = is_namedtuple(value) and value._fields == self._fields
        for i, field_value in enumerate(self):
            if field_value is None:
                continue
            field_value[loc] = tuple.__getitem__(value, i) if same_structure else value

    def __contains__(self, key):  # noqa: N807
        return key in self._fields

    def get(self, index):
        """The field at position ``index`` (plain tuple access)."""
        return tuple.__getitem__(self, index)

    def items(self):
        """``(name, value)`` pairs."""
        yield from zip(self._fields, self)

    def leading_dims(self):
        """Leading dims shared by all fields."""
        return _leading_dims(self)

    namespace = {
        "__getitem__": __getitem__,
        "__setitem__": __setitem__,
        "__contains__": __contains__,
        "get": get,
        "items": items,
        "get_leading_dims": leading_dims,
        "__slots__": (),
        "_is_namedarraytuple": True,
    }
    return type(typename, (base, NamedArrayTuple), namespace)


def is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def is_namedarraytuple(obj: Any) -> bool:
    return isinstance(obj, NamedArrayTuple)


def namedarraytuple_like(example: Any) -> type:
    """The namedarraytuple class with the same name and fields as ``example`` (a namedtuple or its class)."""
    cls = example if isinstance(example, type) else type(example)
    if issubclass(cls, NamedArrayTuple):
        return cls
    return namedarraytuple(cls.__name__, cls._fields)


def get_leading_dims(value: Any, n_dim: int | None = None) -> tuple[int, ...]:
    """See :func:`_leading_dims`."""
    return _leading_dims(value, n_dim)


def _leading_dims(value: Any, n_dim: int | None = None) -> tuple[int, ...]:
    """Leading dims common to every array of a (nested) tuple.

    Raises:
        ValueError: a field is ``None`` or there is no array.
    """
    shapes = []

    def collect(v: Any) -> None:
        if v is None:
            raise ValueError("get_leading_dims: a field is None")
        if isinstance(v, tuple):
            for item in v:
                collect(item)
        else:
            shapes.append(tuple(v.shape))

    collect(value)
    if not shapes:
        raise ValueError("get_leading_dims: no arrays")
    common: list[int] = []
    for dims in zip(*shapes):
        if all(d == dims[0] for d in dims):
            common.append(dims[0])
        else:
            break
    if n_dim is not None:
        common = common[:n_dim]
    return tuple(common)


class AttrDict(dict):
    """A dict whose keys are also attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(name) from e

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def tree_map(fn: Any, value: Any) -> Any:
    """Apply ``fn`` to every tensor of a nested tuple structure, keeping the structure (``None`` stays)."""
    if value is None:
        return None
    if isinstance(value, tuple):
        mapped = [tree_map(fn, v) for v in value]
        return type(value)(*mapped) if is_namedtuple(value) else type(value)(mapped)
    return fn(value)


def tree_flatten(value: Any) -> list[Any]:
    """Leaves of a nested tuple structure, depth first."""
    if isinstance(value, tuple):
        out: list[Any] = []
        for v in value:
            out += tree_flatten(v)
        return out
    return [value]


def tree_unflatten(structure: Any, leaves: list[Any]) -> Any:
    """Rebuild ``structure`` (a nested tuple example) from ``leaves`` in :func:`tree_flatten` order."""
    iterator = iter(leaves)

    def build(s: Any) -> Any:
        if isinstance(s, tuple):
            items = [build(v) for v in s]
            return type(s)(*items) if is_namedtuple(s) else type(s)(items)
        return next(iterator)

    return build(structure)
