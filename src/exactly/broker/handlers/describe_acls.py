"""DescribeAcls (key 29): the ACL bindings a filter selects, grouped by resource pattern.

Needs CLUSTER DESCRIBE (else CLUSTER_AUTHORIZATION_FAILED). No authorizer: SECURITY_DISABLED. A filter
with an UNKNOWN field: INVALID_REQUEST.
"""

from __future__ import annotations

from exactly.broker import guard
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from exactly.security.acls import AclBindingFilter, ResourcePattern


@handler(ApiKey.DESCRIBE_ACLS)
async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return DescribeAclsResponse(
            0, ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", []
        )
    if not guard.allowed(ctx, ApiKey.DESCRIBE_ACLS, "cluster"):
        return DescribeAclsResponse(
            0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", []
        )
    r = request
    acl_filter = AclBindingFilter.from_wire(
        r.resource_type_filter,
        r.resource_name_filter,
        r.pattern_type_filter,
        r.principal_filter,
        r.host_filter,
        r.operation,
        r.permission_type,
    )
    problem = acl_filter.find_indefinite()
    if problem is not None:
        return DescribeAclsResponse(0, ErrorCode.INVALID_REQUEST, problem, [])
    grouped: dict[ResourcePattern, list[AclDescription]] = {}
    for acl in authorizer.matching(acl_filter):
        e = acl.entry
        grouped.setdefault(acl.pattern, []).append(
            AclDescription(e.principal, e.host, e.operation, e.permission)
        )
    resources = [
        DescribeAclsResource(p.resource_type, p.name, p.pattern_type, acls) for p, acls in grouped.items()
    ]
    return DescribeAclsResponse(0, ErrorCode.NONE, None, resources)
