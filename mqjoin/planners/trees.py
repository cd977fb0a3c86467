"""Operator trees as ordinary plans: the shape of MJoin and of binary join trees.

CLASH (the ILP of :mod:`mqjoin.planning.optimizer`) chooses probe orders among all candidates.
The systems it is compared with execute one query at a time with a fixed operator shape; an
operator tree (:class:`JoinTree`: a leaf or an n-ary join of subtrees) describes that shape —
an MJoin is one flat node (:mod:`mqjoin.planners.mjoin`), a binary tree has two children per
node.  :func:`tree_choices` turns any tree into probe orders and :func:`plan_trees` into a plan
handed to :func:`mqjoin.planning.probe_trees.build_plan`, so it runs on every engine and is costed by
docs/model.md §4/§5 like any plan.

* **Probing sequences.**  Inside a node, each input probes the other inputs "most selective
  predicate first" (MJoin Section 2.2).  Our reading of the rule: the next input is the
  connected one with the fewest expected matches per probing tuple, i.e. the smallest next
  partial result ``|⋈(P ∪ S)|`` (docs/model.md §2) — selectivity times the partner's size, as in
  the MJoin paper's Section 3.3, where the same selectivity is right or wrong depending on the
  10,000 or 15,000 tuples behind it (:func:`probing_sequence`).
* **Binary join trees**: every inner node an MIR store (the symmetric hash join's state),
  probe orders climbing the tree (a relation's order lists its sibling at each level).
  ``deep``: the cheapest linear tree (every inner node joins one base relation);
  ``bushy``: the cheapest tree whose every inner node splits its relations as evenly as
  connectivity allows; ``best``: the cheapest tree of any shape.  Each is found exactly by
  dynamic programming over connected subsets; the cost of a tree is the sum of ``|⋈N|`` over
  its non-root nodes ``N`` (every node's results probe its sibling, routed: the sibling is
  partitioned on a class they share).

Modes: ``individual`` (each query's own stores, a namespace per query), ``shared`` (the same
orders deployed together: identical steps and stores run once); ``mqo`` means ``shared`` here,
since these planners optimise no workload jointly.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a, b], rate: 100},
...             T: {attributes: [b], rate: 100}}
... queries: {q: "R(a), S(a,b), T(b)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
... ''')
>>> flat = JoinTree.join(JoinTree.leaf(r) for r in ("R", "S", "T"))
>>> [str(c.order) for c in tree_choices(w, "q", flat)]
['R » S[a] » T[b]', 'S » R[a] » T[b]', 'T » S[a] » R[a]']
>>> binary_tree(w, "q", "best"), tree_cost(w, "q", binary_tree(w, "q", "best"))
(((R ⋈ S) ⋈ T), 400.0)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable, Mapping

from mqjoin.planning.candidates import (MIR, Owner, ProbeOrder, Step, owner_classes, owner_selection,
                                       partition_candidates, steps_of)
from mqjoin.planning.cost import is_close, join_results, least, prefix_messages
from mqjoin.planning.options import OptimizeOptions
from mqjoin.model.errors import PlannerError
from mqjoin.planning.plan import Choice, Plan
from mqjoin.planning.probe_trees import build_plan
from mqjoin.planning.cost import step_cost, store_parallelism
from mqjoin.model.workload import Attr, Query, Workload, is_connected, restrict_classes


TREE_SHAPES = ("deep", "bushy", "best")


PLANNER_MODES = ("mqo", "individual", "shared")


# --------------------------------------------------------------------------------------------
# operator trees
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinTree:
    """An operator tree of one query: a leaf (one relation, no children) or a symmetric join of
    two or more subtrees (an MJoin node when it has more than two).

    >>> JoinTree.leaf("R")
    R
    >>> JoinTree.join([JoinTree.leaf("T"), JoinTree.join([JoinTree.leaf("S"), JoinTree.leaf("R")])])
    ((R ⋈ S) ⋈ T)
    """

    relations: tuple[str, ...]
    children: tuple["JoinTree", ...] = ()

    @staticmethod
    def leaf(relation: str) -> "JoinTree":
        return JoinTree((relation,))

    @staticmethod
    def join(children: Iterable["JoinTree"]) -> "JoinTree":
        kids = tuple(sorted(children, key=lambda t: (-len(t.relations), t.relations)))
        return JoinTree(tuple(sorted(r for k in kids for r in k.relations)), kids)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def nodes(self) -> Iterable["JoinTree"]:
        """Every node, children before parents."""
        for k in self.children:
            yield from k.nodes()
        yield self

    def render(self) -> str:
        if self.is_leaf:
            return self.relations[0]
        return "(" + " ⋈ ".join(k.render() for k in self.children) + ")"

    __str__ = render

    def __repr__(self) -> str:
        return self.render()


def _query(workload: Workload, query: str) -> Query:
    return workload.query(query)


def _mir(workload: Workload, q: Query, relations: Iterable[str]) -> MIR:
    rels = tuple(relations)
    return MIR.of(workload, rels, restrict_classes(q.classes, rels), workload.selections(q.name))


def linked(q: Query, a: Iterable[str], b: Iterable[str]) -> bool:
    """Whether one of ``q``'s classes joins a relation of ``a`` with one of ``b``."""
    a, b = set(a), set(b)
    return any(c.relations & a and c.relations & b for c in q.classes)


def connected(q: Query, rels: Iterable[str]) -> bool:
    """Whether ``q``'s classes, restricted to ``rels``, connect all of them."""
    rels = tuple(rels)
    return len(rels) == 1 or is_connected(rels, restrict_classes(q.classes, rels))


def probing_sequence(workload: Workload, query: str, prefix: Iterable[str], inputs: Iterable[Iterable[str]],
                     least_selective_first: bool = False) -> tuple[tuple[str, ...], ...]:
    """MJoin's rule (Section 2.2): the order in which a tuple covering ``prefix`` probes the
    other ``inputs`` (sets of relations): always next the connected input with the fewest
    expected matches, i.e. the smallest partial result ``⋈(P ∪ input)``, counted over the
    horizon (:func:`~mqjoin.planning.cost.join_results`: inputs of different sizes compare
    alike in any time unit; docs/model.md §2, §4); ties by declaration order.
    ``least_selective_first=True`` is the paper's *wrong* sequence
    (Section 3.3): always next the connected input with the *most* expected matches (ties
    still by declaration order).

    The MJoin paper's Section 3.3 setting (S1, S3: 10,000 tuples; S2: 15,000; one join value
    among 1,000): S1 probes S3 before S2; in the wrong sequence, S2 first.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {selectivity: 0.001}
    ... relations: {S1: {attributes: [k], rate: 10000}, S2: {attributes: [k], rate: 15000},
    ...             S3: {attributes: [k], rate: 10000}}
    ... queries: {q: "S1(k), S2(k), S3(k)"}
    ... ''')
    >>> probing_sequence(w, "q", ["S1"], [["S2"], ["S3"]])
    (('S3',), ('S2',))
    >>> probing_sequence(w, "q", ["S1"], [["S2"], ["S3"]], least_selective_first=True)
    (('S2',), ('S3',))
    """
    q = _query(workload, query)
    have = set(prefix)
    left = [tuple(sorted(i)) for i in inputs]
    rank = workload.relation_rank
    out = []
    while left:
        reachable = [i for i in left if linked(q, have, i)]
        if not reachable:
            raise PlannerError(f"query {query}: inputs {', '.join('/'.join(i) for i in left)} are not connected to "
                               f"{'/'.join(sorted(have))}; a probing sequence needs a join predicate at every probe")
        sign = -1.0 if least_selective_first else 1.0
        cost = {i: sign * join_results(workload, have | set(i), q.classes) for i in reachable}
        nxt = least(reachable, cost.__getitem__, lambda i: (min(rank[r] for r in i), i))
        out.append(nxt)
        have |= set(nxt)
        left.remove(nxt)
    return tuple(out)


def tree_orders(workload: Workload, query: str, tree: JoinTree,
                least_selective_first: bool = False) -> dict[tuple[str, ...], dict[str, ProbeOrder]]:
    """Unpartitioned probe orders of every inner node of ``tree``: node relations → start
    relation → order.  A start ``X`` in child ``C`` of node ``N`` first climbs to ``C``
    (its order there), then probes ``N``'s other children in MJoin's probing sequence
    (:func:`probing_sequence`; ``least_selective_first`` gives the paper's wrong one).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> orders = tree_orders(w, "q", binary_tree(w, "q", "bushy"))
    >>> {node: [str(o) for o in by.values()] for node, by in orders.items()}  # doctest: +NORMALIZE_WHITESPACE
    {('A', 'B'): ['A » B', 'B » A'], ('C', 'D'): ['C » D', 'D » C'], ('A', 'B', 'C', 'D'): ['A » B » CD', 'B » A » CD',
    'C » D » AB', 'D » C » AB']}
    """
    q = _query(workload, query)
    out: dict[tuple[str, ...], dict[str, ProbeOrder]] = {}

    def rec(node: JoinTree) -> None:
        if node.is_leaf:
            return
        for k in node.children:
            rec(k)
        by_start: dict[str, ProbeOrder] = {}
        for k in node.children:
            others = [o.relations for o in node.children if o is not k]
            tail = tuple(_mir(workload, q, rels)
                         for rels in probing_sequence(workload, query, k.relations, others, least_selective_first))
            for x in k.relations:
                head = out[k.relations][x].elements if not k.is_leaf else ()
                by_start[x] = ProbeOrder(x, head + tail)
        out[node.relations] = dict(sorted(by_start.items(), key=lambda kv: workload.relation_rank[kv[0]]))

    if tree.is_leaf:
        raise PlannerError(f"query {query}: a one-relation tree has no join to plan")
    rec(tree)
    return out


def _partitions(workload: Workload, cand_workload: Workload, owned: list[tuple[Owner, ProbeOrder]],
                partitioning: str) -> list[ProbeOrder]:
    """Give every element a partition attribute among its store's candidates (docs/model.md §3):
    ``single`` — per store the attribute with the least probe cost over the distinct steps
    that target it (ties: smallest attribute); ``replicas`` — per step an attribute it knows
    (routed), else the store's ``single`` choice."""
    steps: list[list[Step]] = []
    by_store: dict[MIR, dict[Step, None]] = {}
    for owner, order in owned:
        ss = list(steps_of(order, owner_classes(owner, workload), workload, owner_selection(owner, workload)))
        steps.append(ss)
        for s in ss:
            by_store.setdefault(s.target, {})[s] = None
    chosen: dict[MIR, Attr] = {}
    cands: dict[MIR, tuple[Attr, ...]] = {}
    for m, ss in by_store.items():
        cands[m] = partition_candidates(cand_workload, m)
        if not cands[m]:
            raise PlannerError(f"store {m.label} has no partition candidate; every probed store joins its prober "
                               "on some class, so this is a bug: please report the workload")
        p = store_parallelism(workload, m.relations)

        costs = {a: sum(step_cost(workload, s, a, p) for s in ss) for a in cands[m]}
        best = min(costs.values())
        chosen[m] = min(a for a, c in costs.items() if is_close(c, best))
    out = []
    for (_owner, order), ss in zip(owned, steps):
        if partitioning == "single":
            parts = tuple(chosen[s.target] for s in ss)
        else:
            parts = tuple(min((a for a in cands[s.target] if a in s.known), default=chosen[s.target]) for s in ss)
        out.append(ProbeOrder(order.start, order.elements, parts))
    return out


def tree_choices(workload: Workload, query: str, tree: JoinTree, namespace: str = "",
                 partitioning: str = "single", least_selective_first: bool = False) -> list[Choice]:
    """The partitioned probe orders of one query's operator tree: one per relation of the
    query, and one per relation of every inner non-root node (its MIR's materialisation).
    Partition candidates come from the query alone (as in ``individual`` mode), or from its
    query group (docs/model.md §7), whose stores it shares.
    ``least_selective_first``: the paper's wrong probing sequence (:func:`probing_sequence`).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> [(str(c.owner), c.order.render()) for c in tree_choices(w, "q", binary_tree(w, "q", "bushy"))][:3]
    [('q', 'A » B[a] » CD[b]'), ('q', 'B » A[a] » CD[b]'), ('q', 'C » D[c] » AB[b]')]
    """
    owned = tree_owned_orders(workload, query, tree, least_selective_first)
    parted = _partitions(workload, workload.restricted_to(workload.group_of(query)), owned, partitioning)
    return [Choice(owner, o, namespace) for (owner, _), o in zip(owned, parted)]


def tree_owned_orders(workload: Workload, query: str, tree: JoinTree,
                      least_selective_first: bool = False) -> list[tuple[Owner, ProbeOrder]]:
    """The unpartitioned probe orders of one query's operator tree with their owners: the
    query's (one per relation) and every inner non-root node's MIR (its materialisation)."""
    q = _query(workload, query)
    orders = tree_orders(workload, query, tree, least_selective_first)
    owned: list[tuple[Owner, ProbeOrder]] = [(query, o) for o in orders[tree.relations].values()]
    for node in tree.nodes():
        if not node.is_leaf and node is not tree:
            owned.extend((_mir(workload, q, node.relations), o) for o in orders[node.relations].values())
    return owned


def plan_joint_trees(workload: Workload, trees: Mapping[str, JoinTree], partitioning: str = "single") -> Plan:
    """A plan of one operator tree per query optimised *together* (mode ``mqo``): one
    namespace, and every store's partition attribute chosen over the steps of all queries
    (under ``single``, one attribute per store for the whole workload, as the ILP's plans)."""
    owned = [pair for q in workload.queries for pair in tree_owned_orders(workload, q.name, trees[q.name])]
    parted = _partitions(workload, workload, owned, partitioning)
    return build_plan(workload, [Choice(owner, o) for (owner, _), o in zip(owned, parted)], "mqo", partitioning)


def splits(q: Query, rels: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Unordered splits of ``rels`` into two connected, linked parts (the first part holds
    the first relation), in a fixed order."""
    first, rest = rels[0], rels[1:]
    for n in range(0, len(rest)):
        for combo in itertools.combinations(rest, n):
            a = (first,) + combo
            b = tuple(r for r in rels if r not in a)
            if b and connected(q, a) and connected(q, b) and linked(q, a, b):
                yield a, b


# --------------------------------------------------------------------------------------------
# binary join trees
# --------------------------------------------------------------------------------------------


def tree_cost(workload: Workload, query: str, tree: JoinTree) -> float:
    """The docs/model.md §4 probe cost of a query's operator tree alone, every probe routed: each non-root
    node's results over the horizon (:func:`~mqjoin.planning.cost.prefix_messages`) probe the rest of their parent's
    join — once per step of the probing sequence (for a binary tree: once, into the sibling).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a, b], rate: 100},
    ...             T: {attributes: [b], rate: 100}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
    ... ''')
    >>> flat = JoinTree.join(JoinTree.leaf(r) for r in ("R", "S", "T"))  # an MJoin
    >>> tree_cost(w, "q", binary_tree(w, "q", "best")), tree_cost(w, "q", flat)
    (400.0, 475.0)
    """
    q = _query(workload, query)
    total = 0.0
    for node in tree.nodes():
        for k in node.children:
            have = set(k.relations)
            # the prefix grows along the probing sequence; each step costs |⋈P| / |P| per start
            # relation, i.e. |⋈P| summed over the |k| starts of this child
            others = [o.relations for o in node.children if o is not k]
            for nxt in probing_sequence(workload, query, have, others):
                total += sum(prefix_messages(workload, have, x, q.classes) for x in k.relations)
                have |= set(nxt)
    return total


def binary_tree(workload: Workload, query: str, shape: str = "best") -> JoinTree:
    """The cheapest binary join tree of ``shape`` (``deep``, ``bushy`` or ``best``) under
    :func:`tree_cost`, by dynamic programming over connected subsets (ties: the first split
    in a fixed order).

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> w = w.with_selectivity("B.b = C.b", 0.5)  # the middle join inflates: keep it for last
    >>> [(shape, str(binary_tree(w, "q", shape))) for shape in TREE_SHAPES]
    [('deep', '(((C ⋈ D) ⋈ B) ⋈ A)'), ('bushy', '((A ⋈ B) ⋈ (C ⋈ D))'), ('best', '((A ⋈ B) ⋈ (C ⋈ D))')]
    """
    if shape not in TREE_SHAPES:
        raise PlannerError(f"unknown tree shape {shape!r} (choose one of {', '.join(TREE_SHAPES)})")
    q = _query(workload, query)
    rank = workload.relation_rank
    rels = tuple(sorted(q.relations, key=rank.__getitem__))
    best: dict[tuple[str, ...], tuple[float, JoinTree]] = {(r,): (0.0, JoinTree.leaf(r)) for r in rels}
    for size in range(2, len(rels) + 1):
        for sub in itertools.combinations(rels, size):
            if not connected(q, sub):
                continue
            cuts = list(splits(q, sub))
            if shape == "deep":
                cuts = [s for s in cuts if min(len(s[0]), len(s[1])) == 1]
            elif shape == "bushy":
                even = min(abs(len(a) - len(b)) for a, b in cuts)
                cuts = [(a, b) for a, b in cuts if abs(len(a) - len(b)) == even]
            found: tuple[float, JoinTree] | None = None
            for a, b in cuts:
                # both children's results probe the other child
                cost = best[a][0] + best[b][0] + sum(join_results(workload, c, q.classes) for c in (a, b))
                if found is None or (cost < found[0] and not is_close(cost, found[0])):
                    found = (cost, JoinTree.join([best[a][1], best[b][1]]))
            if found is not None:
                best[sub] = found
    return best[rels][1]


def tree_rule(workload: Workload, query: str, options: OptimizeOptions) -> JoinTree:
    """The ``tree`` planner's :class:`~mqjoin.planners.contract.TreeRule`: the cheapest binary
    tree of the options' shape (``best`` unless given)."""
    return binary_tree(workload, query, options.tree_shape or "best")


# --------------------------------------------------------------------------------------------
# plans
# --------------------------------------------------------------------------------------------


def plan_trees(workload: Workload, trees: Mapping[str, JoinTree], mode: str = "individual",
               partitioning: str = "single", least_selective_first: bool = False) -> Plan:
    """A plan from one operator tree per query: ``individual`` — a namespace per query;
    ``shared``/``mqo`` — one namespace, identical steps and stores run once.
    ``least_selective_first=True`` builds every probing sequence the paper's wrong way round
    (Section 3.3: the least selective predicate first), e.g. to measure what it costs.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {A: {attributes: [a]}, B: {attributes: [a, b]}, C: {attributes: [b, c]}, D: {attributes: [c]}}
    ... queries: {q: "A(a), B(a,b), C(b,c), D(c)"}
    ... ''')
    >>> from mqjoin.planners.registry import operator_trees
    >>> trees = operator_trees(w, "mjoin")
    >>> plan_trees(w, trees, "individual"), plan_trees(w, trees, "individual").probe_orders()["q"]["B"]
    (Plan(individual/single: probe cost 733.333, 4 stores, 12 steps), 'B » A[a] » C[b] » D[c]')
    >>> w = parse_workload('''
    ... relations: {R: {attributes: [a], rate: 100}, S: {attributes: [a, b], rate: 100},
    ...             T: {attributes: [b], rate: 100}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015}
    ... ''')
    >>> [plan_trees(w, operator_trees(w, "mjoin"), least_selective_first=wrong).probe_orders()["q"]["S"]
    ...  for wrong in (False, True)]
    ['S » R[a] » T[b]', 'S » T[b] » R[a]']
    """
    if mode not in PLANNER_MODES:
        raise PlannerError(f"unknown mode {mode!r} (choose one of {', '.join(PLANNER_MODES)})")
    choices: list[Choice] = []
    for q in workload.queries:
        if q.name not in trees:
            raise PlannerError(f"no operator tree for query {q.name}")
        if set(trees[q.name].relations) != q.relation_set:
            raise PlannerError(f"the tree {trees[q.name]} does not cover the relations of query {q.name} "
                               f"({', '.join(q.relations)})")
        choices.extend(tree_choices(workload, q.name, trees[q.name], q.name if mode == "individual" else "",
                                    partitioning, least_selective_first))
    return build_plan(workload, choices, mode, partitioning)
