"""engine.protocol.records: a record's dict is what dataclasses.asdict makes of it, and a snapshot."""

from __future__ import annotations

from dataclasses import asdict

from engine.protocol.records import Delivered, HookRun, PendingChange, StageResult


def history(n: int) -> list[dict[str, object]]:
    return [
        {"role": "user", "parts": [{"type": "text", "text": f"m{i}", "n": i, "x": 1.5, "b": True, "z": None}]}
        for i in range(n)
    ]


def test_to_dict_is_asdict() -> None:
    run = HookRun(
        id="run_1",
        stage="chat",
        hook="h.py",
        started_at=1.0,
        input={"hook": "chat", "history": history(3), "pair": (1, [2, 3]), 7: "int key"},
        logs=[{"level": "info"}, "x", [Delivered("a dataclass inside", 1.0)]],
        stdout_lines=["{}"],
        result={"system": ["a"], "nested": {"k": [1, {"deep": None}]}},
    )
    dispatch = StageResult(id="dsp_1", stage="chat", started_at=2.0, context={"c": [1]}, runs=["run_1"])
    pending = PendingChange(
        id="chg_1",
        file="hooks/h.py",
        base_sha256="0" * 64,
        message="m",
        tool="evolve_hook_write",
        session=None,
        call_id=None,
        hook="h.py",
        created_at=1.0,
        content="x",
    )
    for record in (run, dispatch, pending):
        assert record.to_dict() == asdict(record)  # type: ignore[call-overload]
    assert pending.summary().content is None and pending.summary().file == "hooks/h.py"


def test_to_dict_is_a_snapshot_the_record_can_change_after() -> None:
    run = HookRun(id="run_1", stage="chat", hook="h.py", started_at=1.0, input={"history": history(2)})
    data = run.to_dict()
    run.input["history"][0]["parts"][0]["text"] = "changed"
    run.input["history"].append({"role": "assistant"})
    assert data["input"]["history"] == history(2)
