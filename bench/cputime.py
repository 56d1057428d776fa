"""CPU time of what a benchmark's in-process engine starts: its reaped children (hooks started cold,
git) and its warm-start servers (still running), with the hooks they reaped."""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")


def children_cpu_ms() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1000


def servers_cpu_ms(engine: Any) -> float:
    """CPU of the engine's ready interpreters and of the hook processes they reaped."""
    total = 0.0
    for pid in engine.warm.zygote_pids() if engine.warm is not None else []:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) * 1000 / CLK_TCK  # utime stime cutime cstime
    return total
