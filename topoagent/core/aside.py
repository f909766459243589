"""What a frozen Struct carries beside its value: derived lookups and notes, never compared.

msgspec has no per-field ``compare=False`` (what ``dataclasses.field(compare=False)`` does), and a
``functools.cached_property`` needs ``dict=True``, sits outside every field, and is lost on
``msgspec.structs.replace`` -- or, copied by hand, goes stale when the copy changes the fields
it came from.  A model value that derives things from its fields (indexes, a fingerprint) or
carries facts about how it was made (a scan's timings) instead declares one field::

    aside: Aside = msgspec.field(default_factory=Aside)

and then:

* every :class:`Aside` equals every other and they all hash alike, so the field is outside
  the Struct's equality and hash (its ``repr`` shows nothing either);
* ``msgspec.structs.replace`` copies the field as it copies any other: what it holds is kept
  on every copy, without copying anything by hand;
* a property made with :func:`derived` is computed on first use and kept in the aside with
  the values of the fields it is derived from (compared by identity): a copy that shares
  those fields reuses it, a copy with any of them replaced computes its own -- never a stale
  value;
* :attr:`Aside.notes` are facts about how the value was made (a scan's timings), kept on every
  copy; :meth:`Aside.noting` makes an aside with other notes and the same derived values.

A derived value read in inner loops (``Topology.index``) wants its Struct declared with
``weakref=True``: the aside then remembers (weakly) which value last asked and answers it again
with one lookup, instead of comparing the fields each time.

Adding a derived value is one decorated method; adding a field the ordinary way makes it part
of the value, as it should.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from operator import attrgetter, is_
from typing import Any, Generic, NamedTuple, Protocol, TypeVar, overload

from topoagent.core.frozen import FrozenMap

__all__ = ["Aside", "Derived", "derived"]

T = TypeVar("T")


class _HasAside(Protocol):
    @property
    def aside(self) -> Aside: ...


S = TypeVar("S", bound=_HasAside)

_NO_NOTES: Mapping[str, Any] = FrozenMap()


class Aside:
    """A Struct field outside the Struct's value: equal to every other :class:`Aside`.

    It holds the values :func:`derived` properties computed (shared by the copies of one value,
    each kept with the fields it came from) and :attr:`notes`.
    """

    __slots__ = ("_memo", "notes")

    def __init__(self, notes: Mapping[str, Any] = _NO_NOTES, *, _memo: dict[str, _Kept] | None = None) -> None:
        #: Facts about how the value was made (read-only), kept on every copy.
        self.notes: Mapping[str, Any] = notes
        self._memo: dict[str, _Kept] = {} if _memo is None else _memo

    def noting(self, **notes: Any) -> Aside:
        """An aside with ``notes`` added to (or replacing) these notes, and the same derived values."""
        return Aside(FrozenMap({**self.notes, **notes}), _memo=self._memo)

    def derive(self, name: str, owner: object, inputs: tuple[Any, ...], make: Callable[[], T]) -> T:
        """The value kept under ``name`` if it was made from these very ``inputs`` (by
        identity), else ``make()``, kept for them; ``owner`` is the value asking (the next
        question from it is answered without comparing the inputs)."""
        kept = self._memo.get(name)
        if kept is not None and len(kept.inputs) == len(inputs) and all(map(is_, kept.inputs, inputs)):
            value: T = kept.value
        else:
            value = make()
        # one assignment: a reader on another thread sees the old entry or the new one
        self._memo[name] = _Kept(_ref(owner), inputs, value)
        return value

    def __eq__(self, other: object) -> bool:
        return True if isinstance(other, Aside) else NotImplemented

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "Aside()"


class _Kept(NamedTuple):
    """A derived value, the inputs it was made from, and (weakly) the last value that asked."""

    asker: Callable[[], object]
    inputs: tuple[Any, ...]
    value: Any


def _nobody() -> None:
    return None


def _ref(owner: object) -> Callable[[], object]:
    """A weak reference to ``owner`` (a Struct with ``weakref=True``), else one to nobody: the
    inputs are then compared on every read, which is slower, never wrong."""
    try:
        return weakref.ref(owner)
    except TypeError:
        return _nobody


class Derived(Generic[S, T]):
    """A read-only property derived from some fields of its owner, kept in the owner's
    ``aside`` (:func:`derived` makes one)."""

    def __init__(self, fn: Callable[[S], T], fields: tuple[str, ...]) -> None:
        if not fields:
            raise TypeError(f"{fn.__name__}: a derived value names the fields it is derived from")
        self._fn = fn
        self._fields = fields
        self._get = attrgetter(*fields)  # one name: the value; several: a tuple
        self._name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Derived[S, T]: ...
    @overload
    def __get__(self, obj: S, owner: type | None = None) -> T: ...

    def __get__(self, obj: S | None, owner: type | None = None) -> Derived[S, T] | T:
        if obj is None:
            return self
        aside = obj.aside
        kept = aside._memo.get(self._name)
        if kept is not None and kept.asker() is obj:  # the common case, read in inner loops: one lookup
            value: T = kept.value
            return value
        got = self._get(obj)
        inputs = got if len(self._fields) > 1 else (got,)
        return aside.derive(self._name, obj, inputs, lambda: self._fn(obj))


def derived(*fields: str) -> Callable[[Callable[[S], T]], Derived[S, T]]:
    """A property computed from ``fields`` of a Struct on first use and kept in its
    ``aside`` (see the module docstring): ``@derived("paths")`` over ``def index(self) -> ...``."""

    def wrap(fn: Callable[[S], T]) -> Derived[S, T]:
        return Derived(fn, fields)

    return wrap
