"""fastunwind.typecheck.NamedTuple makes at run time the record typing.NamedTuple makes (mypy sees
typing's): the same fields, defaults, methods, docstring and errors; only the annotations stay as
written."""
from __future__ import annotations

import typing

import pytest

from fastunwind.typecheck import TYPE_CHECKING, NamedTuple, cast, overload


def record_deriving_from(base: type) -> type:
    """The same record class, declared on typing.NamedTuple or on ours."""

    class Record(base):  # type: ignore[valid-type,misc]
        """A record."""

        address: int
        name: str = "?"

        @property
        def doubled(self) -> int:
            return self.address * 2

        def label(self) -> str:
            return f"{self.name}@{self.address:#x}"

    return Record


Ours = record_deriving_from(NamedTuple)
Typings = record_deriving_from(typing.NamedTuple)  # type: ignore[arg-type]


def test_type_checking_is_false_at_run_time() -> None:
    assert TYPE_CHECKING is False


def test_a_record_behaves_as_typings() -> None:
    for record in (Ours, Typings):
        made = record(0x10)
        assert made == (0x10, "?")
        assert isinstance(made, tuple)
        assert made.doubled == 0x20 and made.label() == "?@0x10"
        assert made._replace(name="f") == (0x10, "f")
        assert record._fields == ("address", "name") and record._field_defaults == {"name": "?"}
        assert record.__doc__ == "A record." and record.__module__ == __name__
    assert repr(Ours(1, "a")) == "Record(address=1, name='a')"
    assert Ours.__qualname__ == Typings.__qualname__ == "record_deriving_from.<locals>.Record"


def test_annotations_are_kept_as_written() -> None:
    assert Ours.__annotations__ == {"address": "int", "name": "str"}


def test_a_field_without_a_default_after_one_with_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default"):
        class Bad(NamedTuple):
            first: int = 0
            second: int


def test_namedtuples_own_attributes_cannot_be_overwritten() -> None:
    with pytest.raises(AttributeError, match="_replace"):
        class Bad(NamedTuple):
            first: int

            def _replace(self) -> None:  # type: ignore[override]
                pass


def test_a_record_derives_from_namedtuple_alone() -> None:
    with pytest.raises(TypeError, match="alone"):
        class Bad(NamedTuple, dict):  # type: ignore[misc]
            first: int


def test_cast_gives_the_value_and_overload_the_signature() -> None:
    value = object()
    assert cast("int", value) is value

    def signature(x: int) -> int:
        return x

    assert overload(signature) is signature
