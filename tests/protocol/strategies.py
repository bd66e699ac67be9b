"""Hypothesis strategies for every generated message, built from the same JSON specs the generator reads.

A value drawn for (struct, version) sets only the fields that exist in that version; the others keep their
defaults, so that encode → decode must give back an equal object.
"""

from __future__ import annotations

import uuid
from functools import cache
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from exactly.protocol.api import API_SPECS
from exactly.protocol.messages import MODULES, ApiKey
from tools import gen_protocol as gen

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


@cache
def message_structs(api: str) -> tuple[gen.Struct, gen.Struct]:
    req = gen.load_json(gen.SPEC_DIR / f"{api}Request.json")
    resp = gen.load_json(gen.SPEC_DIR / f"{api}Response.json")
    structs: dict[str, gen.Struct] = {}
    return (
        gen.SpecReader(structs, "Request").read_message(req),
        gen.SpecReader(structs, "Response").read_message(resp),
    )


def api_name(key: ApiKey) -> str:
    return next(name for name in gen.APIS if gen.snake(name).upper() == key.name)


def _scalar(typ: str) -> st.SearchStrategy[Any]:
    if typ in INT_RANGES:
        lo, hi = INT_RANGES[typ]
        return st.integers(lo, hi)
    if typ == "bool":
        return st.booleans()
    if typ == "float64":
        return st.floats(allow_nan=False)
    if typ == "string":
        return _text
    if typ in ("bytes", "records"):
        return st.binary(max_size=24)
    if typ == "uuid":
        return st.builds(lambda n: uuid.UUID(int=n), st.integers(0, 2**128 - 1))
    raise ValueError(typ)


def struct_value(
    module: ModuleType, struct: gen.Struct, version: int, flexible: bool
) -> st.SearchStrategy[Any]:
    cls = getattr(module, struct.name)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        tagged = flexible and version in f.tagged
        if f.is_struct:
            assert f.struct is not None
            inner = struct_value(module, f.struct, version, flexible)
            if f.is_array:
                value: st.SearchStrategy[Any] = st.lists(inner, max_size=3)
            else:
                value = inner
                if tagged:
                    value = st.none() | value
        elif f.is_array:
            value = st.lists(_scalar(f.elem), max_size=4)
        else:
            value = _scalar(f.type)
        if version in f.nullable:
            value = st.none() | value
        kwargs[f.py] = value
    return st.builds(cls, **kwargs)


def message(key: ApiKey, version: int, kind: str) -> st.SearchStrategy[Any]:
    """A random request (kind='request') or response of API `key` at `version`."""
    spec = API_SPECS[int(key)]
    req, resp = message_structs(api_name(key))
    if kind == "request":
        return struct_value(MODULES[key], req, version, spec.request_is_flexible(version))
    return struct_value(MODULES[key], resp, version, spec.response_is_flexible(version))


def all_versions() -> list[tuple[ApiKey, int]]:
    return [
        (spec.key, v) for spec in API_SPECS.values() for v in range(spec.min_version, spec.max_version + 1)
    ]
