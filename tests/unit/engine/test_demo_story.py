"""The demo's story and its scripted model, read without running it (the story run against an engine is in
tests/engine/test_demo_story.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from evolve_demo import story
from evolve_demo.scripted_model import MockLLM, Reply, Request
from tests.support.environment import REPO

EXAMPLE = REPO / "engine" / "example"


def request(*messages: dict[str, Any], system: str = "s") -> Request:
    return Request({"messages": [{"role": "system", "content": system}, *messages]}, {}, 0.0)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def called(name: str, args: dict[str, Any], call_id: str, result: str) -> list[dict[str, Any]]:
    """An assistant tool call and its result, as opencode sends them back."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def sse_events(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def test_the_story_edits_match_the_example_files_once() -> None:
    hook = (EXAMPLE / "hooks" / "notes.py").read_text()
    chat = (EXAMPLE / "prompts" / "chat.md").read_text()
    assert chat.count(story.PROMPT_OLD) == 1
    assert chat.count(story.KEEP_OLD) == 1
    assert hook.count(story.REJECTED_OLD) == 1
    assert hook.count(story.BAD_OLD) == 1


def test_chat_turns_answer_from_the_tool_results() -> None:
    agent = story.Story()
    first = agent.respond(request(user(story.OPENING[0])))
    ((name, args),) = first.tool_calls
    assert (name, args["priority"]) == ("notes_add", "high")
    done = agent.respond(request(user(story.OPENING[0]), *called(name, args, "c1", "added note #7")))
    assert done.tool_calls == [] and "added note #7" in done.text

    listing = "#2 [normal] buy oat milk (tags: todo)\n#5 [normal] book the dentist (tags: todo)"
    turn = [user("I did it: book the dentist. You can drop that note.")]
    assert agent.respond(request(*turn)).tool_calls == [("notes_list", {"tag": "todo"})]
    turn += called("notes_list", {"tag": "todo"}, "c2", listing)
    assert agent.respond(request(*turn)).tool_calls == [("notes_forget", {"id": 5})]


def test_with_the_keep_rule_in_its_system_prompt_the_agent_refuses_to_drop_a_note() -> None:
    agent = story.Story()
    turn = [user("I did it: book the dentist. You can drop that note.")]
    kept = agent.respond(request(*turn, system=f"chat... {story.KEEP_RULE}"))
    assert kept.tool_calls == [] and "I keep notes permanently" in kept.text
    assert agent.respond(request(*turn)).tool_calls == [("notes_list", {"tag": "todo"})]

    ((name, edit),) = agent.respond(request(user(story.OPENING[5]))).tool_calls
    assert (name, edit["oldString"], edit["newString"]) == (
        "evolve_prompt_edit",
        story.KEEP_OLD,
        story.KEEP_NEW,
    )
    done = agent.respond(
        request(user(story.OPENING[5]), *called(name, edit, "c1", "successfully edited chat.md"))
    )
    assert done.text == "Done: my chat prompt now says never to delete a note."


def test_the_heartbeat_makes_the_bad_edit_once_after_the_rejected_one_then_obeys_it() -> None:
    announced: list[bool] = []
    agent = story.Story(on_bad_edit=lambda: announced.append(True))
    beat = user("[heartbeat] Heartbeat. Nobody is waiting.")
    listing = "#1 [high] renew the passport (tags: admin)\n#2 [normal] buy oat milk (pinned)\n#3 [low] x"
    after_list = [beat, *called("notes_list", {}, "h1", listing)]

    assert agent.respond(request(beat)).tool_calls == [("notes_list", {})]
    assert agent.respond(request(*after_list)).tool_calls == []  # before scene 5: only upkeep

    rejected = called(
        "evolve_hook_edit", {}, "c9", "validation failed:\nFAIL discover: tool 'list' is missing"
    )
    agent.respond(request(user(story.OPENING[4]), *rejected))
    ((name, edit),) = agent.respond(request(*after_list)).tool_calls
    assert (name, edit["oldString"], edit["newString"]) == ("evolve_hook_edit", story.BAD_OLD, story.BAD_NEW)
    accepted = [*after_list, *called(name, edit, "h2", "successfully edited notes.py")]
    agent.respond(request(*accepted))
    agent.respond(request(*accepted))
    assert announced == [True]
    assert agent.respond(request(*after_list)).tool_calls == []  # never twice

    # With the bad rule in its system prompt, a heartbeat forgets the first note that is not pinned.
    obeying = agent.respond(request(*after_list, system=f"heartbeat... {story.BAD_RULE}"))
    assert obeying.tool_calls == [("notes_forget", {"id": 1})]


def test_the_user_turns_open_with_the_scenes_and_never_end() -> None:
    turns = story.Story().user_turns()
    opening = [next(turns) for _ in story.OPENING]
    assert opening == list(story.OPENING)
    later = [next(turns) for _ in range(60)]
    assert any(t.startswith("I did it: ") for t in later) and len(set(later)) > 10


def test_the_scripted_model_answers_with_its_responder_after_the_script() -> None:
    seen: list[list[tuple[str, str]]] = []

    def responder(req: Request) -> Reply:
        seen.append(req.tool_results())
        return Reply("from the responder", [("notes_list", {"tag": "a"})])

    model = MockLLM(responder, model="demo")
    try:
        model.script(Reply("scripted first"))
        messages = [user("hi"), *called("notes_add", {"text": "x"}, "c1", "added note #1")]
        texts, calls = [], []
        for _ in range(2):
            resp = httpx.post(
                f"{model.url}/chat/completions", json={"messages": messages}, timeout=10, verify=False
            )
            events = sse_events(resp.text)
            assert {e["model"] for e in events} == {"demo"}
            deltas = [e["choices"][0]["delta"] for e in events]
            texts.append("".join(d.get("content") or "" for d in deltas))
            calls += [c["function"] for d in deltas for c in d.get("tool_calls") or []]
        assert texts == ["scripted first", "from the responder"]
        assert calls == [{"name": "notes_list", "arguments": '{"tag": "a"}'}]
        assert seen == [[("notes_add", "added note #1")]]
        assert model.requests[0].last_user_text() == "hi"
    finally:
        model.close()
