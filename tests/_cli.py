"""The command line as the tests run it, written once.

* :func:`run_cli`: ``mqjoin ARGS`` in the test process (``mqjoin.cli.main``) — its exit code
  and what it printed, read through pytest's ``capsys``.
* :func:`cli_process`: ``python -m mqjoin.cli ARGS`` in a child process, for what only a process
  of its own shows (its exit status, its own JVM, a run that is killed or left running);
  :func:`cli_command` is its command line, for a test that starts the process itself.

Arguments may be paths or numbers: each becomes its ``str``.

>>> from pathlib import Path
>>> cli_command("optimize", Path("w.yaml"), 2)[1:]
['-m', 'mqjoin.cli', 'optimize', 'w.yaml', '2']
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from mqjoin.cli import main


def run_cli(capsys, *args: Any) -> tuple[int, str, str]:
    """``mqjoin ARGS`` in this process: ``(exit code, stdout, stderr)``."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def cli_command(*args: Any) -> list[str]:
    """The command line of ``mqjoin ARGS`` run by this Python."""
    return [sys.executable, "-m", "mqjoin.cli", *map(str, args)]


def cli_process(*args: Any, timeout: float = 400, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``mqjoin ARGS`` in a child process, its output captured as text; ``kw``: further
    arguments of :func:`subprocess.run` (``cwd``, ``env``)."""
    return subprocess.run(cli_command(*args), capture_output=True, text=True, timeout=timeout, **kw)
