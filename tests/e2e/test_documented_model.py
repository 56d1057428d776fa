"""The documented configuration of a real model works as written: the provider docs/opencode.md shows
(what `evolve opencode model` writes, and how to write it by hand: an OpenAI-compatible provider whose
key is `{env:MYLLM_API_KEY}`), taken from the page itself, with only `baseURL` pointed at the scripted
model, makes real opencode send its chat requests there with the key from the environment as the
bearer token."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

from tests.e2e.conftest import Project
from tests.support.environment import REPO


def documented_provider_config() -> dict[str, Any]:
    page = (REPO / "docs" / "opencode.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", page, re.S)
    configs = [json.loads(b) for b in blocks if '"{env:MYLLM_API_KEY}"' in b]
    assert len(configs) == 1, "docs/opencode.md's provider example is gone or doubled"
    config: dict[str, Any] = configs[0]
    return config


def test_the_documented_provider_reaches_the_model_with_the_key_from_the_environment(
    make_project: Callable[..., Project],
) -> None:
    config = documented_provider_config()
    assert config["model"] == "llm/my-model"
    provider = config["provider"]["llm"]
    assert provider["options"]["baseURL"] == "http://127.0.0.1:8080/v1"
    project = make_project({**config, "small_model": config["model"]})
    opencode_json = json.loads((project.dir / "opencode.json").read_text())
    opencode_json["provider"]["llm"]["options"]["baseURL"] = project.mock.url
    (project.dir / "opencode.json").write_text(json.dumps(opencode_json, indent=2))

    proc = subprocess.run(
        project.run_argv(("say", "hello")),
        cwd=project.dir,
        env={**project.env, "MYLLM_API_KEY": "sk-from-the-environment"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    main = project.mock.main_requests()
    assert main, "opencode sent no chat request to the configured endpoint"
    assert {r.headers.get("authorization") for r in main} == {"Bearer sk-from-the-environment"}
