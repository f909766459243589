"""topoagent.records: the model's record classes behave as frozen dataclasses do."""

from __future__ import annotations

import copy
import pickle
import typing

import pytest

from topoagent import records
from topoagent.records import FrozenRecordError, field, record


@record
class Point:
    """A frozen record with a default, a factory and a field left out of == and repr."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)
    note: str = field(default="", compare=False, repr=False)
    LIMIT: typing.ClassVar[int] = 3


@record(frozen=False)
class Bag:
    """A mutable record whose fields are named like the generated __init__'s locals."""

    d: dict[str, int] = field(default_factory=dict)
    self_: int = 0
    MISSING: int = 1


@record
class Indexed:
    items: tuple[int, ...]
    _total: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_total", sum(self.items))


@record
class Child(Point):
    z: int = 5


@record
class Custom:
    a: int

    def __repr__(self) -> str:
        return f"<{self.a}>"

    def __hash__(self) -> int:
        return 7


def test_init_by_position_and_name() -> None:
    assert Point(1, 2) == Point(x=1, y=2)
    assert Point(1).tags == () and Point(1).y == 0
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, (), "n", 5)  # type: ignore[call-arg]


@pytest.mark.parametrize(("a", "b", "equal"), [
    (Point(1, 2), Point(1, 2), True),
    (Point(1, 2), Point(1, 3), False),
    (Point(1, note="a"), Point(1, note="b"), True),  # compare=False
    (Point(1, tags=("a",)), Point(1, tags=("b",)), False),
    (Point(1), Child(1), False),  # another class is never equal
])
def test_equality_and_hash_follow_the_compared_fields(a: Point, b: Point, equal: bool) -> None:
    assert (a == b) is equal
    if equal:
        assert hash(a) == hash(b)


def test_frozen_records_refuse_assignment_and_deletion() -> None:
    p = Point(1)
    with pytest.raises(FrozenRecordError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):  # FrozenRecordError is an AttributeError
        del p.x
    assert p.x == 1


def test_mutable_records_assign_and_do_not_hash() -> None:
    b = Bag()
    b.d["k"] = 1
    b.self_ = 4
    assert b == Bag({"k": 1}, 4, 1) and Bag().d == {}  # each instance its own dict
    assert Bag(MISSING=9).MISSING == 9
    with pytest.raises(TypeError):
        hash(b)


def test_repr_skips_repr_false_fields() -> None:
    assert repr(Point(1, 2, note="x")) == "Point(x=1, y=2, tags=())"
    assert repr(Custom(3)) == "<3>" and hash(Custom(3)) == 7  # a class's own methods are kept


def test_post_init_fills_init_false_fields_and_replace_reruns_it() -> None:
    i = Indexed((1, 2, 3))
    assert i._total == 6 and repr(i) == "Indexed(items=(1, 2, 3))"
    assert records.replace(i, items=(4,))._total == 4
    with pytest.raises(ValueError):
        records.replace(i, _total=1)


def test_fields_replace_and_is_record() -> None:
    assert [f.name for f in records.fields(Point)] == ["x", "y", "tags", "note"]  # ClassVar is no field
    assert [f.name for f in records.fields(Child(1))] == ["x", "y", "tags", "note", "z"]
    assert records.fields(Point)[0].type == "int"
    assert records.replace(Point(1, 2), y=5) == Point(1, 5)
    assert records.is_record(Point) and records.is_record(Point(1)) and not records.is_record(3)
    assert Point.__match_args__ == ("x", "y", "tags", "note") and Point.LIMIT == 3
    with pytest.raises(TypeError):
        records.fields(3)


def test_copy_and_pickle_round_trip() -> None:
    p = Child(1, 2, ("t",), "n", 9)
    assert copy.deepcopy(p) == p and copy.copy(p) == p
    assert pickle.loads(pickle.dumps(p)) == p


@pytest.mark.parametrize(("annotations", "values", "error"), [
    ({"a": "int", "b": "int"}, {"a": 1}, TypeError),  # no default after a default
    ({"a": "list[int]"}, {"a": []}, ValueError),  # a shared mutable default
])
def test_bad_declarations_fail_at_class_creation(annotations: dict[str, str], values: dict[str, object],
                                                 error: type[Exception]) -> None:
    with pytest.raises(error):
        record(type("Bad", (), {"__annotations__": annotations, **values}))
    with pytest.raises(ValueError):
        field(default=1, default_factory=list)


@record
class Plain:
    """Fields all from arguments: ``__init__`` is a renamed copy of the shared template."""

    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


@record
class SameArity:
    """Three fields too: the same template, other names."""

    first: int
    second: int
    third: int


@record(frozen=False)
class PlainPost:
    """A plain record with ``__post_init__`` (the template's other form)."""

    items: tuple[int, ...]
    scale: int = 1

    def __post_init__(self) -> None:
        self.total = sum(self.items) * self.scale


def test_plain_records_share_a_template_under_their_own_names() -> None:
    import inspect

    assert Plain.__init__.__code__.co_code == SameArity.__init__.__code__.co_code
    assert records._TEMPLATES  # compiled once per (arity, __post_init__)
    assert list(inspect.signature(Plain).parameters) == ["a", "b", "c"]
    assert list(inspect.signature(SameArity).parameters) == ["first", "second", "third"]
    assert Plain.__init__.__qualname__ == "Plain.__init__"
    assert Plain(1) == Plain(a=1, b="b", c=()) and Plain(1, c=(2,)).c == (2,) and Plain(1).b == "b"
    assert vars(SameArity(third=3, first=1, second=2)) == {"first": 1, "second": 2, "third": 3}
    assert PlainPost((1, 2), scale=3).total == 9 and PlainPost(items=(4,)).total == 4


@pytest.mark.parametrize(("call", "message"), [
    (lambda: Plain(), "missing 1 required positional argument: 'a'"),
    (lambda: Plain(1, a=2), "multiple values for argument 'a'"),
    (lambda: Plain(1, d=4), "unexpected keyword argument 'd'"),
    (lambda: SameArity(1, 2, 3, 4), "takes 4 positional arguments but 5 were given"),
])
def test_plain_init_errors_name_the_fields(call: typing.Callable[[], object], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()


def test_factories_and_init_false_defaults_run_per_instance() -> None:
    """The tail: a fresh factory value per instance unless one is given; init=False defaults."""

    @record(frozen=False)
    class Holder:
        items: list[int] = field(default_factory=list)
        given: list[int] = field(default_factory=list)
        seen: dict[str, int] = field(default_factory=dict, init=False)
        flag: bool = field(default=True, init=False)

    a, b = Holder(), Holder(given=[1])
    assert a.items is not b.items and a.seen is not b.seen and a.items == [] and b.given == [1]
    assert a.flag is True and "seen" not in [p for p in Holder.__init__.__code__.co_varnames[:3]]

    @record
    class Pair:
        left: int
        right: int

    assert Holder.__init__.__code__.co_code == Pair.__init__.__code__.co_code  # one template per arity


def test_the_written_templates_are_the_generated_ones() -> None:
    """topoagent/record_templates.py is generated: regenerate with ``python -m topoagent.records``."""
    from pathlib import Path

    written = Path(records.__file__).with_name("record_templates.py").read_text()
    assert written == records.templates_module(), "run: python -m topoagent.records"


def test_a_record_wider_than_the_written_templates_compiles_its_own() -> None:
    n = records.MAX_WRITTEN_ARITY + 3
    wide = record(type("Wide", (), {"__annotations__": {f"f{i}": "int" for i in range(n)}}))
    obj = wide(*range(n))
    assert [getattr(obj, f"f{i}") for i in range(n)] == list(range(n)) and wide(*range(n)) == obj
