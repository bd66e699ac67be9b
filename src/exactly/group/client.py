"""Who sent a request to the group coordinator."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClientInfo"]


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Who sent a request: what Kafka's RequestContext gives the coordinator."""

    client_id: str = ""
    client_host: str = ""
    api_version: int = 0
