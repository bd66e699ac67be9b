"""What a handler gets besides its request body."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from exactly.protocol.api import RequestHeader
from exactly.protocol.messages import ApiKey
from exactly.security.listeners import Listener
from exactly.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from exactly.broker.server import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    connection_id: int
    peer: str
    size: int = 0  # the request's bytes on the wire (header and body), what Kafka's produce quota counts
    mute: Callable[[int], None] = lambda ms: None  # stop reading the connection for `ms` (quota throttling)
    principal: KafkaPrincipal = ANONYMOUS  # who the connection authenticated as (TLS client cert, SASL)
    listener: Listener | None = None  # the listener the connection came in on (None: the first)
    # the connection sends records straight from segment files (plaintext): Fetch may answer FileSlices
    zero_copy: bool = False

    @property
    def advertised(self) -> tuple[str, int]:
        """Where this client is told to find the broker (the endpoint of its own listener)."""
        return self.broker.advertised_for(self.listener)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def request_name(self) -> str:
        """For log lines: API, version, connection and correlation id."""
        key = ApiKey(self.header.api_key).name
        return f"{key} v{self.version} (connection {self.connection_id}, #{self.header.correlation_id})"
