"""Predicted beside measured: what the cost model says a run of a plan will count, next to
what the run counted, per step and per store — and the join sizes a run measured, to
re-plan on them (``mqjoin run --json``, ``mqjoin optimize --stats-from RUN.json``).

**What the model predicts for a run.**  The model's totals are counted over the horizon
(docs/model.md §4–§5, :mod:`mqjoin.planning.cost`); a run over an input spanning ``S`` time
units is predicted by the same formulas over ``S``: a step with prefix ``P`` and start ``X``
ships the partial results of ``⋈P`` whose latest tuple is ``X``'s and whose other tuples lie
within their windows of it, ``χ`` times each::

    messages = |⋈P| · χ · ∫₀^S Π_{R ∈ P, R ≠ X} min(w_R, t) dt        (w_R = ∞ without a window)

(:func:`~mqjoin.planning.cost.step_messages`), and a store of ``M`` holds at most
``|⋈M| · Π_{R ∈ M} min(w_R, S)`` rows.  When ``S`` is the horizon these are the plan's own step
costs and memory.  The measured side is the engine's count: probe messages per edge and the
most rows a store held at once.  The ratio measured / predicted is 1 on data where the model's
assumptions hold (uniform, independent join values, uniform arrivals); it says where they do not.

**Order of arrival.**  Where the workload gives the share ``o`` of ``⋈P``'s results that the
start ``X`` completes (docs/model.md §2), the step's messages are ``|⋈P| · χ · |P| · o`` times
the integral: the symmetric ``1/|P|`` of the full history replaced by ``o``.

**Sizes measured by a run** (:func:`run_sizes`).  A step's messages divided by ``χ`` and by
its exposure (the integral above, times ``|P| · o``) estimate ``|⋈P|`` from the starts the plan probes from;
an MIR store's rows divided by ``Π min(w_R, S)`` measure ``|⋈M|``, preferred when present.
Re-planning on them (:meth:`~mqjoin.model.workload.Workload.with_sizes`) makes the
predictions of the sets the run saw agree with the run.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... relations: {R: {attributes: [a], rate: 2}, S: {attributes: [a], rate: 2, window: 1}}
... queries: {q: "R(a), S(a)"}
... selectivities: {R.a = S.a: 0.5}''')
>>> from mqjoin.planning.optimizer import optimize
>>> plan = optimize(w.with_defaults(horizon=3.0)).plan
>>> check = check_run(plan, {}, {}, 3.0)
>>> check.total("messages")[0] == plan.probe_cost, check.total("rows")[0] == plan.memory
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from mqjoin.model.errors import PlanError
from mqjoin.model.tables import time_range
from mqjoin.model.workload import Workload, restrict_classes
from mqjoin.model.sizes import MeasuredSize
from mqjoin.planning.cost import exposure, held_volume, is_close, last_share, memory_tuples, step_messages
from mqjoin.planning.diff import PlanDiff, plan_diff
from mqjoin.planning.plan import Node, Plan
from mqjoin.planning.recost import recost
from mqjoin.support.units import MEMORY_UNIT, PROBE_COST_UNIT, number


@dataclass(frozen=True)
class Count:
    """One figure of a run: the model's prediction and the engine's count."""

    kind: str  # "messages" or "rows"
    store: str
    step: str  # the step (``R » S[a]``-style rendering); '' for a store's total
    predicted: float
    measured: float

    @property
    def ratio(self) -> float:
        """measured / predicted (``inf`` when nothing was predicted but something counted,
        ``nan`` when nothing was measured)."""
        if math.isnan(self.measured):
            return math.nan
        if self.predicted > 0:
            return self.measured / self.predicted
        return 1.0 if self.measured == 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "store": self.store, **({"step": self.step} if self.step else {}),
                "predicted": self.predicted, "measured": None if math.isnan(self.measured) else self.measured,
                "ratio": None if math.isinf(self.ratio) or math.isnan(self.ratio) else self.ratio}


@dataclass(frozen=True)
class RunCheck:
    """Predicted beside measured for one run of ``plan``: per step (messages), per store
    (messages and rows), over an input of ``span`` time units."""

    span: float
    steps: tuple[Count, ...]
    stores: tuple[Count, ...]
    #: per step: (prefix relations, start, owner query or '', χ, measured messages, the share
    #: of the prefix's join the start completes) for run_sizes
    shapes: tuple[tuple[tuple[str, ...], str, str, int, int, float], ...] = ()
    #: per unfiltered MIR store: (relations, a query joining them so, most rows held, Π min(w_R, S))
    held: tuple[tuple[tuple[str, ...], str, int, float], ...] = ()
    #: the messages were counted over [since, span] (:func:`check_run`)
    since: float = 0.0

    def total(self, kind: str) -> tuple[float, float]:
        rows = [c for c in self.stores if c.kind == kind]
        return sum(c.predicted for c in rows), sum(c.measured for c in rows)

    def worst(self, n: int = 5, share: float = 0.01) -> list[Count]:
        """The ``n`` store figures furthest from their prediction (by ``|log ratio|``) among
        stores holding at least ``share`` of the plan's total of their kind."""
        big = []
        for c in self.stores:
            pred, meas = self.total(c.kind)
            if max(c.measured / meas if meas else 0, c.predicted / pred if pred else 0) >= share:
                big.append(c)
        return sorted(big, key=lambda c: -abs(math.log(c.ratio)) if 0 < c.ratio < math.inf else -math.inf)[:n]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"span": self.span, **({"since": self.since} if self.since else {}),
                               "steps": [c.to_dict() for c in self.steps],
                               "stores": [c.to_dict() for c in self.stores]}
        for kind in ("messages", "rows"):
            pred, meas = self.total(kind)
            out[f"total_{kind}"] = {"predicted": pred, "measured": meas, "ratio": meas / pred if pred else None}
        out["shapes"] = [{"prefix": list(p), "start": x, "query": q, "broadcast": chi, "messages": m, "share": o}
                         for p, x, q, chi, m, o in self.shapes]
        out["held"] = [{"relations": list(r), "query": q, "rows": n, "volume": v} for r, q, n, v in self.held]
        return out

    def render(self, n: int = 5) -> str:
        lines = []
        for kind in ("messages", "rows"):
            pred, meas = self.total(kind)
            lines.append(f"{'probe messages' if kind == 'messages' else 'store rows (most at once)'}: predicted "
                         f"{pred:,.0f}, measured {meas:,.0f} ({meas / pred if pred else math.inf:.3g}×)")
        worst = self.worst(n)
        if worst:
            lines.append("furthest from the model (stores with ≥ 1 % of the total):")
            lines += [f"  {c.store:<32} {c.kind:<8} predicted {c.predicted:>12,.0f}  measured {c.measured:>12,.0f}"
                      f"  {c.ratio:.3g}×" for c in worst]
        return "\n".join(lines)


def check_run(plan: Plan, messages: Mapping[str, int], rows: Mapping[str, int], span: float,
              per_store: bool = False, since: float = 0.0, workload: Workload | None = None) -> RunCheck:
    """Predicted beside measured for a run of ``plan`` over ``span`` time units that sent
    ``messages`` (probe edge label → messages) and held ``rows`` (store id → most rows).
    ``per_store``: ``messages`` are per store id (an engine that counts no more, e.g. Spark's
    batches): the stores are compared, the steps only predicted (measured ``nan``).
    ``since``: the plan probed from this time unit on (an adaptive run's last plan): its
    messages are predicted over ``[since, span]``, its stores' rows as if filled from 0.
    ``workload``: predicted on its statistics rather than the plan's (the part of the input a
    stopped run reached, :attr:`RunCounts.workload`)."""
    w = plan.workload if workload is None else workload
    steps, shapes = [], []
    predicted = {s.id: 0.0 for s in plan.stores}
    measured = {s.id: float(messages.get(s.id, 0)) if per_store else 0.0 for s in plan.stores}
    for n in plan.nodes:
        store = plan.store[n.store]
        start = n.step.prefix[0].relations[0]
        pred = step_messages(w, n.step, span, since) * (store.parallelism if n.broadcast else 1)
        predicted[n.store] += pred
        if per_store:
            steps.append(Count("messages", n.store, n.step.render(), pred, math.nan))
            continue
        got = int(messages.get(n.edge, 0))
        measured[n.store] += got
        steps.append(Count("messages", n.store, n.step.render(), pred, got))
        chi = store.parallelism if n.broadcast else 1
        owner = next((o for o in n.owners if o in w.query_names), "")
        share = last_share(w, n.step.prefix_relations, start, n.step.classes, n.step.selection)
        shapes.append((tuple(sorted(n.step.prefix_relations)), start, owner, chi, got, share))
    stores: list[Count] = []
    held: dict[tuple[tuple[str, ...], str], tuple[tuple[str, ...], str, int, float]] = {}
    for s in plan.stores:
        stores.append(Count("messages", s.id, "", predicted[s.id], measured[s.id]))
        volume = held_volume(w, s.mir.relations, span)
        stores.append(Count("rows", s.id, "", memory_tuples(w, s.mir.relations, s.mir.classes, s.mir.selection, span),
                            rows.get(s.id, 0)))
        if not s.mir.is_base and not s.mir.selection:
            shape = tuple(c.members for c in s.mir.classes)
            query = next((q.name for q in w.queries if s.mir.relation_set <= q.relation_set
                          and tuple(c.members for c in restrict_classes(q.classes, s.mir.relations)) == shape), "")
            key = (s.mir.relations, query)
            held[key] = (s.mir.relations, query, max(rows.get(s.id, 0), held.get(key, ((), "", 0))[2]), volume)
    return RunCheck(span, tuple(steps), tuple(stores), tuple(shapes), tuple(held.values()), since)


def same_layout(a: Plan, b: Plan) -> bool:
    """Whether ``a`` and ``b`` have the same stores, edges and steps (their costs may differ:
    the same plan under other statistics), so that counts of a run of one are counts of the other."""
    def layout(p: Plan) -> tuple[Any, ...]:
        return (tuple((s.id, s.partition, s.parallelism) for s in p.stores), p.edges,
                tuple((n.edge, n.store, n.step.render(), n.broadcast) for n in p.nodes))

    return a is b or layout(a) == layout(b)


@dataclass(frozen=True)
class RunCounts:
    """What one run of ``plan`` counted, kept raw (the arguments of :func:`check_run`) so that
    it can be set beside the model again after an edit that keeps the plan's layout — a new
    selectivity, measured sizes — which moves the predictions, not the counts.  ``label``
    names the run for the reader (``mqo #1``)."""

    label: str
    plan: Plan
    messages: Mapping[str, int]
    rows: Mapping[str, int]
    span: float
    per_store: bool = False
    since: float = 0.0
    #: the statistics of the part of the input the run reached, when it stopped before the end
    #: of an input whose arrivals are not spread evenly over its keys (TPC-H's tables arrive in
    #: key order: a run stopped a third of the way joined a third of the keys, not a ninth):
    #: predicted on them; None: on the plan's
    workload: Workload | None = None

    def check(self, plan: Plan | None = None) -> RunCheck | None:
        """Predicted (by ``plan``'s workload, or :attr:`workload`; default the run's own plan)
        beside measured, or ``None`` when ``plan`` is laid out differently from the plan that ran."""
        plan = self.plan if plan is None else plan
        if not same_layout(plan, self.plan):
            return None
        return check_run(plan, self.messages, self.rows, self.span, self.per_store, self.since, self.workload)


def store_counts(label: str, plan: Plan, stores: Any, tables: Mapping[str, Any],
                 batches: Any = None) -> RunCounts | None:
    """The counts of an engine that reports per micro-batch and store (``stores``: a frame with
    columns ``store``, ``messages``, ``rows``, e.g. a Spark deployment's) over ``tables``:
    messages summed, the most rows a store held after a batch; ``None`` when it counted none.
    ``batches`` (a frame with a column ``max_ts`` per micro-batch, the deployment's): the run
    is compared over the event time it reached — a run stopped early with the prediction for
    the part that ran, not for the whole input."""
    if stores is None or not len(stores):
        return None
    messages = {k: int(v) for k, v in stores.groupby("store")["messages"].sum().items()}
    rows = {k: int(v) for k, v in stores.groupby("store")["rows"].max().items()}
    first, span = time_range(tables)
    if batches is not None and len(batches) and "max_ts" in batches and batches["max_ts"].notna().any():
        span = min(span, float(batches["max_ts"].max()) - first)
    return RunCounts(label, plan, messages, rows, span, per_store=True)


def run_sizes(workload: Workload, check: Mapping[str, Any]) -> tuple[MeasuredSize, ...]:
    """Join sizes measured by a run, from the ``predicted`` section of ``run --json``
    (:meth:`RunCheck.to_dict`): per prefix of two or more relations, its steps' messages over
    ``χ`` and their exposures (module docstring).  A prefix some query filters gets the size of
    that query (it includes the filters); sets the workload does not join alike are left to
    :meth:`~mqjoin.model.workload.Workload.with_sizes` to drop."""
    try:
        span, since = float(check["span"]), float(check.get("since", 0.0))
        shapes = [(tuple(s["prefix"]), str(s["start"]), str(s["query"]), int(s["broadcast"]), float(s["messages"]),
                   float(s.get("share", 1 / len(s["prefix"])))) for s in check["shapes"]]
        held = {(tuple(sorted(h["relations"])), str(h["query"])): (float(h["rows"]), float(h["volume"]))
                for h in check.get("held", ())}
    except (KeyError, TypeError, ValueError) as e:
        raise PlanError(f"the run's 'predicted' section is malformed ({e!r}); "
                        "write it with 'mqjoin run --json'") from None
    order = {r.name: i for i, r in enumerate(workload.relations)}
    # per set and scope (the join, or one query's filtered join): its steps' counts and volumes
    # (a step shared by several queries' orders once), and an MIR store's rows, the exact count
    seen: dict[tuple[str | None, tuple[str, ...], str], tuple[float, float]] = {}
    for prefix, start, query, chi, got, share in shapes:
        for r in prefix:
            workload.relation(r)
        rels = tuple(sorted(prefix, key=order.__getitem__))
        scope = _scope(workload, rels, query)
        if len(prefix) < 2 or scope == "" or (scope, rels, start) in seen:
            continue
        seen[scope, rels, start] = (got / chi, len(prefix) * share * (
            exposure(workload, prefix, start, span) - (exposure(workload, prefix, start, since) if since > 0 else 0.0)))
    found: dict[tuple[str | None, tuple[str, ...]], tuple[float, float]] = {}
    for (scope, rels, _), (count, volume) in seen.items():
        c, v = found.get((scope, rels), (0.0, 0.0))
        found[scope, rels] = (c + count, v + volume)
    for (prefix, query), rows_volume in held.items():
        rels = tuple(sorted(prefix, key=order.__getitem__))
        scope = _scope(workload, rels, query)
        if scope != "":
            found[scope, rels] = rows_volume
    return tuple(MeasuredSize(scope, rels, max(count, 1.0) / volume)
                 for (scope, rels), (count, volume) in found.items() if volume > 0)


def running_sizes(plan: Plan, messages: Mapping[str, int], rows: Mapping[str, int], start: float, end: float,
                  plan_start: float = 0.0, min_count: int = 10) -> tuple[MeasuredSize, ...]:
    """Join sizes of the running ``plan``'s prefixes and MIRs measured while it ran, in time
    units since the input's first tuple: its steps' ``messages`` (edge → messages) sent in
    ``[start, end]`` (an epoch), and its MIR stores' ``rows`` held at ``end`` — those only
    when the stores have been filled over the MIR's whole volume (the plan ran from the first
    tuple, ``plan_start = 0``, or for longer than every window of the MIR's relations: an MIR
    store a plan switch created holds nothing older); likewise a step's messages only when
    the steps before it probed base stores or such filled MIR stores.  A size counted from
    fewer than ``min_count`` partial results (messages over χ, rows) is left out: its relative
    error, about ``1/√count``, would be larger than what it corrects."""
    check = check_run(plan, messages, rows, end, since=start)
    w = plan.workload

    def filled(relations: Iterable[str]) -> bool:
        return plan_start <= 0 or all((win := w.window(r)) is not None and win <= end - plan_start for r in relations)

    by_edge = {n.edge: n for n in plan.nodes}

    def path_filled(n: Node) -> bool:
        while n.parent is not None:
            n = by_edge[n.parent]
            mir = plan.store[n.store].mir
            if not mir.is_base and not filled(mir.relations):
                return False
        return True

    shapes = tuple(sh for n, sh in zip(plan.nodes, check.shapes) if sh[4] >= min_count * sh[3] and path_filled(n))
    held = tuple(h for h in check.held if h[2] >= min_count and filled(h[0]))
    return run_sizes(w, replace(check, shapes=shapes, held=held).to_dict())


def measured_workload(workload: Workload, check: Mapping[str, Any]) -> Workload:
    """``workload`` with the join sizes a run measured (:func:`run_sizes` of its ``predicted``
    section) — what ``mqjoin optimize --stats-from`` and the explorer's "re-optimise on what
    was measured" plan on.  Everything else of the workload stays as it is; sizes of sets it
    no longer joins as the run's plan did are left out."""
    return workload.with_sizes(run_sizes(workload, check), strict=False)


def _scope(workload: Workload, relations: Iterable[str], query: str) -> str | None:
    """Where a size of ``relations`` measured in ``query``'s plan belongs (docs/model.md §2):
    ``None`` (the unfiltered join) when ``query`` filters none of them and every query joins
    them alike, else ``query``; ``""`` when there is no query to give it to."""
    rels = frozenset(relations)
    if query and query in workload.query_names and any(workload.query(query).filter_of(r) for r in rels):
        return query
    shapes = {tuple(c.members for c in restrict_classes(q.classes, rels)) for q in workload.queries
              if rels <= q.relation_set}
    if len(shapes) == 1:
        return None
    return query if query in workload.query_names else ""


@dataclass(frozen=True)
class Replan:
    """A plan re-optimised on measured sizes beside the plan chosen without them, both costed
    under the measured sizes (``diff``'s "before" is the old plan re-costed), and the old
    plan's own estimates."""

    sizes: tuple[MeasuredSize, ...]
    diff: PlanDiff
    estimated_cost: float  # the old plan's probe cost on the estimates it was chosen on
    estimated_memory: float

    def render(self) -> str:
        d = self.diff
        head = (f"re-planned on {len(self.sizes)} join sizes measured by the run; the plan chosen on the estimates "
                f"costs {number(d.cost_before)} {PROBE_COST_UNIT} and holds {number(d.memory_before)} {MEMORY_UNIT} "
                f"on the measured sizes (it was estimated at {number(self.estimated_cost)} and "
                f"{number(self.estimated_memory)}):")
        return head + "\n" + "\n".join("  " + line for line in d.summary().splitlines())

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": [{"query": m.query, "relations": list(m.relations), "value": m.value} for m in self.sizes],
                "estimated_cost_before": self.estimated_cost, "estimated_memory_before": self.estimated_memory,
                "diff": self.diff.to_dict()}


def replan_report(before: Plan, after: Plan) -> Replan:
    """Compare ``before`` (optimised without measured sizes) with ``after`` (optimised with
    them, ``after.workload``), both under the measured sizes."""
    w = after.workload
    diff = replace(plan_diff(before, after), cost_before=recost(before, w), memory_before=memory_on(before, w))
    return Replan(w.sizes, diff, before.probe_cost, before.memory)


def memory_on(plan: Plan, workload: Workload | None = None, span: float | None = None) -> float:
    """The rows ``plan``'s stores (every replica) hold at the end of a run over ``span`` time
    units (default the horizon) under ``workload``'s statistics (default the plan's own) — the
    same plan's :attr:`~mqjoin.planning.plan.Plan.memory` on measured sizes, or the state a
    run of another span predicts (what ``--spark-mode auto`` decides on)."""
    w = plan.workload if workload is None else workload
    return sum(memory_tuples(w, s.mir.relations, s.mir.classes, s.mir.selection, span) for s in plan.stores)


def pareto_front(points: Iterable[tuple[float, float]]) -> list[bool]:
    """Which of the ``(probe cost, memory)`` points no other point beats: none has both at
    most as large and one smaller (equal up to float rounding counts as equal).

    >>> pareto_front([(10, 5), (8, 9), (12, 5), (10, 5), (9, 9)])
    [True, True, False, True, False]
    """
    pts = list(points)

    def le(a: float, b: float) -> bool:
        return a < b or is_close(a, b)

    return [not any(le(c, cost) and le(m, mem) and not (is_close(c, cost) and is_close(m, mem)) for c, m in pts)
            for cost, mem in pts]
