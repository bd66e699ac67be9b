"""The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup; KIP-62/345/394/814).

`state.py` (the state machine), `member.py` (`Member`), `group.py` (`ClassicGroup`).
"""
