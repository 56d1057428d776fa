"""The command line's parser: every subcommand, its options, and the function that runs it; plus
the subcommands other packages add (`evolve.commands` entry points, such as `evolve console`)."""

from __future__ import annotations

import argparse
from importlib import metadata

from engine import __version__
from engine.cli.commands import (
    cmd_call,
    cmd_doctor,
    cmd_heartbeat,
    cmd_init,
    cmd_serve,
    cmd_shim,
    cmd_stage,
    cmd_stop,
    cmd_tools,
)
from engine.cli.evals import cmd_eval
from engine.cli.replay import cmd_replay
from engine.protocol.stages import STAGES

COMMANDS_GROUP = "evolve.commands"
"""Entry points that add subcommands (the console registers `evolve console` here), so that the
engine's command line offers them without importing their packages."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace",
        metavar="DIR",
        default=argparse.SUPPRESS,  # so that a subcommand does not reset a value given before it
        help="the workspace (default: $OPENCODE_EVOLVE_WORKSPACE, else ~/workspace)",
    )
    parser = argparse.ArgumentParser(
        prog="evolve", description="Runtime and tools for self-modifying opencode agents.", parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"evolve {__version__}")
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        help=f"log level on stderr: one of {', '.join(LOG_LEVELS)} (default: $EVOLVE_LOG_LEVEL, else WARNING)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", parents=[common], help="create an example workspace (never overwrites a file)")
    p.add_argument("dir", nargs="?", metavar="DIR", help="where (default: the workspace)")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser(
        "stage", parents=[common], help="dispatch one stage to every hook, print the merged result"
    )
    p.add_argument("stage", metavar="STAGE", help=f"one of {', '.join(STAGES)}")
    p.add_argument("--input", metavar="JSON", help="the stage context as a JSON object")
    p.add_argument("--input-file", metavar="FILE", help="read the context from FILE (- for stdin)")
    p.add_argument("--session", metavar="ID", help="bind the call to a session (adds its history)")
    p.add_argument(
        "--verbose", "-v", action="store_true", help="print the whole dispatch with every hook run"
    )
    p.set_defaults(func=cmd_stage)

    p = sub.add_parser("tools", parents=[common], help="list every tool with its JSON Schema and permission")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("call", parents=[common], help="call a tool exactly as the agent would")
    p.add_argument("tool", metavar="TOOL", help="the full tool name, e.g. notes_add (see: evolve tools)")
    p.add_argument("--args", metavar="JSON", help="the arguments as a JSON object")
    p.add_argument("--args-file", metavar="FILE", help="read the arguments from FILE (- for stdin)")
    p.add_argument(
        "--session",
        metavar="ID",
        help="the session the call belongs to (passed to the hook, recorded in git)",
    )
    p.add_argument("--call-id", metavar="ID", help="recorded in the commit trailers")
    p.add_argument("--json", action="store_true", help="print the whole call record")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("serve", parents=[common], help="run the engine and its HTTP API for the workspace")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="its own address, announced to local clients: a loopback one (default 127.0.0.1)",
    )
    p.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="also listen there, for consoles elsewhere (needs --token-file, and TLS or --behind-tunnel)",
    )
    p.add_argument(
        "--token-file", metavar="FILE", help="the token to require, from FILE (mode 600), not a random one"
    )
    p.add_argument("--tls-cert", metavar="FILE", help="the certificate (PEM) of the --listen address")
    p.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    p.add_argument(
        "--behind-tunnel",
        action="store_true",
        help="serve --listen without TLS: the address is inside a tunnel or a private network you trust",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("stop", parents=[common], help="stop the workspace's running engine")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser(
        "shim", parents=[common], help="add the evolve plugin to (or remove it from) an opencode project"
    )
    p.add_argument(
        "action",
        choices=["install", "uninstall"],
        help="install: add the plugin entry (and its agent); uninstall: remove them",
    )
    p.add_argument(
        "--project", metavar="DIR", help="the opencode project directory (default: the current one)"
    )
    p.add_argument(
        "--command",
        dest="plugin_command",  # not `command`: that is the subcommand's name
        metavar="CMD",
        help="how the plugin starts evolve (default: this Python, -m engine)",
    )
    p.set_defaults(func=cmd_shim)

    p = sub.add_parser(
        "heartbeat", parents=[common], help="the running engine's heartbeat: status, fire, pause, resume"
    )
    p.add_argument(
        "action",
        choices=["status", "fire", "pause", "resume"],
        help="status: show it; fire: run one tick now; pause, resume: the timer",
    )
    p.add_argument(
        "--attach", metavar="URL", help="an engine elsewhere (default: the workspace's running engine)"
    )
    p.add_argument("--token", metavar="TOKEN", help="that engine's token")
    p.set_defaults(func=cmd_heartbeat)

    p = sub.add_parser(
        "replay",
        parents=[common],
        help="what a change (commit or pending change) does to the agent's recorded traffic",
    )
    p.add_argument(
        "change", metavar="REV|PENDING_ID", help="a commit (sha, HEAD, ...) or a pending change's id"
    )
    p.add_argument(
        "--stage",
        action="append",
        metavar="STAGE",
        help="replay this stage (repeatable); default: the stages the change can affect",
    )
    p.add_argument(
        "--limit", type=int, default=20, metavar="N", help="recorded inputs per stage (default 20)"
    )
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser(
        "eval",
        parents=[common],
        help="run the workspace's behaviour checks (evals/) before and after a change, through opencode",
        description="Run the workspace's scenarios (evals/*.jsonc) at the version before a change and "
        "after it, each in a throwaway copy with its own engine and a headless opencode, and compare. "
        "Exit 0 when nothing regressed, 1 when a scenario that passed before fails after (or the checks "
        "could not run), 2 for a mistake in the command.",
    )
    p.add_argument(
        "change", metavar="REV|PENDING_ID", help="a commit (sha, HEAD, ...) or a pending change's id"
    )
    p.add_argument(
        "--scenario", action="append", metavar="NAME", help="run this scenario (repeatable); default: all"
    )
    p.add_argument(
        "--repeat",
        type=int,
        metavar="K",
        help="runs of each scenario at each version (default: evals_repeat in the config, 1); "
        "the pass rates are compared",
    )
    p.add_argument(
        "--turns",
        type=int,
        metavar="N",
        help="instead of the scenarios, re-ask the last N user turns of the sessions the change reaches",
    )
    p.add_argument(
        "--project",
        metavar="DIR",
        help="the opencode project whose opencode.json names the agent's provider and model "
        "(default: evals_project in the config, else the project of the connected opencode)",
    )
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("doctor", parents=[common], help="check the workspace; exit 1 when something is wrong")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--project", metavar="DIR", help="also check this opencode project's plugin entry and agents"
    )
    p.set_defaults(func=cmd_doctor)
    for entry in metadata.entry_points(group=COMMANDS_GROUP):
        entry.load()(sub, common)
    return parser
