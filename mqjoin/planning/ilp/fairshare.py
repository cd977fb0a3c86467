"""A lower bound on every part of a model at once, in one pass over its probe orders: each
step's cost shared fairly among the groups that may use it.

A solve has a plan before it has a bound: the start (or fallback) plan stands for every part
until the part's own method proves something, which on a large coupled part takes seconds.
:func:`fair_shares` gives each part a bound at once, so that the first plan a solve reports
already has a proven gap.  The argument, for one plan of a part:

* A group is a (query, start) or (MIR, start) pair: it chooses one of its probe orders (a
  query's group always, an MIR's group when the MIR is materialised).  Let ``n_s`` be the number
  of groups with some order through step ``s``.  The plan pays ``c_s`` once for a step its
  chosen orders use, and at most ``n_s`` chosen orders use it, so charging each of them
  ``c_s / n_s`` charges no more than the plan pays.  A group's share is at least the cheapest of
  its orders under these charges.
* An optimal plan materialises only MIRs that some chosen order probes (dropping one that
  nothing probes costs nothing more).  A materialised MIR's groups are charged at least its
  *upkeep* ``k_M`` — per start of ``M`` the cheapest order of ``M``'s group there.  At most
  ``u_M`` groups probe ``M``, so charging ``k_M / u_M`` to every chosen order that probes it
  charges no more than the upkeep.
* Under ``single`` a store has one partition attribute ``A``.  A step into it whose prefix
  does not know ``A`` pays its broadcast surcharge; if every order of a query's group steps
  into the store, the group causes at least the cheapest of those surcharges (again shared by
  ``n_s``) for every ``A``, and the store pays at least the least, over ``A``, of the sum over
  such groups.  (Under ``budget`` a store may keep several attributes: no such term.)

The part's bound is the sum over its queries' groups of the cheapest order charged its steps'
shares and its MIRs' upkeep shares, plus the stores' broadcast terms.  It is weak where
sharing is rich (every step is shared as if all its possible users used it), but it costs one
pass and holds from the first moment.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> from mqjoin.planning.ilp.model import build_model, components
>>> from mqjoin.planning.ilp.solving import solve
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q: "R(a), S(a,b), T(b)", p: "R(a), S(a)"}
... ''')
>>> mdl = build_model(enumerate_candidates(w))
>>> parts = [cols for cols, _ in components(mdl)]
>>> bound, = fair_shares(mdl, parts)
>>> 0 < bound <= solve(mdl).objective
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mqjoin.model.schema import Attr
from mqjoin.planning.candidates import MIR, Owner
from mqjoin.planning.ilp.model import Model


def fair_shares(mdl: Model, parts: Sequence[Sequence[int]]) -> list[float]:
    """The bound of each part (its columns; components of the model) described in the module
    docstring: at most the cost of every plan of the part that materialises only MIRs it
    probes, so at most its optimum.  Only the groups of those parts are read: every group with
    an order through a step or an MIR lies in the part of that column, so the parts not asked
    for change no share."""
    of_col = {c: n for n, cols in enumerate(parts) for c in cols}
    groups: dict[tuple[Owner, str], list[int]] = {}
    for (owner, start, _), xi in mdl.x.items():
        if xi in of_col:
            groups.setdefault((owner, start), []).append(xi)
    users: dict[int, int] = {}  # y or m column → the groups with an order through it
    for xs in groups.values():
        seen: set[int] = set()
        for xi in xs:
            seen.update(mdl.order_steps[xi])
            seen.update(mdl.order_mirs[xi])
        for c in seen:
            users[c] = users.get(c, 0) + 1
    cost = mdl.cost
    charge = {xi: math.fsum(cost[y] / users[y] for y in mdl.order_steps[xi]) for xs in groups.values() for xi in xs}
    upkeep: dict[int, float] = {}
    for (owner, _), xs in groups.items():
        if isinstance(owner, MIR):
            mi = mdl.m[owner]
            upkeep[mi] = upkeep.get(mi, 0.0) + min(charge[xi] for xi in xs)
    out = [0.0] * len(parts)
    for (owner, _), xs in groups.items():
        if not isinstance(owner, MIR):
            out[of_col[xs[0]]] += min(charge[xi] + math.fsum(upkeep.get(mi, 0.0) / users[mi]
                                                             for mi in mdl.order_mirs[xi]) for xi in xs)
    if mdl.policy == "single" and mdl.b:
        for yi, extra in _broadcasts(mdl, groups, users):
            out[of_col[yi]] += extra
    return out


def _broadcasts(mdl: Model, groups: dict[tuple[Owner, str], list[int]],
                users: dict[int, int]) -> list[tuple[int, float]]:
    """Per store that the queries' groups cannot avoid: a y column into it (its part's) and the
    least over its partition attributes of the surcharges those groups cause there."""
    step_of = {mdl.y[s]: s for s in mdl.b}
    by_store: dict[MIR, tuple[int, dict[Attr, float]]] = {}
    for (owner, _), xs in groups.items():
        if isinstance(owner, MIR):
            continue
        # per store every order of the group steps into: per order, its surcharges there
        into: dict[MIR, list[list[tuple[float, frozenset[Attr], int]]]] | None = None
        for xi in xs:
            here: dict[MIR, list[tuple[float, frozenset[Attr], int]]] = {}
            for yi in mdl.order_steps[xi]:
                s = step_of.get(yi)
                if s is not None:
                    here.setdefault(s.target, []).append((mdl.cost[mdl.b[s]] / users[yi], s.known, yi))
            into = {m: [v] for m, v in here.items()} if into is None else {
                m: into[m] + [here[m]] for m in into if m in here}
            if not into:
                break
        for store, orders in (into or {}).items():
            at = by_store.setdefault(store, (orders[0][0][2], {}))[1]
            for a in mdl.candidates.partition_candidates[store]:
                at[a] = at.get(a, 0.0) + min(math.fsum(c for c, known, _ in steps if a not in known)
                                             for steps in orders)
    return [(yi, min(at.values())) for yi, at in by_store.values()]
