"""Which change most likely made a hook fail: what the hook depends on, and the newest commit that
changed any of it before the first failure (and after the hook last ran fine at that stage).

What a hook depends on is what can be known without running it: its own file; the files of the
workspace its error names (a traceback's frames, a path in the message: a module it imports, the data
file it could not read); the prompts it is given at every stage; the configuration. Its test is left
out: a test decides what gets installed, it does not change what the installed hook does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from engine.changes.gitreads import GitReads
from engine.changes.history import origin_of
from engine.changes.provenance import PROVENANCE_REF, decode
from engine.protocol.records import Provenance, Suspect

PROMPTS: Final = "prompts/"
CONFIG: Final = "config/evolve.jsonc"
NAMED_LIMIT: Final = 10  # files an error names, at most
SKIPPED: Final = (".git/", "state/")
_PATH: Final = re.compile(r"[\w.~/-]*[\w-]/[\w./-]*\w")
LOOKED_AT: Final = 50  # commits that touch what the hook depends on, newest first


@dataclass(frozen=True)
class Dependency:
    path: str  # a file of the workspace, or a directory ending in "/"
    why: str  # what it is to the hook, e.g. "the hook itself"


def depends_on(hook: str, stderr: str, root: Path) -> list[Dependency]:
    """What `hooks/<hook>` depends on, as far as its own file and the error it printed tell."""
    own = f"hooks/{hook}"
    found = [Dependency(own, "the hook itself")]
    seen = {own, CONFIG}
    for named in named_files(stderr, root):
        if named not in seen and not named.startswith(PROMPTS):
            seen.add(named)
            found.append(Dependency(named, "a file its error names"))
    found.append(Dependency(PROMPTS, "the prompts it is given"))
    found.append(Dependency(CONFIG, "the engine's configuration"))
    return found


def named_files(text: str, root: Path) -> list[str]:
    """The files of the workspace that `text` names, absolute or relative to the root, in order."""
    bases = {str(root) + "/", str(root.resolve()) + "/"}
    found: list[str] = []
    for candidate in _PATH.findall(text):
        rel = candidate
        for base in bases:
            if candidate.startswith(base):
                rel = candidate[len(base) :]
                break
        else:
            if candidate.startswith("/"):
                continue  # a file outside the workspace (the standard library, /tmp)
        rel = rel.removeprefix("./")
        if rel in found or rel.startswith(SKIPPED) or ".." in rel.split("/"):
            continue
        try:
            if not (root / rel).is_file():
                continue
        except OSError:
            continue
        found.append(rel)
        if len(found) >= NAMED_LIMIT:
            break
    return found


def ago(seconds: float) -> str:
    """A span of time as people say it: `40 s`, `1 min`, `3 h`, `2 days`."""
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return "less than a second"
    if seconds < 60:
        return f"{round(seconds)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 36 * 3600:
        return f"{round(seconds / 3600)} h"
    return f"{round(seconds / 86400)} days"


def find_suspect(
    git: GitReads,
    depends: list[Dependency],
    first_at: float,
    last_ok_at: float | None,
    title: Callable[[str], str | None],
    committed_at: Mapping[str, float] | None = None,
) -> Suspect | None:
    """The newest commit before `first_at` (after `last_ok_at`, when the hook ran fine before) that
    changed something of `depends`; None when no such commit is known. `committed_at`: when commits
    were made, to the fraction of a second, where the engine saw them made (git keeps whole seconds)."""
    paths = [d.path for d in depends]
    commits = git.log(LOOKED_AT, paths)
    if not commits:
        return None
    notes: dict[str, str] | None = None  # read only when a commit is a candidate (one git call)
    for commit in commits:
        sha = str(commit["sha"])
        if (
            last_ok_at is not None
            and float(str(commit["time"])) + 1.0 < last_ok_at
            and sha not in (committed_at or {})
        ):
            return None  # made before the hook last ran fine (the common case of a hook that flaps)
        if notes is None:
            notes = git.notes(PROVENANCE_REF, 1000)
        found = decode(notes[sha]) if sha in notes else None
        precise = (committed_at or {}).get(sha) or (found.at if found is not None and found.at else None)
        at = precise or float(str(commit["time"]))
        # git keeps whole seconds: a commit of second T was made within [T, T + 1)
        latest = at if precise else at + 1.0
        if at > first_at:
            continue  # after the first failure: it cannot have started it
        if last_ok_at is not None and latest < last_ok_at:
            return None  # installed while the hook still ran fine: no change explains the failure
        trailers = commit["trailers"]
        assert isinstance(trailers, dict)
        if origin_of(trailers) == "initial":
            return None  # the workspace as it was made: no change of anyone's
        files = [str(f) for f in commit["files"]]  # type: ignore[attr-defined]
        message = str(commit["message"])
        return Suspect(
            sha=sha,
            subject=message.splitlines()[0] if message else "",
            origin=origin_of(trailers),
            at=at,
            before_s=max(first_at - at, 0.0),
            files=files,
            because=_because(files, depends),
            session=_session(found, trailers),
            session_title=_title(found, trailers, title),
            pending=trailers.get("pending"),
        )
    return None


def _because(files: list[str], depends: list[Dependency]) -> str:
    reasons = []
    for dep in depends:
        touched = [f for f in files if f == dep.path or (dep.path.endswith("/") and f.startswith(dep.path))]
        if touched:
            reasons.append(f"{', '.join(touched)}, {dep.why}")
    return "it changed " + "; ".join(reasons)


def _session(found: Provenance | None, trailers: dict[str, str]) -> str | None:
    if found is not None and found.session:
        return found.session
    session = trailers.get("session")
    return session.split()[0] if session else None


def _title(
    found: Provenance | None, trailers: dict[str, str], title: Callable[[str], str | None]
) -> str | None:
    if found is not None and found.session_title:
        return found.session_title
    session = _session(found, trailers)
    return title(session) if session else None


def cause_text(suspect: Suspect | None, stage: str, last_ok_at: float | None, first_at: float) -> str:
    """The cause in words: `since 7a46fd1, agent, 1 min before the first failure, session "Errands"`,
    or why no change explains it."""
    if suspect is None:
        if last_ok_at is not None:
            return (
                f"no change explains it: nothing it depends on (its file, the files its error names, "
                f"the prompts, the config) changed since it last ran fine at {stage}, "
                f"{ago(first_at - last_ok_at)} before the first failure"
            )
        return "no change explains it: no commit changed what it depends on before the first failure"
    text = f"since {suspect.sha[:7]}, {suspect.origin}, {ago(suspect.before_s)} before the first failure"
    if suspect.session_title:
        text += f', session "{suspect.session_title}"'
    elif suspect.session:
        text += f", session {suspect.session}"
    return text
