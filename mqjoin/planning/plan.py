"""Plans: chosen probe orders merged into a forest of probe trees (paper Section V-B).

Each chosen (partitioned) probe order is a path from its start relation through stores.
Orders that share a step (docs/model.md §4 identity, with the same target partition) share its
node: a node is one executed step, and a tuple reaching a node is copied along every
outgoing edge.  Every edge gets a unique,
deterministic label; every store gets rules keyed by the incoming edge label:

* a **store rule** keeps the arriving tuple (input tuples of a base relation, or results
  of a materialisation order arriving at an MIR store);
* a **probe rule** probes the store with a predicate and sends results along its out edges
  (next stores, MIR stores, query outputs).

In ``individual`` mode every query has its own stores and trees (a *namespace* per query);
in ``shared`` mode the individual orders are merged, so identical steps run once.

The forest is built by :func:`mqjoin.planning.probe_trees.build_plan` and priced anew under
other statistics by :mod:`mqjoin.planning.recost`.

Plans are plain values and round-trip through JSON (:meth:`Plan.to_json`, :meth:`Plan.from_json`);
a plan read back is validated (:func:`check_plan`): every edge label, store, relation and query
it names exists, or :class:`~mqjoin.model.errors.PlanError` says which does not.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> plan = optimize(parse_workload('''
... defaults: {rate: 100, selectivity: 0.01}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}''')).plan
>>> print(plan.render())
R  ⇒ store R[a] (e1)
  ─e2→ S[a]  cost 100  ⇒ q (e3)
S  ⇒ store S[a] (e4)
  ─e5→ R[a]  cost 100  ⇒ q (e6)
>>> Plan.from_json(plan.to_json()) == plan
True
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Iterator, Mapping

from mqjoin.planning.candidates import MIR, Owner, ProbeOrder, Step
from mqjoin.model.filters import Selection, parse_where
from mqjoin.model.errors import MqjoinError, PlanError
from mqjoin.model.workload import Attr, JoinClass, Workload


@dataclass(frozen=True)
class Choice:
    """A chosen partitioned probe order of an owner (query or MIR), in a namespace."""

    owner: Owner
    order: ProbeOrder
    namespace: str = ""


@dataclass(frozen=True)
class Store:
    """A store: an MIR kept partitioned by ``partition`` into ``parallelism`` partitions."""

    id: str
    mir: MIR
    partition: Attr
    parallelism: int
    memory: float  # tuples, docs/model.md §5
    namespace: str = ""


@dataclass(frozen=True)
class Edge:
    """A labelled edge of a probe tree.

    ``kind``: ``ingest`` (input → base store), ``probe`` (partial result → store to probe),
    ``insert`` (materialisation result → MIR store), ``output`` (result → query output).
    ``layout`` is the relation order of the travelling tuple.  ``route`` is the attribute of
    the travelling tuple that selects the target partition (``None``: broadcast to all
    partitions of the target; outputs are not routed)."""

    label: str
    source: str
    target: str
    kind: str
    layout: tuple[str, ...]
    route: Attr | None


@dataclass(frozen=True)
class StoreRule:
    edge: str


@dataclass(frozen=True)
class ProbeRule:
    edge: str
    predicate: tuple[tuple[Attr, Attr], ...]  # (travelling attribute, stored attribute)
    out: tuple[str, ...]


@dataclass(frozen=True)
class Node:
    """One executed step of a probe tree, reached over edge ``edge``."""

    edge: str
    parent: str | None  # label of the edge into the parent node; None for a root's child
    root: str
    step: Step
    store: str
    cost: float
    broadcast: bool
    owners: tuple[str, ...]


def source_id(relation: str) -> str:
    return f"input:{relation}"


def output_id(query: str) -> str:
    return f"output:{query}"


def output_query(target: str) -> str:
    """The query of an output id (:func:`output_id`'s inverse)."""
    kind, _, query = target.partition(":")
    if kind != "output" or not query:
        raise PlanError(f"{target!r} is not a query output (expected 'output:<query>')")
    return query








@dataclass(frozen=True)
class Plan:
    """A deployable plan: stores, labelled edges, rules and the probe-tree nodes."""

    workload: Workload
    mode: str
    partitioning: str
    choices: tuple[Choice, ...]
    stores: tuple[Store, ...]
    edges: tuple[Edge, ...]
    nodes: tuple[Node, ...]
    sources: Mapping[str, tuple[str, ...]]  # relation → out edges of its input
    rules: Mapping[str, Mapping[str, StoreRule | ProbeRule]]  # store id → edge → rule

    @property
    def probe_cost(self) -> float:
        return sum(n.cost for n in self.nodes)

    @property
    def memory(self) -> float:
        return sum(s.memory for s in self.stores)

    @cached_property
    def edge(self) -> dict[str, Edge]:
        return {e.label: e for e in self.edges}

    @cached_property
    def store(self) -> dict[str, Store]:
        return {s.id: s for s in self.stores}

    def probe_orders(self) -> dict[str, dict[str, str]]:
        """Query → start relation → rendered probe order (``individual``: each query's own)."""
        out: dict[str, dict[str, str]] = {}
        for c in self.choices:
            if isinstance(c.owner, str):
                out.setdefault(c.owner, {})[c.order.start] = c.order.render()
        return {q: dict(sorted(d.items(), key=lambda kv: self.workload.relation_rank[kv[0]]))
                for q, d in sorted(out.items(), key=lambda kv: self.workload.query_names.index(kv[0]))}

    def kept_twice(self) -> list[list[str]]:
        """The MIRs kept under more than one partition attribute in one namespace, each as its
        stores' renderings: replicas.  Under ``replicas`` that is the policy; under ``single``
        only mode ``shared`` has them, as it merges plans that each query made for itself.

        >>> from pathlib import Path
        >>> import mqjoin
        >>> from mqjoin.model.workload import load_workload
        >>> from mqjoin.planning.optimizer import optimize
        >>> demo = load_workload(Path(mqjoin.__file__).parent / "workloads" / "demo.yaml")
        >>> optimize(demo, mode="shared").plan.kept_twice()
        [['S[a]', 'S[b]'], ['T[b]', 'T[c]']]
        >>> optimize(demo).plan.kept_twice()
        []
        """
        by: dict[tuple[str, MIR], list[Store]] = {}
        for st in self.stores:
            by.setdefault((st.namespace, st.mir), []).append(st)
        return [[st.mir.render_partition(st.partition) for st in sorted(group, key=lambda st: st.partition.name)]
                for group in by.values() if len(group) > 1]

    def materializations(self) -> dict[str, dict[str, str]]:
        """MIR store (with namespace) → start relation → rendered probe order that maintains it."""
        out: dict[str, dict[str, str]] = {}
        for c in self.choices:
            if isinstance(c.owner, MIR):
                key = f"{c.namespace}:{c.owner.label}" if c.namespace else c.owner.label
                out.setdefault(key, {})[c.order.start] = c.order.render()
        return out

    def render(self, edges: Iterable[str] | None = None) -> str:
        """The probe-tree forest as indented text (paper Figure 4); ``edges``: only the steps
        with these edge labels (e.g. one query's part of the forest)."""
        keep = None if edges is None else set(edges)
        nodes = [n for n in self.nodes if keep is None or n.edge in keep]
        children: dict[str | None, list[Node]] = {}
        for n in nodes:
            children.setdefault(n.parent if n.parent else "root:" + n.root, []).append(n)
        lines = []

        def sinks(out_edges: Iterable[str]) -> str:
            parts = []
            for lab in out_edges:
                e = self.edge[lab]
                if e.kind == "output":
                    parts.append(f"{e.target.split(':', 1)[1]} ({lab})")
                elif e.kind in ("insert", "ingest"):
                    parts.append(f"store {e.target} ({lab})")
            return f"  ⇒ {', '.join(parts)}" if parts else ""

        def walk(key: str, depth: int) -> None:
            for n in children.get(key, []):
                bc = " (broadcast)" if n.broadcast else ""
                rule = self.rules[n.store][n.edge]
                lines.append(f"{'  ' * depth}─{n.edge}→ {n.store}  cost {n.cost:g}{bc}"
                             f"{sinks(rule.out)}")  # type: ignore[union-attr]
                walk(n.edge, depth + 1)

        for root in dict.fromkeys(n.root for n in nodes):
            ns, _, rel = root.rpartition(":")
            ingest = [lab for lab in self.sources.get(rel, ())
                      if self.edge[lab].kind == "ingest" and self.store[self.edge[lab].target].namespace == ns]
            lines.append(root + sinks(ingest))
            walk("root:" + root, 1)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"Plan({self.mode}/{self.partitioning}: probe cost {self.probe_cost:g}, "
                f"{len(self.stores)} stores, {len(self.nodes)} steps)")

    def _repr_html_(self) -> str:
        """Notebook display: the summary line and the probe-tree forest (:meth:`render`)."""
        import html

        return f"<b>{html.escape(repr(self))}</b><pre>{html.escape(self.render())}</pre>"

    # -- JSON ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "mqjoin-plan/1",
            "workload": self.workload.to_spec(),
            "mode": self.mode,
            "partitioning": self.partitioning,
            "probe_cost": self.probe_cost,
            "memory": self.memory,
            "choices": [{"owner": _owner_json(c.owner), "namespace": c.namespace, "start": c.order.start,
                         "elements": [_mir_json(m) for m in c.order.elements],
                         "partitions": [str(a) for a in c.order.partitions or ()],
                         "rendered": c.order.render()} for c in self.choices],
            "stores": [{"id": s.id, "mir": _mir_json(s.mir), "partition": str(s.partition),
                        "parallelism": s.parallelism, "memory": s.memory, "namespace": s.namespace}
                       for s in self.stores],
            "edges": [{"label": e.label, "source": e.source, "target": e.target, "kind": e.kind,
                       "layout": list(e.layout), "route": None if e.route is None else str(e.route)}
                      for e in self.edges],
            "nodes": [{"edge": n.edge, "parent": n.parent, "root": n.root, "step": _step_json(n.step),
                       "store": n.store, "cost": n.cost, "broadcast": n.broadcast, "owners": list(n.owners)}
                      for n in self.nodes],
            "sources": {r: list(es) for r, es in self.sources.items()},
            "rules": {sid: {e: ({"type": "store"} if isinstance(r, StoreRule) else
                                {"type": "probe", "predicate": [[str(a), str(b)] for a, b in r.predicate],
                                 "out": list(r.out)})
                            for e, r in rs.items()} for sid, rs in self.rules.items()},
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Plan":
        """The plan of :meth:`to_dict`, validated: a missing key, a dangling edge label, an
        unknown store, relation or query, or a bad kind raises :class:`PlanError` naming it —
        never a ``KeyError``, neither here nor later when the plan runs.

        >>> from mqjoin.planning.optimizer import optimize
        >>> from mqjoin.model.workload import parse_workload
        >>> w = parse_workload('''
        ... defaults: {selectivity: 0.1}
        ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
        ... queries: {q: "R(a), S(a)"}''')
        >>> d = optimize(w).plan.to_dict()
        >>> Plan.from_dict(d) == optimize(w).plan
        True
        >>> d["rules"]["S[a]"]["e9"] = {"type": "store"}
        >>> Plan.from_dict(d)
        Traceback (most recent call last):
        ...
        mqjoin.model.errors.PlanError: malformed plan: the rules of store S[a]: no edge e9 in the plan
        """
        if not isinstance(d, Mapping):
            raise PlanError(f"malformed plan: expected a JSON object, got {type(d).__name__}")
        if d.get("format") != "mqjoin-plan/1":
            raise PlanError(f"not an mqjoin plan (format {d.get('format')!r}, expected 'mqjoin-plan/1')")
        with _malformed("malformed plan: its workload is invalid: ", "malformed plan: its workload is invalid: "):
            w = Workload.from_spec(_field(d, "workload", "the plan"))
        with _malformed("malformed plan: ", "malformed plan JSON: "):
            plan = Plan(
                w, _field(d, "mode", "the plan"), _field(d, "partitioning", "the plan"),
                tuple(_choice_from(c, w) for c in _field(d, "choices", "the plan")),
                tuple(_store_from(s, w) for s in _field(d, "stores", "the plan")),
                tuple(_edge_from(e) for e in _field(d, "edges", "the plan")),
                tuple(_node_from(n, w) for n in _field(d, "nodes", "the plan")),
                {r: tuple(es) for r, es in _items(_field(d, "sources", "the plan"), "sources")},
                {sid: {e: _rule_from(e, r, sid) for e, r in _items(rs, f"the rules of store {sid}")}
                 for sid, rs in _items(_field(d, "rules", "the plan"), "rules")})
        check_plan(plan)
        return plan

    @staticmethod
    def from_json(text: str) -> "Plan":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlanError(f"plan is not valid JSON: {e}") from None
        return Plan.from_dict(d)


@contextmanager
def _malformed(invalid: str, broken: str) -> Iterator[None]:
    """Turn what reading a part of a plan's JSON raises into a :class:`PlanError`: a typed error
    of an invalid value after ``invalid``, a Python error of a broken structure after ``broken``
    (its type named); a ``PlanError`` passes unchanged."""
    try:
        yield
    except PlanError:
        raise
    except MqjoinError as e:
        raise PlanError(f"{invalid}{e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise PlanError(f"{broken}{type(e).__name__}: {e}") from None


def _field(d: Any, key: str, where: str) -> Any:
    """``d[key]``, or a :class:`PlanError` saying which key of what is missing."""
    if not isinstance(d, Mapping):
        raise PlanError(f"malformed plan: {where} must be a JSON object, got {type(d).__name__}")
    if key not in d:
        raise PlanError(f"malformed plan: {where} has no key {key!r}")
    return d[key]


def _items(d: Any, where: str) -> Iterable[tuple[str, Any]]:
    if not isinstance(d, Mapping):
        raise PlanError(f"malformed plan: {where} must be a JSON object, got {type(d).__name__}")
    return d.items()


def _choice_from(c: Any, w: Workload) -> Choice:
    order = ProbeOrder(_field(c, "start", "a choice"),
                       tuple(_mir_from(m, w) for m in _field(c, "elements", "a choice")),
                       tuple(_attr(a) for a in _field(c, "partitions", "a choice")))
    return Choice(_owner_from(_field(c, "owner", "a choice"), w), order, _field(c, "namespace", "a choice"))


def _store_from(s: Any, w: Workload) -> Store:
    return Store(_field(s, "id", "a store"), _mir_from(_field(s, "mir", "a store"), w),
                 _attr(_field(s, "partition", "a store")), int(_field(s, "parallelism", "a store")),
                 float(_field(s, "memory", "a store")), _field(s, "namespace", "a store"))


def _edge_from(e: Any) -> Edge:
    route = _field(e, "route", "an edge")
    return Edge(_field(e, "label", "an edge"), _field(e, "source", "an edge"), _field(e, "target", "an edge"),
                _field(e, "kind", "an edge"), tuple(_field(e, "layout", "an edge")),
                None if route is None else _attr(route))


def _node_from(n: Any, w: Workload) -> Node:
    return Node(_field(n, "edge", "a node"), _field(n, "parent", "a node"), _field(n, "root", "a node"),
                _step_from(_field(n, "step", "a node"), w), _field(n, "store", "a node"),
                float(_field(n, "cost", "a node")), bool(_field(n, "broadcast", "a node")),
                tuple(_field(n, "owners", "a node")))


def _rule_from(edge: str, r: Any, store: str) -> StoreRule | ProbeRule:
    where = f"the rule of edge {edge} at store {store}"
    kind = _field(r, "type", where)
    if kind == "store":
        return StoreRule(edge)
    if kind == "probe":
        return ProbeRule(edge, tuple((_attr(a), _attr(b)) for a, b in _field(r, "predicate", where)),
                         tuple(_field(r, "out", where)))
    raise PlanError(f"malformed plan: {where} has type {kind!r} (expected 'store' or 'probe')")


EDGE_KINDS = ("ingest", "probe", "insert", "output")


def check_plan(plan: Plan) -> None:
    """Raise :class:`PlanError` unless every label, store id, relation and query ``plan``
    refers to exists and every kind is known — the checks that make a plan read from JSON
    safe to run (an engine never meets a dangling reference).

    >>> from dataclasses import replace
    >>> from mqjoin.planning.optimizer import optimize
    >>> from mqjoin.model.workload import parse_workload
    >>> plan = optimize(parse_workload('''
    ... defaults: {selectivity: 0.1}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    ... queries: {q: "R(a), S(a)"}''')).plan
    >>> check_plan(plan)
    >>> check_plan(replace(plan, sources={**plan.sources, "X": ("e1",)}))
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.PlanError: malformed plan: sources name relation X, which the workload does not declare
    """
    from mqjoin.planning.options import check_mode, check_policy

    def bad(message: str) -> PlanError:
        return PlanError(f"malformed plan: {message}")

    try:
        check_mode(plan.mode)
        check_policy(plan.partitioning)
    except MqjoinError as err:
        raise bad(str(err)) from None
    relations = {r.name for r in plan.workload.relations}
    queries = set(plan.workload.query_names)
    stores: dict[str, Store] = {}
    for s in plan.stores:
        if s.id in stores:
            raise bad(f"two stores have the id {s.id}")
        stores[s.id] = s
    edges: dict[str, Edge] = {}
    for e in plan.edges:
        if e.label in edges:
            raise bad(f"two edges have the label {e.label}")
        edges[e.label] = e

    def endpoint(ref: str, edge: Edge, role: str) -> None:
        if ref in stores:
            return
        kind, _, name = ref.partition(":")
        if (kind, role) == ("input", "source") and name in relations:
            return
        if (kind, role) == ("output", "target") and name in queries:
            return
        raise bad(f"edge {edge.label} has {role} {ref!r}, which is no store of the plan"
                  + (", no input of a declared relation" if role == "source" else ", no output of a query"))

    for e in plan.edges:
        if e.kind not in EDGE_KINDS:
            raise bad(f"edge {e.label} has kind {e.kind!r} (expected one of {', '.join(EDGE_KINDS)})")
        endpoint(e.source, e, "source")
        endpoint(e.target, e, "target")
        if (e.kind == "output") != e.target.startswith("output:"):
            raise bad(f"edge {e.label} of kind {e.kind} has target {e.target!r}")
        for r in e.layout:
            if r not in relations:
                raise bad(f"edge {e.label} carries relation {r}, which the workload does not declare")

    def known(label: Any, where: str) -> Edge:
        if label not in edges:
            raise bad(f"{where}: no edge {label} in the plan")
        return edges[label]

    for rel, labels in plan.sources.items():
        if rel not in relations:
            raise bad(f"sources name relation {rel}, which the workload does not declare")
        for lab in labels:
            if known(lab, f"the sources of {rel}").source != source_id(rel):
                raise bad(f"the sources of {rel} list edge {lab}, which leaves {edges[lab].source}")
    for sid in stores:
        if sid not in plan.rules:
            raise bad(f"store {sid} has no rules (give it an empty object if nothing arrives)")
    for sid, rules in plan.rules.items():
        if sid not in stores:
            raise bad(f"rules are given for store {sid}, which the plan does not have")
        for lab, rule in rules.items():
            edge = known(lab, f"the rules of store {sid}")
            if rule.edge != lab or edge.target != sid:
                raise bad(f"the rule of edge {lab} is filed under store {sid}, but the edge leads to {edge.target}")
            if isinstance(rule, ProbeRule):
                for out in rule.out:
                    known(out, f"the probe rule of edge {lab} at store {sid}")
    for n in plan.nodes:
        known(n.edge, "a node")
        if n.parent is not None:
            known(n.parent, f"the parent of node {n.edge}")
        if n.store not in stores:
            raise bad(f"node {n.edge} probes store {n.store}, which the plan does not have")
        if not isinstance(plan.rules[n.store].get(n.edge), ProbeRule):
            raise bad(f"node {n.edge} probes store {n.store}, which has no probe rule for it")
    for e in plan.edges:  # every store an edge reaches has a rule for it: engines look it up
        if e.target in stores and e.label not in plan.rules.get(e.target, {}):
            raise bad(f"store {e.target} has no rule for its incoming edge {e.label}")


def _attr(s: str) -> Attr:
    if not isinstance(s, str):
        raise PlanError(f"malformed attribute {s!r} in plan (expected 'R.a')")
    rel, _, name = s.partition(".")
    if not rel or not name:
        raise PlanError(f"malformed attribute {s!r} in plan (expected 'R.a')")
    return Attr(rel, name)


def _classes_json(classes: Iterable[JoinClass]) -> list[dict[str, Any]]:
    return [{"members": [str(a) for a in c.members], "selectivity": c.selectivity} for c in classes]


def _classes_from(d: list[Any]) -> tuple[JoinClass, ...]:
    return tuple(JoinClass(tuple(_attr(a) for a in c["members"]), float(c["selectivity"])) for c in d)


def _mir_json(m: MIR) -> dict[str, Any]:
    d: dict[str, Any] = {"relations": list(m.relations), "classes": _classes_json(m.classes)}
    if m.selection:
        d["selection"] = [{"relation": s.relation, "filters": [" AND ".join(map(str, cs)) for cs in s.filters],
                           "fraction": s.fraction} for s in m.selection]
    return d


def _mir_from(d: Mapping[str, Any], w: Workload) -> MIR:
    relations = {r.name: r for r in w.relations}
    selection = [Selection(s["relation"], tuple(parse_where(f, relations, "plan")[0].comparisons for f in s["filters"]),
                           float(s["fraction"])) for s in d.get("selection", ())]
    return MIR.of(w, d["relations"], _classes_from(d["classes"]), selection)


def _owner_json(o: Owner) -> Any:
    return o if isinstance(o, str) else _mir_json(o)


def _owner_from(d: Any, w: Workload) -> Owner:
    return d if isinstance(d, str) else _mir_from(d, w)


def _step_json(s: Step) -> dict[str, Any]:
    return {"prefix": [_mir_json(m) for m in s.prefix], "target": _mir_json(s.target),
            "classes": _classes_json(s.classes)}


def _step_from(d: Mapping[str, Any], w: Workload) -> Step:
    return Step(tuple(_mir_from(m, w) for m in d["prefix"]), _mir_from(d["target"], w), _classes_from(d["classes"]))
