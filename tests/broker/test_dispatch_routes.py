"""`exactly.broker.dispatch.route`: the per-key lookup the connection makes for every request."""

from __future__ import annotations

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.dispatch import _ROUTES, HANDLERS, answered_max, handler, route
from exactly.protocol.messages import ApiKey


def test_a_route_is_the_key_its_handler_and_highest_answered_version() -> None:
    for key, fn in HANDLERS.items():
        found = route(int(key))
        assert found is not None
        assert (found.key, found.handler, found.max_version) == (key, fn, answered_max(key))


def test_unknown_keys_have_no_route() -> None:
    assert route(32_000) is None
    assert route(-1) is None


def test_registering_a_handler_forgets_the_routes() -> None:
    key = ApiKey.METADATA
    before = HANDLERS[key]
    assert route(int(key)) is not None
    assert _ROUTES

    async def replacement(ctx: object, body: object) -> None:
        return None

    try:
        handler(key)(replacement)  # type: ignore[arg-type]
        found = route(int(key))
        assert found is not None
        assert found.handler is replacement
    finally:
        handler(key)(before)
    found = route(int(key))
    assert found is not None
    assert found.handler is before
