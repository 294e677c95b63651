"""What the package's modules take from typing, without importing typing at run time.

Importing typing costs a short command ~12M instructions (~3 ms: `python -c 'import typing'` against
the interpreter's start; the module builds its special forms when imported), and typing is needed
by mypy only: annotations are strings (`from __future__ import annotations`), never evaluated.
So a module imports the names it annotates with under `if TYPE_CHECKING:`, and takes what it uses
of typing at run time from here:

* `TYPE_CHECKING` is False at run time; mypy takes any `if TYPE_CHECKING:` as true.
* `class Record(NamedTuple):` declares a record as with typing.NamedTuple, which is what mypy sees.
  At run time the class statement makes a `collections.namedtuple` of the annotated fields, with
  the defaults, methods, properties and docstring of the class body, as typing.NamedTuple does,
  except that the annotations are kept as written instead of being turned into `typing.ForwardRef`s
  (which compile each string: the first compile of a run sets the compiler up, ~9M instructions).
* `cast` and `overload` are typing's for mypy; at run time `cast` returns the value, as typing's
  does, and `overload` returns the signature it decorates, which the implementation defined after
  it replaces (typing's registers it for get_overloads(), which nothing here asks).
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
    from typing import cast as cast
    from typing import overload as overload
else:
    def cast(kind, value):
        return value

    def overload(signature):
        return signature

    #: what namedtuple makes itself, that a class body may not define (typing.NamedTuple's rule)
    _NAMEDTUPLE_ATTRIBUTES = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                                        "_field_defaults", "_make", "_replace", "_asdict", "_source"})
    #: what the class statement puts in every class body, set by namedtuple itself
    _CLASS_BODY_ATTRIBUTES = frozenset({"__module__", "__annotations__"})

    class _RecordType(type):
        """The metaclass of NamedTuple: a class deriving from it is a collections.namedtuple."""

        def __new__(mcls, name, bases, namespace):
            if not bases:  # NamedTuple itself
                return super().__new__(mcls, name, bases, namespace)
            if bases != (NamedTuple,):
                raise TypeError(f"record {name}: derives from NamedTuple alone")
            annotations = namespace.get("__annotations__", {})
            fields = list(annotations)
            with_defaults = [field for field in fields if field in namespace]
            if with_defaults != fields[len(fields) - len(with_defaults):]:
                raise TypeError(f"record {name}: a field without a default follows one with a default")
            record = collections.namedtuple(name, fields, defaults=[namespace[field] for field in with_defaults],
                                            module=namespace["__module__"])
            for key, value in namespace.items():
                if key in _NAMEDTUPLE_ATTRIBUTES:
                    raise AttributeError(f"record {name}: cannot overwrite NamedTuple attribute {key}")
                if key not in _CLASS_BODY_ATTRIBUTES and key not in annotations:
                    setattr(record, key, value)
            record.__annotations__ = annotations
            return record

    class NamedTuple(metaclass=_RecordType):
        """The base of a record class (the module's docstring)."""
