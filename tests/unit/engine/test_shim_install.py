"""engine.shim_install: where the plugin file is found, and the plugin entry it writes into a project's
opencode.json. (How an installed wheel finds it: tests/project/test_packaging.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.opencode.shim_install import install, shim_file
from tests.support.environment import REPO


@pytest.fixture(autouse=True)
def no_global_opencode_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_shim_file_is_the_plugin_of_this_evolve() -> None:
    assert shim_file().read_bytes() == (REPO / "shim" / "evolve.js").read_bytes()


def test_install_replaces_an_entry_of_an_installed_evolve_instead_of_adding_a_second(tmp_path: Path) -> None:
    project, workspace = tmp_path / "project", tmp_path / "ws"
    project.mkdir()
    workspace.mkdir()
    installed = "file:///opt/venv/lib/python3.11/site-packages/evolve_shim/evolve.js"
    other = "file:///plugins/other.js"
    config = {"plugin": [other, [installed, {"workspace": "/old"}]]}
    (project / "opencode.json").write_text(json.dumps(config))

    result = install(project, workspace)

    plugins = json.loads((project / "opencode.json").read_text())["plugin"]
    assert plugins == [other, result["plugin"]]
    assert result["plugin"][0] == shim_file().as_uri()
    assert install(project, workspace)["changed"] is False
