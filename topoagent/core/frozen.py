"""A read-only, hashable mapping for the model's frozen values.

Frozen records that held ``dict`` fields could be changed through the dict and could not
be hashed; :class:`FrozenMap` can do neither, so results are safe to share with a server thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

__all__ = ["FrozenMap"]


class FrozenMap(Mapping[K, V]):
    """An immutable mapping that keeps insertion order and can be hashed (if its values can)."""

    __slots__ = ("_data", "_hash")

    @overload
    def __init__(self) -> None: ...
    @overload
    def __init__(self, items: Mapping[K, V]) -> None: ...
    @overload
    def __init__(self, items: Iterable[tuple[K, V]]) -> None: ...

    def __init__(self, items: Any = ()) -> None:
        self._data: dict[K, V] = dict(items)
        self._hash: int | None = None

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    # get and `in` straight from the dict (Mapping's own go through __getitem__ and KeyError)
    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, /, default: V | T) -> V | T: ...

    def get(self, key: Any, /, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when it is absent."""
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"
