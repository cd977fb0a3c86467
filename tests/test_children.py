"""A command started through :func:`_children.tied` dies with the process that started it, even
when that process is killed with SIGKILL (no ``finally`` and no ``atexit`` runs then)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _children import alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")

#: a process that starts ``sleep`` through the launcher (tied, or not, to itself), prints its id and waits
_PARENT = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from _children import tied
cmd = ["sleep", "60"]
child = subprocess.Popen(tied(cmd) if sys.argv[2] == "tied" else cmd, start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""



def _outlives_its_killed_parent(how: str, patience: float) -> bool:
    """Whether the child still runs ``patience`` seconds after its parent was killed."""
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(Path(__file__).parent), how],
                              stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    try:
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + patience
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        return alive(child)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_tied_child_dies_with_its_killed_parent():
    assert not _outlives_its_killed_parent("tied", patience=10)


def test_an_untied_child_outlives_it():
    """The control: without the launcher, a child in its own session runs on."""
    assert _outlives_its_killed_parent("untied", patience=1)
