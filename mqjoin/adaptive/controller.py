"""Adaptive re-optimisation in epochs, and queries that arrive and leave (paper Section VI).

This module is the engine-independent half of adaptivity: *when* a plan changes and *why*.
Engines (the reference executor :mod:`mqjoin.runtime.epochs`, the Spark engine) feed it
per-epoch samples and ask it for the plan of each epoch.

**Epochs** (paper Figure 5).  Event time is cut into epochs of ``policy.epoch`` seconds:
a tuple with event time ``ts`` belongs to epoch ``⌊(ts − origin) / epoch⌋``.  During epoch
``i`` the engine samples statistics (tuples per relation, agreeing pairs per equality of the
classes it joins on).  When epoch ``i + 1`` starts, the optimiser runs on them; if the plan
changes, the new plan is *active from epoch* ``i + 2``.  The first two epochs of a run use the
plan of the workload's declared statistics.

**Statistics of an epoch.**  ``rate(R) = n_R / epoch`` (an epoch without a tuple of ``R``
gives half a tuple per epoch: the model needs positive rates); the selectivity of a pair
``X.a = Y.b`` is ``agreeing pairs / (n_X · n_Y)`` over the epoch's tuples (one agreeing pair
when none agree, as :mod:`mqjoin.datasets.stats` writes it), and linked pairs of one class get
their geometric mean (the same grouping as ``mqjoin stats``).  A class whose relations had no
tuple in the epoch keeps its previous value.  With ``policy.sample < 1`` only join values whose
hash falls below the fraction are counted (the same values in every relation, so agreeing
pairs are sampled consistently) and the count is scaled up.

**Hysteresis.**  A re-optimised plan replaces the running one only if it differs (other
probe orders or stores) and the running plan, re-costed under the new statistics
(:func:`mqjoin.planning.plan.recost`), would cost more than ``1 + threshold`` times as much — so
sampling noise does not make plans flap — or, with an MIR memory budget, if the running
plan's MIR stores no longer fit it under the new statistics (:func:`mqjoin.planning.plan.mir_memory`).  Every decision, kept or switched, is a
:class:`Decision` with its reason.

**Query changes** come in batches (AJoin's changelogs): every :class:`QueryChange` submitted
during epoch ``i`` is part of the optimisation at the start of ``i + 1`` and active from epoch
``i + 2``, its *activation epoch* ``a``; a removal stops the query from epoch ``a`` on.

**What a query answers** (DESIGN A6 restricted to its lifetime).  A query active in epochs
``[a, r)`` returns exactly the A6 results whose latest tuple arrives in an epoch of ``[a, r)``
(``a = −∞`` for queries of the workload itself, ``r = ∞`` when never removed), among those
whose tuples are *available*.  A relation is **retained** in an epoch when some query active
then uses it: the engine keeps its tuples (a base store).  A tuple of relation ``X`` that
arrived in epoch ``e < a`` is available iff ``X`` was retained in every epoch ``e … a − 1``
(stores are reference-counted and dropped when no query needs them).  So a query added at
``a`` answers from the stored history at once — the full windowed result for triggers from
``a`` on — when the running queries retained all its relations for a window before ``a``; a
relation nobody retained contributes only tuples from ``a`` on, and the query's results are
complete one window later (the bootstrap of paper Figure 6).  :func:`available_since` gives
the first epoch of available history; :func:`mqjoin.runtime.oracle.adaptive_oracle_results` checks it
by brute force.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {rate: 10, selectivity: 0.1, window: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q1: "R(a), S(a)"}
... ''')
>>> policy = AdaptivePolicy(epoch=1.0)
>>> changes = [QueryChange(at=3.5, add={"q2": "S(b), T(b)"}), QueryChange(at=6.2, remove=("q1",))]
>>> full, lives = lifetimes(w, changes, policy)
>>> [(l.query, l.added, l.removed) for l in lives]
[('q1', None, 8), ('q2', 5, None)]
>>> sorted(retained_relations(full, lives, 4)), sorted(retained_relations(full, lives, 8))
(['R', 'S'], ['S', 'T'])
>>> available_since(full, lives, "S", 5), available_since(full, lives, "T", 5)
(None, 5)
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqjoin.model.errors import AdaptiveError, MqjoinError, OptimizerError, WorkloadError
from mqjoin.planning.options import check_options
from mqjoin.planning.plan import Plan, mir_memory, recost
from mqjoin.model.workload import Attr, Workload, iter_pairs

#: rate written for a retained relation without any tuple in an epoch: half a tuple per epoch
EMPTY_EPOCH_TUPLES = 0.5


# --------------------------------------------------------------------------------------------
# settings
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdaptivePolicy:
    """How a run adapts.

    ``epoch`` seconds of event time per epoch, starting at ``origin``; ``threshold``: the
    relative predicted saving a new plan must bring (hysteresis); ``adapt=False`` gives the
    static baseline (statistics never change the plan, query changes still do); ``mode``,
    ``partitioning``, ``mirs``, ``solver``, ``time_limit`` are passed to the optimiser;
    ``sample``: fraction of join values counted for selectivities (1 = all); ``mir_budget``:
    tuples of MIR stores a plan may hold (:func:`mqjoin.planning.optimizer.optimize`).

    >>> AdaptivePolicy(epoch=0)
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.AdaptiveError: epoch length must be a positive number of seconds, got 0
    """

    epoch: float = 1.0
    threshold: float = 0.1
    adapt: bool = True
    origin: float = 0.0
    mode: str = "mqo"
    partitioning: str = "single"
    mirs: bool = True
    solver: str = "highs"
    time_limit: float | None = None
    sample: float = 1.0
    mir_budget: float | None = None

    def __post_init__(self) -> None:
        if not _finite(self.epoch) or self.epoch <= 0:
            raise AdaptiveError(f"epoch length must be a positive number of seconds, got {self.epoch!r}")
        if not _finite(self.threshold) or self.threshold < 0:
            raise AdaptiveError(f"threshold must be a relative saving ≥ 0 (e.g. 0.1 for 10 %), got {self.threshold!r}")
        if not _finite(self.origin):
            raise AdaptiveError(f"epoch origin must be a number of seconds, got {self.origin!r}")
        if not _finite(self.sample) or not 0 < self.sample <= 1:
            raise AdaptiveError(f"sample must be a fraction in (0, 1] of the join values to count, got {self.sample!r}")
        check_options(self.mode, self.partitioning, self.solver, self.time_limit, self.mir_budget)

    def epoch_of(self, ts: float) -> int:
        """The epoch of event time ``ts``.

        >>> AdaptivePolicy(epoch=2.0).epoch_of(3.9), AdaptivePolicy(epoch=2.0).epoch_of(4.0)
        (1, 2)
        """
        return math.floor((ts - self.origin) / self.epoch)

    def start(self, epoch: int) -> float:
        """Event time at which ``epoch`` starts."""
        return self.origin + epoch * self.epoch

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class QueryChange:
    """One entry of a changelog: queries to add (name → text in paper notation or as
    equalities, or ``{join: …, where: …}`` with a filter, DESIGN A7) and to remove, submitted
    at event time ``at``, with selectivities for the classes of added queries (``"R.a = S.a":
    0.01``) where the workload has none, and the pass fractions of their filters
    (``filters: {"q9.R": 0.2}``).

    >>> QueryChange(at=2.0, add={"q9": "R(a), S(a)"}).describe()
    '+q9'
    >>> QueryChange(at=2.0, add={"q9": {"join": "R(a), S(a)", "where": "R.x = 1"}}, filters={"q9.R": 0.2}).fractions_of("q9")
    {'R': 0.2}
    """

    at: float
    add: Mapping[str, str | Mapping[str, str]] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    selectivities: Mapping[str, float] = field(default_factory=dict)
    filters: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _finite(self.at):
            raise AdaptiveError(f"a query change needs an event time 'at' in seconds, got {self.at!r}")
        object.__setattr__(self, "add", dict(self.add))
        object.__setattr__(self, "remove", tuple(self.remove))
        object.__setattr__(self, "selectivities", dict(self.selectivities))
        object.__setattr__(self, "filters", dict(self.filters))
        if not self.add and not self.remove:
            raise AdaptiveError(f"the query change at {self.at:g} s adds and removes nothing")
        both = set(self.add) & set(self.remove)
        if both:
            raise AdaptiveError(f"the query change at {self.at:g} s both adds and removes {sorted(both)[0]}")

    def describe(self) -> str:
        return " ".join([f"+{q}" for q in self.add] + [f"−{q}" for q in self.remove])

    def fractions_of(self, query: str) -> dict[str, float]:
        """Relation → pass fraction of the added ``query``'s filters (from ``filters``)."""
        return {k.split(".", 1)[1]: v for k, v in self.filters.items() if k.split(".", 1)[0] == query}

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "add": dict(self.add), "remove": list(self.remove),
                "selectivities": dict(self.selectivities), **({"filters": dict(self.filters)} if self.filters else {})}


def parse_changes(text: str, where: str = "changelog") -> tuple[QueryChange, ...]:
    """A changelog from YAML: a list of ``{at: S, add: {name: query}, remove: [names],
    selectivities: {equality: value}, filters: {query.relation: pass fraction}}`` (a query as
    in a workload: a text, or ``{join: …, where: …}``).

    >>> parse_changes("- {at: 3, add: {q2: 'R(a), S(a)'}}\\n- {at: 9, remove: [q2]}")[1].remove
    ('q2',)
    >>> parse_changes("- {at: 3, drop: [q1]}")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.AdaptiveError: changelog, entry 1: unknown key 'drop' (allowed: at, add, remove, selectivities, filters)
    """
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AdaptiveError(f"{where} is not valid YAML: {str(e).splitlines()[0]}") from None
    if data is None:
        return ()
    if not isinstance(data, list):
        raise AdaptiveError(f"{where} must be a list of changes ({{at: seconds, add: {{name: query}}, "
                            f"remove: [names]}}), got a {type(data).__name__}")
    out = []
    for k, d in enumerate(data, start=1):
        here = f"{where}, entry {k}"
        if not isinstance(d, Mapping):
            raise AdaptiveError(f"{here} must be a mapping with 'at' and 'add' and/or 'remove'")
        for key in d:
            if key not in ("at", "add", "remove", "selectivities", "filters"):
                raise AdaptiveError(f"{here}: unknown key {key!r} (allowed: at, add, remove, selectivities, filters)")
        add, remove, sel = d.get("add") or {}, d.get("remove") or [], d.get("selectivities") or {}
        fractions = d.get("filters") or {}
        if not isinstance(add, Mapping) or not all(isinstance(v, (str, Mapping)) for v in add.values()):
            raise AdaptiveError(f"{here}: 'add' must map query names to query texts (or {{join: …, where: …}})")
        if not isinstance(fractions, Mapping):
            raise AdaptiveError(f"{here}: 'filters' must map query.relation to pass fractions")
        if isinstance(remove, str):
            remove = [remove]
        if not isinstance(remove, list):
            raise AdaptiveError(f"{here}: 'remove' must be a list of query names")
        if not isinstance(sel, Mapping):
            raise AdaptiveError(f"{here}: 'selectivities' must map equalities to numbers")
        try:
            out.append(QueryChange(d.get("at"), {str(n): t for n, t in add.items()}, tuple(map(str, remove)),
                                   dict(sel), {str(k): v for k, v in fractions.items()}))
        except AdaptiveError as e:
            raise AdaptiveError(f"{here}: {e}") from None
    return tuple(out)


def load_changes(path: str | Path) -> tuple[QueryChange, ...]:
    """Read a changelog file (see :func:`parse_changes`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise AdaptiveError(f"cannot read changelog {p}: {e.strerror or e}") from None
    return parse_changes(text, where=f"changelog {p}")


# --------------------------------------------------------------------------------------------
# lifetimes of queries (pure functions of the workload and the changelog)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lifetime:
    """A query is active in epochs ``[added, removed)`` (``None``: unbounded)."""

    query: str
    added: int | None
    removed: int | None

    def active(self, epoch: int) -> bool:
        return (self.added is None or self.added <= epoch) and (self.removed is None or epoch < self.removed)


def lifetimes(workload: Workload, changes: Iterable[QueryChange],
              policy: AdaptivePolicy) -> tuple[Workload, tuple[Lifetime, ...]]:
    """Validate a changelog against a workload: the workload with every query that is ever
    active (added queries included, with their selectivities) and each query's lifetime.
    Query names are never reused, so results stay attributable."""
    full = workload
    lives: dict[str, list] = {q.name: [None, None] for q in workload.queries}
    for ch in sorted(changes, key=lambda c: c.at):
        a = policy.epoch_of(ch.at) + 2
        for name in ch.remove:
            if name not in lives:
                raise AdaptiveError(f"the change at {ch.at:g} s removes {name}, which no earlier change added and the "
                                    f"workload does not declare (queries: {', '.join(lives) or 'none'})")
            if lives[name][1] is not None:
                raise AdaptiveError(f"the change at {ch.at:g} s removes {name} again (already removed from epoch "
                                    f"{lives[name][1]})")
            lives[name][1] = a
        for name, text in ch.add.items():
            if name in lives:
                raise AdaptiveError(f"the change at {ch.at:g} s adds {name}, a name already used; give the new "
                                    f"query a new name")
            try:
                full = full.with_query(name, text, ch.fractions_of(name))
                for eq, v in ch.selectivities.items():
                    full = full.with_selectivity(eq, v)
            except WorkloadError as e:
                raise type(e)(f"the change at {ch.at:g} s: {e}") from None
            lives[name] = [a, None]
    return full, tuple(Lifetime(q, a, r) for q, (a, r) in lives.items())


def lifetime_of(lives: Iterable[Lifetime], query: str) -> Lifetime:
    """The lifetime of ``query`` among ``lives``.

    >>> lifetime_of([Lifetime("q1", None, 3)], "q1").removed
    3
    >>> lifetime_of([Lifetime("q1", None, 3)], "q2")
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.AdaptiveError: no query q2 (queries: q1)
    """
    lives = tuple(lives)
    for lf in lives:
        if lf.query == query:
            return lf
    raise AdaptiveError(f"no query {query} (queries: {', '.join(lf.query for lf in lives)})")


def active_queries(lives: Iterable[Lifetime], epoch: int) -> tuple[str, ...]:
    return tuple(lf.query for lf in lives if lf.active(epoch))


def retained_relations(full: Workload, lives: Iterable[Lifetime], epoch: int) -> frozenset[str]:
    """Relations some query active in ``epoch`` uses: their tuples of that epoch are kept."""
    return frozenset(r for q in active_queries(lives, epoch) for r in full.query(q).relations)


def _change_epochs(lives: Iterable[Lifetime]) -> list[int]:
    return sorted({e for lf in lives for e in (lf.added, lf.removed) if e is not None})


def available_since(full: Workload, lives: tuple[Lifetime, ...], relation: str, epoch: int) -> int | None:
    """The first epoch whose tuples of ``relation`` are still stored at the start of
    ``epoch``: ``relation`` was retained in every epoch from it to ``epoch − 1`` (``None``:
    all history; ``epoch``: none).  Retention only changes at activation epochs, so this
    walks the intervals between them, latest first."""
    points = sorted({e for e in _change_epochs(lives) if e < epoch})
    intervals = list(zip([None, *points], [*points, epoch]))
    since: int | None = epoch
    for lo, hi in reversed(intervals):
        if relation not in retained_relations(full, lives, hi - 1):
            return since
        since = lo
    return since


# --------------------------------------------------------------------------------------------
# statistics of an epoch
# --------------------------------------------------------------------------------------------


def sampled(value: Any, fraction: float) -> bool:
    """Whether a join value is in the hash sample of ``fraction`` (equal values — ``1`` and
    ``1.0`` — are sampled alike in every relation).

    >>> sampled(7, 1.0), sampled(7, 0.5) == sampled(7.0, 0.5)
    (True, True)
    """
    if fraction >= 1:
        return True
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    h = zlib.crc32(repr(value).encode("utf-8")) if not isinstance(value, int) else (value * 2654435761) & 0xFFFFFFFF
    return (h & 0xFFFFFF) < fraction * 0x1000000


def agreeing_pairs(ca: Mapping[Any, int], cb: Mapping[Any, int], fraction: float = 1.0) -> float:
    """``Σ_v cnt_a(v) · cnt_b(v) / fraction``: agreeing pairs from two value counts (of a hash
    sample of ``fraction`` of the values).

    >>> agreeing_pairs({1: 2, 2: 1}, {1: 3, 5: 1})
    6.0
    """
    small, big = (ca, cb) if len(ca) <= len(cb) else (cb, ca)
    return sum(n * big[v] for v, n in small.items() if v in big) / fraction


def epoch_sample(workload: Workload, tables: Mapping[str, Any], policy: AdaptivePolicy, epoch: int) -> EpochSample:
    """What an engine samples in ``epoch`` of ``tables`` (tuples with ``ts`` in the epoch):
    e.g. to start a run from the statistics a running system would already have.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.model.tables import Table
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> t = {"R": Table.from_columns("R", {"ts": [0.1, 0.2, 1.5], "a": [1, 2, 1]}),
    ...      "S": Table.from_columns("S", {"ts": [0.5, 0.7], "a": [1, 1]})}
    >>> s = epoch_sample(w, t, AdaptivePolicy(epoch=1.0), 0)
    >>> s.tuples, list(s.matches.values())
    ({'R': 2, 'S': 2}, [2.0])
    """
    from collections import Counter

    pairs = tracked_pairs(workload)
    counts: dict[Attr, Counter] = {}
    n: dict[str, int] = {}
    for a in sorted({a for p in pairs for a in p}):
        t = tables[a.relation]
        rows = [i for i, ts in enumerate(t.ts) if policy.epoch_of(ts) == epoch]
        n[a.relation] = len(rows)
        col = t.columns.get(a.name, ())
        counts[a] = Counter(v for v in (col[i] for i in rows) if v is not None and sampled(v, policy.sample))
    return EpochSample(epoch, n, {(a, b): agreeing_pairs(counts[a], counts[b], policy.sample) for a, b in pairs})


@dataclass(frozen=True)
class EpochSample:
    """What an engine counted in one epoch: tuples per relation and agreeing pairs per
    equality (already scaled by ``1 / sample``)."""

    epoch: int
    tuples: Mapping[str, int]
    matches: Mapping[tuple[Attr, Attr], float]


@dataclass(frozen=True)
class EpochStats:
    """Statistics derived from one :class:`EpochSample`: rates and pair selectivities."""

    epoch: int
    tuples: Mapping[str, int]
    rates: Mapping[str, float]
    pairs: Mapping[tuple[Attr, Attr], float]

    def apply(self, workload: Workload) -> Workload:
        """``workload`` with these rates and selectivities (classes without a sampled pair keep
        their values)."""
        from mqjoin.datasets.stats import with_pair_values

        return with_pair_values(workload, self.pairs, rates={r: v for r, v in self.rates.items()
                                                              if r in workload.relation_rank})

    def describe(self, before: Workload | None = None, limit: int = 6) -> str:
        """The values, and how they moved relative to ``before``'s selectivities."""
        parts = []
        for (a, b), v in sorted(self.pairs.items()):
            old = None if before is None else before.selectivity_of(a, b)
            if old is None:
                parts.append(f"{a} = {b} {v:.3g}")
            elif not math.isclose(old, v, rel_tol=0.05):
                parts.append(f"{a} = {b} {old:.3g} → {v:.3g}")
        if before is not None:
            for r, v in sorted(self.rates.items()):
                old = before.rate(r)
                if not math.isclose(old, v, rel_tol=0.05):
                    parts.append(f"rate {r} {old:.3g} → {v:.3g}")
        if len(parts) > limit:
            parts = parts[:limit] + [f"… {len(parts) - limit} more"]
        return "; ".join(parts) if parts else "no change beyond 5 %"


def epoch_stats(sample: EpochSample, policy: AdaptivePolicy, relations: Iterable[str]) -> EpochStats:
    """Rates of ``relations`` and selectivities of the sampled pairs whose relations both had
    tuples (see the module doc)."""
    from mqjoin.datasets.stats import PairEstimate

    n = dict(sample.tuples)
    rates = {r: max(n.get(r, 0), EMPTY_EPOCH_TUPLES) / policy.epoch for r in relations}
    pairs = {}
    for (a, b), m in sample.matches.items():
        nx, ny = n.get(a.relation, 0), n.get(b.relation, 0)
        if nx and ny:
            est = PairEstimate(a, b, min(1.0, m / (nx * ny)), 0.0, 0.0, 0.0, (nx, ny), (nx, ny), round(m))
            pairs[(a, b)] = min(1.0, est.written)
    return EpochStats(sample.epoch, n, rates, pairs)


def tracked_pairs(workload: Workload) -> tuple[tuple[Attr, Attr], ...]:
    """The equalities whose selectivities are sampled: every pair of members of every class."""
    out: dict[tuple[Attr, Attr], None] = {}
    for q in workload.queries:
        for c in q.classes:
            for p in iter_pairs(c.members):
                out[p] = None
    return tuple(out)


# --------------------------------------------------------------------------------------------
# decisions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """One optimisation at the start of epoch ``epoch`` on the statistics of ``stats_epoch``,
    for the plan active from ``active_from`` (= ``epoch + 1``).  ``plan`` is the index of the
    plan active from then on (:attr:`AdaptiveController.plans`); ``running_cost`` is the
    previous plan re-costed under the new statistics, ``candidate_cost`` the re-optimised
    plan's cost."""

    epoch: int
    stats_epoch: int | None
    active_from: int
    switched: bool
    reason: str
    plan: int
    queries: tuple[str, ...]
    running_cost: float | None
    candidate_cost: float | None
    solve_seconds: float
    statistics: EpochStats | None = None

    @property
    def saving(self) -> float | None:
        if not self.running_cost or self.candidate_cost is None:
            return None
        return (self.running_cost - self.candidate_cost) / self.running_cost

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "statistics"}
        d["saving"] = self.saving
        if self.statistics is not None:
            d["statistics"] = {"tuples": dict(self.statistics.tuples), "rates": dict(self.statistics.rates),
                               "selectivities": {f"{a} = {b}": v for (a, b), v in self.statistics.pairs.items()}}
        return d


Optimizer = Callable[[Workload, AdaptivePolicy], Plan]


def default_optimizer(workload: Workload, policy: AdaptivePolicy) -> Plan:
    from mqjoin.planning.optimizer import optimize

    return optimize(workload, mode=policy.mode, partitioning=policy.partitioning, mirs=policy.mirs,
                    solver=policy.solver, time_limit=policy.time_limit, mir_budget=policy.mir_budget).plan


class AdaptiveController:
    """Chooses the plan of every epoch (the one mutable object of adaptivity; engines drive it).

    Call :meth:`enter` with each epoch in increasing order, handing over the samples of the
    epochs that ended; it makes the pending decisions and returns the epoch's plan.  For live
    deployments, :meth:`submit` adds a query change at the current event time.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 10, window: 2, parallelism: 2}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.5}
    ... ''')
    >>> c = AdaptiveController(w, AdaptivePolicy(epoch=1.0))
    >>> c.enter(0).probe_orders()["q"]["S"]
    'S » R[a] » T[b]'
    >>> a, b = Attr("R", "a"), Attr("S", "a")
    >>> s0 = EpochSample(0, {"R": 10, "S": 10, "T": 10}, {(a, b): 90, (Attr("S", "b"), Attr("T", "b")): 1})
    >>> c.enter(1, {0: s0}).probe_orders()["q"]["S"]       # decided now, active from epoch 2
    'S » R[a] » T[b]'
    >>> c.enter(2).probe_orders()["q"]["S"]
    'S » T[b] » R[a]'
    >>> c.switches()[-1].reason.split(";")[0]
    'predicted probe cost 120 → 31 tuples/s (−74.2 % > threshold 10 %)'
    """

    def __init__(self, workload: Workload, policy: AdaptivePolicy | None = None,
                 changes: Iterable[QueryChange] = (), optimizer: Optimizer | None = None):
        self.policy = policy or AdaptivePolicy()
        self.base = workload
        self.changes = list(changes)
        self.full, self.lives = lifetimes(workload, self.changes, self.policy)
        self.optimizer = optimizer or default_optimizer
        self.plans: list[Plan] = []
        self.plan_of: dict[int, int] = {}  # epoch → index into plans
        self.decisions: list[Decision] = []
        self.stats: dict[int, EpochStats] = {}
        self.pair_values: dict[tuple[Attr, Attr], float] = {}
        self.rates: dict[str, float] = {}
        self.epoch: int | None = None  # the current epoch
        self.first: int | None = None

    # -- what is active ---------------------------------------------------------------------

    def queries(self, epoch: int) -> tuple[str, ...]:
        return active_queries(self.lives, epoch)

    def retained(self, epoch: int) -> frozenset[str]:
        return retained_relations(self.full, self.lives, epoch)

    def tracked(self, epoch: int) -> tuple[tuple[Attr, Attr], ...]:
        """The pairs to sample during ``epoch``: classes of the queries active then or in the
        next two epochs (so that added queries have statistics when they start)."""
        names = dict.fromkeys(q for e in (epoch, epoch + 1, epoch + 2) for q in self.queries(e))
        return tracked_pairs(self.full.restricted_to(names)) if names else ()

    def workload(self, epoch: int) -> Workload:
        """The workload the optimiser sees for ``epoch``: its active queries with the latest
        sampled statistics (declared values where nothing was sampled yet)."""
        from mqjoin.datasets.stats import with_pair_values

        w = self.full.restricted_to(self.queries(epoch))
        if not self.pair_values and not self.rates:
            return w
        return with_pair_values(w, self.pair_values, rates=self.rates)

    def plan_for(self, epoch: int) -> Plan:
        try:
            return self.plans[self.plan_of[epoch]]
        except KeyError:
            raise AdaptiveError(f"epoch {epoch} has not been entered yet (current: {self.epoch})") from None

    # -- driving ----------------------------------------------------------------------------

    def enter(self, epoch: int, samples: Mapping[int, EpochSample] | None = None) -> Plan:
        """Advance to ``epoch`` (≥ the current one), making the decisions of every epoch start
        passed on the way with the ``samples`` of the epochs that ended, and return the plan
        of ``epoch``."""
        samples = samples or {}
        if self.epoch is None:
            self.first = self.epoch = epoch
            self._schedule(epoch, self._optimise(epoch), None, "initial plan (declared statistics)", None, 0.0)
            self.plan_of[epoch + 1] = self.plan_of[epoch]
            return self.plan_for(epoch)
        if epoch < self.epoch:
            raise AdaptiveError(f"epochs must be entered in order: {epoch} after {self.epoch}")
        while self.epoch < epoch:
            self.epoch += 1
            self._decide(self.epoch, samples.get(self.epoch - 1))
        return self.plan_for(epoch)

    def submit(self, change: QueryChange) -> int:
        """Add a query change during a run; returns its activation epoch (``epoch_of(at) + 2``).
        A change for an epoch already decided is refused."""
        if self.epoch is not None and self.policy.epoch_of(change.at) + 1 < self.epoch:
            raise AdaptiveError(f"the change at {change.at:g} s is too late: epoch {self.epoch} has started, so its "
                                f"batch was decided; submit it with the current event time")
        changes = self.changes + [change]
        self.full, self.lives = lifetimes(self.base, changes, self.policy)
        self.changes = changes
        return self.policy.epoch_of(change.at) + 2

    # -- internals --------------------------------------------------------------------------

    def _optimise(self, epoch: int) -> tuple[Plan, float]:
        w = self.workload(epoch)
        t0 = time.perf_counter()
        if not w.queries:  # every query removed: nothing to store or probe until one is added
            from mqjoin.planning.plan import build_plan

            return build_plan(w, (), self.policy.mode, self.policy.partitioning), 0.0
        try:
            plan = self.optimizer(w, self.policy)
        except MqjoinError as e:
            raise OptimizerError(f"re-optimisation for epoch {epoch} (queries {', '.join(w.query_names)}) failed: {e}") from None
        return plan, time.perf_counter() - t0

    def _schedule(self, epoch: int, planned: tuple[Plan, float], stats: EpochStats | None, reason: str,
                  running: float | None, candidate: float | None) -> None:
        plan, seconds = planned
        self.plans.append(plan)
        self.plan_of[epoch] = len(self.plans) - 1
        self.decisions.append(Decision(epoch - 1, None if stats is None else stats.epoch, epoch, True, reason,
                                       len(self.plans) - 1, self.queries(epoch), running, candidate, seconds, stats))

    def _decide(self, epoch: int, sample: EpochSample | None) -> None:
        """At the start of ``epoch``: the plan for ``epoch + 1`` (and ``epoch``'s own plan,
        already decided, unless its query set was not known in time)."""
        from mqjoin.planning.diff import plan_diff

        if epoch not in self.plan_of:  # only the first epochs: ``enter`` jumped ahead
            self.plan_of[epoch] = self.plan_of[epoch - 1]
        if set(self.plans[self.plan_of[epoch]].workload.query_names) != set(self.queries(epoch)):
            # a change activating before its batch could be decided (submitted before the run)
            self._schedule(epoch, self._optimise(epoch), None, "query set at activation: " +
                           _query_delta(self.plans[self.plan_of[epoch]], self.queries(epoch)), None, None)
        stats = None
        if sample is not None and any(sample.tuples.values()):
            stats = epoch_stats(sample, self.policy, self.retained(sample.epoch))
            self.stats[sample.epoch] = stats
            before = self.workload(epoch + 1)
            self.pair_values.update(stats.pairs)
            self.rates.update(stats.rates)
        target = epoch + 1
        running_idx = self.plan_of[epoch]
        running = self.plans[running_idx]
        queries = self.queries(target)
        if set(running.workload.query_names) != set(queries):
            planned = self._optimise(target)
            self._schedule(target, planned, stats, "query change: " + _query_delta(running, queries),
                           None, planned[0].probe_cost)
            return
        if not self.policy.adapt or stats is None:
            why = "static plan (adaptation off)" if not self.policy.adapt else \
                f"no tuples in epoch {epoch - 1}: statistics unchanged"
            self.plan_of[target] = running_idx
            self.decisions.append(Decision(epoch, None if stats is None else stats.epoch, target, False, why,
                                           running_idx, queries, None, None, 0.0, stats))
            return
        w = self.workload(target)
        plan, seconds = self._optimise(target)
        old, new = recost(running, w), plan.probe_cost
        saving = (old - new) / old if old > 0 else 0.0
        moved = stats.describe(before)
        diff = plan_diff(running, plan)
        head = (f"predicted probe cost {old:.4g} → {new:.4g} tuples/s "
                f"({-saving:+.1%} {'>' if saving > self.policy.threshold else '≤'} threshold "
                f"{self.policy.threshold:.0%})").replace("-", "−").replace("%", " %")
        budget = self.policy.mir_budget
        over = budget is not None and mir_memory(running, w) > budget * (1 + 1e-9)
        if diff.plan_changed and (saving > self.policy.threshold or over):
            changes = "; ".join(diff.summary(max_lines=4).splitlines()[1:])
            if over:
                head = (f"the running plan's MIR stores would hold {mir_memory(running, w):.4g} tuples, over the "
                        f"budget of {budget:g}; {head}")
            self._schedule(target, (plan, seconds), stats, f"{head}; statistics of epoch {epoch - 1}: {moved}; "
                           f"{changes}", old, new)
            return
        why = head if diff.plan_changed else f"re-optimised plan is the running one (cost {new:.4g} tuples/s)"
        self.plan_of[target] = running_idx
        self.decisions.append(Decision(epoch, stats.epoch, target, False, f"kept: {why}; statistics of epoch "
                                       f"{epoch - 1}: {moved}", running_idx, queries, old, new, seconds, stats))

    def switches(self) -> list[Decision]:
        """The decisions that installed a plan (the initial one included)."""
        return [d for d in self.decisions if d.switched]


def _query_delta(plan: Plan, queries: Iterable[str]) -> str:
    had, has = set(plan.workload.query_names), set(queries)
    parts = [f"+{q}" for q in sorted(has - had)] + [f"−{q}" for q in sorted(had - has)]
    return " ".join(parts) or "same queries"
