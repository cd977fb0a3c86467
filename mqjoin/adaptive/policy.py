"""How a run adapts and which queries it answers when: the policy, query changes and the
lifetimes of queries over epochs (paper Section VI).

**Epochs** (paper Figure 5).  Event time is cut into epochs of ``policy.epoch`` seconds:
a tuple with event time ``ts`` belongs to epoch ``⌊(ts − origin) / epoch⌋``.  During epoch
``i`` the engine samples statistics (tuples per relation, agreeing pairs per equality of the
classes it joins on).  When epoch ``i + 1`` starts, the optimiser runs on them; if the plan
changes, the new plan is *active from epoch* ``i + 2``.  The first two epochs of a run use the
plan of the workload's declared statistics.

**Query changes** come in batches (AJoin's changelogs): every :class:`QueryChange` submitted
during epoch ``i`` is part of the optimisation at the start of ``i + 1`` and active from epoch
``i + 2``, its *activation epoch* ``a``; a removal stops the query from epoch ``a`` on.

**What a query answers** (docs/model.md §6 restricted to its lifetime).  A query active in
epochs ``[a, r)`` returns exactly the §6 results whose latest tuple arrives in an epoch of ``[a, r)``
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from mqjoin.model.errors import AdaptiveError, WorkloadError
from mqjoin.model.workload import Workload
from mqjoin.planning.options import OptimizeOptions


@dataclass(frozen=True)
class AdaptivePolicy:
    """How a run adapts.

    ``epoch`` seconds of event time per epoch, starting at ``origin``; ``threshold``: the
    relative predicted saving a new plan must bring (hysteresis); ``adapt=False`` gives the
    static baseline (statistics never change the plan, query changes still do); ``mode``,
    ``partitioning``, ``mirs``, ``solver``, ``time_limit`` are passed to the optimiser;
    ``sample``: fraction of join values counted for selectivities (1 = all); ``mir_budget``:
    tuples of MIR stores a plan may hold (:func:`mqjoin.planning.optimizer.optimize`);
    ``sizes``: re-optimise also on the join sizes the running plan measures
    (:mod:`mqjoin.adaptive.controller`), not only on class selectivities.

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
    sizes: bool = True

    def __post_init__(self) -> None:
        if not _finite(self.epoch) or self.epoch <= 0:
            raise AdaptiveError(f"epoch length must be a positive number of seconds, got {self.epoch!r}")
        if not _finite(self.threshold) or self.threshold < 0:
            raise AdaptiveError(f"threshold must be a relative saving ≥ 0 (e.g. 0.1 for 10 %), got {self.threshold!r}")
        if not _finite(self.origin):
            raise AdaptiveError(f"epoch origin must be a number of seconds, got {self.origin!r}")
        if not _finite(self.sample) or not 0 < self.sample <= 1:
            raise AdaptiveError(f"sample must be a fraction in (0, 1] of the join values to count, got {self.sample!r}")
        self.optimize_options  # noqa: B018 — the optimiser's options, checked as the value is made

    @property
    def optimize_options(self) -> OptimizeOptions:
        """The options every epoch's plan is optimised with (by the default optimiser).

        >>> AdaptivePolicy(mode="individual").optimize_options.mode
        'individual'
        """
        return OptimizeOptions(mode=self.mode, partitioning=self.partitioning, mirs=self.mirs, solver=self.solver,
                               time_limit=self.time_limit, mir_budget=self.mir_budget)

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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "adaptive policy") -> "AdaptivePolicy":
        """The policy :meth:`to_dict` wrote.  A field the writer did not know yet (a checkpoint
        of an older version) takes its default; a field this version does not know is an error.

        >>> AdaptivePolicy.from_dict({"epoch": 2.0, "threshold": 0.1}) == AdaptivePolicy(epoch=2.0)
        True
        >>> AdaptivePolicy.from_dict({"epoch": 2.0, "speed": 3})  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        ...
        mqjoin.model.errors.AdaptiveError: adaptive policy: unknown field 'speed' (fields: epoch, threshold, adapt,
        origin, mode, partitioning, mirs, solver, time_limit, sample, mir_budget, sizes)
        """
        if not isinstance(data, Mapping):
            raise AdaptiveError(f"{where} must be a mapping of its fields, got {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        for key in data:
            if key not in names:
                raise AdaptiveError(f"{where}: unknown field {key!r} (fields: {', '.join(names)})")
        return cls(**dict(data))


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class QueryChange:
    """One entry of a changelog: queries to add (name → text in paper notation or as
    equalities, or ``{join: …, where: …}`` with a filter, docs/model.md §7) and to remove, submitted
    at event time ``at``, with selectivities for the classes of added queries (``"R.a = S.a":
    0.01``) where the workload has none, and the pass fractions of their filters
    (``filters: {"q9.R": 0.2}``).

    >>> QueryChange(at=2.0, add={"q9": "R(a), S(a)"}).describe()
    '+q9'
    >>> QueryChange(at=2.0, add={"q9": {"join": "R(a), S(a)", "where": "R.x = 1"}},
    ...             filters={"q9.R": 0.2}).fractions_of("q9")
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
    >>> parse_changes("- {at: 3, drop: [q1]}")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.AdaptiveError: changelog, entry 1: unknown key 'drop' (allowed: at, add, remove, selectivities,
    filters)
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
        full = _added(full, ch, lives)
        for name in ch.add:
            lives[name] = [a, None]
    return full, tuple(Lifetime(q, a, r) for q, (a, r) in lives.items())


def with_change(workload: Workload, change: QueryChange) -> Workload:
    """``workload`` after ``change`` at once: the queries it removes left out, those it adds
    in (with its selectivities and filters) — what a re-plan optimises
    (``mqjoin optimize --changes``, :func:`mqjoin.planning.optimizer.replan`).

    >>> from mqjoin.model.workload import parse_workload
    >>> text = "defaults: {selectivity: 0.01}\\nrelations: {R: {attributes: [a]}, S: {attributes: [a]}}\\n"
    >>> w = parse_workload(text + "queries: {q1: 'R(a), S(a)'}")
    >>> [q.name for q in with_change(w, QueryChange(at=0, add={"q2": "S(a), R(a)"}, remove=("q1",))).queries]
    ['q2']
    >>> with_change(w, QueryChange(at=1, remove=("q3",)))
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.AdaptiveError: the change at 1 s removes q3, which the workload does not have (queries: q1)
    """
    names = [q.name for q in workload.queries]
    for name in change.remove:
        if name not in names:
            raise AdaptiveError(f"the change at {change.at:g} s removes {name}, which the workload does not have "
                                f"(queries: {', '.join(names) or 'none'})")
        workload = workload.without_query(name)
    return _added(workload, change, [q.name for q in workload.queries])


def _added(workload: Workload, ch: QueryChange, taken: Iterable[str]) -> Workload:
    """``workload`` with the queries ``ch`` adds (names not among ``taken``), its selectivities
    and filters."""
    taken = set(taken)
    for name, text in ch.add.items():
        if name in taken:
            raise AdaptiveError(f"the change at {ch.at:g} s adds {name}, a name already used; give the new "
                                f"query a new name")
        try:
            workload = workload.with_query(name, text, ch.fractions_of(name))
            for eq, v in ch.selectivities.items():
                workload = workload.with_selectivity(eq, v)
        except WorkloadError as e:
            raise type(e)(f"the change at {ch.at:g} s: {e}") from None
    return workload


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
