"""What the re-planning tests share: two results compared, the kinds of change a workload takes,
and a model's largest part (tests/test_ilp_replan.py, tests/test_ilp_changed.py)."""

from __future__ import annotations

import math

from mqjoin.planning.clash import OBJECTIVE_TOLERANCE
from mqjoin.planning.ilp import components


def same(a, b) -> None:
    """Two results of the same workload: the same plan, the same optimum, both canonical (a
    kept part's objective is its values' cost, which the continuous columns of a tie-break
    solve may lift by the solver's tolerance: OBJECTIVE_TOLERANCE)."""
    assert a.ilp.status == b.ilp.status == "optimal" and a.ilp.canonical and b.ilp.canonical
    assert math.isclose(a.ilp.objective, b.ilp.objective, rel_tol=OBJECTIVE_TOLERANCE)
    assert a.plan == b.plan
    assert a.plan.to_json() == b.plan.to_json()


# the kinds of change a workload takes (each a workload → the workloads before and after it)
# --------------------------------------------------------------------------------------------


def some_relation(w):
    """A relation the first query joins."""
    return w.queries[0].relations[0]


def _some_equality(w):
    """An equality of the first query, as ``with_selectivity`` takes it."""
    a, b = w.queries[0].classes[0].members[:2]
    return f"{a} = {b}"


def _sharing(w):
    """Two queries that join a common relation, and that relation."""
    for i, q in enumerate(w.queries):
        for p in w.queries[i + 1:]:
            common = sorted(q.relation_set & p.relation_set)
            if common:
                return q, p, common[0]
    raise AssertionError("no two queries share a relation")


def _filtered(w, q, relation, where, fraction):
    return w.with_query(q.name, {"join": q.text, "where": f"{relation}.{where}"}, {relation: fraction})


def _grouped_pair(w):
    """Two queries sharing a relation, each with its own filter on it, in one group."""
    q, p, r = _sharing(w)
    return _filtered(_filtered(w, q, r, "a < 5", 0.5), p, r, "a > 7", 0.2).with_groups([[q.name, p.name]])


def redeclared_relation(w):
    """One relation declared with other attributes (those no query reads renamed): the
    queries are as they were, but the stores holding it render their partitions otherwise
    (an attribute name several of a store's relations declare is written with its relation)."""
    used = w.input_attributes()
    r = next(r for q in w.queries for r in q.relations if set(w.relation(r).attributes) - used[r])
    return w.with_relation(r, attributes=[a if a in used[r] else a + "x" for a in w.relation(r).attributes])


def _measured(w):
    from mqjoin.model.sizes import MeasuredSize

    a, b = w.queries[0].classes[0].members[:2]
    return w.with_sizes([MeasuredSize(None, (a.relation, b.relation), 3.0)])


def query_names(w):
    return [q.name for q in w.queries]


#: each kind of change: a workload → (the workload before, the workload after)
CHANGES = {
    "query added": lambda w: (w.restricted_to(query_names(w)[:-1]), w),
    "query removed": lambda w: (w, w.restricted_to(query_names(w)[:2] + query_names(w)[3:])),
    "rate": lambda w: (w, w.with_relation(some_relation(w), rate=300.0)),
    "window": lambda w: (w, w.with_relation(some_relation(w), window=0.5)),
    "parallelism": lambda w: (w, w.with_relation(some_relation(w), parallelism=2)),
    "attributes": lambda w: (w, redeclared_relation(w)),
    "selectivity": lambda w: (w, w.with_selectivity(_some_equality(w), 0.02)),
    "horizon": lambda w: (w, w.with_defaults(horizon=10.0)),
    "measured size": lambda w: (w, _measured(w)),
    "filter added": lambda w: (w, _filtered(w, *_sharing(w)[::2], "a < 5", 0.5)),
    "filter fraction": lambda w: (_filtered(w, *_sharing(w)[::2], "a < 5", 0.5),
                                  _filtered(w, *_sharing(w)[::2], "a < 5", 0.1)),
    "group formed": lambda w: (_grouped_pair(w).with_groups(()), _grouped_pair(w)),
    "group member's filter": lambda w: (_grouped_pair(w),
                                        _grouped_pair(w).with_filter_fraction(_sharing(w)[0].name,
                                                                              _sharing(w)[2], 0.9)),
}


def largest(mdl):
    """The largest part of a model, split into blocks."""
    from mqjoin.planning.ilp.blocks import coupled_part

    return coupled_part(mdl, *max(components(mdl), key=lambda p: len(p[0])))
