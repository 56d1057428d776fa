"""The console's state without a screen: what the engine has told it, and what each event changes.

The app feeds it the engine's answers and events, and draws the parts it reports changed (its
parts, the call that fetches each and what a batch changed: `parts.py`; its rows: `entries.py`;
the alerts an event raises: `alerts.py`). It imports neither Textual nor Rich, so the order of events (replays after a reconnect, numbers
skipped, an engine restarted under the console, a reload racing live events) is tested on plain
data (`tests/unit/console/test_model.py`).
"""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Final

from engine.protocol import (
    EngineStatus,
    Event,
    EventKind,
    HeartbeatStatus,
    HookRun,
    PendingChange,
    SessionInfo,
    StageResult,
    ToolCall,
)
from engine.protocol.calls import Call
from engine.protocol.records import (
    Attempt,
    ChangeList,
    DispatchList,
    EvalProgress,
    EvalRun,
    FailingSince,
    Failure,
    FailureList,
    Health,
    HeartbeatChanged,
    Notice,
    OpencodeChanged,
    ReviewRecorded,
    RunList,
    SessionChanged,
    SessionList,
    TickList,
    TickResult,
    ToolCallList,
)

from .alerts import attempt_alert, failure_alert, held_alert, stale_alert

# The rows the model holds (entries.py) and its parts (parts.py), named here with it.
from .entries import ChangeEntry as ChangeEntry
from .entries import RunFilter as RunFilter
from .entries import in_order
from .parts import HISTORY_LIMIT as HISTORY_LIMIT
from .parts import MAX_ROWS as MAX_ROWS
from .parts import TICKS_KEPT, Reloaded, brief, brief_run, query, trim
from .parts import Part as Part
from .parts import Update as Update

# Events that say nothing of what the agent did (the engine's own notices, a replay's progress).
_NOT_ACTIVITY: Final = frozenset({EventKind.WARNING, EventKind.ERROR, EventKind.REPLAY_PROGRESS})

# What a payload that does not parse raises (a newer or older engine's shape).
_UNPARSED = (TypeError, ValueError, KeyError, AttributeError)


class ConsoleModel:
    """Everything the console shows, as plain data, and how the engine's events and answers change it."""

    def __init__(self) -> None:
        self.connected = False
        self.detail = "connecting…"  # the engine's address and pid, or why it does not answer
        self.engine_pid: int | None = None
        self.last_seq: int | None = None  # the number of the newest event received
        self.applied_seq = 0  # and of the newest one applied
        self.status: EngineStatus | None = None
        self.heartbeat: HeartbeatStatus | None = None
        self.counts: dict[str, int] = {}  # the journal's counts, and the runs that came since
        self._counted_seq = 0  # the last event received when the counts were read
        self.events_seen: Counter[str] = Counter()  # events applied, by kind
        self.run_filter = RunFilter()
        self.runs: dict[str, HookRun] = {}  # the runs shown, oldest first, at most MAX_ROWS
        self.dispatches: dict[str, StageResult] = {}  # likewise
        self.sessions: dict[str, SessionInfo] = {}
        self.changes: dict[str, ChangeEntry] = {}  # commits oldest first, then held ones (`in_order`)
        self.tool_calls: dict[str, ToolCall] = {}  # the tool calls shown, oldest first
        self.failed_unseen = 0  # failed runs that arrived since the operator last looked at the runs
        self.failures: dict[str, Failure] = {}  # the hooks failing now, by the failure's id
        self.ticks: list[TickResult] = []  # the heartbeat's last ticks, newest first
        self.attempts_unseen = 0  # attempts that arrived since the operator last looked at view 5
        self.failed_total = 0  # failed runs that arrived since the console started (the fleet's counts)
        self.last_activity: float | None = None  # when the newest event or run the console got happened
        self.stale: set[Part] = set()  # parts to fetch again, once connected
        self._waiting: list[Event] = []  # received, not yet applied
        self._live: deque[tuple[int, HookRun]] = deque(maxlen=MAX_ROWS)  # runs applied, by seq
        self._set_at: dict[Part, int] = {}  # part -> seq of the event that last set it directly
        self._session_seq: dict[str, int] = {}  # session -> seq of the event that last set it

    # ---- the connection and the event stream ------------------------------------------------------

    def set_connection(self, connected: bool, detail: str) -> None:
        self.connected, self.detail = connected, detail

    def apply_health(self, health: Health) -> int:
        """The engine answered its health check (a full load follows): the seq to follow events from.

        A new engine process numbers its events from 1 again: what was counted for the old one no
        longer says anything, and events of the old one still waiting no longer count."""
        if health.pid != self.engine_pid:
            self.engine_pid, self.last_seq = health.pid, None
            self.applied_seq = 0
            self._live.clear()
            self._set_at.clear()
            self._session_seq.clear()
            self._waiting = [replace(e, seq=0) for e in self._waiting]
        if self.last_seq is None:
            # Events from here on are replayed after the history is loaded, so a run recorded in
            # between is in one or the other (rows are keyed: no duplicates).
            self.last_seq = health.seq or 0
        self.stale.clear()
        return self.last_seq

    def receive(self, event: Event) -> bool:
        """An event off the stream, kept until the next batch; False when it was seen already."""
        if event.seq and self.last_seq is not None:
            if event.seq <= self.last_seq:
                return False  # a replay of what this engine sent already
            if event.seq > self.last_seq + 1:
                self.stale.add(Part.RUNS)  # events were dropped on the way: reload from the journal
        if event.seq:
            self.last_seq = event.seq
        self._waiting.append(event)
        return True

    @property
    def waiting(self) -> int:
        """Events received and not yet applied."""
        return len(self._waiting)

    def apply_waiting(self) -> Update:
        events, self._waiting = self._waiting, []
        return self.apply_events(events)

    def take_reloads(self) -> set[Part]:
        """The parts to fetch again now (none while the engine does not answer)."""
        if not self.connected:
            return set()
        stale, self.stale = self.stale, set()
        return stale

    # ---- applying events ----------------------------------------------------------------------------

    def apply_events(self, events: Iterable[Event]) -> Update:
        update = Update()
        runs: dict[str, HookRun] = {}
        for event in events:
            self.events_seen[event.kind] += 1
            if event.at and event.known_kind not in _NOT_ACTIVITY:
                self.last_activity = max(self.last_activity or 0.0, event.at)
            if event.seq:
                self.applied_seq = event.seq
            kind = event.known_kind
            if kind is EventKind.HOOK_RUN:
                try:
                    run = brief_run(event.data)
                except _UNPARSED:
                    update.reload.add(Part.RUNS)
                    continue
                if event.seq > self._counted_seq:
                    # The journal's counts (Part.COUNTS, exact, also when it trims) are read every
                    # few seconds; runs that came since count at once, so the line never lags.
                    self.counts["runs"] = self.counts.get("runs", 0) + 1
                    if run.error is not None:
                        self.counts["failed_runs"] = self.counts.get("failed_runs", 0) + 1
                if self.run_filter.matches(run):
                    runs[run.id] = run
                    self._live.append((event.seq, run))
                if run.error is not None:
                    self.failed_unseen += 1
                    self.failed_total += 1
            elif kind is EventKind.STAGE:
                try:
                    update.stages.append(StageResult.from_dict(event.data))
                except _UNPARSED:
                    update.reload.add(Part.STAGES)
            elif kind in (EventKind.TOOL_CALL, EventKind.TOOL_RESULT):
                try:
                    call = ToolCall.from_dict(event.data)
                except _UNPARSED:
                    update.reload.add(Part.TOOLS)
                    continue
                update.tools = [c for c in update.tools if c.id != call.id] + [call]
            elif kind is EventKind.SESSION:
                self._apply_session(event, update)
            elif kind is EventKind.OPENCODE:
                self._apply_opencode(event, update)
            elif kind is EventKind.COMMIT:
                update.reload.add(Part.CHANGES)
            elif kind is EventKind.REVIEW:
                self._apply_review(event, update)
            elif kind is EventKind.PENDING:
                self._apply_pending(event, update)
            elif kind is EventKind.HEARTBEAT:
                self._apply_heartbeat(event, update)
            elif kind is EventKind.FAILURE:
                self._apply_failure(event, update)
            elif kind is EventKind.ATTEMPT:
                self._apply_attempt(event, update)
            elif kind in (EventKind.EVAL_PROGRESS, EventKind.EVAL):
                self._apply_eval(event, update)
            elif kind in (EventKind.CONFIG, EventKind.HOOKS_DISCOVERED):
                update.reload.add(Part.STATUS)
            elif kind in (EventKind.REPLAY_PROGRESS, EventKind.REPLAY):
                # One that does not parse is skipped: a replay's screen asks for its result itself.
                with contextlib.suppress(*_UNPARSED):
                    update.replays.append(event.payload())
            elif kind in (EventKind.WARNING, EventKind.ERROR):
                try:
                    notice = Notice.from_dict(event.data)
                except _UNPARSED:
                    notice = Notice(str(event.data.get("source")), str(event.data.get("message")))
                update.notices.append((kind.value, notice))
        if runs:
            # Only the newest rows can be shown: a flood costs the tables no more than that.
            update.runs = list(runs.values())[-MAX_ROWS:]
            self.runs.update((run.id, run) for run in update.runs)
            trim(self.runs)
            update.redraw.add(Part.RUNS)
        if update.stages:
            self.dispatches.update((d.id, d) for d in update.stages)
            trim(self.dispatches)
            update.redraw.add(Part.STAGES)
        if update.tools:
            self.tool_calls.update((c.id, c) for c in update.tools)
            trim(self.tool_calls)
            update.redraw.add(Part.TOOLS)
        self.stale |= update.reload
        return update

    def looked_at_runs(self) -> None:
        """The operator is looking at the hook runs: the failures so far are seen."""
        self.failed_unseen = 0

    def looked_at_changes(self) -> None:
        """The operator is looking at the self-modifications: the attempts so far are seen."""
        self.attempts_unseen = 0

    @property
    def pending_count(self) -> int:
        """The held changes that can still be decided (a stale one can only be dismissed)."""
        return sum(1 for c in self.changes.values() if c.awaits_decision)

    @property
    def unreviewed_count(self) -> int:
        return sum(1 for c in self.changes.values() if c.state == "unreviewed")

    def waiting_changes(self) -> frozenset[str]:
        """The changes that wait for the operator: held for a decision, or committed unreviewed."""
        return frozenset(k for k, c in self.changes.items() if c.awaits_decision or c.state == "unreviewed")

    def _apply_session(self, event: Event, update: Update) -> None:
        try:
            changed = SessionChanged.from_dict(event.data)
        except _UNPARSED:
            update.reload.add(Part.SESSIONS)
            return
        if changed.change == "forgotten":
            self.sessions.pop(changed.session.id, None)
        else:
            self.sessions[changed.session.id] = changed.session
        self._session_seq[changed.session.id] = event.seq
        update.redraw.add(Part.SESSIONS)

    def _apply_opencode(self, event: Event, update: Update) -> None:
        try:
            changed = OpencodeChanged.from_dict(event.data)
        except _UNPARSED:
            changed = None
        if changed is None or self.status is None or changed.event not in ("connected", "disconnected"):
            update.reload.add(Part.STATUS)
            return
        connections = [c for c in self.status.opencode if c.id != changed.connection.id]
        if changed.event == "connected":
            connections.append(changed.connection)
        self.status = replace(self.status, opencode=connections)
        self._set_at[Part.STATUS] = event.seq
        update.redraw.add(Part.STATUS)

    def _apply_review(self, event: Event, update: Update) -> None:
        try:
            review = ReviewRecorded.from_dict(event.data)
        except _UNPARSED:
            review = None
        entry = self.changes.get(review.sha) if review is not None else None
        if review is None or entry is None:
            update.reload.add(Part.CHANGES)
            return
        state = "approved" if entry.state in ("unreviewed", "none") else entry.state
        self.changes[entry.key] = replace(entry, review=review.review, state=state)
        update.redraw.add(Part.CHANGES)

    def _apply_pending(self, event: Event, update: Update) -> None:
        try:
            pending = PendingChange.from_dict(event.data)
        except _UNPARSED:
            update.reload.add(Part.CHANGES)
            return
        known = self.changes.get(pending.id)
        if pending.status != "pending":
            update.decided.add(pending.id)
        if pending.status == "approved":
            # Installed: its commit (with the approval) stands for it from now on.
            self.changes.pop(pending.id, None)
            update.reload.add(Part.CHANGES)
        else:
            if pending.status == "pending" and known is None:
                update.alerts.append(held_alert(pending))
            elif pending.status == "stale" and known is not None and known.state != "stale":
                update.alerts.append(stale_alert(pending))
            entry = ChangeEntry.pending(pending)
            if known is not None and entry.evals is None:
                entry = replace(entry, evals=known.evals)  # events carry it only once saved
            self.changes[pending.id] = entry
            self.changes = in_order(self.changes.values())
        update.redraw.add(Part.CHANGES)

    def _apply_failure(self, event: Event, update: Update) -> None:
        """A hook started failing at a stage (alert, unless it fails now and then: `recurs`), failed
        again there (its count), or runs fine again (it goes). The change it suspects says so."""
        try:
            failure = Failure.from_dict(event.data)
        except _UNPARSED:
            update.reload |= {Part.FAILURES, Part.CHANGES}
            return
        if failure.state == "cleared":
            self.failures.pop(failure.id, None)
        else:
            self.failures[failure.id] = failure
        if failure.state == "started" and not failure.recurs:
            update.alerts.append(failure_alert(failure))
        if self._mark_failing(failure):
            update.redraw.add(Part.CHANGES)
        update.redraw.add(Part.FAILURES)

    def _mark_failing(self, failure: Failure) -> bool:
        """The rows of the changes this failure is told on: the count of its runs, or gone once it
        cleared. True when a row changed."""
        changed = False
        suspect = failure.suspect.sha if failure.suspect else None
        for key, entry in list(self.changes.items()):
            kept = tuple(f for f in entry.failing if f.failure != failure.id)
            if key == suspect and failure.state != "cleared":
                since = FailingSince(
                    failure.id, failure.hook, failure.stage, failure.runs, failure.first_at, failure.error
                )
                kept = (*kept, since)
            if kept != entry.failing:
                self.changes[key] = replace(entry, failing=kept)
                changed = True
        return changed

    def _apply_attempt(self, event: Event, update: Update) -> None:
        """An edit of the agent's that its test rejected: a row of its own, counted until seen."""
        try:
            attempt = Attempt.from_dict(event.data)
        except _UNPARSED:
            update.reload.add(Part.CHANGES)
            return
        if attempt.id not in self.changes:
            self.attempts_unseen += 1
            update.alerts.append(attempt_alert(attempt))
        self.changes[attempt.id] = ChangeEntry.attempt(attempt)
        self.changes = in_order(self.changes.values())
        update.redraw.add(Part.CHANGES)

    def _apply_eval(self, event: Event, update: Update) -> None:
        """Behaviour checks went on or ended: to the screen that shows them; a held change's row
        shows the line of its latest ones."""
        try:
            found = event.payload()
        except _UNPARSED:
            return
        if not isinstance(found, EvalProgress | EvalRun):
            return
        update.evals.append(found)
        if isinstance(found, EvalRun) and found.state == "done":
            entry = self.changes.get(found.target)
            if entry is not None and entry.pending_id is not None and entry.evals != found.summary:
                self.changes[entry.key] = replace(entry, evals=found.summary)
                update.redraw.add(Part.CHANGES)

    def _apply_heartbeat(self, event: Event, update: Update) -> None:
        try:
            changed = HeartbeatChanged.from_dict(event.data)
        except _UNPARSED:
            update.reload.add(Part.HEARTBEAT)  # a payload without the status after it
            return
        self.heartbeat = changed.status
        self._set_at[Part.HEARTBEAT] = event.seq
        update.redraw.add(Part.HEARTBEAT)
        if changed.event == "tick" and changed.tick is not None:
            # The history, drawn with the status (the view shows them together).
            self.ticks = [changed.tick, *self.ticks][:TICKS_KEPT]

    # ---- answers of the API ---------------------------------------------------------------------------

    def query(self, part: Part) -> Call[Any]:
        """The call that fetches `part`; its answer goes to `apply_reload`."""
        return query(part, self.run_filter)

    def apply_reload(self, part: Part, answer: Reloaded, since: int | None = None) -> bool:
        """The engine's answer for `part` (to `query(part)`); False when it was older than the model.

        `since`: the `applied_seq` when the request went out. Runs applied from the stream after
        that may be newer than the answer and are kept; a heartbeat set by a newer event wins."""
        newer_event = since is not None and self._set_at.get(part, 0) > since
        if part in (Part.RUNS, Part.COUNTS):
            # What the journal held when it answered: every event received so far (an event comes
            # before its run is journaled, a moment later), give or take the last few.
            self._counted_seq = self.last_seq or 0
        if part is Part.RUNS and isinstance(answer, RunList):
            self.counts = dict(answer.counts)
            runs = [brief(r) for r in reversed(answer.runs)]
            if since is not None:
                runs += [run for seq, run in self._live if seq > since]
            self.runs = {run.id: run for run in runs}
            trim(self.runs)
            if runs:
                self.last_activity = max(self.last_activity or 0.0, max(run.started_at for run in runs))
        elif part is Part.COUNTS and isinstance(answer, RunList):
            self.counts = dict(answer.counts or self.counts)
        elif part is Part.STAGES and isinstance(answer, DispatchList):
            self.dispatches = {d.id: d for d in reversed(answer.dispatches)}
            trim(self.dispatches)
        elif part is Part.SESSIONS and isinstance(answer, SessionList):
            loaded = {s.id: s for s in answer.sessions}
            if since is not None:  # what an event newer than the answer said wins
                for sid, seq in self._session_seq.items():
                    if seq > since:
                        if sid in self.sessions:
                            loaded[sid] = self.sessions[sid]
                        else:
                            loaded.pop(sid, None)
            self.sessions = loaded
        elif part is Part.CHANGES and isinstance(answer, ChangeList):
            entries = [ChangeEntry.commit(c) for c in reversed(answer.changes)]
            # An approved held change is its commit now.
            entries += [ChangeEntry.pending(p) for p in answer.pending if p.status != "approved"]
            entries += [ChangeEntry.attempt(a) for a in answer.attempts]
            self.changes = in_order(entries)
        elif part is Part.FAILURES and isinstance(answer, FailureList):
            self.failures = {f.id: f for f in answer.failures}
        elif part is Part.TICKS and isinstance(answer, TickList):
            self.ticks = answer.ticks[:TICKS_KEPT]
        elif part is Part.TOOLS and isinstance(answer, ToolCallList):
            by_id = {c.id: c for c in reversed(answer.tool_calls)}
            if since is not None and by_id:  # what events told since the request went out
                oldest = min(c.started_at for c in by_id.values())
                for known in self.tool_calls.values():
                    answered = by_id.get(known.id)
                    if (answered is None and known.started_at >= oldest) or (
                        answered is not None and answered.output is None and known.output is not None
                    ):
                        by_id[known.id] = known
            self.tool_calls = dict(sorted(by_id.items(), key=lambda item: item[1].started_at))
            trim(self.tool_calls)
        elif part is Part.HEARTBEAT and isinstance(answer, HeartbeatStatus):
            if newer_event:
                return False
            self.heartbeat = answer
        elif part is Part.STATUS and isinstance(answer, EngineStatus):
            status = answer
            if newer_event and self.status is not None:
                status = replace(status, opencode=self.status.opencode)  # as the newer event left it
            self.status = status
        else:
            raise TypeError(f"{type(answer).__name__} is not what the engine answers for {part}")
        return True
