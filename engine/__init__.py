"""evolve's engine: the hook, tool and heartbeat runtime for self-modifying opencode agents."""

import sys

__version__ = "0.1.0"

# httpx imports its command-line client whenever rich, click and pygments are installed (Textual
# installs rich): ~40 ms of CPU at every engine start and `evolve` command, for a client evolve never
# runs. With its module marked missing, httpx defines a stand-in that only says it is not installed.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
