"""Probe trees from chosen probe orders (paper Section V-B): the building of a :class:`Plan`.

Each chosen (partitioned) probe order is a path from its start relation through stores;
:func:`build_plan` merges the paths into a forest.  Orders that share a step (docs/model.md §4
identity, with the same target partition) share its node, the stores are laid out per
namespace (one per query in ``individual`` mode, one in ``shared`` and ``mqo``), and a
deterministic traversal gives every edge its label and every store its rules.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {selectivity: 0.1}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}''')
>>> from mqjoin.planning.optimizer import optimize
>>> plan = optimize(w).plan
>>> build_plan(w, plan.choices, plan.mode, plan.partitioning) == plan
True
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from mqjoin.model.workload import Attr, JoinClass, Workload
from mqjoin.planning.candidates import (MIR, Candidates, Step, owner_classes, owner_label, owner_selection,
                                       steps_of)
from mqjoin.planning.cost import broadcast_factor, memory_tuples, step_cost, store_parallelism
from mqjoin.planning.plan import Choice, Edge, Node, Plan, ProbeRule, Store, StoreRule, output_id, source_id

NodeKey = tuple[Any, ...]  # a node of the forest: (namespace, start) for a root, (namespace, step, partition) else


def route_attribute(classes: Iterable[JoinClass], travelling: Iterable[str], target: MIR,
                    partition: Attr) -> Attr | None:
    """The travelling attribute whose class holds the target's partition attribute."""
    rels = set(travelling)
    for c in classes:
        if any(target.canonical(a) == partition for a in c.members if a.relation in target.relation_set):
            for a in c.members:
                if a.relation in rels:
                    return a
    return None


def build_plan(workload: Workload, choices: Iterable[Choice], mode: str, partitioning: str,
               candidates: Candidates | None = None) -> Plan:
    """Merge chosen partitioned probe orders into probe trees with stores, labels and rules:
    the stores (:func:`_plan_stores`), the probe tree nodes with their sinks
    (:func:`_plan_nodes`), then edge labels and rules in a deterministic traversal.
    ``candidates``: those the choices were chosen among, enumerated from ``workload``: the
    steps of a chosen order and their costs without broadcast are read there instead of derived
    again (equal values)."""
    choices = normalise_choices(choices)
    rank = workload.relation_rank
    stores, replicas = _plan_stores(workload, choices)
    node_info, sinks = _plan_nodes(workload, choices, stores, replicas, candidates)

    # deterministic traversal: namespaces, then start relations, then children by step/partition
    children: dict[NodeKey, list[NodeKey]] = {}
    for key, info in node_info.items():
        children.setdefault(info["parent"], []).append(key)

    def child_order(k: NodeKey) -> tuple[Any, ...]:
        _, s, a = k
        return (s.target.sort_key(), a, tuple(c.members for c in s.classes))

    roots = sorted({(c.namespace, c.order.start) for c in choices}, key=lambda r: (r[0], rank[r[1]]))
    edges: list[Edge] = []
    nodes: list[Node] = []
    rules: dict[str, dict[str, StoreRule | ProbeRule]] = {s.id: {} for s in stores.values()}
    sources: dict[str, list[str]] = {}
    counter = [0]

    def label() -> str:
        counter[0] += 1
        return f"e{counter[0]}"

    def add_probe(key: NodeKey, parent_edge: str | None, root: str) -> str:
        info = node_info[key]
        store: Store = info["store"]
        lab = label()
        src = source_id(info["step"].prefix[0].relations[0]) if parent_edge is None \
            else node_info[info["parent"]]["store"].id
        edges.append(Edge(lab, src, store.id, "probe", info["layout"], info["route"]))
        nodes.append(Node(lab, parent_edge, root, info["step"], store.id, info["cost"], info["broadcast"],
                          tuple(info["owners"])))
        out: list[str] = []
        result_layout = info["layout"] + store.mir.relations
        for k in sorted(children.get(key, []), key=child_order):
            out.append(add_probe(k, lab, root))
        for sink in sinks.get(key, {}):
            ol = label()
            if sink.startswith("output:"):
                edges.append(Edge(ol, store.id, sink, "output", result_layout, None))
            else:
                target = by_id[sink]
                edges.append(Edge(ol, store.id, sink, "insert", result_layout,
                                  _find_attr(result_layout, target.partition)))
                rules[sink][ol] = StoreRule(ol)
            out.append(ol)
        pred = tuple(info["step"].predicate())
        rules[store.id][lab] = ProbeRule(lab, pred, tuple(out))
        return lab

    by_id: dict[str, Store] = {}
    for s in stores.values():
        by_id.setdefault(s.id, s)
    base_replicas: dict[tuple[str, str], list[Store]] = {}  # (namespace, relation) → its base stores
    for (ns, m), reps in replicas.items():
        if m.is_base:
            base_replicas.setdefault((ns, m.relations[0]), []).extend(reps)
    for ns, start in roots:
        root = f"{ns}:{start}" if ns else start
        outs = sources.setdefault(start, [])
        bases = base_replicas.get((ns, start), [])
        for rep in sorted(bases, key=lambda s: (s.partition, s.mir.sort_key())):
            lab = label()
            edges.append(Edge(lab, source_id(start), rep.id, "ingest", (start,), rep.partition))
            rules[rep.id][lab] = StoreRule(lab)
            outs.append(lab)
        for k in sorted(children.get((ns, start), []), key=child_order):
            outs.append(add_probe(k, None, root))
    # base stores of relations that start no order in that namespace still need ingestion
    for (ns, m), reps in sorted(replicas.items(), key=lambda kv: (kv[0][0], kv[0][1].sort_key())):
        if m.is_base and (ns, m.relations[0]) not in roots:
            for rep in sorted(reps, key=lambda s: s.partition):
                lab = label()
                edges.append(Edge(lab, source_id(m.relations[0]), rep.id, "ingest", m.relations, rep.partition))
                rules[rep.id][lab] = StoreRule(lab)
                sources.setdefault(m.relations[0], []).append(lab)

    ordered_sources = {r: tuple(sources[r]) for r in sorted(sources, key=lambda r: rank[r])}
    return Plan(workload, mode, partitioning, choices, tuple(stores.values()), tuple(edges), tuple(nodes),
                ordered_sources, rules)


def _plan_stores(workload: Workload, choices: tuple[Choice, ...]
                 ) -> tuple[dict[tuple[str, MIR, Attr], Store], dict[tuple[str, MIR], list[Store]]]:
    """The stores: every (namespace, MIR, partition) some step targets, with unique ids; and
    the replicas of each (namespace, MIR)."""
    store_keys: dict[tuple[str, MIR, Attr], None] = {}
    for c in choices:
        for m, a in zip(c.order.elements, c.order.partitions or ()):
            store_keys[(c.namespace, m, a)] = None
    stores: dict[tuple[str, MIR, Attr], Store] = {}
    used_ids: dict[str, tuple[str, MIR, Attr]] = {}
    for ns, m, a in sorted(store_keys, key=lambda k: (k[0], k[1].sort_key(), k[2])):
        sid = (f"{ns}:" if ns else "") + m.render_partition(a)
        if sid in used_ids:
            k = 2
            while f"{sid}#{k}" in used_ids:
                k += 1
            sid = f"{sid}#{k}"
        used_ids[sid] = (ns, m, a)
        stores[(ns, m, a)] = Store(sid, m, a, store_parallelism(workload, m.relations),
                                   memory_tuples(workload, m.relations, m.classes, m.selection), ns)
    replicas: dict[tuple[str, MIR], list[Store]] = {}
    for (ns, m, _), s in stores.items():
        replicas.setdefault((ns, m), []).append(s)

    return stores, replicas


def _plan_nodes(workload: Workload, choices: tuple[Choice, ...], stores: Mapping[tuple[str, MIR, Attr], Store],
                replicas: Mapping[tuple[str, MIR], list[Store]], candidates: Candidates | None = None
                ) -> tuple[dict[tuple[Any, ...], dict[str, Any]], dict[tuple[Any, ...], dict[str, None]]]:
    """The probe tree nodes (their parent, step, store, layout, route, owners, cost) and each
    node's sinks (``output:q`` or the ids of the MIR stores it fills).  A chosen order's steps
    and their costs without broadcast are the ``candidates``' where it is among them
    (:func:`_steps`), else derived from ``workload``.

    Tree nodes are keyed by step identity (docs/model.md §4) and target partition: identical steps
    run — and are paid — once.  Orders can reach the same step through differently
    partitioned prefixes (in shared mode); those prefixes compute the same partial results,
    so the node hangs off the first of them.  Keys: (namespace, start) for a root,
    (namespace, step, partition) for a node."""
    node_info: dict[NodeKey, dict[str, Any]] = {}
    sinks: dict[NodeKey, dict[str, None]] = {}  # node → sink ids ("output:q" or store ids)
    unit_costs = {} if candidates is None else candidates.step_cost
    for c in choices:
        key: tuple[Any, ...] = (c.namespace, c.order.start)
        layout: tuple[str, ...] = (c.order.start,)
        for s, a, m in zip(_steps(workload, c, candidates), c.order.partitions or (), c.order.elements):
            parent, key = key, (c.namespace, s, a)
            info = node_info.get(key)
            if info is None:
                store = stores[(c.namespace, m, a)]
                unit = unit_costs.get(s)
                node_info[key] = info = {
                    "parent": parent, "step": s, "store": store, "layout": layout,
                    "route": route_attribute(s.classes, layout, m, a), "owners": {},
                    "cost": step_cost(workload, s, a, store.parallelism) if unit is None
                    else unit * broadcast_factor(a in s.known, store.parallelism),
                    "broadcast": a not in s.known and store.parallelism > 1,
                }
            info["owners"][owner_label(c.owner)] = None
            layout = layout + tuple(r for r in m.relations)
        if isinstance(c.owner, MIR):
            for rep in replicas.get((c.namespace, c.owner), []):
                sinks.setdefault(key, {})[rep.id] = None
        else:
            sinks.setdefault(key, {})[output_id(c.owner)] = None
    return node_info, sinks


def _steps(workload: Workload, c: Choice, candidates: Candidates | None) -> tuple[Step, ...]:
    """The steps of a chosen order: the candidates' (the same values, their properties
    computed already) where the order is among them, else :func:`~mqjoin.planning.candidates.steps_of`."""
    i = None if candidates is None else candidates.position(c.owner, c.order)
    if candidates is not None and i is not None:
        return candidates.steps[c.owner][c.order.start][i]
    return steps_of(c.order, owner_classes(c.owner, workload), workload, owner_selection(c.owner, workload))


def normalise_choices(choices: Iterable[Choice]) -> tuple[Choice, ...]:
    """Keep one materialisation order per (namespace, MIR, start) — the first — and only MIRs
    that the namespace's query orders use, directly or through other materialised MIRs.

    (An ILP solution may materialise an MIR nobody uses when its steps are paid anyway, and
    the individual plans merged in ``shared`` mode may each bring an order for one MIR.)"""
    choices = tuple(choices)
    first: dict[tuple[str, MIR, str], Choice] = {}
    for c in choices:
        if isinstance(c.owner, MIR):
            first.setdefault((c.namespace, c.owner, c.order.start), c)
    by_mir: dict[tuple[str, MIR], list[Choice]] = {}  # the first orders of each (namespace, MIR), in order
    for (ns, mir, _), mc in first.items():
        by_mir.setdefault((ns, mir), []).append(mc)
    needed: set[tuple[str, MIR]] = set()
    frontier = [c for c in choices if not isinstance(c.owner, MIR)]
    while frontier:
        c = frontier.pop()
        for m in c.order.elements:
            if not m.is_base and (c.namespace, m) not in needed:
                needed.add((c.namespace, m))
                frontier.extend(by_mir.get((c.namespace, m), ()))
    return tuple(c for c in choices if not isinstance(c.owner, MIR)
                 or ((c.namespace, c.owner) in needed and first[(c.namespace, c.owner, c.order.start)] is c))


def _find_attr(layout: Iterable[str], attr: Attr) -> Attr | None:
    return attr if attr.relation in set(layout) else None

