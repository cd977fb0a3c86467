"""An independent, exhaustive reference optimiser written straight from docs/model.md §2–§5.

It shares no logic with ``mqjoin.planning.candidates``, ``mqjoin.planning.ilp`` or ``mqjoin.planning.optimizer``: MIRs,
probe orders, step identity, step costs, broadcast factors and partition candidates are all
recomputed here from the definitions, on plain frozensets.  Only the validated ``Workload``
value (relations, rates, parallelism, query classes) is read from mqjoin.

The search is a depth-first enumeration of one probe order per (query, start relation) and,
recursively, one probe order per relation of every materialised MIR, with branch and bound on
the cost of the steps chosen so far (that cost only grows when more steps are added, so the
bound never cuts an optimum).  For a fixed set of distinct steps the best partitioning is
separable and is computed exactly: ``single`` — per store, the minimum over its candidates of
the summed cost of the steps targeting it; ``replicas`` — per step, the minimum over the
target's candidates.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable

# A class is (frozenset of Attr members, selectivity); a join (query, MIR or base relation)
# is (frozenset of relations, frozenset of classes).


@dataclass(frozen=True)
class Join:
    rels: frozenset
    classes: frozenset  # of (frozenset[Attr], float)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "J(" + "".join(sorted(self.rels)) + ")"


def restrict(classes: Iterable, rels: Iterable[str]) -> frozenset:
    rels = frozenset(rels)
    out = set()
    for members, sel in classes:
        kept = frozenset(a for a in members if a.relation in rels)
        if len(kept) >= 2:
            out.add((kept, sel))
    return frozenset(out)


def class_rels(cls) -> frozenset:
    return frozenset(a.relation for a in cls[0])


def connected(rels: frozenset, classes: frozenset) -> bool:
    rels = set(rels)
    if not rels:
        return False
    start = next(iter(rels))
    seen, todo = {start}, [start]
    while todo:
        r = todo.pop()
        for c in classes:
            cr = class_rels(c)
            if r in cr:
                for o in cr & rels:
                    if o not in seen:
                        seen.add(o)
                        todo.append(o)
    return seen == rels


def query_join(q) -> Join:
    return Join(frozenset(q.relations), frozenset((frozenset(c.members), c.selectivity) for c in q.classes))


def mir_join(m) -> Join:
    """Convert an ``mqjoin.planning.candidates.MIR`` into a Join (only for evaluating mqjoin's plans)."""
    return Join(frozenset(m.relations), frozenset((frozenset(c.members), c.selectivity) for c in m.classes))


def base(rel: str) -> Join:
    return Join(frozenset([rel]), frozenset())


def mirs_of(j: Join, use_mirs: bool) -> list[Join]:
    """Connected proper subsets with restricted classes (A3); only size 1 without MIRs."""
    rels = sorted(j.rels)
    top = len(rels) - 1 if use_mirs else 1
    out = []
    for k in range(1, top + 1):
        for sub in itertools.combinations(rels, k):
            cl = restrict(j.classes, sub)
            if k == 1 or connected(frozenset(sub), cl):
                out.append(Join(frozenset(sub), cl))
    return out


def probe_orders(j: Join, start: str, use_mirs: bool) -> list[tuple[Join, ...]]:
    """All ⟨M1, …, Mk⟩ of pairwise disjoint MIRs covering ``j`` minus ``start``, each sharing
    a class of ``j`` with everything before it (A3)."""
    ms = mirs_of(j, use_mirs)
    out = []

    def rec(head: frozenset, seq: tuple):
        if head == j.rels:
            out.append(seq)
            return
        for m in ms:
            if m.rels & head:
                continue
            if not any(class_rels(c) & head and class_rels(c) & m.rels for c in j.classes):
                continue
            rec(head | m.rels, seq + (m,))

    rec(frozenset([start]), ())
    return out


def join_size(workload, rels: frozenset, classes: Iterable) -> float:
    """A2: Π λ_R · Π s_c^(k_c(P) − 1)."""
    size = 1.0
    for r in rels:
        size *= workload.rate(r)
    for members, sel in classes:
        k = sum(1 for a in members if a.relation in rels)
        if k >= 2:
            size *= sel ** (k - 1)
    return size


def held(workload, rels) -> float:
    """A5: the time volume a store holds at the end of the horizon H: Π min(w_R, H)."""
    h = workload.defaults.horizon
    out = 1.0
    for r in rels:
        w = workload.window(r)
        out *= h if w is None else min(w, h)
    return out


def memory(workload, store: Join) -> float:
    """A5: one replica holds |⋈M| · Π min(w_R, H) tuples at the end of the horizon H."""
    return join_size(workload, store.rels, store.classes) * held(workload, store.rels)


def history(workload, rels, start, steps: int = 4000) -> float:
    """A2/A4 over the horizon H: ∫₀^H Π_{R ≠ start} min(w_R, t) dt, H^k/k in closed form without
    windows, else by the midpoint rule."""
    h = workload.defaults.horizon
    windows = [workload.window(r) for r in rels if r != start]
    if all(w is None for w in windows):
        return h ** len(rels) / len(rels)
    dt = h / steps
    total = 0.0
    for i in range(steps):
        t = (i + 0.5) * dt
        v = 1.0
        for w in windows:
            v *= t if w is None else min(w, t)
        total += v * dt
    return total


def parallelism(workload, store: Join) -> int:
    if len(store.rels) == 1:
        return workload.parallelism(next(iter(store.rels)))
    return workload.defaults.parallelism


def canonical(store: Join, attr):
    for members, _ in store.classes:
        if attr in members:
            return min(members)
    return attr


def partition_candidates(workload, store: Join) -> frozenset:
    """A3: X.a in the store whose class, in some query containing the store as an MIR, has a
    member outside the store (as canonical representatives)."""
    out = set()
    for q in workload.queries:
        qj = query_join(q)
        if not (store.rels < qj.rels) or restrict(qj.classes, store.rels) != store.classes:
            continue
        for members, _ in qj.classes:
            inside = [a for a in members if a.relation in store.rels]
            if inside and len(inside) < len(members):
                out.update(canonical(store, a) for a in inside)
    return frozenset(out)


@dataclass(frozen=True)
class StepKey:
    """A4 step identity: ordered prefix MIRs, target MIR, owner classes on prefix ∪ target."""

    prefix: tuple
    target: Join
    classes: frozenset


def steps_of(owner: Join, start: str, elements: tuple) -> list[StepKey]:
    prefix = (base(start),)
    rels = frozenset([start])
    out = []
    for m in elements:
        out.append(StepKey(prefix, m, restrict(owner.classes, rels | m.rels)))
        prefix = prefix + (m,)
        rels = rels | m.rels
    return out


def prefix_rels(step: StepKey) -> frozenset:
    return frozenset().union(*(m.rels for m in step.prefix))


def base_cost(workload, step: StepKey) -> float:
    """A4 with χ = 1, over the horizon: |⋈P| / |P| · |P| · ∫₀^H Π min(w_R, t) dt (|⋈P| / |P| · H^|P|
    under full history)."""
    p = prefix_rels(step)
    start = next(iter(step.prefix[0].rels))
    return join_size(workload, p, step.classes) * history(workload, p, start)


def knows(step: StepKey, attr) -> bool:
    """χ = 1 iff the partition attribute's class (in the owner, on prefix ∪ target) has a
    member in the prefix."""
    p = prefix_rels(step)
    for members, _ in step.classes:
        if attr in members:
            return any(a.relation in p for a in members)
    return False


def step_cost(workload, step: StepKey, attr) -> float:
    chi = 1 if knows(step, attr) else parallelism(workload, step.target)
    return base_cost(workload, step) * chi


class Reference:
    """Exhaustive optimum of docs/model.md §5 for one workload."""

    def __init__(self, workload, use_mirs: bool = True, replica_budget: float | None = None):
        self.w = workload
        self.use_mirs = use_mirs
        self.replica_budget = replica_budget  # policy "budget": tuples of replicas beyond the first
        self._orders: dict[tuple[Join, str], list[tuple[tuple[StepKey, ...], tuple[Join, ...]]]] = {}
        self._cands: dict[Join, tuple] = {}
        self._base: dict[StepKey, float] = {}
        self._cost: dict[tuple[StepKey, object], float] = {}
        self._min: dict[StepKey, float] = {}

    def orders(self, owner: Join, start: str):
        key = (owner, start)
        if key not in self._orders:
            lst = []
            for elements in probe_orders(owner, start, self.use_mirs):
                steps = tuple(steps_of(owner, start, elements))
                used = tuple(m for m in elements if len(m.rels) > 1)
                lst.append((steps, used))
            self._orders[key] = lst
        return self._orders[key]

    def candidates(self, store: Join) -> tuple:
        if store not in self._cands:
            self._cands[store] = tuple(sorted(partition_candidates(self.w, store)))
        return self._cands[store]

    def base(self, step: StepKey) -> float:
        if step not in self._base:
            self._base[step] = base_cost(self.w, step)
        return self._base[step]

    def c(self, step: StepKey, attr) -> float:
        """Cached :func:`step_cost`."""
        key = (step, attr)
        if key not in self._cost:
            self._cost[key] = step_cost(self.w, step, attr)
        return self._cost[key]

    def cost(self, steps: Iterable[StepKey], policy: str) -> float:
        """Best cost of a set of distinct steps under a policy (exact: the sum is separable)."""
        steps = set(steps)
        if policy == "budget":
            return self.budget_cost(steps)
        if policy == "replicas":
            total = 0.0
            for s in steps:
                cands = self.candidates(s.target)
                assert cands, f"store {s.target} has no partition candidate"
                total += min(self.c(s, a) for a in cands)
            return total
        by_store: dict[Join, list[StepKey]] = {}
        for s in steps:
            by_store.setdefault(s.target, []).append(s)
        total = 0.0
        for store, ss in by_store.items():
            cands = self.candidates(store)
            assert cands, f"store {store} has no partition candidate"
            total += min(sum(self.c(s, a) for s in ss) for a in cands)
        return total

    def budget_cost(self, steps: set) -> float:
        """Policy ``budget``: every used store keeps a non-empty set of replicas (one per
        partition attribute); a step pays its cheapest kept replica; the replicas beyond the
        first of every store hold at most ``replica_budget`` tuples.  Exhaustive over the
        replica sets of every store (small workloads only)."""
        by_store: dict[Join, list[StepKey]] = {}
        for s in steps:
            by_store.setdefault(s.target, []).append(s)
        options = []  # per store: (extra memory, cost) of every non-empty replica set
        for store, ss in by_store.items():
            cands = self.candidates(store)
            mem = memory(self.w, store)
            opts = []
            for k in range(1, len(cands) + 1):
                for keep in itertools.combinations(cands, k):
                    opts.append(((k - 1) * mem, sum(min(self.c(s, a) for a in keep) for s in ss)))
            pareto = []  # a set that needs more memory for no less cost never helps
            for e, c in sorted(opts):
                if not pareto or c < pareto[-1][1]:
                    pareto.append((e, c))
            options.append(pareto)
        limit = math.inf if self.replica_budget is None else self.replica_budget * (1 + 1e-9) + 1e-9
        best = math.inf
        for combo in itertools.product(*options):
            if sum(e for e, _ in combo) <= limit:
                best = min(best, sum(c for _, c in combo))
        return best

    def min_cost(self, step: StepKey) -> float:
        """The cheapest way to pay for one step (over its target's candidates)."""
        if step not in self._min:
            self._min[step] = min(self.c(step, a) for a in self.candidates(step.target))
        return self._min[step]

    def remaining_bound(self, pending: list, steps: frozenset) -> float:
        """A lower bound on what the pending choice points add to the cost of ``steps``.

        Adding steps T to S costs at least Σ_{t ∈ T∖S} min_A cost(t, A) under both policies
        (a store's min over A of a sum is at least the sum of the mins).  Steps of different
        start relations differ (a step's prefix begins with its start), so the bound sums over
        start relations the largest, over that start's pending points, cheapest new-step cost."""
        per_start: dict[str, float] = {}
        for _, owner, start in pending:
            cheapest = min(sum(self.min_cost(s) for s in ss if s not in steps)
                           for ss, _ in self.orders(owner, start))
            per_start[start] = max(per_start.get(start, 0.0), cheapest)
        return sum(per_start.values())

    def optimum(self, policy: str) -> float:
        return self.search(policy)[0]

    def search(self, policy: str, collect: bool = False):
        """(optimal cost, optimal assignments).  With ``collect`` every optimal assignment
        {(owner join, start): elements} is returned (ties kept, so use on tiny workloads)."""
        # a choice point: (owner key, owner join, start); the key tells a query from an MIR
        # sub-query (an MIR of one query can equal another query's join)
        points = [(("q", q.name), query_join(q), start) for q in self.w.queries for start in sorted(q.relations)]
        best = [math.inf]
        found: list[dict] = []

        def tol(x: float) -> float:
            return 1e-9 * max(1.0, abs(x))

        def rec(pending: list, steps: frozenset, materialised: frozenset, assignment: dict):
            cur = self.cost(steps, policy)
            lb = cur + self.remaining_bound(pending, steps)
            if lb > best[0] + tol(best[0]) or (not collect and lb >= best[0] - tol(best[0])):
                return
            if not pending:
                if cur < best[0] - tol(best[0]):
                    found.clear()
                best[0] = min(best[0], cur)
                if collect:
                    found.append(dict(assignment))
                return
            key, owner, start = pending[0]
            rest = pending[1:]
            opts = self.orders(owner, start)
            assert opts, f"no probe order for {owner} from {start}"
            for ss, used in sorted(opts, key=lambda o: self.cost(steps | set(o[0]), policy)):
                new_mat = [m for m in used if m not in materialised]
                more = [(("m", m), m, x) for m in dict.fromkeys(new_mat) for x in sorted(m.rels)]
                assignment[(key, start)] = tuple(s.target for s in ss)
                rec(rest + more, steps | frozenset(ss), materialised | frozenset(new_mat), assignment)
                del assignment[(key, start)]

        rec(points, frozenset(), frozenset(), {})
        return best[0], found


def optimum(workload, policy: str = "single", use_mirs: bool = True) -> float:
    return Reference(workload, use_mirs).optimum(policy)


def individual_optimum(workload, policy: str = "single", use_mirs: bool = True) -> float:
    return sum(optimum(workload.restricted_to([q]), policy, use_mirs) for q in workload.query_names)


# --------------------------------------------------------------------------------------------
# evaluating and validating a plan produced by mqjoin (its choices), per docs/model.md §3–§5
# --------------------------------------------------------------------------------------------


def owner_join(workload, owner) -> Join:
    return query_join(workload.query(owner)) if isinstance(owner, str) else mir_join(owner)


def check_plan(plan, workload, use_mirs: bool, policy: str, mode: str, only_used_mirs: bool = False) -> float:
    """Validate ``plan.choices`` against A3/A5 and return their A4/A5 cost computed here
    (distinct (namespace, step, partition attribute) paid once).  Raises AssertionError."""
    namespaces = {c.namespace for c in plan.choices}
    if mode == "individual":
        assert namespaces == set(workload.query_names), namespaces
    else:
        assert namespaces == {""}, namespaces
    refs = {ns: Reference(workload.restricted_to([ns]) if mode == "individual" else workload, use_mirs)
            for ns in namespaces}
    chosen: dict[tuple, list] = {}
    paid: dict[tuple, float] = {}
    used: set[tuple[str, Join]] = set()
    part: dict[tuple[str, Join], set] = {}
    for c in plan.choices:
        oj = owner_join(workload, c.owner)
        okey = ("q", c.owner) if isinstance(c.owner, str) else ("m", oj)
        elements = tuple(mir_join(m) for m in c.order.elements)
        # identical choices (e.g. an MIR that two merged individual plans materialise the same
        # way) are one deployed order; different ones are counted separately
        got = chosen.setdefault((c.namespace, okey, c.order.start), [])
        if (elements, c.order.partitions) not in got:
            got.append((elements, c.order.partitions))
        # the order is a valid candidate of its owner (A3)
        valid = probe_orders(oj, c.order.start, use_mirs)
        assert elements in valid, f"{c.order.render()} is not a probe order of {oj} from {c.order.start}"
        assert c.order.partitions is not None and len(c.order.partitions) == len(elements)
        ref = refs[c.namespace]
        for s, a in zip(steps_of(oj, c.order.start, elements), c.order.partitions):
            assert a in ref.candidates(s.target), f"{a} is not a partition candidate of {s.target}"
            paid[(c.namespace, s, a)] = step_cost(workload, s, a)
            part.setdefault((c.namespace, s.target), set()).add(a)
        for m in elements:
            if len(m.rels) > 1:
                used.add((c.namespace, m))
    # exactly one order per (query, start) per namespace
    for ns in namespaces:
        for qn in ([ns] if mode == "individual" else list(workload.query_names)):
            for start in workload.query(qn).relations:
                got = chosen.get((ns, ("q", qn), start), [])
                assert len(got) == 1, f"{ns or 'shared'}: query {qn} from {start} has {len(got)} orders"
    # every used MIR materialised (one order per relation of the MIR); with only_used_mirs,
    # nothing else is
    mats = {(ns, okey[1]) for (ns, okey, _) in chosen if okey[0] == "m"}
    assert used <= mats, f"used but not materialised: {used - mats}"
    if only_used_mirs:
        assert mats == used, f"materialised but unused: {mats - used}"
    for ns, m in used:
        for x in m.rels:
            got = chosen.get((ns, ("m", m), x), [])
            assert len(got) == 1, f"{ns or 'shared'}: MIR {m} from {x} is maintained by {len(got)} orders {got}"
    if policy == "single" and mode != "shared":
        for k, attrs in part.items():
            assert len(attrs) == 1, f"single policy, but store {k} has partition attributes {attrs}"
    return sum(paid.values())


# --------------------------------------------------------------------------------------------
# seeded random workloads
# --------------------------------------------------------------------------------------------

RATES = (1, 5, 10, 20, 50, 100, 200, 1000)
SELECTIVITIES = (0.001, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)


def random_spec(rng, n_rel=(3, 5), n_attr=(1, 3), n_q=(1, 3), q_size=(2, 3), par=(1, 4), dpar=(1, 3),
                extra_eq=0.3, selectivity=None):
    """A random workload spec (plain values for ``Workload.build``): relations with 1–3
    attributes named from a small pool (so names recur), connected queries written as explicit
    equalities (a random spanning tree plus, sometimes, an extra equality), one selectivity per
    attribute pair (or, with ``selectivity``, that one value for every class: large workloads
    then never violate A1's consistency rules)."""
    from mqjoin.model.workload import Attr

    letters = ["R", "S", "T", "U", "V", "W", "X", "Y", "Z"]
    names = (letters + [f"R{i}" for i in range(100)])[: rng.randint(*n_rel)]
    pool = ["a", "b", "c", "d"]
    relations = {}
    for r in names:
        attrs = rng.sample(pool, rng.randint(*n_attr))
        relations[r] = {"attributes": attrs, "rate": rng.choice(RATES), "parallelism": rng.randint(*par)}
    pair_sel: dict = {}
    queries, sels = {}, {}
    for qi in range(rng.randint(*n_q)):
        rels = rng.sample(names, min(len(names), rng.randint(*q_size)))
        eqs = []
        for i in range(1, len(rels)):
            x, y = rels[i], rng.choice(rels[:i])
            eqs.append((Attr(x, rng.choice(relations[x]["attributes"])),
                        Attr(y, rng.choice(relations[y]["attributes"]))))
        if len(rels) > 2 and rng.random() < extra_eq:
            x, y = rng.sample(rels, 2)
            eqs.append((Attr(x, rng.choice(relations[x]["attributes"])),
                        Attr(y, rng.choice(relations[y]["attributes"]))))
        for a, b in eqs:
            key = (min(a, b), max(a, b))
            if selectivity is None:
                pair_sel.setdefault(key, rng.choice(SELECTIVITIES))
                sels[f"{key[0]} = {key[1]}"] = pair_sel[key]
        queries[f"q{qi + 1}"] = ", ".join(f"{a} = {b}" for a, b in eqs)
    defaults = {"parallelism": rng.randint(*dpar)}
    if selectivity is not None:
        defaults["selectivity"] = selectivity
    return {"relations": relations, "queries": queries, "selectivities": sels, "defaults": defaults}


def random_workload(seed: int, **kw):
    """A valid random workload; specs that violate A1 (self-join classes, inconsistent
    selectivities) are redrawn deterministically."""
    import random

    from mqjoin.model.errors import WorkloadError
    from mqjoin.model.workload import Workload

    rng = random.Random(seed)
    for _ in range(1000):
        spec = random_spec(rng, **kw)
        try:
            return Workload.build(**spec)
        except WorkloadError:
            continue
    raise RuntimeError("no valid random workload")  # pragma: no cover
