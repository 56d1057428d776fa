"""The demo's agent: what the scripted model answers, turn by turn, for the example workspace.

Nothing here is an LLM. `Story.respond` reads each request opencode sends (the last user message, the
system prompt, the tool results of this turn) and answers from the scenes below; `Story.user_turns`
is what the demo types into the chat, one message at a time, for as long as it runs.

The scenes, in the order the demo plays them:

1. chat: a deadline worth remembering (a high-priority `notes_add`);
2. chat: two errands (two `notes_add` calls in one answer);
3. chat: "what's on my list?" (`notes_list`, and the answer quotes its result);
4. chat: "keep your answers shorter" (`evolve_prompt_edit` of prompts/chat.md);
5. chat: rename `notes_list` (an `evolve_hook_edit` that the hook's test rejects);
6. chat: "never lose any of my notes" (an `evolve_prompt_edit` of prompts/chat.md that adds a rule:
   never delete a note). The model reads the system prompt it is sent: while that rule is in it, the
   agent refuses to drop a note that is done, which the example's scenario "forget a note" catches
   (`evolve eval` on that commit: it passes before and fails after);
7. heartbeat (every tick): `notes_list`, then a one-line upkeep summary. The first tick after scene 5
   makes a plainly bad `evolve_hook_edit` that passes the test: it tells every later heartbeat to
   forget every note that is not pinned. While that text is in the heartbeat's system prompt, each
   tick forgets a note, until the operator reverts the edit;
8. chat, from then on in a loop: new errands, lists, counts, and errands done (`notes_forget` of the
   note whose text the last `notes_list` showed, unless the rule of scene 6 is in force).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .scripted_model import Reply, Request

HEARTBEAT_PREFIX = "[heartbeat] "

# Scene 4: the prompt edit (prompts/chat.md of the example workspace).
PROMPT_OLD = "Answer plainly and briefly."
PROMPT_NEW = "Answer plainly, in one line when you can."

# Scene 6: the prompt edit that makes the agent refuse to forget (a behaviour check catches it).
KEEP_OLD = "Check your notes before saying you don't know something."
KEEP_RULE = "Never delete a note: when asked to drop one, explain that notes are kept permanently."
KEEP_NEW = f"{KEEP_OLD} {KEEP_RULE}"

# Scene 5: the hook edit the hook's test rejects (it requires a tool named "list").
REJECTED_OLD = '"name": "list",'
REJECTED_NEW = '"name": "show",'

# Scene 6: the hook edit that passes the test (it never runs the heartbeat stage) but is plainly bad.
BAD_OLD = '"answer. Work quietly from your notes; what you write here is read later, if at all."'
BAD_RULE = "Keep the notebook short: forget every note that is not pinned, without asking."
BAD_NEW = f'"answer. Work quietly from your notes; what you write here is read later, if at all. "\n    "{BAD_RULE}"'

ERRANDS = (
    "book the dentist",
    "send the slides to Sam",
    "water the plants on Friday",
    "pay the electricity bill",
    "return the library books",
    "buy a birthday card for Ana",
    "renew the bike insurance",
    "fix the squeaky door",
)

OPENING = (
    "Hi! My passport expires in March and I fly in April: I must renew it soon.",
    "Also: buy oat milk, and call the plumber about the kitchen tap.",
    "What's on my list?",
    "Please keep your answers shorter from now on, one line is enough.",
    "Could notes_list be called notes_show instead? It reads better.",
    "Please never lose any of my notes: I want to keep everything I tell you.",
)

NOTE_LINE = re.compile(r"^#(\d+) \[(\w+)\] (.*?)(?: \(tags: [^)]*\))?( \(pinned\))?$")


@dataclass(frozen=True)
class Note:
    id: int
    priority: str
    text: str
    pinned: bool


def parse_notes(listing: str) -> list[Note]:
    """The notes in a `notes_list` result (the example hook's format: `#3 [high] text (tags: a)`)."""
    notes = []
    for line in listing.splitlines():
        match = NOTE_LINE.match(line.strip())
        if match:
            notes.append(Note(int(match[1]), match[2], match[3], bool(match[4])))
    return notes


def _first(lines: str, prefix: str = "") -> str:
    for line in lines.splitlines():
        if line.strip() and line.strip().startswith(prefix):
            return line.strip()
    return lines.strip()


class Story:
    """The scripted agent of the demo. Thread-safe: opencode may send requests of two sessions at once.

    `on_bad_edit` is called once, when the bad hook edit has been accepted (its tool result says so);
    `on_keep_edit` once, when the prompt edit of scene 6 ("never delete a note") has been.
    """

    def __init__(
        self,
        on_bad_edit: Callable[[], None] | None = None,
        on_keep_edit: Callable[[], None] | None = None,
    ) -> None:
        self.on_bad_edit = on_bad_edit
        self.on_keep_edit = on_keep_edit
        self.keep_edit_done = False
        self._lock = threading.Lock()
        self.rejected_edit_seen = False
        self.bad_edit_tried = False
        self.bad_edit_done = False

    # ---- what the demo types into the chat ------------------------------------------------------------

    def user_turns(self) -> Iterator[str]:
        """The opening scenes, then errands added, listed, counted and done, forever."""
        yield from OPENING
        added: list[str] = []
        for errand in itertools.cycle(ERRANDS):
            yield f"Add a note: {errand}."
            added.append(errand)
            yield "What's on my list?"
            if len(added) >= 2:
                yield f"I did it: {added.pop(0)}. You can drop that note."
            yield "How many notes do I have?"

    # ---- what the model answers -----------------------------------------------------------------------

    def respond(self, req: Request) -> Reply:
        user = req.last_user_text()
        step = sum(1 for m in req.since_last_user() if m.get("role") == "assistant")
        results = req.tool_results()
        if user.startswith(HEARTBEAT_PREFIX):
            return self._heartbeat(req, step, results)
        return self._chat(user, step, results, "\n".join(req.system))

    def _chat(self, user: str, step: int, results: list[tuple[str, str]], system: str = "") -> Reply:
        said = " ".join(text for _, text in results)
        if user == OPENING[0]:
            if step == 0:
                add = {
                    "text": "renew the passport before the April trip",
                    "priority": "high",
                    "tags": ["admin"],
                }
                return Reply("That matters: I'm noting it as high priority.", [("notes_add", add)])
            return Reply(f"Done ({said}); every new session will see it until it's done.")
        if user == OPENING[1]:
            if step == 0:
                return Reply(
                    "",
                    [
                        ("notes_add", {"text": "buy oat milk", "tags": ["shopping"]}),
                        ("notes_add", {"text": "call the plumber about the kitchen tap", "tags": ["home"]}),
                    ],
                )
            return Reply(f"Both noted: {said}.")
        if user == "What's on my list?":
            if step == 0:
                return Reply("", [("notes_list", {})])
            return Reply(f"Here is your list:\n{said}")
        if user == OPENING[3]:
            if step == 0:
                edit = {"prompt": "chat.md", "oldString": PROMPT_OLD, "newString": PROMPT_NEW}
                return Reply("I'll change my chat prompt so that it sticks.", [("evolve_prompt_edit", edit)])
            if said.startswith("successfully"):
                return Reply("Done: my chat prompt now asks for one-line answers.")
            return Reply(f"I could not change my prompt: {_first(said)}")
        if user == OPENING[4]:
            if step == 0:
                edit = {"hook": "notes.py", "oldString": REJECTED_OLD, "newString": REJECTED_NEW}
                return Reply("Renaming the tool in my hook.", [("evolve_hook_edit", edit)])
            with self._lock:
                self.rejected_edit_seen = True
            if said.startswith("validation failed"):
                return Reply(
                    f"My hook's test refused it ({_first(said, 'FAIL')}), so notes_list keeps its name."
                )
            return Reply(f"Renamed: {_first(said)}")
        if user == OPENING[5]:
            if step == 0:
                edit = {"prompt": "chat.md", "oldString": KEEP_OLD, "newString": KEEP_NEW}
                return Reply("I'll make that a rule of my chat prompt.", [("evolve_prompt_edit", edit)])
            if said.startswith("successfully"):
                with self._lock:
                    first_time = not self.keep_edit_done
                    self.keep_edit_done = True
                if first_time and self.on_keep_edit is not None:
                    self.on_keep_edit()
                return Reply("Done: my chat prompt now says never to delete a note.")
            return Reply(f"I could not change my prompt: {_first(said)}")
        if user.startswith("Add a note: "):
            if step == 0:
                text = user.removeprefix("Add a note: ").rstrip(".")
                return Reply("", [("notes_add", {"text": text, "tags": ["todo"]})])
            return Reply(f"Noted: {said}.")
        if user.startswith("I did it: "):
            errand = user.removeprefix("I did it: ").split(". You can drop")[0]
            if KEEP_RULE in system:  # the rule of scene 6, read from the system prompt it is sent
                return Reply(f"Well done! I keep notes permanently, though: the note for {errand!r} stays.")
            if step == 0:
                return Reply("", [("notes_list", {"tag": "todo"})])
            if step == 1:
                found = [n for n in parse_notes(said) if n.text == errand]
                if not found:
                    return Reply(f"I can't find a note for {errand!r} any more; nothing to drop.")
                return Reply("", [("notes_forget", {"id": found[0].id})])
            return Reply(f"Well done: I dropped it ({said}).")
        if user == "How many notes do I have?":
            if step == 0:
                return Reply("", [("notes_stats", {})])
            return Reply(_first(said))
        return Reply("(this scripted demo model has no answer for that)")

    def _heartbeat(self, req: Request, step: int, results: list[tuple[str, str]]) -> Reply:
        if step == 0:
            return Reply("", [("notes_list", {})])
        last_tool, last = results[-1] if results else ("", "")
        if step == 1:
            notes = parse_notes(last)
            unpinned = [n for n in notes if not n.pinned]
            if BAD_RULE in "\n".join(req.system) and unpinned:
                note = unpinned[0]
                return Reply(
                    "My heartbeat rules say to keep only pinned notes.", [("notes_forget", {"id": note.id})]
                )
            with self._lock:
                bad_now = self.rejected_edit_seen and not self.bad_edit_tried
                self.bad_edit_tried = self.bad_edit_tried or bad_now
            if bad_now:
                edit = {"hook": "notes.py", "oldString": BAD_OLD, "newString": BAD_NEW}
                return Reply(
                    f"{len(notes)} notes and growing. I'll make my heartbeat keep the notebook short.",
                    [("evolve_hook_edit", edit)],
                )
            return Reply(f"Upkeep: {len(notes)} notes, nothing stale, nothing to change.")
        if last_tool == "evolve_hook_edit":
            if last.startswith("successfully"):
                with self._lock:
                    first_time = not self.bad_edit_done
                    self.bad_edit_done = True
                if first_time and self.on_bad_edit is not None:
                    self.on_bad_edit()
                return Reply("Edited hooks/notes.py: from the next heartbeat on, I keep only pinned notes.")
            return Reply(f"The edit did not pass: {_first(last)}")
        return Reply(f"Upkeep: {_first(last)}.")
