_MAIN = dict(globals())  # first: `__main__` exactly as the interpreter set it up for a script
"""The warm start's server: runs inside a hook's own Python interpreter, never imported by the engine.

engine/warm/starts.py writes this file under the hook's `#!` line and starts it the way the kernel
starts the hook (same interpreter, flags, environment and cwd), so everything the interpreter does
at start-up is done once, exactly as for the hook. It then imports PRELOAD and forks one child per
hook run. The child becomes the hook: its own process group, the run's pipes as fds 0-2, the run's
cwd, argv, `sys.path[0]` and a new `__main__`; then it runs the hook's code at this module's level
(one frame below the hook's) and ends as the interpreter would. docs/hooks.md ("Warm start") lists
what a hook can still tell apart from a cold start.

Control socket (AF_UNIX, SOCK_SEQPACKET; fd number in argv[1]); one message per packet, a type
byte then fields separated by NUL bytes:

  engine -> here   R run, hook path, stage, cwd, sys.path[0] or "", comm or "", #! line
                   + fds 0, 1, 2
  here -> engine   H version, pid, refusal or "", sys.path[0], comm, identity, files to watch...
                   S run, pid          sent by the child, before any code of the hook runs
                   X run, wait status, CPU microseconds of the child
                   F run, reason       no hook code ran (fork or set-up failed)

Written for every Python from 3.10 on: no newer syntax, and no import at its top but what the
interpreter has loaded anyway (what else it imports is taken out of the child's `sys.modules`).

Over 500 lines: one file on purpose, it is the script the hook's interpreter
runs, written out under the hook's `#!` line, and it can import nothing of its own. That Python may
not see the engine at all (another version, another venv), and every module it imported would be
one more in each child's `sys.modules` that a cold start of the hook does not have.
"""

import sys

_BASELINE = set(sys.modules)  # the modules every script of this interpreter starts with
_CACHE_BASELINE = set(sys.path_importer_cache)

import posix  # loaded at start-up by every interpreter: it is `os`

_TAG = b"EVOLVE_RUN"  # engine/hooks/groups.py: RUN_TAG; the server starts with a placeholder


def _identity() -> bytes:
    """What decides how this interpreter runs a script: compared with a fresh start of the same `#!`
    line to notice that it now resolves to another interpreter (a version manager's shim). The
    run tag's placeholder is the server's own, not the hook's environment."""
    env = sorted((k, v) for k, v in posix.environ.items() if k != _TAG)
    state = (sys.executable, sys.version, sys.prefix, sys.exec_prefix, sys.path[1:], str(sys.flags), env)
    return repr(state).encode("utf-8", "backslashreplace")


if sys.argv[1:] == ["probe"]:
    posix.write(1, _identity())
    posix._exit(0)

# Common standard-library modules, imported here once instead of in every run. A child whose hook
# directory holds a module of one of these names (or of a module they import) gets none of them.
# Not subprocess: it brings threading, whose clean-up after fork costs every run ~0.3 ms.
PRELOAD = (
    "json",
    "re",
    "datetime",
    "pathlib",
    "tempfile",
    "contextlib",
    "fcntl",
    "typing",
    "collections.abc",
    "shutil",
    "textwrap",
    "hashlib",
    "base64",
)
_IDENTITY = _identity()
for _name in PRELOAD:
    try:
        __import__(_name)
    except Exception:  # not in this Python: its hooks import it themselves, or fail there
        pass
_PRELOADED = set(sys.modules) - _BASELINE

import _imp
import _signal  # type: ignore[import-not-found]
import _socket
import _warnings
import atexit
import gc
import select
from _frozen_importlib_external import FileFinder, _get_supported_file_loaders  # type: ignore[attr-defined]

_TOOLS = set(sys.modules) - _BASELINE - _PRELOADED  # the server's own modules: never the hook's
_PRELOADED_TOP = sorted(
    {n.partition(".")[0] for n in _PRELOADED}
    - set(sys.builtin_module_names)
    - {n for n in {m.partition(".")[0] for m in _PRELOADED} if _imp.is_frozen(n)}
)
_PRELOADED_TOP_SET = frozenset(_PRELOADED_TOP)
_SUFFIXES = tuple(sorted({*_imp.extension_suffixes(), ".py", ".pyc"}, key=len, reverse=True))
_CACHE_EXTRA = [k for k in sys.path_importer_cache if k not in _CACHE_BASELINE]
# The interpreter asks the import system whether the script is a zip or a directory to run, which
# leaves the script's path in sys.path_importer_cache: this file's path, the hook's in the child.
_SCRIPT_KEY = sys.argv[0] if sys.argv[0] in _CACHE_BASELINE else None
_SCRIPT_LAST = False  # whether it is the cache's last entry (as it is after a normal start-up)
_KEPT = frozenset(_BASELINE | _PRELOADED)  # the child's modules before the hook's own
_MODULES = sys.modules  # the interpreter's, even if a hook binds sys.modules to another dict
_KEPT_IDS = frozenset(id(m) for m in _MODULES.values())
_FS = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
_CODE: "dict[bytes, tuple[bytes, object]]" = {}  # hook path -> (source, its code), compiled here
_CODE_LIMIT = 64
_GRACE_S = 1.0  # between SIGTERM and SIGKILL to the runs' process groups when the engine is gone


def _text(value: bytes) -> str:
    return value.decode(*_FS)


def _refusal() -> str:
    """Why this interpreter cannot run hooks warm ("" when it can): flags whose effect is more than
    how a script runs, or a kernel or Python without what the server needs."""
    if sys.version_info < (3, 10):
        return f"Python {sys.version_info[0]}.{sys.version_info[1]} (warm starts need 3.10 or later)"
    flags = sys.flags
    if flags.inspect or flags.interactive:
        return "interactive mode (-i or PYTHONINSPECT)"
    if flags.verbose:
        return "verbose imports (-v or PYTHONVERBOSE)"
    if "importtime" in sys._xoptions or (
        not flags.ignore_environment and posix.environ.get(b"PYTHONPROFILEIMPORTTIME")
    ):
        return "-X importtime"
    if "x" in _short_options(_ARGV_PREFIX[1:]):
        return "-x (skip the first line)"
    try:
        posix.close(posix.pidfd_open(posix.getpid()))
    except (AttributeError, OSError) as exc:
        return f"no pidfd_open ({exc})"
    return ""


def _short_options(options: "list[str]") -> "set[str]":
    """The single-letter options in the interpreter's command line (the value of -W and -X skipped)."""
    found: set[str] = set()
    takes_value = False
    for option in options:
        if takes_value or not option.startswith("-") or option.startswith("--"):
            takes_value = False
            continue
        for position, letter in enumerate(option[1:], start=1):
            found.add(letter)
            if letter in "WX":
                takes_value = position == len(option) - 1
                break
    return found


def _argv_prefix() -> list[str]:
    """The interpreter's command line before the script: the hook's is the same plus its own path."""
    orig = list(getattr(sys, "orig_argv", []))
    if len(orig) >= len(sys.argv) and orig[len(orig) - len(sys.argv) :] == sys.argv:
        return orig[: len(orig) - len(sys.argv)]
    return orig[:1]


def _comm() -> bytes:
    try:
        fd = posix.open("/proc/self/comm", posix.O_RDONLY)
        try:
            return posix.read(fd, 64).rstrip(b"\n")
        finally:
            posix.close(fd)
    except OSError:
        return b""


def _watch() -> list[str]:
    """Files whose change makes this server stale: the interpreter, what it loaded at start-up and
    PRELOAD, the directories of its sys.path (a new .pth or package) and the .pth files in them."""
    found = [sys.executable, sys.prefix + "/pyvenv.cfg"]
    for name in _BASELINE | _PRELOADED:
        where = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(where, str):
            found.append(where)
    for entry in sys.path[1:]:
        if not isinstance(entry, str) or not entry:
            continue
        found.append(entry)
        try:
            found.extend(entry + "/" + n for n in posix.listdir(entry) if n.endswith(".pth"))
        except OSError:
            pass
    return list(dict.fromkeys(found))


def _send(sock: "_socket.socket", kind: bytes, *fields: "bytes | str | int") -> None:
    parts = [f if isinstance(f, bytes) else str(f).encode("utf-8", "surrogateescape") for f in fields]
    sock.send(kind + b"\0".join(parts))


def _received_fds(ancillary: "list[tuple[int, int, bytes]]") -> "list[int]":
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(
                int.from_bytes(data[i : i + 4], sys.byteorder, signed=True) for i in range(0, usable, 4)
            )
    return fds


def _close(fds: "list[int]") -> None:
    for fd in fds:
        try:
            posix.close(fd)
        except OSError:
            pass


def _stop_runs(children: "dict[int, tuple[int, bytes]]") -> None:
    """The engine is gone: nobody supervises the runs any more, so end them as it would have (SIGTERM
    to each process group, SIGKILL after a grace period), reap them, and exit."""
    for pid, _run in children.values():
        try:
            posix.killpg(pid, _signal.SIGTERM)
        except OSError:
            pass
    poller = select.poll()
    for pidfd in children:
        poller.register(pidfd, select.POLLIN)
    left = dict(children)
    import time  # the child never gets here

    deadline = time.monotonic() + _GRACE_S
    while left and time.monotonic() < deadline:
        for pidfd, _events in poller.poll(max(int((deadline - time.monotonic()) * 1000), 1)):
            poller.unregister(pidfd)
            posix.waitpid(left.pop(pidfd)[0], 0)
    for pid, _run in left.values():
        try:
            posix.killpg(pid, _signal.SIGKILL)
        except OSError:
            pass
        posix.waitpid(pid, 0)
    posix._exit(0)


class _NotThisHook(Exception):
    """The file cannot be read, or is no longer the one the engine decided to start warm."""


def _compiled(path: bytes, line: bytes) -> object:
    """The hook's code, read now and compiled here once per content, so that no run compiles it
    again; or its source, for the child to compile where the hook's own stderr shows what the
    compiler says (an error, a warning). Raises _NotThisHook when the file cannot be read or its
    `#!` line is no longer `line` (it was rewritten meanwhile): a cold start then runs what it is."""
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        raise _NotThisHook(f"cannot read the hook: {exc}") from None
    if source[: len(line) + 1].split(b"\n", 1)[0] != line:
        raise _NotThisHook("the hook's #! line changed")
    cached = _CODE.get(path)
    if cached is not None and cached[0] == source:
        return cached[1]
    warnings = sys.modules.get("warnings")
    filters = getattr(warnings, "filters", None) if warnings is not None else None
    if not isinstance(filters, list):
        filters = _warnings.filters
    saved = filters[:]
    filters.insert(0, ("error", None, Warning, None, 0))
    try:
        code = compile(source, _text(path), "exec", dont_inherit=True)
    except Exception:
        return source
    finally:
        filters[:] = saved
    if len(_CODE) >= _CODE_LIMIT:
        del _CODE[next(iter(_CODE))]
    _CODE[path] = (source, code)
    return code


def _drop_own_cache_entries() -> None:
    """Take what the server's own imports added out of sys.path_importer_cache, once, here: in
    every child, freeing those finders (and the directory listings they cache) would copy dozens of
    the server's pages."""
    global _SCRIPT_LAST
    cache = sys.path_importer_cache
    for key in _CACHE_EXTRA:
        cache.pop(key, None)
    _SCRIPT_LAST = bool(cache) and next(reversed(cache)) == _SCRIPT_KEY


def _serve(
    ctrl: int,
) -> "tuple[_socket.socket, dict[int, tuple[int, bytes]], list[int], list[bytes], object]":
    """Answer run requests until the engine closes the socket. Returns only in a forked child, with
    what it needs to become the hook."""
    sock = _socket.socket(fileno=ctrl)
    refusal = _refusal()
    path0 = sys.path[0] if sys.path and isinstance(sys.path[0], str) else ""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    try:
        _send(sock, b"H", version, posix.getpid(), refusal, path0, _comm(), _IDENTITY, *_watch())
    except OSError:  # the engine stopped while this started and closed the socket: nobody to serve
        posix._exit(0)
    if refusal:
        posix._exit(0)
    children: dict[int, tuple[int, bytes]] = {}  # pidfd -> (pid, run)
    poller = select.poll()
    poller.register(ctrl, select.POLLIN)
    _drop_own_cache_entries()
    space = _socket.CMSG_SPACE(3 * 4)
    while True:
        for fd, _events in poller.poll():
            if fd != ctrl:
                pid, run = children.pop(fd)
                poller.unregister(fd)
                posix.close(fd)
                _pid, status, usage = posix.wait4(pid, 0)
                cpu = int((usage.ru_utime + usage.ru_stime) * 1_000_000)
                _send(sock, b"X", run, status, cpu)
                continue
            try:
                message, ancillary, _flags, _addr = sock.recvmsg(65536, space, _socket.MSG_CMSG_CLOEXEC)
            except OSError:
                message, ancillary = b"", []
            fds = _received_fds(ancillary)
            if not message:
                _close(fds)
                _stop_runs(children)
            fields = message[1:].split(b"\0")
            if message[:1] != b"R" or len(fields) != 8 or len(fds) != 3:
                _close(fds)
                _send(sock, b"F", fields[0], "malformed request")
                continue
            try:
                code = _compiled(fields[1], fields[6])
            except _NotThisHook as exc:
                _close(fds)
                _send(sock, b"F", fields[0], str(exc))
                continue
            # All the server has, made before this run too: the child's collections leave those
            # objects (and their pages) alone, and it starts with no young objects.
            gc.freeze()
            try:
                pid = posix.fork()
            except OSError as exc:
                _close(fds)
                _send(sock, b"F", fields[0], f"fork failed: {exc}")
                continue
            if pid == 0:
                return sock, children, fds, fields, code
            _close(fds)
            pidfd = posix.pidfd_open(pid)
            children[pidfd] = (pid, fields[0])
            poller.register(pidfd, select.POLLIN)


def _shadowed(directory: str) -> bool:
    """Whether `directory`, first on the hook's sys.path, holds a module named like a preloaded one:
    the hook would import that one instead (and so would the preloaded modules that import it)."""
    try:
        entries = posix.listdir(directory)
    except OSError:
        return False
    names = set()
    for entry in entries:  # a cheap first look; the import system's own finder decides
        stem = entry
        for suffix in _SUFFIXES:
            if entry.endswith(suffix):
                stem = entry[: -len(suffix)]
                break
        if stem in _PRELOADED_TOP_SET:
            names.add(stem)
    if not names:
        return False
    finder = FileFinder(directory, *_get_supported_file_loaders())
    for name in names:
        spec = finder.find_spec(name)
        if spec is not None and spec.loader is not None:  # a namespace portion shadows nothing
            return True
    return False


def _new_main(path: str) -> "dict[str, object]":
    """A fresh `__main__` for the hook, with the attributes (and their order) the interpreter gives a
    script's `__main__`, as it gave this file's."""
    main = type(sys)("__main__")
    space = main.__dict__
    for key, value in _MAIN.items():
        if key == "__file__":
            value = path
        elif key == "__doc__":
            value = None
        elif key == "__loader__" and value is not None:
            value = type(value)("__main__", path)
        elif key == "__annotations__":
            value = {}
        space[key] = value
    sys.modules["__main__"] = main
    return space


def _become_hook(
    sock: "_socket.socket",
    children: "dict[int, tuple[int, bytes]]",
    fds: "list[int]",
    fields: "list[bytes]",
    code: object,
) -> "tuple[dict[str, object], str, object]":
    """In the forked child: turn this process into the hook's, then say so. Any failure here exits
    before the hook's code runs (the engine then starts it cold)."""
    run = fields[0]
    path, stage, cwd, path0 = (_text(f) for f in fields[1:5])
    try:
        posix.setpgid(0, 0)
        for target, fd in enumerate(fds):
            posix.dup2(fd, target)
        _close([fd for fd in fds if fd > 2])
        _close(list(children))
        posix.chdir(cwd)
        if fields[5]:
            fd = posix.open("/proc/self/comm", posix.O_WRONLY)
            try:
                posix.write(fd, fields[5])
            finally:
                posix.close(fd)
        if fields[7]:  # the run's own variables (its tag): inherited by what the hook starts
            for item in fields[7].split(b"\n"):
                variable, _, value = item.partition(b"=")
                posix.putenv(variable, value)  # for the programs it starts
                posix.environ[variable] = value  # for an `os` imported later
                if "os" in sys.modules:  # os.environ is a copy made when os was imported
                    sys.modules["os"].environ[_text(variable)] = _text(value)
                if variable == _TAG:
                    _show_tag(value)
        sys.argv = [path, stage]
        sys.orig_argv = [*_ARGV_PREFIX, path, stage]
        for name in _TOOLS:
            sys.modules.pop(name, None)
        if path0:
            sys.path[0] = path0
            if _shadowed(path0):
                global _KEPT
                _KEPT = frozenset(_BASELINE)
                for name in _PRELOADED:
                    sys.modules.pop(name, None)
        cache = sys.path_importer_cache
        if _SCRIPT_KEY is not None and _SCRIPT_LAST:
            cache[path] = cache.pop(_SCRIPT_KEY)  # the same order as below, touching two entries
        elif _SCRIPT_KEY is not None:
            entries = [(path if k == _SCRIPT_KEY else k, v) for k, v in cache.items()]
            cache.clear()
            cache.update(entries)
        main = _new_main(path)
    except BaseException as exc:
        try:
            _send(sock, b"F", run, f"set-up failed: {exc!r}")
        finally:
            posix._exit(70)
    try:
        _send(sock, b"S", run, posix.getpid())
    except OSError:
        posix._exit(70)  # the engine gave up on this run: the hook must not run unseen
    sock.close()
    return main, path, code


def _show_tag(value: bytes) -> None:
    """Write the run's tag over the placeholder in the environment block this process started with:
    the block `/proc/<pid>/environ` shows, which every fork of the hook inherits even if it never
    runs another program (a `fork` then `setsid`), so that the engine finds and ends it with the
    run. The rest of the placeholder becomes NUL bytes. Nothing is written when the block has no
    placeholder long enough (the server was started without one)."""
    try:
        fd = posix.open("/proc/self/stat", posix.O_RDONLY)
        try:
            stat = posix.read(fd, 4096)
        finally:
            posix.close(fd)
        fields = stat.rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50, 51)
        fd = posix.open("/proc/self/mem", posix.O_RDWR)
        try:
            block = posix.pread(fd, end - start, start)
            name = _TAG + b"="
            at = 0 if block.startswith(name) else block.find(b"\0" + name) + 1
            if at <= 0 and not block.startswith(name):
                return
            at += len(name)
            width = block.find(b"\0", at) - at
            if width < len(value) or block[at : at + width].strip(b".") != b"":
                return
            posix.pwrite(fd, value + b"\0" * (width - len(value)), start + at)
        finally:
            posix.close(fd)
    except (OSError, ValueError, IndexError):
        pass  # no /proc: the tag is in what the hook starts, as set above


def _flush_std() -> bool:
    """Flush sys.stdout and sys.stderr as the interpreter does at exit; False if one failed."""
    ok = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None or getattr(stream, "closed", False):
            continue
        try:
            stream.flush()
        except Exception:
            ok = False
    return ok


def _exit_code(exc: SystemExit) -> int:
    """The exit status of an uncaught SystemExit, printing a code that is not a number."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code if -(2**31) <= code < 2**31 else -1
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    return 1


def _print_uncaught(exc: BaseException) -> None:
    """What the interpreter does with an exception that ends the script, without this file's frame."""
    tb = exc.__traceback__
    tb = tb.tb_next if tb is not None else None
    exc.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = exc
    hook = getattr(sys, "excepthook", None)
    if hook is None:
        sys.stderr.write("sys.excepthook is missing\n")
        sys.__excepthook__(type(exc), exc, tb)
        return
    try:
        hook(type(exc), exc, tb)
    except SystemExit as again:
        _finish(_exit_code(again), False)
    except BaseException as failed:
        sys.stderr.write("Error in sys.excepthook:\n")
        sys.__excepthook__(type(failed), failed, failed.__traceback__)
        sys.stderr.write("\nOriginal exception was:\n")
        sys.__excepthook__(type(exc), exc, tb)


def _clear(space: "dict[str, object]") -> None:
    """Clear a module's namespace as the interpreter does at exit: names starting with an underscore
    first, `__builtins__` kept, values set to None."""
    for first in (True, False):
        for key in list(space):
            if key != "__builtins__" and isinstance(key, str) and key.startswith("_") == first:
                space[key] = None


def _loaded_by_the_hook() -> "list[object]":
    """The modules the hook loaded, newest first: the last ones in sys.modules. Looking no further
    keeps the inherited ones untouched (every object touched is a page copied from the server)."""
    found: list[object] = []
    for name in reversed(_MODULES):
        if name in _KEPT:
            break
        module = _MODULES.get(name)
        if module is not None and id(module) not in _KEPT_IDS:  # `sys.modules["x"] = sys` is not its
            found.append(module)
    return found


def _shut_down(status: int) -> int:
    """What the interpreter does at exit before it frees everything: non-daemon threads joined,
    atexit callbacks, stdout and stderr flushed (status 120 if that fails), the hook's own modules
    cleared and its garbage collected. The modules inherited from the server are left as they are
    (no copy of their memory for nothing); so are objects the hook hung on them."""
    threading = _MODULES.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    try:
        atexit._run_exitfuncs()  # the interpreter's callbacks, whichever atexit module registered them
    except BaseException:
        pass
    if not _flush_std():
        status = 120
    if gc.isenabled():
        _collect()  # as the interpreter does before it destroys the modules: finalizers still work
    global _failure
    _failure = None
    sys.last_type = sys.last_value = sys.last_traceback = None
    if sys.version_info >= (3, 12):
        sys.last_exc = None
    for module in _loaded_by_the_hook():
        _clear(vars(module))
    _clear(_HOOK_MAIN)
    del gc.callbacks[:]  # the interpreter's last collection calls none
    _collect()  # what clearing left, cycles included, with its finalizers
    _flush_std()
    return status


def _collect() -> None:
    """Collect the hook's garbage. The server froze all it had before the fork, so the oldest
    generation holds objects only if the hook's own collections (or gc.unfreeze) put them there;
    otherwise the young generations hold all the hook's, and collecting those spares a full
    collection's emptying of the free lists, which writes to dozens of the server's pages. A hook
    with gc.callbacks sees the generation: it gets the full collection, as a cold start does."""
    gc.collect(2 if gc.callbacks or gc.get_objects(2) else 1)


def _finish(status: int, interrupted: bool) -> None:
    """End the child as the interpreter ends (see _shut_down), with `status`, or by SIGINT after an
    uncaught KeyboardInterrupt, as the interpreter does."""
    try:
        status = _shut_down(status)
    except BaseException:  # whatever the hook did to the interpreter, the run ends here
        pass
    if interrupted:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        posix.kill(posix.getpid(), _signal.SIGINT)
        status = 128 + _signal.SIGINT
    posix._exit(status & 0xFF)


_ARGV_PREFIX = _argv_prefix()
_HOOK_MAIN, _HOOK_PATH, _code = _become_hook(*_serve(int(sys.argv[1])))
_failure = None
try:
    if isinstance(_code, bytes):
        _code = compile(_code, _HOOK_PATH, "exec", dont_inherit=True)
    exec(_code, _HOOK_MAIN)  # type: ignore[arg-type]
except BaseException as _exc:
    _failure = _exc
del _code
_flush_std()
if _failure is None:
    _status = 0
elif isinstance(_failure, SystemExit):
    _finish(_exit_code(_failure), False)
else:
    _print_uncaught(_failure)
    _status = 1
_HOOK_MAIN.pop("__file__", None)
_HOOK_MAIN.pop("__cached__", None)
_finish(_status, isinstance(_failure, KeyboardInterrupt))
