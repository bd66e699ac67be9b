"""The group coordinator (`__consumer_offsets`): classic consumer groups and committed offsets.

Plain synchronous code, no asyncio and no sockets (ARCHITECTURE invariant 1): operations return the
records to append and the responses; the state changes when the appended records are replayed. See
`coordinator.py` for how it is driven and `classic/state.py` for the state machine and what is stored.
"""

from exactly.group.classic.group import ClassicGroup
from exactly.group.classic.manager import ClassicGroupManager
from exactly.group.classic.member import Member
from exactly.group.classic.state import ClassicGroupState, GroupEvent
from exactly.group.client import ClientInfo
from exactly.group.config import GroupConfig
from exactly.group.coordinator import GroupCoordinator
from exactly.group.group import Group, GroupType
from exactly.group.offset_manager import OffsetManager
from exactly.group.offsets import OffsetAndMetadata, OffsetStore
from exactly.group.partitioning import java_string_hash, partition_for
from exactly.group.records import CoordinatorRecord, build_batch
from exactly.group.result import Parked, Result

__all__ = [
    "ClassicGroup",
    "ClassicGroupManager",
    "ClassicGroupState",
    "ClientInfo",
    "CoordinatorRecord",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupEvent",
    "GroupType",
    "Member",
    "OffsetAndMetadata",
    "OffsetManager",
    "OffsetStore",
    "Parked",
    "Result",
    "build_batch",
    "java_string_hash",
    "partition_for",
]
