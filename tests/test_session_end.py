"""A process ending with its Spark session says nothing of py4j's lost JVM
(:func:`mqjoin.runtime.spark.session.quiet_py4j`), and keeps every other report."""

from __future__ import annotations

import subprocess
import sys

# py4j logs a lost connection through its own loggers and through the root logger from its own
# files; the script logs both ways, and an error of its own, before and after quiet_py4j()
SCRIPT = r"""
import logging, sys
logging.basicConfig(stream=sys.stdout, format="%(name)s %(message)s")
from mqjoin.runtime.spark.session import quiet_py4j

def as_py4j(message):
    exec(compile(f"logging.error({message!r})", "/venv/site-packages/py4j/java_gateway.py", "exec"))

for when in ("before", "after"):
    if when == "after":
        quiet_py4j()
    as_py4j(f"{when}: Exception while sending command.")
    logging.getLogger("py4j.clientserver").error(f"{when}: Error while sending or receiving")
    logging.getLogger("mqjoin").error(f"{when}: an error of our own")
"""


def test_py4j_reports_end_with_the_session_and_nothing_else_does():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["root before: Exception while sending command.",
                     "py4j.clientserver before: Error while sending or receiving",
                     "mqjoin before: an error of our own",
                     "mqjoin after: an error of our own"], out.stdout
