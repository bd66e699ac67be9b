"""The ACL matrix, generated from exactly.security.rules.RULES: each row's request sent by a principal with
what the row needs (it passes the authorizer) and by one without it (the exact error code of the row).

Principals are real: the broker's one listener is SASL_PLAINTEXT with SCRAM-SHA-256, and every client
authenticates as its own user. `User:admin`, the super user, is stored before the broker starts (as `exactly
users add --data-dir` or Kafka's `kafka-storage.sh format --add-scram` do); it then creates the two users of
every row (`User:m<row>-yes`, `User:m<row>-no`) with confluent-kafka's AlterUserScramCredentials, and every
ACL with a raw CreateAcls request.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import ScramMechanism

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.security.rules import RULES
from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.acl_scenarios import SCENARIOS, Names, Row
from tests.interop.client import RawClient
from tests.interop.support import add_scram_users, running_broker, store_scram_users

pytestmark = pytest.mark.interop

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SETTINGS = (
    f"authorizer.class.name={AUTHORIZER}",
    "super.users=User:admin",
    "sasl.enabled.mechanisms=SCRAM-SHA-256",
    "group.initial.rebalance.delay.ms=0",
    "group.share.enable=true",
    "share.transactional.ack.enable=true",
)
MECHANISM = "SCRAM-SHA-256"
ADMIN_PASSWORD = "admin-matrix-pw"
ROWS: list[Row] = [(api, role) for api, roles in RULES.items() for role in roles]
LITERAL, ALLOW, ANY_HOST = 3, 3, "*"


def names(index: int, who: str) -> Names:
    return Names(f"m{index}-{who}-t", f"m{index}-{who}-g", f"m{index}-{who}-x")


def password(user: str) -> str:
    return f"{user}-pw"


def client(proc: BrokerProcess, user: str) -> RawClient:
    """A raw client authenticated as `user` (SCRAM-SHA-256)."""
    raw = RawClient(proc.bootstrap, client_id=f"{user}-client")
    try:
        return raw.login(user, ADMIN_PASSWORD if user == "admin" else password(user), MECHANISM)
    except BaseException:
        raw.close()
        raise


def grant(principal: str, row: Row, n: Names) -> AclCreation:
    rule = RULES[row[0]][row[1]]
    return AclCreation(
        int(rule.resource_type), n.of(row), LITERAL, principal, ANY_HOST, int(rule.operation), ALLOW
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("acl-matrix") / "data"
    store_scram_users(data, {"admin": ADMIN_PASSWORD})
    port = free_port()
    with running_broker(data, f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", *SETTINGS, port=port) as proc:
        users = [
            f"m{index}-{who}" for index, row in enumerate(ROWS) if row in SCENARIOS for who in ("yes", "no")
        ]
        as_admin = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }
        passwords = {user: password(user) for user in users}
        add_scram_users(proc.bootstrap, passwords, ScramMechanism.SCRAM_SHA_256, 4096, as_admin)
        admin = client(proc, "admin")
        try:
            creations: list[AclCreation] = []
            topics: list[CreatableTopic] = []
            for index, row in enumerate(ROWS):
                scenario = SCENARIOS.get(row)
                if scenario is None:
                    continue
                for who in ("yes", "no"):
                    n = names(index, who)
                    principal = f"User:m{index}-{who}"
                    wanted = list(scenario.needs) + ([row] if who == "yes" else [])
                    creations += [grant(principal, r, n) for r in wanted]
                    if not scenario.fresh_topic:
                        topics.append(CreatableTopic(n.topic, 1, 1))
            response = admin.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics, 30_000, False))
            assert {t.error_code for t in response.topics} == {ErrorCode.NONE}
            for index, row in enumerate(ROWS):
                setup = SCENARIOS[row].setup if row in SCENARIOS else None
                if setup is not None:
                    for who in ("yes", "no"):
                        setup(admin, names(index, who))
            created = admin.request(ApiKey.CREATE_ACLS, 2, CreateAclsRequest(creations))
            assert {r.error_code for r in created.results} == {ErrorCode.NONE}
        finally:
            admin.close()
        yield proc


def _id(row: Row) -> str:
    return f"{row[0].name}-{row[1]}"


@pytest.mark.parametrize("row", ROWS, ids=[_id(r) for r in ROWS])
def test_row(broker: BrokerProcess, row: Row) -> None:
    scenario = SCENARIOS.get(row)
    if scenario is None:
        pytest.fail(f"no scenario for {_id(row)}: add one to tests/interop/acl_scenarios.py")
    index = ROWS.index(row)
    rule = RULES[row[0]][row[1]]
    for who, expected in (("yes", scenario.passes), ("no", rule.error)):
        raw = client(broker, f"m{index}-{who}")
        try:
            code = scenario.send(raw, names(index, who))
        finally:
            raw.close()
        assert ErrorCode(code) == expected, f"{who}: {ErrorCode(code).name}, expected {expected.name}"
    # one audit line for the denial, naming the principal, the operation and the resource (of one of
    # the alternatives, when any of several would do)
    lines = [line for line in broker.full_log().splitlines() if f"DENIED User:m{index}-no from" in line]
    if scenario.listing:  # a listing leaves out what may not be seen, silently (Kafka: logIfDenied=false)
        assert lines == []
        return
    assert len(lines) == 1, lines
    options = [RULES[api][role] for api, role in (row, *scenario.alternatives)]
    assert any(f": {o.operation.name} on {o.resource_type.name} " in lines[0] for o in options), lines
