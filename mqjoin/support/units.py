"""One number format and one set of unit names for every view (CLI, explorer, reports).

* :func:`number` — costs, memory, rates: whole numbers with thousands separators from 1,000
  up, four significant digits below (``26,327``, ``800``, ``12.35``, ``0.0006667``);
* :func:`count` — counts read aloud (``3.2 billion``); :func:`size` — bytes (``2.0 MB``).

Units: the probe cost of a plan (docs/model.md §4) is the number of partial results its probes ship
per second of input, :data:`PROBE_COST_UNIT`; memory (§5) is tuples held, :data:`MEMORY_UNIT`.

>>> f"probe cost {number(26326.90579)} {PROBE_COST_UNIT}, memory {number(1500)} {MEMORY_UNIT}"
'probe cost 26,327 tuples/s, memory 1,500 tuples'
"""

from __future__ import annotations

import math

#: the unit of a probe cost (partial results shipped per second of input)
PROBE_COST_UNIT = "tuples/s"
#: the unit of memory (tuples held by stores)
MEMORY_UNIT = "tuples"


def number(x: float) -> str:
    """The one number format (see the module doc).

    >>> number(26326.90579), number(0.00066667), number(800.0), number(-1234.5), number(2.5e16)
    ('26,327', '0.0006667', '800', '-1,234', '2.5e+16')
    """
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e15:
        return f"{x:.3g}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def percent_change(share: float, digits: int = 1) -> str:
    """A relative change (``0.034`` = 3.4 %) as a signed percentage with a real minus sign;
    a change that rounds to nothing reads ``0.0 %``, never ``-0.0 %``.

    >>> percent_change(0.034), percent_change(-0.826), percent_change(-0.00001), percent_change(-0.3, 0)
    ('+3.4 %', '−82.6 %', '0.0 %', '−30 %')
    """
    r = round(share * 100, digits)
    if r == 0:
        return f"{0:.{digits}f} %"
    return f"{r:+.{digits}f} %".replace("-", "−")


def count(x: float) -> str:
    """A count as a class reads it aloud: separators below a million, then million,
    billion, trillion with two significant digits.

    >>> count(2000.0), count(26326.9), count(3.24e9), count(0.5), count(1.5e16)
    ('2,000', '26,327', '3.2 billion', '0.5', '15,000 trillion')
    """
    if not math.isfinite(x):
        return str(x)
    if abs(x) < 1:
        return f"{x:.2g}"
    if abs(x) < 1e6:
        return f"{round(x):,}"
    for unit, v in (("trillion", 1e12), ("billion", 1e9), ("million", 1e6)):
        if abs(x) >= v:
            y = x / v
            return f"{y:,.0f} {unit}" if abs(y) >= 10 else f"{y:.2g} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def size(n_bytes: float) -> str:
    """Bytes in kB, MB, GB, TB (decimal units).

    >>> size(2_000_000.0), size(389e9), size(512)
    ('2.0 MB', '389 GB', '512 B')
    """
    for unit, v in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= v:
            y = n_bytes / v
            return f"{y:.0f} {unit}" if y >= 10 else f"{y:.1f} {unit}"
    return f"{n_bytes:.0f} B"


def memory_basis(workload) -> str:
    """What the memory figure of a plan counts, in one sentence for a status line: the
    tuples its stores hold, over each store's smallest window — or over the 1-s horizon
    (``defaults.horizon``) for relations with unbounded windows (docs/model.md §5), which is why
    memory and probe cost (tuples shipped per second) can come out equal.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a], window: 5}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... selectivities: {R.a = S.a: 0.1}
    ... ''')
    >>> memory_basis(w)  # doctest: +NORMALIZE_WHITESPACE
    'memory: tuples the stores hold over their smallest window; S has an unbounded window, so its stores count the
    tuples of one horizon (1 s, defaults.horizon) — then memory and probe cost are both tuples per second of input, and
    with equal rates and selectivities they can coincide'
    """
    unbounded = [r for r in workload.used_relations if workload.window(r) is None]
    if not unbounded:
        return "memory: tuples the stores hold over their smallest window"
    who = ", ".join(unbounded) if len(unbounded) < len(workload.used_relations) else "every relation"
    verb = "has" if len(unbounded) == 1 else "have"
    return (f"memory: tuples the stores hold over their smallest window; {who} {verb} an unbounded window, so "
            f"{'its' if len(unbounded) == 1 else 'their'} stores count the tuples of one horizon "
            f"({number(workload.defaults.horizon)} s, defaults.horizon) — then memory and probe cost are both "
            f"tuples per second of input, and with equal rates and selectivities they can coincide")
