"""Every test's temporary files live in one directory of this run (`evolve-tests-*` in the system temp
directory), removed when the run passes: a green run leaves nothing behind (pytest itself would keep
the last three runs' files, a few hundred MB with the end-to-end tests). A failed run keeps it and
says where. `--basetemp=DIR` puts them in DIR and keeps them.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest

_OWN_BASETEMP = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        base = tempfile.mkdtemp(prefix="evolve-tests-")
        config.option.basetemp = base
        config.stash[_OWN_BASETEMP] = base


def pytest_unconfigure(config: pytest.Config) -> None:
    base = config.stash.get(_OWN_BASETEMP, None)
    if base is None:
        return
    if config.stash.get(_FAILED, False):
        print(f"\nthe temporary files of this run are kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)


_FAILED = pytest.StashKey[bool]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_FAILED] = exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
