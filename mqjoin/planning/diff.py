"""Plan diffs: which probe orders changed, which stores appeared or disappeared.

Plans are compared by their rendered probe orders (``R » S[b] » T[c]``, per query and start
relation), their materialised MIRs and their store ids — the same vocabulary every view uses.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {rate: 100, parallelism: 1}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b, c]}, U: {attributes: [c]}}
... queries: {q1: "R(a), S(a,b), T(b)", q2: "S(b), T(b,c), U(c)"}
... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.015, T.c = U.c: 0.01}
... ''')
>>> d = plan_diff(optimize(w, mode="individual", mirs=False).plan, optimize(w, mirs=False).plan)
>>> d.cost_before, d.cost_after
(950.0, 800.0)
>>> d.changed_orders[0]
('q1', 'R', 'R » S[a] » T[b]', 'R » S[b] » T[b]')
>>> print(d.summary().splitlines()[0])
probe cost 950 → 800 tuples/s (−150, −15.8 %); memory 600 → 400 tuples (−200)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqjoin.planning.plan import Plan
from mqjoin.support.units import MEMORY_UNIT, PROBE_COST_UNIT, number, percent_change


def _pct(before: float, after: float) -> str:
    if before == 0:
        return ""
    return f", {percent_change((after - before) / before)}"


def _delta(before: float, after: float) -> str:
    d = after - before
    return ("+" if d >= 0 else "−") + number(abs(d))


@dataclass(frozen=True)
class PlanDiff:
    """What changed from plan ``a`` to plan ``b``.

    ``changed_orders``: ``(query, start, order in a, order in b)`` where both have the
    (query, start) but chose different probe orders; ``added_orders`` / ``removed_orders``:
    ``(query, start, order)`` of queries only one plan answers.  ``added_stores`` /
    ``removed_stores``: store ids (MIR and partition attribute, e.g. ``ST[b]``);
    ``added_mirs`` / ``removed_mirs``: materialised MIRs."""

    cost_before: float
    cost_after: float
    memory_before: float
    memory_after: float
    changed_orders: tuple[tuple[str, str, str, str], ...]
    added_orders: tuple[tuple[str, str, str], ...]
    removed_orders: tuple[tuple[str, str, str], ...]
    added_stores: tuple[str, ...]
    removed_stores: tuple[str, ...]
    added_mirs: tuple[str, ...]
    removed_mirs: tuple[str, ...]

    @property
    def plan_changed(self) -> bool:
        """Whether the plans differ in any order or store (costs alone do not count)."""
        return bool(self.changed_orders or self.added_orders or self.removed_orders
                    or self.added_stores or self.removed_stores or self.added_mirs or self.removed_mirs)

    def summary(self, max_lines: int = 12) -> str:
        """A few lines of text: costs, then the changed orders and stores."""
        lines = [(f"probe cost {number(self.cost_before)} → {number(self.cost_after)} {PROBE_COST_UNIT} "
                  f"({_delta(self.cost_before, self.cost_after)}{_pct(self.cost_before, self.cost_after)}); "
                  f"memory {number(self.memory_before)} → {number(self.memory_after)} {MEMORY_UNIT} "
                  f"({_delta(self.memory_before, self.memory_after)})")]
        if not self.plan_changed:
            lines.append("same probe orders and stores")
            return "\n".join(lines)
        body = []
        for q, s, a, b in self.changed_orders:
            body.append(f"{q} from {s}: {a}  ⟶  {b}")
        for q, s, o in self.added_orders:
            body.append(f"+ {q} from {s}: {o}")
        for q, s, o in self.removed_orders:
            body.append(f"− {q} from {s}: {o}")
        if self.added_stores:
            body.append("stores appeared: " + ", ".join(self.added_stores))
        if self.removed_stores:
            body.append("stores disappeared: " + ", ".join(self.removed_stores))
        if self.added_mirs:
            body.append("MIRs materialised: " + ", ".join(self.added_mirs))
        if self.removed_mirs:
            body.append("MIRs no longer materialised: " + ", ".join(self.removed_mirs))
        if len(body) > max_lines:
            body = body[:max_lines - 1] + [f"… and {len(body) - max_lines + 1} more changes"]
        return "\n".join(lines + body)

    def to_dict(self) -> dict[Any, Any]:
        return dict(self.__dict__)


def plan_diff(a: Plan, b: Plan) -> PlanDiff:
    """Compare two plans (e.g. before and after an edit, or ``mqo`` and ``individual``)."""
    oa, ob = a.probe_orders(), b.probe_orders()
    changed, added, removed = [], [], []
    for q in list(oa) + [q for q in ob if q not in oa]:
        starts_a, starts_b = oa.get(q, {}), ob.get(q, {})
        for s in list(starts_a) + [s for s in starts_b if s not in starts_a]:
            if s in starts_a and s in starts_b:
                if starts_a[s] != starts_b[s]:
                    changed.append((q, s, starts_a[s], starts_b[s]))
            elif s in starts_b:
                added.append((q, s, starts_b[s]))
            else:
                removed.append((q, s, starts_a[s]))
    sa, sb = [s.id for s in a.stores], [s.id for s in b.stores]
    ma, mb = list(a.materializations()), list(b.materializations())
    return PlanDiff(
        cost_before=a.probe_cost, cost_after=b.probe_cost, memory_before=a.memory, memory_after=b.memory,
        changed_orders=tuple(changed), added_orders=tuple(added), removed_orders=tuple(removed),
        added_stores=tuple(s for s in sb if s not in sa), removed_stores=tuple(s for s in sa if s not in sb),
        added_mirs=tuple(m for m in mb if m not in ma), removed_mirs=tuple(m for m in ma if m not in mb),
    )


def plan_signature(plan: Plan) -> tuple[tuple[str, str, str], ...]:
    """A plan's identity for plan diagrams: its rendered probe orders per (query, start) and
    the orders that maintain its materialised MIRs.

    >>> from mqjoin.model.workload import parse_workload
    >>> from mqjoin.planning.optimizer import optimize
    >>> w = parse_workload('''
    ... defaults: {rate: 100, selectivity: 0.01}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}
    ... ''')
    >>> plan_signature(optimize(w).plan)
    (('q', 'R', 'R » S[a]'), ('q', 'S', 'S » R[a]'))
    """
    out = [(q, s, o) for q, by in plan.probe_orders().items() for s, o in by.items()]
    out += [(m, s, o) for m, by in plan.materializations().items() for s, o in by.items()]
    return tuple(out)
