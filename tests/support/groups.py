"""The tests marked `xdist_group(NAME)` run in one worker (tests/README.md, `--dist loadgroup`).

pytest-xdist does it by adding `@NAME` to those tests' node ids in each worker, and its scheduler hands
out the tests of one id suffix together. pytest-xdist 3.8 writes the new id into `item._nodeid`, which
pytest 9.2 no longer reads (a node keeps its id as a structured `_id`): the groups were lost without a
word, and a module's costly fixture was built again in every worker that got one of its tests (the
wheel and its fresh venv, a minute each, three times in one run). Here the id is set where this pytest
reads it; with a pytest that still reads `_nodeid`, pytest-xdist's own suffix is there and nothing is
done.
"""

from __future__ import annotations

import pytest

try:
    from _pytest.nodeid import NodeId
except ImportError:  # a pytest before 9.2 reads the id pytest-xdist sets
    NodeId = None  # type: ignore[assignment,misc]


def group_suffix(item: pytest.Item) -> str:
    """`@NAME` for a test marked `xdist_group(NAME)` (names joined by `_`, as pytest-xdist does), else ``."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "@" + "_".join(sorted(names)) if names else ""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker run with `--dist loadgroup`: give each grouped test its group's suffix."""
    if NodeId is None or not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        suffix = group_suffix(item)
        if suffix and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = NodeId.parse(item.nodeid + suffix)
