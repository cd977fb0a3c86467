"""Where a plan's probe cost goes: by step, by query and by chosen probe order.

The breakdown is computed from the plan, so it always sums to the plan's probe cost (which
equals the ILP objective at the optimum):

* **by step** — every executed step (plan node) with its cost ``|⋈P|/|P| × χ``;
* **by query** — a step used by several probe orders is split equally between them, and a
  step that maintains an MIR is split equally between the probe orders that use the MIR
  (recursively), so each query's share is what it pays in the shared plan;
* **by order** — each chosen probe order of a query with the steps it runs and what they
  cost together (shared steps counted in full).

>>> from pathlib import Path
>>> from mqjoin.model.workload import load_workload
>>> from mqjoin.planning.optimizer import optimize
>>> plan = optimize(load_workload(Path(__file__).parents[1] / "workloads" / "paper_v2.yaml")).plan
>>> by_q = cost_by_query(plan)
>>> {q: round(v["total"], 6) for q, v in by_q.items()}
{'q1': 350.0, 'q2': 350.0}
>>> sum(v["total"] for v in by_q.values()) == plan.probe_cost
True
>>> [(s.edge, s.cost, s.shared) for s in cost_by_step(plan)][:2]
[('e2', 100.0, False), ('e5', 100.0, True)]
>>> [(o.query, o.start, o.cost, o.shared_steps) for o in order_costs(plan)][:2]
[('q1', 'R', 100.0, ()), ('q1', 'S', 175.0, ('e5',))]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial

from mqjoin.model.schema import Attr
from mqjoin.planning.candidates import MIR, Step, order_steps, owner_label, probe_order_cost
from mqjoin.planning.plan import Node, Plan, ProbeRule


@dataclass(frozen=True)
class StepCost:
    """One executed step of a plan with its cost and users."""

    edge: str
    root: str
    step: str
    store: str
    cost: float
    chi: int
    owners: tuple[str, ...]
    predicate: str

    @property
    def shared(self) -> bool:
        """Whether several probe orders (of queries or MIRs) use the step and pay it once."""
        return len(self.owners) > 1


def cost_by_step(plan: Plan) -> list[StepCost]:
    """Every step of the plan (in plan order) with cost, broadcast factor and users."""
    out = []
    for n in plan.nodes:
        st = plan.store[n.store]
        rule = plan.rules[n.store][n.edge]
        pred = ", ".join(f"{a} = {b}" for a, b in rule.predicate) if isinstance(rule, ProbeRule) else ""
        out.append(StepCost(n.edge, n.root, n.step.render(), n.store, n.cost,
                            st.parallelism if n.broadcast else 1, n.owners, pred))
    return out


def namespace_of(root: str) -> str:
    """The namespace of a plan node's root (``"mqo:q1"`` → ``"mqo"``)."""
    return root.rpartition(":")[0]


def _mir_users(plan: Plan) -> dict[tuple[str, str], list[str]]:
    users: dict[tuple[str, str], dict[str, None]] = {}
    for c in plan.choices:
        for m in c.order.elements:
            if not m.is_base:
                users.setdefault((c.namespace, m.label), {})[owner_label(c.owner)] = None
    return {k: list(v) for k, v in users.items()}


def attribute(plan: Plan, nodes: Iterable[Node] | None = None) -> list[tuple[str, str, float, bool]]:
    """``(query, step edge, amount, shared)`` for every share of every step's cost."""
    queries = set(plan.workload.query_names)
    users = _mir_users(plan)
    out: list[tuple[str, str, float, bool]] = []

    def give(ns: str, owner: str, edge: str, amount: float, shared: bool, depth: int = 0) -> None:
        if owner in queries and (ns, owner) not in users:
            out.append((owner, edge, amount, shared))
            return
        us = users.get((ns, owner), [])
        if not us or depth > 50:  # an MIR nobody uses cannot occur in a normalised plan
            out.append(("(unused MIR " + owner + ")", edge, amount, shared))
            return
        for u in us:
            give(ns, u, edge, amount / len(us), shared or len(us) > 1, depth + 1)

    for n in plan.nodes if nodes is None else nodes:
        ns = namespace_of(n.root)
        for o in n.owners:
            give(ns, o, n.edge, n.cost / len(n.owners), len(n.owners) > 1)
    return out


def cost_by_query(plan: Plan) -> dict[str, dict[str, float]]:
    """Per query: ``total`` share of the probe cost, split into ``own`` (steps it alone
    uses) and ``shared`` (its share of shared steps).  The totals sum to the probe cost."""
    out = {q: {"total": 0.0, "own": 0.0, "shared": 0.0} for q in plan.workload.query_names}
    for q, _, amount, shared in attribute(plan):
        d = out.setdefault(q, {"total": 0.0, "own": 0.0, "shared": 0.0})
        d["total"] += amount
        d["shared" if shared else "own"] += amount
    return out


@dataclass(frozen=True)
class OrderCost:
    """A chosen probe order of a query with what it would cost alone and its shared steps."""

    query: str
    start: str
    order: str
    cost: float
    steps: tuple[str, ...]
    shared_steps: tuple[str, ...]


def _node_cost(nodes: Mapping[tuple[str, Step, Attr], Node], namespace: str, step: Step, partition: Attr) -> float:
    return nodes[(namespace, step, partition)].cost


def order_costs(plan: Plan) -> list[OrderCost]:
    """The chosen probe order per (query, start relation), with the plan nodes it runs."""
    key = {(namespace_of(n.root), n.step, plan.store[n.store].partition): n for n in plan.nodes}
    w = plan.workload
    out = []
    for c in plan.choices:
        if isinstance(c.owner, MIR):
            continue
        classes = w.query(c.owner).classes
        ns = c.namespace
        steps = [(s, a) for s, a in order_steps(c.order, classes, w) if (ns, s, a) in key]
        nodes = [key[(ns, s, a)] for s, a in steps]
        cost = probe_order_cost(steps, partial(_node_cost, key, ns))
        out.append(OrderCost(c.owner, c.order.start, c.order.render(), cost,
                             tuple(n.edge for n in nodes), tuple(n.edge for n in nodes if len(n.owners) > 1)))
    rank = w.relation_rank
    names = w.query_names
    return sorted(out, key=lambda o: (names.index(o.query), rank[o.start]))
