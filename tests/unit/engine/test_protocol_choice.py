"""Which protocol a hook is treated as (engine.hooks.protocols.choose_protocol) and the evidence its
file gives without being run (engine.hooks.hooktext): the rules of docs/hooks.md, "Two protocols", in
their order, on the fixture hooks' own text and on small texts."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import pytest

from engine.hooks.discovery import HookFile, registration_from
from engine.hooks.hooktext import file_stages, named_stages
from engine.hooks.protocols import choose_protocol, classify, protocol_notice, settle_line
from engine.protocol.stages import HCP_ONLY, LEGACY_ONLY, HookProtocol
from tests.support.environment import REPO

FIXTURES = REPO / "tests" / "fixtures"
ONLY = HCP_ONLY | LEGACY_ONLY
HCP, OE = HookProtocol.HCP, HookProtocol.OPENCODE_EVOLVE


def named(*names: str) -> Callable[[], Collection[str]]:
    return lambda: frozenset(names)


def unread() -> Collection[str]:
    raise AssertionError("the file was read although an earlier rule decided")


# ---- the text of a hook ------------------------------------------------------------------------------


def test_stage_names_count_as_string_literals_and_shell_case_labels_not_in_prose() -> None:
    python = 'if stage == "before_tool":\n    pass\nHANDLERS = {\'after_tool\': f, "idle_time": g}\n'
    assert named_stages(python, ONLY) == {"before_tool", "after_tool"}
    shell = 'case "$1" in\n  discover) echo x ;;\n  before_stop | "on_error")\n    ;;\n  idle) ;;\nesac\n'
    assert named_stages(shell, ONLY) == {"before_stop", "on_error", "idle"}
    javascript = "switch (stage) {\n  case `tool_before`: break;\n}\n"
    assert named_stages(javascript, ONLY) == {"tool_before"}
    prose = "# when the session is idle, before_tool has run (see after_turn)\nprint(idle)\n"
    assert named_stages(prose, ONLY) == frozenset()
    assert named_stages('"before_tool_x" "xbefore_tool"', ONLY) == frozenset()


def test_the_fixture_hooks_name_their_own_protocols_stages(tmp_path: Path) -> None:
    assert file_stages(FIXTURES / "hcp_hello.py", ONLY) == {
        "before_tool",
        "after_tool",
        "after_turn",
        "before_stop",
    }
    assert file_stages(FIXTURES / "persona_strict.py", ONLY) == {"idle", "tool_before", "tool_after"}
    assert file_stages(FIXTURES / "legacy_strict.py", ONLY) == {"idle", "tool_before", "tool_after"}
    assert file_stages(tmp_path / "missing.py", ONLY) == frozenset()
    binary = tmp_path / "hook.bin"
    binary.write_bytes(b"\x7fELF\x00\xff\xfe before_tool \x00")
    assert file_stages(binary, ONLY) == frozenset()


# ---- the rules, in their order --------------------------------------------------------------------------


def test_the_config_decides_first_then_the_protocol_key_then_the_declared_stages() -> None:
    configured = {"guard.py": "hcp"}
    first = choose_protocol("guard.py", {"idle"}, "opencode-evolve", configured, unread)
    assert first == choose_protocol("guard.py", None, None, configured, unread)
    assert (first.protocol, first.reason, first.settle) == (
        HCP,
        "hook_protocols in the config says hcp",
        None,
    )

    said = choose_protocol("guard.py", {"before_tool"}, "opencode-evolve", {}, unread)
    assert (said.protocol, said.reason) == (OE, 'its discover answer says "protocol": "opencode-evolve"')

    declared = choose_protocol("guard.py", {"mutate_request", "before_tool", "on_error"}, None, {}, unread)
    assert (declared.protocol, declared.reason) == (
        HCP,
        "it declares before_tool, on_error (hcp stage names)",
    )
    legacy = choose_protocol("guard.py", {"idle", "mutate_request"}, None, {}, unread)
    assert (legacy.protocol, legacy.reason) == (OE, "it declares idle (opencode-evolve stage names)")
    assert declared.settle is None and legacy.settle is None


def test_declared_shared_names_alone_are_ambiguous_and_the_file_is_not_read() -> None:
    choice = choose_protocol("guard.py", {"mutate_request", "execute_tool"}, None, {}, unread)
    assert choice.protocol is OE
    assert "names both protocols share" in choice.reason and "ambiguous" in choice.reason
    assert choice.settle == settle_line("guard.py")
    assert choice.settle == (
        'add "hook_protocols": {"guard.py": "hcp"} to config/evolve.jsonc '
        '(or "opencode-evolve" to keep this choice)'
    )


def test_without_declared_stages_the_names_its_file_names_decide() -> None:
    hcp = choose_protocol("hello.py", None, None, {}, named("before_tool", "after_tool"))
    assert (hcp.protocol, hcp.settle) == (HCP, None)
    assert hcp.reason == "it declares no stages and its file names after_tool, before_tool (hcp stage names)"
    oe = choose_protocol("persona.py", None, None, {}, named("idle"))
    assert (oe.protocol, oe.settle) == (OE, None)
    assert oe.reason == "it declares no stages and its file names idle (opencode-evolve stage names)"


@pytest.mark.parametrize(
    ("names", "why"),
    [
        ((), "its file names no stage only one protocol has"),
        (
            ("before_stop", "idle"),
            "its file names both hcp stages (before_stop) and opencode-evolve ones (idle)",
        ),
    ],
)
def test_names_of_both_protocols_or_of_neither_are_ambiguous_and_keep_opencode_evolve(
    names: tuple[str, ...], why: str
) -> None:
    choice = choose_protocol("wrapper.sh", None, None, {}, named(*names))
    assert choice.protocol is OE
    assert choice.reason.startswith("it declares no stages and ") and why in choice.reason
    assert "ambiguous" in choice.reason
    assert choice.settle == settle_line("wrapper.sh")


def test_a_registration_classified_from_the_file_and_its_notice(tmp_path: Path) -> None:
    hello = tmp_path / "hello.py"
    hello.write_text((FIXTURES / "hcp_hello.py").read_text(encoding="utf-8"), encoding="utf-8")
    answer = {"name": "hello", "test": "hello_test.py", "tools": []}
    reg = classify(registration_from(HookFile("hello.py", hello), answer, None), {})
    assert reg.protocol is HCP and reg.protocol_settle is None and protocol_notice(reg) is None
    assert "its file names after_tool, after_turn, before_stop, before_tool" in reg.protocol_reason

    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text('#!/bin/sh\nexec python3 "$(dirname "$0")/../lib/real.py" "$@"\n', encoding="utf-8")
    reg = classify(registration_from(HookFile("wrapper.sh", wrapper), {"name": "w"}, None), {})
    assert reg.protocol is OE
    assert protocol_notice(reg) == (
        f"hooks/wrapper.sh: treated as opencode-evolve: {reg.protocol_reason}; {settle_line('wrapper.sh')}"
    )
    settled = classify(
        registration_from(HookFile("wrapper.sh", wrapper), {"name": "w"}, None), {"wrapper.sh": "hcp"}
    )
    assert settled.protocol is HCP and protocol_notice(settled) is None
