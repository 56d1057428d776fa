"""Records that cross the API: each has one definition, in the module of its family, and turns into a
plain JSON-able dict (`to_dict`) and back (`from_dict`, which ignores fields it does not know, so that
an older client can read a newer engine's records).

- `base`: `Record` itself, `new_id`.
- `runs`: hook runs and stage dispatches.
- `changes`: commits as the operator sees them, provenance, changes held for review.
- `tools`: tool calls, validation runs.
- `sessions`: opencode sessions, notifications, actions.
- `heartbeat`: ticks and the heartbeat's status.
- `status`: the engine's hooks, configuration, connections, warnings and status.
- `replays`: replays of a change and what they found.
"""

from .base import JSONDict, Record, new_id
from .changes import Change, CommitInfo, Evidence, FileAtChange, PendingChange, Provenance, ReviewRecorded
from .heartbeat import HeartbeatChanged, HeartbeatStatus, TickResult
from .replays import (
    SHOW_SOURCES,
    FieldDiff,
    InputComparison,
    ReplayProgress,
    ReplayResult,
    StageComparison,
    grouped_by_differences,
    inputs_named,
)
from .runs import HookRun, RunStarted, StageResult
from .sessions import ActionDone, Delivered, NotificationSent, SessionChanged, SessionInfo
from .status import (
    ConfigChanged,
    ConnectionInfo,
    EngineStatus,
    HookInfo,
    HooksDiscovered,
    Notice,
    OpencodeChanged,
    SkippedHook,
)
from .tools import ToolCall, ValidationRun

__all__ = [
    "SHOW_SOURCES",
    "ActionDone",
    "Change",
    "CommitInfo",
    "ConfigChanged",
    "ConnectionInfo",
    "Delivered",
    "EngineStatus",
    "Evidence",
    "FieldDiff",
    "FileAtChange",
    "HeartbeatChanged",
    "HeartbeatStatus",
    "HookInfo",
    "HookRun",
    "HooksDiscovered",
    "InputComparison",
    "JSONDict",
    "Notice",
    "NotificationSent",
    "OpencodeChanged",
    "PendingChange",
    "Provenance",
    "Record",
    "ReplayProgress",
    "ReplayResult",
    "ReviewRecorded",
    "RunStarted",
    "SessionChanged",
    "SessionInfo",
    "SkippedHook",
    "StageComparison",
    "StageResult",
    "TickResult",
    "ToolCall",
    "ValidationRun",
    "grouped_by_differences",
    "inputs_named",
    "new_id",
]
