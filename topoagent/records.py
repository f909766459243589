"""Records: the model's value classes, made cheaply.

Every value in the model (snapshot, topology, paths, findings, plans) is a record: fields
from the class's annotations, an ``__init__`` that takes them by position or by name,
equality (and, when frozen, hashing) by value, a readable ``repr``, and, when frozen, no
assignment after construction.  That is what :func:`dataclasses.dataclass` gives, and
:func:`record` is a drop-in for it with one difference that matters to a command that lives
for a tenth of a second: it is cheap to make.  ``dataclass`` compiles five or six methods per
class with ``exec`` and imports :mod:`inspect`; on a 2-vCPU VM that is about 0.35 ms per
frozen class plus 8 ms for ``inspect``, a quarter of a whole ``topoagent scan`` for the ~40
classes every scan imports.  Here nothing is compiled per class: ``__init__`` is a copy of a
template, one per number of arguments (written out in :mod:`topoagent.record_templates`, so
the bytecode cache holds them), with the field names put into the copy's code
(``CodeType.replace``, ~1 us against ~50 us to compile); default factories, ``init=False``
defaults and ``__post_init__`` run in a small per-class tail; equality, hashing, ``repr`` and
the frozen guard are shared functions that read the class's field table.

:func:`field`, :func:`fields` and :func:`replace` mirror their :mod:`dataclasses` namesakes
(``default``, ``default_factory``, ``init``, ``repr``, ``compare``; ``__post_init__`` is
called when a class defines it).  Type checkers see records through
:func:`typing.dataclass_transform`, so constructor calls are checked as for a dataclass.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from types import CodeType, FunctionType

from topoagent.typecheck import TYPE_CHECKING, TypeVar, dataclass_transform, overload

if TYPE_CHECKING:
    from typing import Any

__all__ = ["Field", "FrozenRecordError", "field", "fields", "is_record", "record", "replace"]

T = TypeVar("T")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

#: Annotations (strings here) that name a class variable, not a field.
_CLASSVAR = ("ClassVar[", "typing.ClassVar[")


class FrozenRecordError(AttributeError):
    """An assignment to (or deletion of) an attribute of a frozen record."""


class Field:
    """One field of a record: its name, annotation and how ``__init__``, ``==`` and ``repr`` use it."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "compare")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
                 repr: bool = True, compare: bool = True) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("a field cannot have both a default and a default_factory")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.compare = compare

    def __repr__(self) -> str:
        return f"Field({self.name!r}, type={self.type!r}, default={self.default!r})"


def field(*, default: Any = MISSING, default_factory: Callable[[], Any] | Any = MISSING, init: bool = True,
          repr: bool = True, compare: bool = True) -> Any:
    """A field with a default, a default factory, or left out of ``__init__``/``==``/``repr``."""
    return Field(default, default_factory, init, repr, compare)


def fields(obj: Any) -> tuple[Field, ...]:
    """A record's (or record class's) fields, in declaration order."""
    try:
        table: tuple[Field, ...] = obj.__record_fields__
    except AttributeError:
        raise TypeError(f"{obj!r} is not a record") from None
    return table


def is_record(obj: Any) -> bool:
    """Whether ``obj`` is a record class or an instance of one."""
    return hasattr(obj, "__record_fields__")


def replace(obj: T, **changes: Any) -> T:
    """A copy of the record ``obj`` with some fields changed (its ``__init__`` runs again)."""
    for f in fields(obj):
        if f.init:
            if f.name not in changes:
                changes[f.name] = getattr(obj, f.name)
        elif f.name in changes:
            raise ValueError(f"field {f.name} is not an __init__ argument and cannot be replaced")
    return obj.__class__(**changes)


# -- the shared methods -------------------------------------------------------------------------

def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        key = self.__record_key__
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__record_key__(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.__record_fields__ if f.repr)
    return f"{self.__class__.__qualname__}({shown})"


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenRecordError(f"cannot assign to field {name!r} of a frozen {self.__class__.__name__}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenRecordError(f"cannot delete field {name!r} of a frozen {self.__class__.__name__}")


def _key_of(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of the compared fields' values (always a tuple, as dataclasses compare)."""
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    key: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
    return key


# -- making the class ---------------------------------------------------------------------------

def _collect(cls: type) -> list[Field]:
    table: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, "__record_fields__", ()):
            table[f.name] = f
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if isinstance(annotation, str) and annotation.startswith(_CLASSVAR):
            continue
        value = cls.__dict__.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        if isinstance(f.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(f.default).__name__} for field {name}: use default_factory")
        f.name, f.type = name, annotation
        table[name] = f
        if isinstance(value, Field):  # the class attribute becomes the default, or goes
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
    return list(table.values())


def _make_init(cls: type, table: list[Field]) -> Callable[..., None]:
    """``__init__`` for ``cls``: a copy of the template for its number of arguments
    (:func:`_template`) with its field names put in, so making it compiles nothing.

    The copy stores each argument straight into ``__dict__`` (past the frozen guard), then
    calls the class's tail, if it needs one (:func:`_tail`): default factories, ``init=False``
    defaults, ``__post_init__``.
    """
    names: list[str] = []
    defaults: list[Any] = []
    factories: list[tuple[str, Callable[[], Any]]] = []
    fixed: list[tuple[str, Any, bool]] = []  # init=False fields: (name, default or factory, is factory)
    for f in table:
        if not f.init:
            if f.default_factory is not MISSING:
                fixed.append((f.name, f.default_factory, True))
            elif f.default is not MISSING:
                fixed.append((f.name, f.default, False))
            continue  # init=False and no default: __post_init__ sets it
        names.append(f.name)
        if f.default_factory is not MISSING:
            factories.append((f.name, f.default_factory))
            defaults.append(MISSING)  # the tail calls the factory
        elif f.default is not MISSING:
            defaults.append(f.default)
        elif defaults:
            raise TypeError(f"{cls.__name__}: field {f.name} without a default follows one with a default")
    template = _template(len(names))
    rename = {_arg(i): name for i, name in enumerate(names)}
    rekey = {_key(i): name for i, name in enumerate(names)}
    code = template.replace(co_varnames=tuple(rename.get(v, v) for v in template.co_varnames),
                            co_consts=tuple(rekey.get(c, c) if isinstance(c, str) else c
                                            for c in template.co_consts))
    tail = _tail(tuple(factories), tuple(fixed), hasattr(cls, "__post_init__"))
    init: Callable[..., None] = FunctionType(code, {"__record_tail__": tail}, "__init__", tuple(defaults) or None)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _tail(factories: tuple[tuple[str, Callable[[], Any]], ...], fixed: tuple[tuple[str, Any, bool], ...],
          post_init: bool) -> Callable[[Any], None] | None:
    """What ``__init__`` does after storing its arguments; None when nothing (most records)."""
    if not factories and not fixed and not post_init:
        return None

    def tail(obj: Any) -> None:
        values = obj.__dict__
        for name, factory in factories:
            if values[name] is MISSING:
                values[name] = factory()
        for name, value, is_factory in fixed:
            values[name] = value() if is_factory else value
        if post_init:
            obj.__post_init__()

    return tail


def _arg(i: int) -> str:
    """The placeholder a template's ``i``-th parameter is named by."""
    return f"__record_arg{i}__"


def _key(i: int) -> str:
    """The placeholder a template's ``i``-th ``__dict__`` key is named by."""
    return f"__record_key{i}__"


_TEMPLATES: dict[int, CodeType] = {}
#: Templates up to this many arguments are written out in :mod:`topoagent.record_templates`.
MAX_WRITTEN_ARITY = 32


def _template(arity: int) -> CodeType:
    """The code of ``__init__(self, arg0, ...)``: ``self.__dict__[key0] = arg0`` ..., then the
    tail.  Copied per class under new names (``CodeType.replace``, ~1 us)."""
    code = _TEMPLATES.get(arity)
    if code is None:
        from topoagent import record_templates

        fn = getattr(record_templates, f"init_{arity}", None)
        if fn is None:  # more arguments than written out: compile it (~50 us)
            namespace: dict[str, Any] = {}
            exec(template_source(arity, "init"), namespace)  # see the module docstring
            fn = namespace["init"]
        code = _TEMPLATES[arity] = fn.__code__
    return code


def template_source(arity: int, name: str) -> str:
    """The source of the template for ``arity`` arguments, as a function called ``name``."""
    lines = [f"def {name}(__record_self__{''.join(', ' + _arg(i) for i in range(arity))}):",
             "    __record_dict__ = __record_self__.__dict__"]
    lines += [f"    __record_dict__[{_key(i)!r}] = {_arg(i)}" for i in range(arity)]
    lines += ["    if __record_tail__ is not None:", "        __record_tail__(__record_self__)", ""]
    return "\n".join(lines)


def templates_module() -> str:
    """The text of :mod:`topoagent.record_templates` (``python -m topoagent.records`` writes it)."""
    head = ('"""Record ``__init__`` templates, one per number of arguments (see topoagent.records).\n\n'
            "Generated by ``python -m topoagent.records``; do not edit.  Written out, not compiled at\n"
            "run time, so that Python\'s bytecode cache holds them: compiling the ~14 a scan needs\n"
            'cost its start-up ~1.3 ms.\n"""\n\n# mypy: ignore-errors\n# ruff: noqa\n')
    return head + "".join("\n\n" + template_source(n, f"init_{n}") for n in range(MAX_WRITTEN_ARITY + 1))


def _process(cls: type[T], frozen: bool) -> type[T]:
    table = _collect(cls)
    own = cls.__dict__
    methods: dict[str, Any] = {
        "__record_fields__": tuple(table),
        "__record_key__": staticmethod(_key_of([f.name for f in table if f.compare])),
        "__match_args__": tuple(f.name for f in table if f.init),
    }
    if "__init__" not in own:
        methods["__init__"] = _make_init(cls, table)
    if "__repr__" not in own:
        methods["__repr__"] = _repr
    if "__eq__" not in own:
        methods["__eq__"] = _eq
    explicit_hash = own.get("__hash__", MISSING) not in (MISSING, None) or (
        "__hash__" in own and "__eq__" not in own)
    if not explicit_hash:
        methods["__hash__"] = _hash if frozen else None  # as dataclasses: mutable values do not hash
    if frozen:
        methods["__setattr__"] = _frozen_setattr
        methods["__delattr__"] = _frozen_delattr
    for name, value in methods.items():
        setattr(cls, name, value)
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, frozen: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: type[T] | None = None, /, *, frozen: bool = True) -> Any:
    """Make ``cls`` a record: ``@record`` (frozen) or ``@record(frozen=False)`` (mutable)."""
    if cls is None:
        return lambda c: _process(c, frozen)
    return _process(cls, frozen)


if __name__ == "__main__":  # regenerate topoagent/record_templates.py
    import pathlib

    pathlib.Path(__file__).with_name("record_templates.py").write_text(templates_module())
