"""What the tests, the benchmarks and the screenshot script share: a real engine as a subprocess, a tmux
terminal, isolated environments, waiting on processes and conditions, and opencode with its isolated home.

The benchmarks and scripts/screenshots.py run as plain scripts (`.venv/bin/python bench/x.py`); they
put the repository root on sys.path to import this package.
"""
