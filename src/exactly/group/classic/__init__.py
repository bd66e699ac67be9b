"""The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup; KIP-62/345/394/814).

`state.py` (the state machine and its transition table), `member.py` (`Member`), `group.py`
(`ClassicGroup`, a `group.Group`), `manager.py` (`ClassicGroupManager`: the requests, replay of
GroupMetadata records), `rebalance.py` (`Rebalancer`: forming generations, the deadlines' actions),
`responses.py` (JoinGroup/SyncGroup responses).
"""
