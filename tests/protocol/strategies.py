"""Hypothesis strategies for every generated message, built from the same JSON specs the generator reads.

A value drawn for (struct, version) sets only the fields that exist in that version; the others keep their
defaults, so that encode → decode must give back an equal object.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
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

# Narrows the value drawn for one scalar field: called with (struct, field, version), returns a strategy to
# use instead of the default one for the field's type, or None to keep the default. The differential tests
# use it where the other implementation gives a field a semantic type with a smaller domain than the wire
# type (kio reads error codes into an enum, `*_ms` fields into timedeltas).
FieldOverride = Callable[[gen.Struct, gen.Field, int], "st.SearchStrategy[Any] | None"]


@cache
def message_structs(api: str) -> tuple[gen.Struct, gen.Struct]:
    spec_dir = gen.spec_dir_for(api)
    req = gen.load_json(spec_dir / f"{api}Request.json")
    resp = gen.load_json(spec_dir / f"{api}Response.json")
    structs: dict[str, gen.Struct] = {}
    return (
        gen.SpecReader(structs, "Request").read_message(req),
        gen.SpecReader(structs, "Response").read_message(resp),
    )


def api_name(key: ApiKey) -> str:
    return next(
        name
        for name in [*gen.APIS, *gen.KAFKA_EXTRA_APIS, *gen.EXACTLY_APIS]
        if gen.snake(name).upper() == key.name
    )


def is_extension(key: ApiKey) -> bool:
    """One of exactly's own APIs (docs/two-phase-commit.md), unknown to Kafka's clients and kio."""
    return api_name(key) in gen.EXACTLY_APIS


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


_long_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=100, max_size=300)
_long_binary = st.binary(min_size=128, max_size=400)


def long_values(struct: gen.Struct, f: gen.Field, version: int) -> st.SearchStrategy[Any] | None:
    """A `FieldOverride` that also draws strings, bytes and records long enough for their compact lengths
    to take two-byte uvarints (the default strategies keep every length below 127)."""
    if f.elem == "string":
        return _text | _long_text
    if f.elem in ("bytes", "records"):
        return st.binary(max_size=24) | _long_binary
    return None


def chain(*overrides: FieldOverride) -> FieldOverride:
    """The first override that has a strategy for the field."""

    def override(struct: gen.Struct, f: gen.Field, version: int) -> st.SearchStrategy[Any] | None:
        for o in overrides:
            found = o(struct, f, version)
            if found is not None:
                return found
        return None

    return override


def struct_value(
    module: ModuleType,
    struct: gen.Struct,
    version: int,
    flexible: bool,
    override: FieldOverride | None = None,
) -> st.SearchStrategy[Any]:
    cls = getattr(module, struct.name)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        tagged = flexible and version in f.tagged
        if f.is_struct:
            assert f.struct is not None
            inner = struct_value(module, f.struct, version, flexible, override)
            if f.is_array:
                value: st.SearchStrategy[Any] = st.lists(inner, max_size=3)
            else:
                value = inner
                if tagged:
                    value = st.none() | value
        else:
            scalar = override(struct, f, version) if override is not None else None
            if scalar is None:
                scalar = _scalar(f.elem)
            value = st.lists(scalar, max_size=4) if f.is_array else scalar
        if version in f.nullable:
            value = st.none() | value
        kwargs[f.py] = value
    return st.builds(cls, **kwargs)


def message(
    key: ApiKey, version: int, kind: str, override: FieldOverride | None = None
) -> st.SearchStrategy[Any]:
    """A random request (kind='request') or response of API `key` at `version`."""
    spec = API_SPECS[int(key)]
    req, resp = message_structs(api_name(key))
    if kind == "request":
        return struct_value(MODULES[key], req, version, spec.request_is_flexible(version), override)
    return struct_value(MODULES[key], resp, version, spec.response_is_flexible(version), override)


def all_versions() -> list[tuple[ApiKey, int]]:
    return [
        (spec.key, v) for spec in API_SPECS.values() for v in range(spec.min_version, spec.max_version + 1)
    ]
