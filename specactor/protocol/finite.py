"""Whether a tool's output holds an infinite or NaN float, which JSON cannot carry (msgspec would
write it as null): checked on every typed tool's answer, so the check follows the output type.

`finite` walks any value. `checker(tp)` answers a check for values of `tp` that looks only where
`tp` can hold a float (a memory search's 10 hits: their scores, ~1 us, where `finite` walks every
field of every hit, ~10 us). Where `tp` may hold a float, a value not of the shape `tp` says is
walked by `finite`; a field whose type holds no float (str, int, list[str]...) is not looked at.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgspec
import msgspec.inspect as mi

Check = Callable[[Any], bool]


def finite(value: Any) -> bool:
    """False when `value` holds an infinite or NaN float, anywhere."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, msgspec.Struct):
        return all(finite(getattr(value, f)) for f in value.__struct_fields__)
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(finite(v) for v in value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    return True


def checker(tp: Any) -> Check:
    """`finite`, for values of type `tp`, looking only where `tp` can hold a float."""
    check = _plan(mi.type_info(tp), {})
    return check if check is not None else _always


def _always(value: Any) -> bool:
    return True


def _plan(info: mi.Type, structs: dict[type, Check | None]) -> Check | None:
    """A check for values of `info`, or None when they cannot hold a float."""
    if isinstance(info, mi.Metadata):
        return _plan(info.type, structs)
    if isinstance(info, mi.FloatType):
        return _float
    if isinstance(info, (mi.AnyType, mi.UnionType, mi.CustomType)):
        return finite if _may_hold_float(info) else None
    if isinstance(info, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return _each(_plan(info.item_type, structs))
    if isinstance(info, mi.TupleType):
        return _each(finite) if any(_plan(t, structs) is not None for t in info.item_types) else None
    if isinstance(info, (mi.DictType, mi.FrozenDictType)):
        return _values(_plan(info.value_type, structs))
    if isinstance(info, (mi.StructType, mi.DataclassType, mi.NamedTupleType, mi.TypedDictType)):
        return _record(info, structs)
    return None  # str, int, bool, bytes, enums, literals, dates, Raw...: never a float


def _may_hold_float(info: mi.Type) -> bool:
    if isinstance(info, mi.UnionType):
        return any(_plan(t, {}) is not None for t in info.types)
    return True


def _float(value: Any) -> bool:
    return math.isfinite(value) if type(value) is float else finite(value)


def _each(item: Check | None) -> Check | None:
    if item is None:
        return None

    def check(value: Any) -> bool:
        if type(value) not in (list, tuple, set, frozenset):
            return finite(value)
        return all(item(v) for v in value)
    return check


def _values(value_check: Check | None) -> Check | None:
    if value_check is None:
        return None

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return finite(value)
        return all(value_check(v) for v in value.values())
    return check


def _record(info: Any, structs: dict[type, Check | None]) -> Check | None:
    cls = info.cls
    if cls in structs:  # a type that holds itself: check its fields as any value's
        return structs[cls] or finite
    structs[cls] = None  # while its fields are planned
    fields = [(f.name, c) for f in info.fields if (c := _plan(f.type, structs)) is not None]
    if not fields:
        return None
    if isinstance(info, mi.TypedDictType):
        return finite

    def check(value: Any) -> bool:
        if type(value) is not cls:
            return finite(value)
        return all(c(getattr(value, name)) for name, c in fields)
    structs[cls] = check
    return check
