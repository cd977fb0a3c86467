"""The synthetic workloads of the CLASH paper's Section VII-B (Figure 8), as data generators.

Both use the linear four-way query ``R(a), S(a,b), T(b,c), U(c)`` with constant arrivals
(every relation's ``i``-th tuple at ``i / rate``), a window of 5 s and a change of the data
at 15 s.  The paper's rates are scaled down by ``scale`` (``rate = paper rate / scale``).

**selectivity-change** (Figure 8(a)): all four relations at 100k tuples/s.  Before the change
the ``i``-th tuples of R, S, T, U carry the value ``i`` in all their attributes, so every tuple
is part of exactly one result.  After it, values come in blocks of ``partners`` consecutive
tuples: every S tuple finds ``partners`` partners in R (its block) and none in T; every T tuple
finds ``partners`` partners in U and none in S (S.b and T.b take fresh, distinct values), so the
query has no result after the change.  The post-change phase is cut to whole blocks.

**skewed-rates** (Figure 8(b)): R at 5M tuples/s, S, T, U at 5k tuples/s.  Every R tuple joins
the latest S tuple at or before it (so each S tuple has ``rate_R / rate_S`` R partners).  T and
U are matched one to one on ``c``.  Before the change S and T share ``b`` in blocks of
``fanout``: every S tuple finds ``fanout`` T partners, and the intermediate result of S, T, U
holds ``fanout`` tuples per S tuple.  After it, only every ``1/keep``-th S tuple finds one T
partner, so that intermediate result becomes small (``keep`` per S tuple).  The pre-change
phase is cut to whole blocks (the change may then come up to ``fanout/rate`` s early; the
effective time is in ``params``).

The workload of each data set has the generated rates and, as selectivities, the statistics
of the pre-change data (:mod:`mqjoin.datasets.stats`, exact) — the optimiser's initial view.
For selectivity-change, S.b = T.b is raised by ``bias`` (default 10 %): the paper initialises
the optimiser "with a little higher selectivity for S(b), T(b)" so that S probes R first and
T probes U first.

(The random workloads of Figure 9 are :func:`mqjoin.datasets.random_workloads.random_workload`.)

>>> d = selectivity_change(scale=5000)
>>> d.params["rate"], {r: len(c["ts"]) for r, c in d.columns.items()}
(20.0, {'R': 600, 'S': 600, 'T': 600, 'U': 600})
>>> d.workload.query("q").text
'R(a), S(a,b), T(b,c), U(c)'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from mqjoin.model.errors import DataError
from mqjoin.model.tables import Table
from mqjoin.model.workload import Workload
from mqjoin.datasets.arrivals import Arrival, arrival_times
from mqjoin.datasets.stats import estimate_statistics, workload_yaml
from mqjoin.datasets.streams import ensure_dir, write_manifest, write_stream

QUERY = "R(a), S(a,b), T(b,c), U(c)"
ATTRIBUTES = {"R": ["a"], "S": ["a", "b"], "T": ["b", "c"], "U": ["c"]}
NAMES = ("selectivity-change", "skewed-rates")
#: where the bundled workload files live
WORKLOADS = Path(__file__).parent / "workloads"
BUNDLED = {"selectivity-change": "paper_selectivity_change.yaml", "skewed-rates": "paper_skewed_rates.yaml"}


@dataclass(frozen=True, eq=False)
class PaperData:
    """A generated data set: per relation ``{"ts": …, attribute: …}`` NumPy columns, the
    workload describing it, and the parameters used (including the effective change time)."""

    name: str
    workload: Workload
    columns: Mapping[str, Mapping[str, np.ndarray]]
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def change_at(self) -> float:
        return float(self.params["change_at"])

    @property
    def rows(self) -> int:
        return sum(len(c["ts"]) for c in self.columns.values())

    def tables(self, before: float | None = None) -> dict[str, Table]:
        """The data as :class:`~mqjoin.model.tables.Table` values (only tuples with ``ts < before``
        when given; row indices stay those of the files, as the prefix is kept)."""
        out = {}
        for r, cols in self.columns.items():
            n = len(cols["ts"]) if before is None else int(np.searchsorted(cols["ts"], before, side="left"))
            out[r] = Table.from_columns(r, {k: v[:n].tolist() for k, v in cols.items()}, f"{self.name} {r}")
        return out

    def write(self, out: str | Path, progress: Callable[[str], None] | None = None) -> Path:
        """Write ``out/<relation>.parquet``, ``out/workload.yaml`` and ``out/manifest.json``."""
        d = ensure_dir(out)
        for r, cols in self.columns.items():
            write_stream(d, r, cols["ts"], {k: v for k, v in cols.items() if k != "ts"})
            if progress:
                progress(f"  {r}: {len(cols['ts']):,} tuples → {d / (r + '.parquet')}")
        (d / "workload.yaml").write_text(self.workload_text(), encoding="utf-8")
        write_manifest(d, {"format": "mqjoin-paper-synthetic/1", "name": self.name,
                           "params": dict(self.params), "rows": {r: len(c["ts"]) for r, c in self.columns.items()}})
        return d

    def workload_text(self) -> str:
        """The workload as YAML with a header that says how the data was made."""
        p = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())
        head = [f"# CLASH paper Section VII-B, '{self.name}' (mqjoin data synthetic {self.name})",
                f"# parameters: {p}",
                "# selectivities: exact statistics of the data before the change (the optimiser's initial view)"]
        if self.name == "selectivity-change":
            head.append(f"# with S.b = T.b raised by {self.params['bias']:.0%} so that S probes R first and T probes U "
                        "first")
        return "\n".join(head) + "\n" + workload_yaml(self.workload)


def _check(value: Any, what: str, minimum: float = 0.0, integer: bool = False, strict: bool = True) -> Any:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (value > minimum if strict else value >= minimum) and (not integer or value == int(value))
    if not ok:
        kind = "an integer" if integer else "a number"
        raise DataError(f"{what} must be {kind} {'>' if strict else '>='} {minimum:g}, got {value!r}")
    return int(value) if integer else float(value)


def _constant(rate: float, n: int, relation: str) -> np.ndarray:
    return arrival_times(Arrival("constant", rate=rate), n, relation)


def _workload(name: str, rates: Mapping[str, float], window: float, parallelism: int,
              pre: Mapping[str, Table]) -> Workload:
    rels = {r: {"attributes": ATTRIBUTES[r], "rate": rates[r]} for r in ATTRIBUTES}
    w = Workload.build(rels, {"q": QUERY}, {},
                       {"window": window, "parallelism": parallelism, "selectivity": 1.0})
    st = estimate_statistics(w, pre, sample=None, source=f"{name} before the change")
    # rates are the generated ones (the pre-change rate estimate of a short prefix is the same)
    spec_w = st.apply(w)
    for r, v in rates.items():
        spec_w = spec_w.with_relation(r, rate=v)
    # the statistics of the prefix before the change, not of the whole data: the horizon stays the default
    return spec_w.with_defaults(selectivity=None, horizon=w.defaults.horizon)


def selectivity_change(scale: float = 100.0, duration: float = 30.0, change_at: float = 15.0,
                       partners: int = 100, window: float = 5.0, parallelism: int = 4,
                       bias: float = 0.1) -> PaperData:
    """Figure 8(a)'s data: 100k tuples/s per relation divided by ``scale`` (see the module
    docstring).  ``partners`` consecutive tuples must fit in the window:
    ``(partners − 1) / rate ≤ window``."""
    scale = _check(scale, "scale")
    duration, change_at = _check(duration, "duration (s)"), _check(change_at, "change time (s)")
    partners = _check(partners, "partners", 1, integer=True, strict=False)
    window = _check(window, "window (s)", strict=False)
    parallelism = _check(parallelism, "parallelism", 1, integer=True, strict=False)
    bias = _check(bias, "bias", strict=False)
    rate = 100_000.0 / scale
    n_pre = round(rate * change_at)
    n_post = (round(rate * duration) - n_pre) // partners * partners
    if change_at >= duration:
        raise DataError(f"change time {change_at:g} s must lie before the end of the data ({duration:g} s)")
    if n_pre < 1:
        raise DataError(f"at {rate:g} tuples/s no tuple arrives before the change at {change_at:g} s; "
                        f"lower --scale")
    if n_post < partners:
        raise DataError(f"after the change ({duration - change_at:g} s at {rate:g} tuples/s) fewer than "
                        f"{partners} tuples arrive, so no S tuple can find {partners} partners; lower --scale, "
                        f"lengthen --duration or lower --partners")
    if (partners - 1) / rate > window:
        raise DataError(f"{partners} partners arrive over {(partners - 1) / rate:g} s at {rate:g} tuples/s, "
                        f"longer than the window ({window:g} s); lower --scale (raise the rate) or --partners")
    n = n_pre + n_post
    i = np.arange(n, dtype=np.int64)
    pre = i < n_pre
    block = n + (i - n_pre) // partners  # post-change block values, above every pre-change value
    cols = {
        "R": {"a": np.where(pre, i, block)},
        "S": {"a": np.where(pre, i, block), "b": np.where(pre, i, -(1 + i))},
        "T": {"b": np.where(pre, i, -(1 + n + i)), "c": np.where(pre, i, block)},
        "U": {"c": np.where(pre, i, block)},
    }
    columns = {r: {"ts": _constant(rate, n, r), **c} for r, c in cols.items()}
    params = {"scale": scale, "rate": rate, "duration": n / rate, "change_at": n_pre / rate,
              "partners": partners, "window": window, "parallelism": parallelism, "bias": bias}
    data = PaperData("selectivity-change", Workload.build({r: {"attributes": a} for r, a in ATTRIBUTES.items()},
                                                          {"q": QUERY}, {}, {"selectivity": 1.0}), columns, params)
    w = _workload(data.name, {r: rate for r in ATTRIBUTES}, window, parallelism, data.tables(before=data.change_at))
    sb = w.query("q").class_of(w.relation("S").attr("b")).selectivity
    w = w.with_selectivity("S.b = T.b", min(1.0, float(f"{sb * (1 + bias):.6g}")))
    return PaperData(data.name, w, columns, params)


def skewed_rates(scale: float = 1000.0, duration: float = 30.0, change_at: float = 15.0, fanout: int = 5,
                 keep: float = 0.1, window: float = 5.0, parallelism: int = 4, high_rate: float | None = None,
                 low_rate: float | None = None) -> PaperData:
    """Figure 8(b)'s data: R at 5M and S, T, U at 5k tuples/s, divided by ``scale`` (or given
    directly as ``high_rate`` / ``low_rate``); see the module docstring.

    >>> d = skewed_rates(high_rate=100, low_rate=2)
    >>> {r: len(c["ts"]) for r, c in d.columns.items()}, d.change_at
    ({'R': 3000, 'S': 60, 'T': 60, 'U': 60}, 15.0)
    """
    scale = _check(scale, "scale")
    high = _check(high_rate if high_rate is not None else 5_000_000.0 / scale, "rate of R")
    low = _check(low_rate if low_rate is not None else 5_000.0 / scale, "rate of S, T and U")
    duration, change_at = _check(duration, "duration (s)"), _check(change_at, "change time (s)")
    fanout = _check(fanout, "fanout", 1, integer=True, strict=False)
    keep = _check(keep, "keep (fraction of S tuples with a T partner after the change)")
    window = _check(window, "window (s)", strict=False)
    parallelism = _check(parallelism, "parallelism", 1, integer=True, strict=False)
    if keep > 1:
        raise DataError(f"keep is a fraction of S tuples and must be at most 1, got {keep:g}")
    if change_at >= duration:
        raise DataError(f"change time {change_at:g} s must lie before the end of the data ({duration:g} s)")
    n = round(low * duration)
    n_pre = round(low * change_at) // fanout * fanout
    if n_pre < fanout or n - n_pre < 1:
        raise DataError(f"at {low:g} tuples/s for S, T, U there are too few tuples for blocks of {fanout} before "
                        f"the change and some after it; lower --scale or --fanout")
    if max(fanout - 1, 1) / low > window:
        raise DataError(f"S and T tuples {max(fanout - 1, 1) / low:g} s apart must join, longer than the window "
                        f"({window:g} s); lower --scale (raise the rates) or --fanout")
    every = max(1, round(1 / keep))
    i = np.arange(n, dtype=np.int64)
    pre = i < n_pre
    kept = ~pre & ((i - n_pre) % every == 0)
    ts_low = _constant(low, n, "S")
    n_r = round(high * duration)
    ts_r = _constant(high, n_r, "R")
    r_a = np.maximum(np.searchsorted(ts_low, ts_r, side="right") - 1, 0)
    cols = {
        "R": {"ts": ts_r, "a": r_a.astype(np.int64)},
        "S": {"ts": ts_low, "a": i, "b": np.where(pre, i // fanout, np.where(kept, n + i, -(1 + i)))},
        "T": {"ts": ts_low.copy(), "b": np.where(pre, i // fanout, n + i), "c": i},
        "U": {"ts": ts_low.copy(), "c": i},
    }
    params = {"scale": scale, "high_rate": high, "low_rate": low, "duration": duration,
              "change_at": n_pre / low, "fanout": fanout, "keep": 1 / every, "window": window,
              "parallelism": parallelism}
    data = PaperData("skewed-rates", Workload.build({r: {"attributes": a} for r, a in ATTRIBUTES.items()},
                                                    {"q": QUERY}, {}, {"selectivity": 1.0}), cols, params)
    rates = {"R": high, "S": low, "T": low, "U": low}
    w = _workload(data.name, rates, window, parallelism, data.tables(before=data.change_at))
    return PaperData(data.name, w, cols, params)


GENERATORS: dict[str, Callable[..., PaperData]] = {"selectivity-change": selectivity_change,
                                                   "skewed-rates": skewed_rates}


def paper_data(name: str, **params: Any) -> PaperData:
    """The generator ``name`` (``selectivity-change`` or ``skewed-rates``) with ``params``.

    >>> paper_data("bursty")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.DataError: unknown synthetic data set 'bursty' (choose selectivity-change or skewed-rates)
    """
    if name not in GENERATORS:
        raise DataError(f"unknown synthetic data set {name!r} (choose {' or '.join(NAMES)})")
    return GENERATORS[name](**params)


def write_bundled_workloads(out_dir: str | Path = WORKLOADS) -> list[Path]:
    """(Re)write ``paper_selectivity_change.yaml`` and ``paper_skewed_rates.yaml`` (default
    parameters)."""
    out = []
    for name, file in BUNDLED.items():
        p = ensure_dir(out_dir) / file
        p.write_text(paper_data(name).workload_text(), encoding="utf-8")
        out.append(p)
    return out


# --------------------------------------------------------------------------------------------
# the statistics a running system has of a data set, and Figure 8(b)'s MIR budget
# --------------------------------------------------------------------------------------------


def sampled_workload(data: PaperData, epoch: int = 1, epoch_length: float = 1.0):
    """A paper data set's workload with the statistics an engine samples in ``epoch``
    (rates and selectivities of that epoch's tuples, :func:`mqjoin.adaptive.sampling.epoch_stats`):
    what a running system knows — the initial view of the Figure 8(b) runs.

    >>> d = skewed_rates(high_rate=500, low_rate=10, fanout=5)
    >>> w = sampled_workload(d, 1)
    >>> w.rate("R"), w.rate("S"), w.query("q").class_of(w.relation("S").attr("b")).selectivity
    (500.0, 10.0, 0.5)
    """
    from mqjoin.adaptive.sampling import epoch_sample, epoch_stats
    from mqjoin.adaptive.policy import AdaptivePolicy

    policy = AdaptivePolicy(epoch=epoch_length)
    w, tables = data.workload, data.tables()
    return epoch_stats(epoch_sample(w, tables, policy, epoch), policy, w.relation_rank).apply(w)


@dataclass(frozen=True)
class MirBudget:
    """The MIR memory budget of the paper's Figure 8(b) on this project's model
    (``benchmarks/adaptive_paper.py``): the MIR stores of the plan optimised on the
    statistics of epoch 1 hold ``before`` tuples, and ``after`` under the statistics sampled
    two epochs after the change; a budget between them (their geometric mean, 3 significant
    digits) keeps the store of S⋈T⋈U out before the change and lets it in after."""

    before: float
    after: float
    budget: float


def figure_8b_budget(data: PaperData, policy: Any = None) -> MirBudget:
    """:class:`MirBudget` of a skewed-rates data set (:func:`skewed_rates`) for the optimiser
    options of ``policy`` (an :class:`~mqjoin.adaptive.policy.AdaptivePolicy`, default epochs of
    1 s); :func:`sampled_workload` gives the statistics.

    >>> b = figure_8b_budget(skewed_rates(high_rate=500, low_rate=10, fanout=5))
    >>> b.before > b.budget > b.after
    True
    """
    from mqjoin.adaptive.policy import AdaptivePolicy
    from mqjoin.planning.optimizer import optimize
    from mqjoin.planning.recost import mir_memory

    policy = policy or AdaptivePolicy(epoch=1.0)
    before = sampled_workload(data, 1, policy.epoch)
    after = sampled_workload(data, policy.epoch_of(data.change_at) + 2, policy.epoch)
    plan = optimize(before, mode=policy.mode, partitioning=policy.partitioning, mirs=policy.mirs,
                    solver=policy.solver).plan
    m0, m1 = mir_memory(plan, before), mir_memory(plan, after)
    return MirBudget(m0, m1, float(f"{math.sqrt(m0 * m1):.3g}"))
