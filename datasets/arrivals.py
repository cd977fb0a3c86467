"""Arrival processes: the ``ts`` column of a relation stream.

An :class:`Arrival` says how the tuples of one relation arrive in event time:

* ``constant`` — one tuple every ``1/rate`` seconds, the first at ``start``;
* ``poisson``  — exponential gaps of mean ``1/rate`` (seeded), the first at ``start``;
* ``bursts``   — constant arrivals squeezed into the first ``burst_duty`` fraction of every
  ``burst_period`` seconds (silence in the rest): the mean rate is still ``rate``, the rate
  inside a burst is ``rate / burst_duty``.

Times are float64 seconds, non-decreasing.  Random draws use a NumPy generator seeded with
``(seed, CRC32(relation name))``, so every relation gets its own reproducible stream.

>>> arrival_times(Arrival("constant", rate=4), 5).tolist()
[0.0, 0.25, 0.5, 0.75, 1.0]
>>> arrival_times(Arrival("bursts", rate=4, burst_period=1, burst_duty=0.5), 6).tolist()
[0.0, 0.125, 0.25, 0.375, 1.0, 1.125]
>>> p = arrival_times(Arrival("poisson", rate=100, seed=1), 1000, relation="R")
>>> bool((p[1:] >= p[:-1]).all()), round(999 / p[-1])
(True, 100)
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

import numpy as np

from mqjoin.model.errors import DataError

PROCESSES = ("constant", "poisson", "bursts")


@dataclass(frozen=True)
class Arrival:
    """How tuples arrive: process, mean rate (tuples per second), seed and burst shape.

    >>> Arrival("poisson", rate=10, seed=3).describe()
    'poisson arrivals at 10 tuples/s (seed 3)'
    >>> Arrival("uniform")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.DataError: unknown arrival process 'uniform' (choose constant, poisson or bursts)
    """

    process: str = "constant"
    rate: float = 1.0
    seed: int = 0
    burst_period: float = 1.0
    burst_duty: float = 0.1
    start: float = 0.0

    def __post_init__(self) -> None:
        if self.process not in PROCESSES:
            raise DataError(f"unknown arrival process {self.process!r} (choose constant, poisson or bursts)")
        _positive(self.rate, "arrival rate (tuples per second)")
        _positive(self.burst_period, "burst period (seconds)")
        if not (0 < self.burst_duty <= 1):
            raise DataError(f"burst duty must lie in (0, 1] (the fraction of each period with arrivals), "
                            f"got {self.burst_duty!r}")
        if not math.isfinite(self.start):
            raise DataError(f"arrival start must be a finite time in seconds, got {self.start!r}")

    def with_rate(self, rate: float) -> "Arrival":
        """The same process at another mean rate.

        >>> Arrival("poisson", rate=10).with_rate(2).rate
        2
        """
        return replace(self, rate=rate)

    def describe(self) -> str:
        """One line for logs and workload headers."""
        extra = {"constant": "", "poisson": f" (seed {self.seed})",
                 "bursts": f" (bursts of {self.burst_duty:g} of every {self.burst_period:g} s)"}[self.process]
        return f"{self.process} arrivals at {self.rate:g} tuples/s{extra}"

    def to_dict(self) -> dict:
        return {"process": self.process, "rate": self.rate, "seed": self.seed,
                "burst_period": self.burst_period, "burst_duty": self.burst_duty, "start": self.start}


def _positive(value: float, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0) or math.isinf(value):
        raise DataError(f"{what} must be a positive finite number, got {value!r}")


def relation_rng(seed: int, relation: str) -> np.random.Generator:
    """The seeded random generator of one relation's stream.

    >>> int(relation_rng(0, "R").integers(100)) == int(relation_rng(0, "R").integers(100))
    True
    """
    return np.random.default_rng([int(seed), zlib.crc32(relation.encode("utf-8"))])


def arrival_times(arrival: Arrival, n: int, relation: str = "") -> np.ndarray:
    """``n`` non-decreasing arrival times (float64 seconds) of ``relation`` under ``arrival``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise DataError(f"number of tuples must be a non-negative integer, got {n!r}")
    if arrival.process == "poisson":
        gaps = relation_rng(arrival.seed, relation).exponential(1.0 / arrival.rate, size=n)
        if n:
            gaps[0] = 0.0
        return arrival.start + np.cumsum(gaps)
    u = np.arange(n, dtype=np.float64) / arrival.rate
    if arrival.process == "bursts":
        period, duty = float(arrival.burst_period), float(arrival.burst_duty)
        u = np.floor(u / period) * period + duty * np.mod(u, period)
    return arrival.start + u
