"""The error response to any request: what the broker answers when a handler fails unexpectedly.

Kafka's `AbstractRequest.getErrorResponse` is written per API; this builds the same shape from the generated
message classes: the response of the request's API with

* every `error_code` field set to the error (top level and in every mirrored entity),
* every `error_message` field set to the message,
* the request's entity lists mirrored: each list of structs in the response is paired with the request's list
  whose elements share the most identity fields (a topic's `name`/`topic`/`topic_id`, a partition's
  `partition_index`/`partition`/`index`, a group's `group_id`, a transactional id ...) or, when the request
  has one list and the response's elements carry errors, with that one by position (CreateAcls' results,
  DeleteAcls' filter results); element by element, recursively; the identity fields are copied, everything
  else keeps its schema default.

So a Produce gets UNKNOWN_SERVER_ERROR for each partition it wrote to, a Metadata for each topic it
named, a CreateTopics for each topic, an EndTxn at the top level. A list the request has no counterpart
for (Produce's `node_endpoints`, Fetch's `records`) stays at its default.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from exactly.errors import ErrorCode
from exactly.protocol.messages import MODULES, ApiKey
from exactly.protocol.primitives import struct_lists

# response field -> the request fields it may be copied from, in order of preference
_IDENTITY: dict[str, tuple[str, ...]] = {
    "name": ("name", "topic", "topic_name"),
    "topic": ("topic", "name", "topic_name"),
    "topic_name": ("topic_name", "topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index", "index"),
    "index": ("index", "partition_index", "partition"),
    "group_id": ("group_id", "group"),
    "transactional_id": ("transactional_id",),
    "producer_id": ("producer_id",),
    "member_id": ("member_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "key": ("key",),
    "user": ("user", "name"),
    "id": ("id",),
    "entity_type": ("entity_type",),
    "entity_name": ("entity_name",),
}


def error_response(key: ApiKey, request: Any, code: ErrorCode, message: str | None) -> Any:
    """The response of API `key` to `request` with `code` in every error field (see the module doc)."""
    module = MODULES[key]
    response_cls = getattr(module, type(request).__name__.removesuffix("Request") + "Response")
    return _mirror(response_cls, request, int(code), message)


def _mirror(cls: type[Any], source: Any, code: int, message: str | None) -> Any:
    out = cls()
    for name, element_type in struct_lists(cls).items():
        pair = _pair(element_type, source)
        if pair is not None:
            setattr(out, name, [_mirror(element_type, item, code, message) for item in getattr(source, pair)])
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            out.error_code = code
        elif f.name == "error_message":
            out.error_message = message
        elif f.name in _IDENTITY and source is not None:
            for candidate in _IDENTITY[f.name]:
                value = getattr(source, candidate, None)
                if (
                    value is not None
                    and not isinstance(value, list)
                    and type(value) is type(getattr(out, f.name))
                ):
                    setattr(out, f.name, value)
                    break
    return out


def _pair(element_type: type[Any], source: Any) -> str | None:
    """The list of structs of `source` whose elements best match `element_type` (None: no such list)."""
    candidates = _struct_list_values(source)
    best, best_score = None, 0
    if len(candidates) == 1 and _has_error_field(element_type):  # results by position (CreateAcls ...)
        best = candidates[0]
    for name in candidates:
        first = getattr(source, name)[0]
        score = sum(
            1
            for f in dataclasses.fields(element_type)
            if f.name in _IDENTITY and any(hasattr(first, c) for c in _IDENTITY[f.name])
        ) + (1 if name == _plural_of(element_type) else 0)
        if score > best_score:
            best, best_score = name, score
    return best


def _has_error_field(cls: type[Any]) -> bool:
    return any(f.name == "error_code" for f in dataclasses.fields(cls)) or any(
        _has_error_field(element) for element in struct_lists(cls).values()
    )


def _plural_of(element_type: type[Any]) -> str:
    return element_type.__name__.lower() + "s"


def _struct_list_values(source: Any) -> list[str]:
    """Names of `source`'s non-empty list fields whose elements are generated structs."""
    if source is None or not dataclasses.is_dataclass(source):
        return []
    out = []
    for f in dataclasses.fields(source):
        value = getattr(source, f.name)
        if isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            out.append(f.name)
    return out
