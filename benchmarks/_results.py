"""Benchmark tables into ``benchmarks/RESULTS.md``, each with its provenance.

A benchmark script prints its tables.  Run with ``--results`` (added by :func:`add_flag`), it
also writes what it printed into its own section of ``RESULTS.md`` — the section between the
markers ``<!-- results: NAME -->`` and ``<!-- /results: NAME -->``, replaced if it exists,
appended otherwise — stamped with the command line, the machine (cores, memory, CPU model,
Java and Python versions, the 1-minute load average when the run started) and the date.  The
rest of the file (hand-written sections, other scripts' sections) is left as it is.

    ap = argparse.ArgumentParser(...)
    _results.add_flag(ap)
    args = ap.parse_args(argv)
    with _results.recorded("executors", "Executors: per tuple vs vectorised", args.results):
        ...  # everything printed here goes to the terminal and, with --results, to RESULTS.md

A section looks like this (``render`` with a fixed machine and date):

>>> print(render("demo", "A demo", "x  1\\n", ["benchmarks/demo.py", "--n", "3"],
...              {"machine": "2 cores, 24 GB", "date": "2026-11-24"}))
<!-- results: demo -->
### A demo
<BLANKLINE>
Command: `python benchmarks/demo.py --n 3`
Machine: 2 cores, 24 GB
Date: 2026-11-24
<BLANKLINE>
```text
x  1
```
<!-- /results: demo -->
>>> replace_section("# Results\\n", "demo", "<!-- results: demo -->\\nnew\\n<!-- /results: demo -->")
'# Results\\n\\n<!-- results: demo -->\\nnew\\n<!-- /results: demo -->\\n'
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Mapping, Sequence

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def add_flag(parser) -> None:
    """``--results [FILE]``: also write the printed tables into ``FILE`` (default
    ``benchmarks/RESULTS.md``), replacing this script's section."""
    parser.add_argument("--results", nargs="?", const=str(RESULTS), default=None, metavar="FILE",
                        help="also write the printed tables, with command, machine and date, into this "
                             "script's section of FILE (default benchmarks/RESULTS.md)")


def _first_line(cmd: Sequence[str], pattern: str = "") -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    for line in (out.stdout + out.stderr).splitlines():
        if pattern in line:
            return line.strip()
    return "unknown"


def machine() -> str:
    """Cores, memory, CPU model, Java and Python versions and the 1-minute load average, in
    one line."""
    mem = "unknown memory"
    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kib / 2**20:.0f} GB"
    with contextlib.suppress(OSError, AttributeError):
        cpu = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text()).group(1).strip()
    java = _first_line(["java", "-version"], "version")
    load = f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "unknown"
    return (f"{os.cpu_count()} cores, {mem}, {cpu}; {java}; Python {platform.python_version()}; "
            f"1-minute load {load} at the start")


def render(name: str, title: str, text: str, argv: Sequence[str], stamp: Mapping[str, str]) -> str:
    """The Markdown section of one run: title, command, machine, date, the printed text."""
    command = "python " + " ".join(shlex.quote(a) for a in argv)
    return (f"<!-- results: {name} -->\n### {title}\n\nCommand: `{command}`\nMachine: {stamp['machine']}\n"
            f"Date: {stamp['date']}\n\n```text\n{text.rstrip()}\n```\n<!-- /results: {name} -->")


def replace_section(document: str, name: str, section: str) -> str:
    """``document`` with the section ``name`` replaced by ``section`` (appended when absent)."""
    pattern = re.compile(rf"<!-- results: {re.escape(name)} -->.*?<!-- /results: {re.escape(name)} -->", re.S)
    if pattern.search(document):
        return pattern.sub(lambda _: section, document, count=1)
    return document.rstrip("\n") + "\n\n" + section + "\n"


class _Tee(io.TextIOBase):
    def __init__(self, *streams):
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()


@contextlib.contextmanager
def recorded(name: str, title: str, path: str | None, argv: Sequence[str] | None = None) -> Iterator[None]:
    """Print as usual; with ``path`` also write what was printed as section ``name`` of
    ``path`` once the block finishes without an error."""
    if path is None:
        yield
        return
    stamp = {"machine": machine(), "date": datetime.date.today().isoformat()}
    buf = io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, buf)):
        yield
    argv = list(sys.argv if argv is None else argv)
    argv[0] = os.path.relpath(argv[0]) if os.path.exists(argv[0]) else argv[0]
    target = Path(path)
    document = target.read_text() if target.exists() else "# Benchmark results\n"
    target.write_text(replace_section(document, name, render(name, title, buf.getvalue(), argv, stamp)))
    print(f"(written to section {name!r} of {target})")
