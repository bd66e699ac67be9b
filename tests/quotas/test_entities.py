"""Quota entities: Kafka's alteration validation, DescribeClientQuotas filters, quota precedence."""

from __future__ import annotations

import pytest

from exactly.errors import ErrorCode, KafkaError
from exactly.quotas.entities import (
    CLIENT_ID,
    IP,
    USER,
    FilterComponent,
    MatchType,
    QuotaEntity,
    describe,
    make_entity,
    resolve,
    validate_alteration,
)

P = "producer_byte_rate"
C = "consumer_byte_rate"


def alteration_error(
    pairs: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]
) -> tuple[int, str]:
    with pytest.raises(KafkaError) as e:
        validate_alteration(pairs, ops)
    return e.value.code, e.value.message


def test_valid_alterations() -> None:
    assert validate_alteration([(USER, "alice")], [(P, 1024.0), (C, None)]) == {P: 1024.0, C: None}
    assert validate_alteration([(USER, None), (CLIENT_ID, None)], [("request_percentage", 12.5)]) == {
        "request_percentage": 12.5
    }
    assert validate_alteration([(IP, "127.0.0.1")], [("connection_creation_rate", 10.0)])
    # A type named twice keeps its last name, as the map Kafka builds from the request.
    assert validate_alteration([(USER, ""), (USER, "b")], [(P, 1.0)]) == {P: 1.0}
    assert make_entity([(USER, "a"), (USER, "b")]) == ((USER, "b"),)
    # Removing a key that is not valid for the entity is not checked (nothing to remove).
    assert validate_alteration([(CLIENT_ID, "c")], [("bogus", None)]) == {"bogus": None}


@pytest.mark.parametrize(
    ("pairs", "ops", "message"),
    [
        ([], [(P, 1.0)], "Invalid empty client quota entity"),
        ([("group", "g")], [(P, 1.0)], "Unhandled client quota entity type: group"),
        ([(USER, "")], [(P, 1.0)], "Empty user not supported"),
        (
            [(IP, "1.2.3.4"), (USER, "a")],
            [("connection_creation_rate", 1.0)],
            "Invalid quota entity combination, IP quota entities cannot be combined with User or ClientId",
        ),
        (
            [(IP, "not-an-ip")],
            [("connection_creation_rate", 1.0)],
            "not-an-ip is not a valid IP or resolvable host.",
        ),
        (
            [(USER, "a")],
            [("connection_creation_rate", 1.0)],
            "Invalid configuration key connection_creation_rate",
        ),
        ([(IP, None)], [(P, 1.0)], "Invalid configuration key producer_byte_rate"),
        ([(USER, "a")], [(P, 0.0)], "Quota producer_byte_rate must be greater than 0"),
        ([(USER, "a")], [(P, -5.0)], "Quota producer_byte_rate must be greater than 0"),
        ([(USER, "a")], [(P, 10.5)], "Quota producer_byte_rate had a non-integer value 10.5"),
        ([(USER, "a")], [(P, 1e19)], "Proposed value for producer_byte_rate is too large for a LONG."),
        (
            [(USER, "a")],
            [(P, 1.0), (P, 2.0)],
            "Duplicate quota key producer_byte_rate not updating quota for this entity "
            "ClientQuotaEntity(entries={user=a})",
        ),
    ],
)
def test_invalid_alterations(
    pairs: list[tuple[str, str | None]], ops: list[tuple[str, float | None]], message: str
) -> None:
    assert alteration_error(pairs, ops) == (ErrorCode.INVALID_REQUEST, message)


QUOTAS: dict[QuotaEntity, dict[str, float]] = {
    make_entity([(USER, "alice")]): {P: 1.0},
    make_entity([(USER, None)]): {P: 2.0},
    make_entity([(USER, "alice"), (CLIENT_ID, "app")]): {P: 3.0, C: 4.0},
    make_entity([(USER, "alice"), (CLIENT_ID, None)]): {C: 5.0},
    make_entity([(CLIENT_ID, "app")]): {P: 6.0},
    make_entity([(CLIENT_ID, None)]): {P: 7.0},
    make_entity([(IP, "10.0.0.1")]): {"connection_creation_rate": 8.0},
}


def found(components: list[tuple[str, int, str | None]], strict: bool = False) -> list[QuotaEntity]:
    return [e for e, _ in describe(QUOTAS, [FilterComponent(*c) for c in components], strict)]


def test_describe_filters() -> None:
    assert len(found([])) == len(QUOTAS)
    assert found([], strict=True) == []
    assert found([(USER, MatchType.EXACT, "alice")]) == [
        (("client-id", None), ("user", "alice")),
        (("client-id", "app"), ("user", "alice")),
        (("user", "alice"),),
    ]
    assert found([(USER, MatchType.EXACT, "alice")], strict=True) == [(("user", "alice"),)]
    assert found([(USER, MatchType.DEFAULT, None)]) == [(("user", None),)]
    assert found([(CLIENT_ID, MatchType.SPECIFIED, None)], strict=True) == [(("client-id", "app"),)]
    assert found([(CLIENT_ID, MatchType.SPECIFIED, None), (USER, MatchType.EXACT, "alice")]) == [
        (("client-id", "app"), ("user", "alice"))
    ]
    ((entity, values),) = describe(QUOTAS, [FilterComponent(IP, MatchType.SPECIFIED, None)], False)
    assert (entity, values) == ((("ip", "10.0.0.1"),), {"connection_creation_rate": 8.0})


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        (
            [(USER, 0, "a"), (USER, 2, None)],
            ErrorCode.INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([("group", 0, "g")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (
            [(USER, 0, None)],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [(USER, 1, "a")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            [(USER, 2, "a")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        ),
        ([(USER, 9, None)], ErrorCode.UNSUPPORTED_VERSION, "Unknown match type 9"),
        (
            [(IP, 2, None), (CLIENT_ID, 2, None)],
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component.",
        ),
    ],
)
def test_describe_refused_filters(
    components: list[tuple[str, int, str | None]], code: int, message: str
) -> None:
    with pytest.raises(KafkaError) as e:
        found(components)
    assert (e.value.code, e.value.message) == (code, message)


def test_precedence_and_tags() -> None:
    def bound_and_tags(key: str, user: str, client: str) -> tuple[float, str, str] | None:
        quota = resolve(QUOTAS, key, user, client)
        return None if quota is None else (quota.bound, quota.user_tag, quota.client_tag)

    assert bound_and_tags(P, "alice", "app") == (3.0, "alice", "app")  # /users/alice/clients/app
    assert bound_and_tags(C, "alice", "other") == (5.0, "alice", "other")  # /users/alice/clients/<default>
    assert bound_and_tags(P, "alice", "other") == (1.0, "alice", "")  # /users/alice
    assert bound_and_tags(P, "bob", "app") == (2.0, "bob", "")  # /users/<default>
    assert bound_and_tags(C, "bob", "app") is None  # no consumer quota applies to bob
    only_clients = {e: v for e, v in QUOTAS.items() if all(t == CLIENT_ID for t, _ in e)}
    quota = resolve(only_clients, P, "ANONYMOUS", "app")
    assert quota is not None
    assert (quota.bound, quota.user_tag, quota.client_tag) == (6.0, "", "app")  # /clients/app
    quota = resolve(only_clients, P, "ANONYMOUS", "x")
    assert quota is not None
    assert (quota.bound, quota.client_tag) == (7.0, "x")  # /clients/<default>, counted per client-id
