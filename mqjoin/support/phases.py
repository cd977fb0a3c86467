"""Where a command's seconds went: wall-clock seconds per phase, and the whole command from
the moment its process started (interpreter and imports included: what a user waits for from
the prompt to the prompt).

A phase may run beside another (Spark's start in a thread while the input is read): its
seconds are its own, so the phases may add up to more than the whole.

>>> p = Phases()
>>> with p("input"):
...     pass
>>> p.add("batches", 2.5)
>>> list(p.seconds), p.seconds["batches"]
(['input', 'batches'], 2.5)
>>> p.render({"batches": 2.5, "output": 0.25}, whole=4.0)
'4.0 s in all: input 0.0 s, batches 2.5 s, output 0.2 s'
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Iterator, Mapping

_IMPORTED = time.time()  # the fallback start of the process where /proc does not say


def process_started() -> float:
    """The epoch time this process started (Linux: ``/proc``), else when this module was
    imported."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED


class Phases:
    """Seconds per named phase of one command, in the order they were first timed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float | None) -> None:
        if seconds is not None:
            self.seconds[name] = self.seconds.get(name, 0.0) + float(seconds)

    def whole(self) -> float:
        """Seconds since the process started."""
        return time.time() - process_started()

    def to_dict(self, extra: Mapping[str, float] | None = None) -> dict[str, float]:
        """The phases (and ``extra`` ones) and ``whole``, rounded to milliseconds (``--json``)."""
        out = {k: round(v, 3) for k, v in {**self.seconds, **(extra or {})}.items()}
        out["whole"] = round(self.whole(), 3)
        return out

    def render(self, extra: Mapping[str, float] | None = None, whole: float | None = None) -> str:
        """One line: the whole command, then each phase."""
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in {**self.seconds, **(extra or {})}.items())
        return f"{self.whole() if whole is None else whole:.1f} s in all: {parts}"
