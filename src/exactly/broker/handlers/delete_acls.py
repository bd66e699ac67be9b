"""DeleteAcls (key 31): delete the ACL bindings each filter selects, durably and in one record (in a
replicated cluster: from ZooKeeper, exactly.broker.security_store).

Needs CLUSTER ALTER (else every filter result is CLUSTER_AUTHORIZATION_FAILED). No authorizer:
SECURITY_DISABLED. A filter with an UNKNOWN field: INVALID_REQUEST for that filter. Each filter's result
lists the bindings it deleted (a binding two filters select is listed under both, as in Kafka).
"""

from __future__ import annotations

from exactly.broker import guard
from exactly.broker.config_changes import CLUSTER_WRITE_TIMEOUT_S
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from exactly.security.acls import AclBinding, AclBindingFilter


@handler(ApiKey.DELETE_ACLS)
async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    authorizer = ctx.broker.authorizer

    def all_fail(code: ErrorCode, message: str) -> DeleteAclsResponse:
        return DeleteAclsResponse(0, [DeleteAclsFilterResult(code, message, []) for _ in request.filters])

    if authorizer is None:
        return all_fail(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    if not guard.allowed(ctx, ApiKey.DELETE_ACLS, "cluster"):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    results: list[DeleteAclsFilterResult] = []
    doomed: list[AclBinding] = []
    for f in request.filters:
        acl_filter = AclBindingFilter.from_wire(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        problem = acl_filter.find_indefinite()
        if problem is not None:
            results.append(DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, problem, []))
            continue
        matched = authorizer.matching(acl_filter)
        doomed.extend(matched)
        results.append(
            DeleteAclsFilterResult(
                ErrorCode.NONE,
                None,
                [
                    DeleteAclsMatchingAcl(
                        ErrorCode.NONE,
                        None,
                        a.pattern.resource_type,
                        a.pattern.name,
                        a.pattern.pattern_type,
                        a.entry.principal,
                        a.entry.host,
                        a.entry.operation,
                        a.entry.permission,
                    )
                    for a in matched
                ],
            )
        )
    cluster = ctx.broker.cluster
    try:
        if cluster is not None:  # the cluster's ACLs: ZooKeeper's (applied to the authorizer from there)
            await cluster.change_acls(doomed, add=False, timeout_s=CLUSTER_WRITE_TIMEOUT_S)
            return DeleteAclsResponse(0, results)
        removed = ctx.broker.metadata.delete_acls(doomed)
    except KafkaError as e:  # REQUEST_TIMED_OUT: ZooKeeper out of reach past the deadline
        return all_fail(e.code, e.message)
    except OSError as e:
        return all_fail(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot write the cluster metadata log: {e.strerror}"
        )
    for acl in removed:
        authorizer.remove(acl)
    return DeleteAclsResponse(0, results)
