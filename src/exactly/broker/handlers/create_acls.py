"""CreateAcls (key 30): add ACL bindings, durably (the cluster metadata log) and all in one record; in a
replicated cluster, in ZooKeeper (exactly.broker.security_store), where every broker takes them from.

Needs CLUSTER ALTER (else every result is CLUSTER_AUTHORIZATION_FAILED). With no authorizer configured
every result is SECURITY_DISABLED, as in Kafka. A binding Kafka refuses (ANY/UNKNOWN types, an empty
name, a CLUSTER name other than kafka-cluster, a principal without a type) gets INVALID_REQUEST with
Kafka's message; the others are created. Creating a binding that exists already succeeds.
"""

from __future__ import annotations

from exactly.broker import guard
from exactly.broker.config_changes import CLUSTER_WRITE_TIMEOUT_S
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from exactly.security.acls import AclBinding, binding, validate_new


@handler(ApiKey.CREATE_ACLS)
async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    authorizer = ctx.broker.authorizer

    def all_fail(code: ErrorCode, message: str) -> CreateAclsResponse:
        return CreateAclsResponse(0, [AclCreationResult(code, message) for _ in request.creations])

    if authorizer is None:
        return all_fail(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not guard.allowed(ctx, ApiKey.CREATE_ACLS, "cluster"):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    results: list[AclCreationResult] = []
    valid: list[AclBinding] = []
    for c in request.creations:
        acl = binding(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        try:
            validate_new(acl)
        except KafkaError as e:
            results.append(AclCreationResult(e.code, e.message))
            continue
        valid.append(acl)
        results.append(AclCreationResult(ErrorCode.NONE, None))
    cluster = ctx.broker.cluster
    try:
        if cluster is not None:  # the cluster's ACLs: ZooKeeper's (applied to the authorizer from there)
            await cluster.change_acls(valid, add=True, timeout_s=CLUSTER_WRITE_TIMEOUT_S)
            return CreateAclsResponse(0, results)
        added = ctx.broker.metadata.create_acls(valid)
    except (OSError, KafkaError) as e:
        # ZooKeeper out of reach past the deadline: REQUEST_TIMED_OUT (retriable); else an unknown error
        code = e.code if isinstance(e, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        reason = (
            f"cannot write the cluster metadata log: {e.strerror}" if isinstance(e, OSError) else e.message
        )
        for result in results:
            if result.error_code == ErrorCode.NONE:
                result.error_code = code
                result.error_message = reason
        return CreateAclsResponse(0, results)
    for acl in added:
        authorizer.add(acl)
    return CreateAclsResponse(0, results)
