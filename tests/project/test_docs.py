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

An example that cannot run here (it needs opencode, a model, or an action in the console) is marked with
`<!-- doctest: skip REASON -->` in the line before its block; tests/unit/project/test_docs.py keeps
that list short. tests/support/doc_examples.py finds the examples.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_examples import PAGES, Example, examples
from tests.support.environment import REPO, bare_env

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


def script(page: Path, runnable: list[Example], sandbox: Path, out: Path) -> str:
    """One bash script for the page: its set-up, then each command with its output to its own file
    and its exit status kept for the next command's `$?`."""
    here = str(sandbox / "tmp")
    lines = [f"cd {here}"]
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
            body = command.rstrip().removesuffix("&").replace("/tmp", here)
            lines.append(f"{{ {body} ; }} > {out}/{n} 2>&1" + (" &" if background else ""))
            lines.append(f"__rc=$?; echo $__rc > {out}/{n}.rc")
            if background:  # wait for what it prints first, as the text shows it
                lines.append(f"for _ in $(seq 300); do [ -s {out}/{n} ] && break; sleep 0.1; done")
            lines.append("(exit $__rc)")
            n += 1
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_shell_examples_print_what_the_text_says(page: Path, tmp_path: Path) -> None:
    found = examples(page)
    runnable = [e for e in found if e.skip is None]
    if not runnable:
        pytest.skip("no runnable shell example")
    sandbox = tmp_path / "sandbox"
    (sandbox / "tmp").mkdir(parents=True)
    (sandbox / "home").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (sandbox / "home" / "empty.gitconfig").touch()
    env = bare_env(
        HOME=str(sandbox / "home"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        GIT_CONFIG_GLOBAL=str(sandbox / "home" / "empty.gitconfig"),
        GIT_CONFIG_NOSYSTEM="1",
        PYTHONUNBUFFERED="1",
        TZ="UTC",
        LANG="C.UTF-8",
        TMPDIR=str(sandbox / "tmp"),
    )
    try:
        ran = subprocess.run(
            ["bash", "-c", script(page, runnable, sandbox, out)],
            cwd=sandbox / "tmp",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=600,
        )
    finally:  # an engine an example started in the background must not outlive the test
        for announced in (sandbox / "tmp").glob("*/state/engine.json"):
            subprocess.run(
                ["evolve", "stop", "--workspace", str(announced.parent.parent)], env=env, capture_output=True
            )

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
