"""``namedarraytuple`` (rlpyt): named tuples of tensors indexed across all fields at once, and tree helpers."""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Iterable
from typing import Any

RESERVED_NAMES = ("get", "items")


def _check_reserved(fields: tuple[str, ...]) -> None:
    for name in set(RESERVED_NAMES).intersection(fields):
        raise ValueError(f"Field name '{name}' is reserved in namedarraytuple")


def _index(value: Any, loc: Any) -> Any:
    return None if value is None else value[loc]


class _ArrayTupleMethods:
    __slots__ = ()
    _fields: tuple[str, ...]

    def __getitem__(self, loc: Any) -> Any:
        try:
            return self._make(_index(v, loc) for v in self)  # type: ignore[attr-defined]
        except (IndexError, TypeError) as e:
            for field, value in zip(self._fields, self):  # type: ignore[call-overload]
                try:
                    _index(value, loc)
                except Exception:
                    raise type(e)(f"Occurred in {type(self).__name__} at field '{field}'") from e
            raise

    def __setitem__(self, loc: Any, value: Any) -> None:
        same_structure = isinstance(value, tuple) and getattr(value, "_fields", None) == self._fields
        for i, field_value in enumerate(self):  # type: ignore[arg-type]
            if field_value is not None:
                field_value[loc] = tuple.__getitem__(value, i) if same_structure else value

    def __contains__(self, key: object) -> bool:
        return key in self._fields

    def get(self, index: int) -> Any:
        return tuple.__getitem__(self, index)  # type: ignore[arg-type]

    def items(self) -> Iterable[tuple[str, Any]]:
        yield from zip(self._fields, self)  # type: ignore[call-overload]

    def get_leading_dims(self) -> tuple[int, ...]:
        return get_leading_dims(self)


def namedarraytuple(typename: str, field_names: str | list[str] | tuple[str, ...]) -> type:
    """A namedtuple class whose indexing applies to every field (not named ``get`` or ``items``)."""
    base = namedtuple(typename, field_names)  # type: ignore[misc]
    _check_reserved(base._fields)
    return type(typename, (_ArrayTupleMethods, base), {"__slots__": ()})


def is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def is_namedarraytuple(obj: Any) -> bool:
    return isinstance(obj, _ArrayTupleMethods)


def namedarraytuple_like(example: Any) -> type:
    """The namedarraytuple class with the name and fields of ``example`` (a namedtuple, its class, or a schema)."""
    if isinstance(example, (NamedTupleSchema, NamedTuple)):
        return namedarraytuple(example._typename, example._fields)
    cls = example if isinstance(example, type) else type(example)
    if issubclass(cls, _ArrayTupleMethods) and not issubclass(cls, NamedTuple):
        return cls
    return namedarraytuple(cls.__name__, cls._fields)


def get_leading_dims(value: Any, n_dim: int | None = None) -> tuple[int, ...]:
    """Leading dims common to every array of a (nested) tuple."""
    leaves = tree_flatten(value)
    if any(v is None for v in leaves):
        raise ValueError("get_leading_dims: a field is None")
    if not leaves:
        raise ValueError("get_leading_dims: no arrays")
    shapes = [tuple(v.shape) for v in leaves]
    common = next((i for i, dims in enumerate(zip(*shapes)) if len(set(dims)) > 1), min(map(len, shapes)))
    return shapes[0][:common][:n_dim]


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
    """Apply ``fn`` to every leaf of a nested tuple structure (``None`` stays)."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return _rebuild(value, [tree_map(fn, v) for v in value])
    return fn(value)


def _rebuild(like: Any, items: list[Any]) -> Any:
    return like._make(items) if is_namedtuple(like) else type(like)(items)


def tree_flatten(value: Any) -> list[Any]:
    """Leaves of a nested tuple structure, depth first."""
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in tree_flatten(v)]
    return [value]


def tree_unflatten(structure: Any, leaves: list[Any]) -> Any:
    """Rebuild ``structure`` from ``leaves`` in :func:`tree_flatten` order."""
    iterator = iter(leaves)

    def build(s: Any) -> Any:
        return _rebuild(s, [build(v) for v in s]) if isinstance(s, tuple) else next(iterator)

    return build(structure)


class NamedTuple(tuple):
    """An instance of a :class:`NamedTupleSchema`: a tuple whose fields are also attributes."""

    __slots__ = ()
    _typename: str
    _fields: tuple[str, ...]

    def __new__(cls, typename: str, fields: tuple[str, ...], values: Iterable[Any]) -> Any:
        return _schema_class(cls, typename, tuple(fields))._make(values)

    def __reduce__(self) -> tuple[Any, ...]:  # its class is made at run time: pickled as its base's arguments
        base = NamedArrayTuple if isinstance(self, NamedArrayTuple) else NamedTuple
        return base, (self._typename, self._fields, tuple(self))


class NamedArrayTuple(_ArrayTupleMethods, NamedTuple):
    """An instance of a :class:`NamedArrayTupleSchema`: indexing and assignment apply to every field."""

    __slots__ = ()


@functools.cache
def _schema_class(base: type, typename: str, fields: tuple[str, ...]) -> Any:
    """``namedtuple(typename, fields)`` with ``base`` (:class:`NamedTuple` or :class:`NamedArrayTuple`)."""
    return type(typename, (namedtuple(typename, fields), base), {"__slots__": (), "_typename": typename})


class NamedTupleSchema:
    """``namedtuple(typename, fields)`` without a class (its :class:`NamedTuple` objects pickle under spawn)."""

    _typename: str
    _fields: tuple[str, ...]
    _instance: type[NamedTuple] = NamedTuple

    def __init__(self, typename: str, fields: str | Iterable[str]) -> None:
        if not isinstance(typename, str):
            raise TypeError(f"type name must be string, not {type(typename)}")
        fields = namedtuple(typename, fields)._fields  # parsed and checked as namedtuple does
        if {"index", "count"}.intersection(fields):
            raise ValueError(f"can't name a field 'index' or 'count': {fields}")
        if issubclass(self._instance, _ArrayTupleMethods):
            _check_reserved(fields)
        self.__dict__.update(_typename=typename, _fields=fields)

    def __call__(self, *args: Any, **kwargs: Any) -> NamedTuple:
        return _schema_class(self._instance, self._typename, self._fields)(*args, **kwargs)

    def _make(self, iterable: Iterable[Any]) -> NamedTuple:
        return self._instance(self._typename, self._fields, iterable)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"can't set attributes of '{type(self).__name__}' instance")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._typename!r}, {self._fields!r})"


class NamedArrayTupleSchema(NamedTupleSchema):
    """Acts like a class returned by :func:`namedarraytuple`; its instances are :class:`NamedArrayTuple`."""

    _instance = NamedArrayTuple
