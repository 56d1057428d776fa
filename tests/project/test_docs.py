"""The shell examples of the README and docs/ run, and print what the text says they print.

A shell example is a fenced block whose lines start with `$ ` (a command) followed by its output. The
examples of one page run in order, in one bash, as the page says they were run: in a sandbox with an
empty HOME, `evolve` on PATH (this checkout's virtual environment), `/tmp/` in the commands and outputs
standing for the sandbox's own temporary directory, and the hidden set-up the page names in a comment
`<!-- doctest: setup COMMANDS -->` in the line before a block (run before its first command, output
not checked). A code block marked `<!-- doctest: file PATH -->` is written to PATH when the page's
examples reach it (made executable in `hooks/` and `tests/`), so that the hooks and tests a page shows
are the ones its examples run.

The output printed (stdout and stderr together) must match the text, with these allowances:
- `…` in the text stands for any text (shortened output);
- what changes from run to run is compared as its kind: ids (`run_…`, `dsp_…`, `call_…`, `chg_…`,
  `ses_…`), git shas, times and dates, fractional numbers (durations, epoch times), ports and pids;
- the checkout's own path reads as `/home/me/evolve` and its Python as `python3`.

An example that cannot run here (an action in the console, or a workspace with a history) is marked
with `<!-- doctest: skip REASON -->` in the line before its block; tests/unit/project/test_docs.py keeps
that list short. tests/support/doc_examples.py finds the examples.

A model is at hand: `127.0.0.1:8080` in the commands (llama.cpp's default address) stands for the
scripted model (evolve_demo/scripted_model.py), an OpenAI-compatible server that streams, which the
test serves on a free port for the page; it says `OK` when asked to, and otherwise greets.

The README is run as a new user follows it: its getting-started path, in order, in the checkout, with
an empty HOME and a PATH without evolve (the page activates `.venv` before it first uses `evolve`), in
a shell that expands aliases as an interactive one does. It installs opencode into evolve's cache
(`$EVOLVE_CACHE_DIR` or `.cache/`, as `evolve opencode install` does) and runs it; what opencode would
fetch from the npm registry on its first start (its plugin dependencies) comes from evolve's copy, in
a hidden set-up. Without npm and without opencode installed, the README is skipped. What the path does
not run is in the README as plain `sh` blocks, and tested elsewhere: `./scripts/run.sh` opens the
console (tests/console/test_tmux.py runs it on a fresh HOME), `./scripts/test.sh` is the suite itself,
`evolve demo` (tests/e2e/test_demo.py) and `opencode`'s terminal interface.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evolve_demo import opencode_setup
from evolve_demo.scripted_model import MockLLM, Reply, Request
from tests.support.doc_examples import PAGES, Example, examples
from tests.support.engine_process import stop_workspace_engine
from tests.support.environment import REPO, bare_env, isolated_env

IN_THE_CHECKOUT = {REPO / "README.md"}
"""Pages whose examples run in the checkout, as a new user runs them, with no evolve on PATH."""
MODEL_ADDRESS = "127.0.0.1:8080"
CHECKOUT = "/home/me/evolve"
VARIABLE = [
    (re.compile(r"\b(run|dsp|call|chg|ses|tick)_[0-9A-Za-z]{12,}"), r"\1_<ID>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?( ?(Z|UTC|[+-]\d\d:\d\d))?"), "<TIME>"),
    (re.compile(r"\b\d\d:\d\d:\d\d\b"), "<TIME>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<DATE>"),
    (re.compile(r"\b\d+\.\d{2,}\b"), "<NUMBER>"),
    (re.compile(r"\b[0-9a-f]{7,40}\b"), "<SHA>"),
    (re.compile(r"(127\.0\.0\.1|localhost):\d{2,}"), r"\1:<PORT>"),
    (re.compile(r"\b(pid\"?:? ?)\d+"), r"\1<PID>"),
    (re.compile(r"(\"seq\": ?)\d+"), r"\1<SEQ>"),
]


def normal(text: str, sandbox: Path) -> str:
    text = text.replace(str(sandbox / "tmp"), "/tmp").replace(str(sandbox / "home"), "/home/me")
    # The virtual environment's Python by any of its names (python, python3, python3.11).
    python = re.escape(str(Path(sys.executable).parent)) + r"/python[0-9.]*\b"
    text = re.sub(python, f"{CHECKOUT}/.venv/bin/python3", text).replace(str(REPO), CHECKOUT)
    for pattern, kind in VARIABLE:
        text = pattern.sub(kind, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def matches(expected: str, actual: str) -> bool:
    pattern = re.escape(expected).replace("…", r"[\s\S]*?")
    return re.fullmatch(pattern, actual) is not None


def script(page: Path, runnable: list[Example], sandbox: Path, out: Path, model: str = MODEL_ADDRESS) -> str:
    """One bash script for the page: its set-up, then each command with its output to its own file
    and its exit status kept for the next command's `$?`; `model` is the address of the model server
    that MODEL_ADDRESS stands for."""
    here = str(sandbox / "tmp")
    lines = ["shopt -s expand_aliases", f"cd {REPO if page in IN_THE_CHECKOUT else here}"]
    n = 0
    for example in runnable:
        if example.file:
            path = example.file.replace("/tmp", here)
            lines.append(
                f"mkdir -p $(dirname {path}) && cat > {path} <<'__DOCTEST_EOF__'\n{example.content}__DOCTEST_EOF__"
            )
            if re.search(r"/(hooks|tests)/[^/]+$", path):
                lines.append(f"chmod +x {path}")
        if example.setup:
            lines.append(f"{{ {example.setup.replace('/tmp', here)} ; }} > /dev/null 2>&1")
        for command, _ in example.commands:
            background = command.rstrip().endswith("&")
            body = command.rstrip().removesuffix("&").replace("/tmp", here).replace(MODEL_ADDRESS, model)
            lines.append(f"{{ {body} ; }} > {out}/{n} 2>&1" + (" &" if background else ""))
            lines.append(f"__rc=$?; echo $__rc > {out}/{n}.rc")
            if background:  # wait for what it prints first, as the text shows it
                lines.append(f"for _ in $(seq 300); do [ -s {out}/{n} ] && break; sleep 0.1; done")
            lines.append("(exit $__rc)")
            n += 1
    return "\n".join(lines) + "\n"


def answer(request: Request) -> Reply:
    """The scripted model of the pages: `OK` when asked for it (evolve doctor's question), else a greeting."""
    return Reply(
        text="OK" if "single word OK" in request.last_user_text() else "Hello! How can I help you today?"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_shell_examples_print_what_the_text_says(page: Path, tmp_path: Path) -> None:
    found = examples(page)
    runnable = [e for e in found if e.skip is None]
    if not runnable:
        pytest.skip("no runnable shell example")
    in_checkout = page in IN_THE_CHECKOUT
    if in_checkout:
        if not (REPO / ".venv" / "bin" / "activate").is_file():
            pytest.skip("the README activates the checkout's .venv, which this run does not have")
        if shutil.which("npm") is None and opencode_setup.installed_binary() is None:
            pytest.skip("the README installs opencode with npm (apt-get install npm)")
    sandbox = tmp_path / "sandbox"
    (sandbox / "tmp").mkdir(parents=True)
    (sandbox / "home").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (sandbox / "home" / "empty.gitconfig").touch()
    system_path = ["/usr/local/bin", "/usr/bin", "/bin"]
    env = bare_env(
        HOME=str(sandbox / "home"),
        PATH=os.pathsep.join(
            system_path if in_checkout else [str(Path(sys.executable).parent), *system_path]
        ),
        GIT_CONFIG_GLOBAL=str(sandbox / "home" / "empty.gitconfig"),
        GIT_CONFIG_NOSYSTEM="1",
        PYTHONUNBUFFERED="1",
        TZ="UTC",
        LANG="C.UTF-8",
        TMPDIR=str(sandbox / "tmp"),
        # Where evolve keeps opencode, as the developer running the tests has set it.
        **{k: os.environ[k] for k in (opencode_setup.CACHE_VARIABLE,) if os.environ.get(k)},
    )
    model = MockLLM(answer, model="my-model")
    try:
        ran = subprocess.run(
            ["bash", "-c", script(page, runnable, sandbox, out, f"127.0.0.1:{model.port}")],
            cwd=sandbox / "tmp",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=600,
        )
    finally:  # an engine an example (or opencode's plugin) started must not outlive the test
        model.close()
        for announced in [
            *sandbox.glob("*/*/state/engine.json"),
            *sandbox.glob("home/*/*/state/engine.json"),
        ]:
            stop_workspace_engine(announced.parent.parent, isolated_env(tmp_path / "stopper"))

    wrong = []
    n = 0
    for example in runnable:
        for command, expected in example.commands:
            actual = (out / str(n)).read_text(errors="replace") if (out / str(n)).exists() else "(not run)"
            want, got = normal(expected, sandbox), normal(actual, sandbox)
            if not matches(want, got):
                wrong.append(
                    f"{page.name}:{example.line}: $ {command}\n--- the text says:\n{want}\n--- it printed:\n{got}"
                )
            n += 1
    assert not wrong, "\n\n".join(wrong) + f"\n--- bash's own stderr:\n{ran.stderr.decode(errors='replace')}"
