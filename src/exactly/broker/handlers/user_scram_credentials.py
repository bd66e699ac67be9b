"""AlterUserScramCredentials (key 51) and DescribeUserScramCredentials (key 50), as Kafka's
ScramControlManager: credentials live in the cluster metadata log (exactly.cluster.metadata), salted and
hashed; in a replicated cluster, in ZooKeeper's `/config/users/<user>` as Kafka keeps them there
(exactly.broker.security_store), from where every broker's SASL listeners take them. The client sends
the salt and the salted password (Hi(password, salt, i)); the broker keeps
StoredKey = H(HMAC(salted, "Client Key")) and ServerKey = HMAC(salted, "Server Key") (RFC 5802).

Mechanism numbers are Kafka's ScramMechanism: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter

from exactly.broker import guard
from exactly.broker.config_changes import CLUSTER_WRITE_TIMEOUT_S
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.cluster.metadata import ScramCredential
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from exactly.protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
MECHANISM_NUMBERS = {name: number for number, (name, _) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations

Failure = tuple[ErrorCode, str]


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
async def alter(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    metadata = ctx.broker.metadata
    keys = [(d.name, d.mechanism) for d in request.deletions] + [
        (u.name, u.mechanism) for u in request.upsertions
    ]
    seen = Counter(keys)
    users = list(dict.fromkeys(name for name, _ in keys))
    if not guard.allowed(ctx, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "cluster"):
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterUserScramCredentialsResponse(
            0, [AlterUserScramCredentialsResult(user, denied, None) for user in users]
        )
    failed: dict[str, Failure] = {}
    for name, mechanism in keys:
        if seen[(name, mechanism)] > 1:
            failed.setdefault(
                name,
                (
                    ErrorCode.DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request",
                ),
            )
    for d in request.deletions:
        problem = _check_user_and_mechanism(d.name, d.mechanism)
        if problem is None and (d.name, MECHANISMS[d.mechanism][0]) not in metadata.scram_credentials:
            problem = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        if problem is not None:
            failed.setdefault(d.name, problem)
    for u in request.upsertions:
        problem = _check_user_and_mechanism(u.name, u.mechanism)
        if problem is None and u.iterations < MIN_ITERATIONS:
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        if problem is None and u.iterations > MAX_ITERATIONS:
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if problem is None and (not u.salt or not u.salted_password):
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        if problem is not None:
            failed.setdefault(u.name, problem)
    cluster = ctx.broker.cluster
    for d in request.deletions:
        if d.name not in failed:
            mechanism_name = MECHANISMS[d.mechanism][0]
            if cluster is None:
                metadata.delete_scram_credential(d.name, mechanism_name)
                continue
            try:
                await cluster.change_scram_credential(d.name, mechanism_name, None, CLUSTER_WRITE_TIMEOUT_S)
            except KafkaError as e:  # REQUEST_TIMED_OUT: ZooKeeper out of reach past the deadline
                failed[d.name] = (e.code, e.message)
    for u in request.upsertions:
        if u.name not in failed:
            name, digest = MECHANISMS[u.mechanism]
            credential = _credential(digest, u.salt, u.salted_password, u.iterations)
            if cluster is None:
                metadata.set_scram_credential(u.name, name, credential)
                continue
            try:
                await cluster.change_scram_credential(u.name, name, credential, CLUSTER_WRITE_TIMEOUT_S)
            except KafkaError as e:
                failed[u.name] = (e.code, e.message)
    results = [
        AlterUserScramCredentialsResult(user, *failed.get(user, (ErrorCode.NONE, None))) for user in users
    ]
    return AlterUserScramCredentialsResponse(0, results)


def _check_user_and_mechanism(user: str, mechanism: int) -> Failure | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _credential(digest: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", digest)
    return ScramCredential(salt, iterations, stored_key, server_key)


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
async def describe(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not guard.allowed(ctx, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "cluster"):
        return DescribeUserScramCredentialsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None
        )
    stored = ctx.broker.metadata.scram_credentials
    by_user: dict[str, list[CredentialInfo]] = {}
    for (user, mechanism), credential in sorted(stored.items()):
        by_user.setdefault(user, []).append(
            CredentialInfo(MECHANISM_NUMBERS[mechanism], credential.iterations)
        )
    if not request.users:  # null or empty: every user with a credential
        results = [
            DescribeUserScramCredentialsResult(user, 0, None, infos) for user, infos in by_user.items()
        ]
        return DescribeUserScramCredentialsResponse(0, 0, None, results)
    counts = Counter(u.name for u in request.users)
    results = []
    for name in dict.fromkeys(u.name for u in request.users):
        if counts[name] > 1:
            error, message = (
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            )
        elif name not in by_user:
            error, message = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe nonexistent user credentials"
        else:
            results.append(DescribeUserScramCredentialsResult(name, 0, None, by_user[name]))
            continue
        results.append(DescribeUserScramCredentialsResult(name, error, message, []))
    return DescribeUserScramCredentialsResponse(0, 0, None, results)
