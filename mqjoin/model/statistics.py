"""Statistics as values: the estimates of a relation's rate and of a pair's selectivity, the
groups of classes that share one selectivity, and a workload rewritten with new values.

Whoever measures — ``mqjoin stats`` over a data directory (:mod:`mqjoin.datasets.stats`), an
adaptive engine over an epoch (:mod:`mqjoin.adaptive.sampling`), PMJoin's per-value rates — writes
its numbers into a workload through this module, so they are grouped and rounded alike.

**Selectivity groups.**  The workload model gives one selectivity per class, and classes of
different queries that share a pair of attributes must agree (docs/model.md §1).  So classes
that share a pair form a group with one selectivity; editing it (a slider of the explorer,
an estimate from data) edits every class of the group.  Known pair values give a group the
**geometric mean** of its pairs: for a class ``{X.a, Y.b, Z.c}`` over uniform independent
data, ``s²`` is its join fraction and the geometric mean of the pairs recovers ``s``.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {selectivity: 0.5}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
... queries: {q1: "R(a), S(a), T(a)", q2: "S(a), T(a)"}
... ''')
>>> [g.label for g in selectivity_groups(w)]
['R.a = S.a = T.a']
>>> pairs = {(Attr("R", "a"), Attr("S", "a")): 0.01, (Attr("R", "a"), Attr("T", "a")): 0.04,
...          (Attr("S", "a"), Attr("T", "a")): 0.02}
>>> w2 = with_pair_values(w, pairs)
>>> [c.selectivity for q in w2.queries for c in q.classes]
[0.02, 0.02]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from mqjoin.model.errors import WorkloadError
from mqjoin.model.workload import Attr, JoinClass, Workload, iter_pairs
from mqjoin.support.unionfind import UnionFind

#: fewer agreeing sample pairs than this make the normal interval unreliable
FEW_MATCHES = 10


def significant(x: float, digits: int = 6) -> float:
    """``x`` rounded to ``digits`` significant digits (what is written into workload files).

    >>> significant(1 / 3), significant(12345678.9)
    (0.333333, 12345700.0)
    """
    return float(f"{x:.{digits}g}")


@dataclass(frozen=True)
class RateEstimate:
    """The observed rate of one relation (exact: computed over all rows).

    >>> RateEstimate("R", 11, 0.0, 5.0).rate
    2.0
    >>> RateEstimate("R", 1, 3.0, 3.0).rate is None
    True
    """

    relation: str
    tuples: int
    first: float
    last: float
    #: the span of the whole data set when the rate is counted over it: ``n / horizon``, the rate
    #: at which the model's totals over the horizon are the relation's tuples however they
    #: arrive within it (docs/model.md §4); 0: the relation's own rate ``(n − 1) / span``
    horizon: float = 0.0

    @property
    def span(self) -> float:
        return self.last - self.first

    @property
    def rate(self) -> float | None:
        """``(n − 1) / span`` (``n / horizon`` over a horizon), or ``None`` when the tuples span no time.

        >>> RateEstimate("R", 10, 0.0, 0.9, horizon=5.0).rate
        2.0
        """
        if self.horizon > 0:
            return self.tuples / self.horizon if self.tuples else None
        if self.tuples < 2 or not self.span > 0:
            return None
        return (self.tuples - 1) / self.span

    def describe(self) -> str:
        if self.rate is None:
            return (f"{self.relation}: {self.tuples} tuple(s) spanning no event time; rate not estimated "
                    f"(the declared rate is kept)")
        over = f"the data's {self.horizon:.6g} s" if self.horizon > 0 else f"{self.span:.6g} s"
        return f"{self.relation}: {self.rate:.6g} tuples/s ({self.tuples} tuples over {over})"


@dataclass(frozen=True)
class PairEstimate:
    """The selectivity of one equality ``left = right`` with its precision.

    >>> p = PairEstimate(Attr("R", "a"), Attr("S", "a"), 0.0, 0.0, 0.0, 0.0, (10, 20), (10, 20), 0)
    >>> p.key, p.exact, p.written
    ('R.a = S.a', True, 0.005)
    """

    left: Attr
    right: Attr
    value: float
    stderr: float
    low: float
    high: float
    sizes: tuple[int, int]  # |X|, |Y| (all rows)
    samples: tuple[int, int]  # rows used: m, n (equal to sizes when exact)
    matches: int  # agreeing pairs among the rows used

    @property
    def exact(self) -> bool:
        return self.samples == self.sizes

    @property
    def key(self) -> str:
        return f"{self.left} = {self.right}"

    @property
    def floor(self) -> float:
        """The smallest positive selectivity: one agreeing pair in the full data."""
        return 1.0 / max(1, self.sizes[0] * self.sizes[1])

    @property
    def written(self) -> float:
        """The value written into a workload (positive: ``floor`` when no pair agrees)."""
        return self.value if self.value > 0 else self.floor

    @property
    def few_matches(self) -> bool:
        """True when sampled and fewer than :data:`FEW_MATCHES` sample pairs agree."""
        return not self.exact and self.matches < FEW_MATCHES

    def describe(self) -> str:
        if self.exact:
            how = "exact"
        else:
            how = (f"sampled {self.samples[0]}/{self.sizes[0]} × {self.samples[1]}/{self.sizes[1]} rows, "
                   f"SE {self.stderr:.3g}, 95% CI [{self.low:.4g}, {self.high:.4g}]")
            if self.few_matches:
                how += f"; only {self.matches} agreeing sample pairs: interval unreliable, raise --sample"
        return f"{self.key}: {self.value:.6g} ({how})"


# --------------------------------------------------------------------------------------------
# selectivity groups
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectivityGroup:
    """Classes (of any queries) that must share one selectivity because they share a pair of
    attributes (docs/model.md §1): editing one selectivity edits the whole group.

    ``label`` is the equality text (``"R.a = S.a"``) that :meth:`Workload.with_selectivity`
    accepts; ``members`` the union of the classes' attributes; ``classes`` the distinct member
    sets of the group's classes and ``pairs`` all their pairs (both sorted)."""

    label: str
    members: tuple[Attr, ...]
    selectivity: float
    queries: tuple[str, ...]
    classes: tuple[tuple[Attr, ...], ...]
    pairs: tuple[tuple[Attr, Attr], ...]

    def __str__(self) -> str:
        return self.label


def selectivity_groups(workload: Workload) -> tuple[SelectivityGroup, ...]:
    """The selectivity groups of a workload, in the order of their attributes.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.1}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}, U: {attributes: [a]}}
    ... queries: {q1: "R(a), S(a), T(a)", q2: "S(a), T(a)", q3: "T(a), U(a)"}
    ... ''')
    >>> [(g.label, len(g.classes), len(g.pairs), g.queries) for g in selectivity_groups(w)]
    [('R.a = S.a = T.a', 2, 3, ('q1', 'q2')), ('T.a = U.a', 1, 1, ('q3',))]
    """
    classes: list[tuple[JoinClass, str]] = [(c, q.name) for q in workload.queries for c in q.classes]
    uf = UnionFind(range(len(classes)))
    owner: dict[tuple[Attr, Attr], int] = {}
    for i, (c, _) in enumerate(classes):
        for pair in iter_pairs(c.members):
            uf.union(owner.setdefault(pair, i), i)
    out = []
    for idx in uf.groups():
        members = tuple(sorted({a for i in idx for a in classes[i][0].members}))
        sets = tuple(sorted({classes[i][0].members for i in idx}))
        out.append(SelectivityGroup(" = ".join(str(a) for a in members), members, classes[idx[0]][0].selectivity,
                                    tuple(dict.fromkeys(classes[i][1] for i in idx)), sets,
                                    tuple(sorted({p for c in sets for p in iter_pairs(c)}))))
    return tuple(sorted(out, key=lambda g: g.members))


def covering_classes(classes: Sequence[tuple[Attr, ...]]) -> list[tuple[Attr, ...]]:
    """The classes whose pairs no other (larger) class of ``classes`` contains.

    >>> a, b, c = Attr("R", "a"), Attr("S", "a"), Attr("T", "a")
    >>> covering_classes([(a, b), (a, b, c), (b, c)])
    [(R.a, S.a, T.a)]
    """
    out = []
    for c in classes:
        mine = set(c)
        if not any(o != c and mine <= set(o) for o in classes):
            out.append(c)
    return out


def with_class_selectivity(workload: Workload, group: SelectivityGroup | str, value: float) -> Workload:
    """The workload with a new selectivity for a class and every class that shares a pair of
    attributes with it (one :class:`SelectivityGroup`), so the result stays consistent.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}, T: {attributes: [a]}}
    ... queries: {q1: "R(a), S(a), T(a)", q2: "S(a), T(a)"}
    ... ''')
    >>> w2 = with_class_selectivity(w, "S.a = T.a", 0.001)
    >>> [c.selectivity for q in w2.queries for c in q.classes]
    [0.001, 0.001]
    """
    label = group.label if isinstance(group, SelectivityGroup) else str(group)
    for g in selectivity_groups(workload):
        if label == g.label or _pairs_of(label) & _pairs_of(g.label):
            if set(_attrs_of(label)) <= set(g.members):
                label = g.label
            break
    return workload.with_selectivity(label, value)


def _attrs_of(label: str) -> list[Attr]:
    out = []
    for part in label.split("="):
        rel, _, name = part.strip().partition(".")
        out.append(Attr(rel, name))
    return out


def _pairs_of(label: str) -> set[tuple[Attr, Attr]]:
    attrs = sorted(set(_attrs_of(label)))
    return set(iter_pairs(tuple(attrs)))


# --------------------------------------------------------------------------------------------
# writing statistics into a workload
# --------------------------------------------------------------------------------------------


def with_group_values(workload: Workload, spec: dict[str, Any],
                      values: Iterable[tuple[tuple[tuple[Attr, ...], ...], float]],
                      keep_sizes: bool = True) -> Workload:
    """``spec`` with one selectivity per group of ``values`` (a group's classes, its value), as
    a workload; ``keep_sizes``: ``workload``'s measured sizes move with the new statistics
    (their ratio to the estimate kept, :meth:`~mqjoin.model.workload.Workload.respecified`), else
    ``spec``'s sizes are taken."""
    values = list(values)
    covered = {p for classes, _ in values for c in classes for p in iter_pairs(c)}
    kept = {}
    for (a, b), v in workload.selectivities:
        if (a, b) not in covered:
            kept[f"{a} = {b}"] = v
    for classes, v in values:
        for c in covering_classes(classes):
            kept[" = ".join(str(a) for a in c)] = v
    spec["selectivities"] = kept
    return workload.respecified(spec) if keep_sizes else Workload.from_spec(spec)


def with_pair_values(workload: Workload, pair_values: Mapping[tuple[Attr, Attr], float],
                     rates: Mapping[str, float] | None = None, missing: str = "keep") -> Workload:
    """The workload with new ``rates`` (relation → tuples/s) and the selectivities of every
    group of linked pairs (:func:`selectivity_groups`) whose pairs all have a value in
    ``pair_values`` (geometric mean, as for estimates).  A group with a pair without a value
    keeps its current selectivity (``missing="keep"``) or is an error (``"error"``).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.5}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... ''')
    >>> w2 = with_pair_values(w, {(Attr("R", "a"), Attr("S", "a")): 0.01}, rates={"T": 7.0})
    >>> [c.selectivity for c in w2.query("q").classes], w2.rate("T")
    ([0.01, 0.5], 7.0)
    """
    if missing not in ("keep", "error"):
        raise ValueError(f"missing must be 'keep' or 'error', not {missing!r}")
    values = []
    for g in selectivity_groups(workload):
        unknown = [p for p in g.pairs if p not in pair_values and (p[1], p[0]) not in pair_values]
        if unknown:
            if missing == "error":
                raise WorkloadError(f"no selectivity known for {unknown[0][0]} = {unknown[0][1]}; add it to the "
                                    f"pair values (e.g. estimate it from data with 'mqjoin stats')")
            continue
        vals = [pair_values[p] if p in pair_values else pair_values[(p[1], p[0])] for p in g.pairs]
        values.append((g.classes, significant(math.exp(sum(math.log(v) for v in vals) / len(vals)))))
    spec = workload.to_spec()
    for r, v in (rates or {}).items():
        spec["relations"][r]["rate"] = significant(v)
    return with_group_values(workload, spec, values)
