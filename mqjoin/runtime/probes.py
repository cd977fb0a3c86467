"""Compiled probes: the edges of an epoch's plan as Python functions, and iterative probing.

* **Probes.**  A probe of the MIR ``M`` reaches the containers of ``M`` of every epoch its
  windows reach, one layout per epoch (:func:`~mqjoin.runtime.rules.choose_layout`): routed to
  one partition when the travelling tuple knows the container's partition attribute (one probe
  message), else broadcast to all (one message per partition); containers of several epochs
  laid out alike are reached with one message.  Epochs that have no container of ``M`` (the MIR
  was not materialised then) are **probed iteratively** (paper Section VII-B): through the
  base containers of ``M``'s relations one at a time, or a smaller MIR that has containers,
  keeping the combinations whose latest component arrived in such an epoch — so switching
  plans loses no result and duplicates none.
* **Speed.**  Every edge of the current plan is compiled into a specialised Python function
  (:mod:`mqjoin.runtime.codegen`: index positions, windows and routes become constants); for a
  static plan the probe functions are bound to their single container.

:class:`ProbeCompiler` adds this to the containers of
:class:`~mqjoin.runtime.containers.ContainerStore`; the
:class:`~mqjoin.runtime.executor.Executor` feeds it.  Compiling a plan gives, per relation,
the functions an arriving tuple goes through (``sources``); each probe reads the event time
from ``clock``:

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> from mqjoin.runtime.schedule import StaticSchedule
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> plan = optimize(w).plan
>>> pc = ProbeCompiler(StaticSchedule(plan))
>>> pc.open_epoch(0, plan, frozenset("RS"), 0.0, w)
>>> pc.compile_plan(0, 0)
>>> for r, tup in [("R", (0, 0.0, 1)), ("S", (0, 0.5, 1)), ("S", (1, 0.7, 2))]:
...     pc.clock[0] = tup[1]
...     for f in pc.sources[r]:
...         f((tup,))
>>> pc.raw["q"]
[(0, 0)]
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from mqjoin.model.errors import PlanError
from mqjoin.model.workload import JoinClass, is_connected
from mqjoin.planning.candidates import MIR
from mqjoin.runtime.codegen import compile_function, gated, key_expr, null_test
from mqjoin.runtime.containers import ContainerStore
from mqjoin.runtime.rules import (
    Emit,
    Insert,
    Layout,
    Probe,
    choose_layout,
    int_partition_expr,
    mir_key,
    partition_of,
    plan_rules,
    probe_pairs,
    windows_of,
)
from mqjoin.runtime.schedule import StaticSchedule
from mqjoin.runtime.windows import outside_source


class ProbeCompiler(ContainerStore):
    """The containers of a schedule's plans with the compiled edges of the current plan.

    ``collect``: keep result tuples (else only count them); ``triggers``: keep, per result, the
    arrival number of the tuple that produced it (``trigger[0]``, set by the feed);
    ``instrument``: count the operations (``ops``); ``admission(rule)``: a CPU budget — the gate
    ``admit(T)`` of each probe edge (see :mod:`mqjoin.runtime.shedding`)."""

    def __init__(self, schedule, *, collect: bool = True, triggers: bool = False, instrument: bool = False,
                 admission: Callable[[Probe], Callable[[float], bool]] | None = None):
        self.schedule = schedule
        self.static = isinstance(schedule, StaticSchedule)
        timing = schedule if self.static else schedule.policy  # epoch_of, start
        w = schedule.full
        super().__init__(timing.epoch_of, {r.name: r.window for r in w.relations}, w,
                         [0, 0, 0, 0] if instrument else None)  # see mqjoin.runtime.executor.Executor.operations
        self.collect, self.triggers = collect, triggers
        self.admission = admission
        self.raw: dict[str, list] = {}  # query → results: row indices in its relation order, after the trigger if kept
        self.counts: Counter = Counter()
        self.counters: dict[tuple[int, str], list[int]] = {}  # (plan index, probe edge) → messages
        self.history = [0]  # messages of iterative probing
        self.clock = [-math.inf]
        self.trigger = [0]
        self.sources: dict[str, tuple[Callable, ...]] = {}
        self.groups: list[tuple[Probe, list, list]] = []  # the current plan's probes and their reach
        self.adhoc: dict[tuple, Callable] = {}
        self.sinks: list[list] = []

    def compile_plan(self, pidx: int, epoch: int) -> None:
        """Compile the edges of plan ``pidx`` for tuples of ``epoch``."""
        rules = self.rules = plan_rules(self.schedule.plans[pidx], self.w)
        compiled: dict[str, Callable] = {}
        self.groups = []

        def fn(label: str) -> Callable:
            if label not in compiled:
                compiled[label] = self._compile_edge(rules.edges[label], pidx, epoch, fn)
            return compiled[label]

        self.sources = {r: tuple(fn(lab) for lab in labs) for r, labs in rules.sources.items()}
        if not self.static:  # feed the history containers of relations kept only filtered (open_epoch)
            plan = self.schedule.plans[pidx]
            for r in self.schedule.retained(epoch):
                if any(s.mir.relations == (r,) and s.mir.selection for s in plan.stores) and \
                        not any(s.mir.relations == (r,) and not s.mir.selection for s in plan.stores):
                    for layout in self.by_mir.get(mir_key(MIR.of(self.w, [r], ())), {}).get(epoch, ()):
                        put = compile_function("def put(t):\n    c.insert(t)\n", "put",
                                               {"c": self.containers[(layout, epoch)]})
                        self.sources[r] = self.sources.get(r, ()) + (put,)
        self.refresh()

    def _compile_edge(self, rule, pidx: int, epoch: int, fn: Callable[[str], Callable]) -> Callable:
        f = self._compile_rule(rule, pidx, epoch, fn)
        if rule.admit is None:
            return f
        # filters (docs/model.md §7): the tuple goes on only when it passes
        return compile_function("def admitted(t):\n    if admit(t):\n        f(t)\n", "admitted",
                                {"admit": rule.admit, "f": f})

    def _compile_rule(self, rule, pidx: int, epoch: int, fn: Callable[[str], Callable]) -> Callable:
        if isinstance(rule, Emit):
            raw = self.raw.setdefault(rule.query, [])
            counts = self.counts
            q = rule.query
            if not self.collect:
                return compile_function(f"def out(t):\n    counts[{q!r}] += 1\n", "out", {"counts": counts})
            # the result's row indices in the query's relation order, made at emission (the
            # travelling tuple can go at once)
            rows = "".join(f"t[{i}][0], " for i in rule.order)
            head = "trigger[0], " if self.triggers else ""
            return compile_function(f"def out(t):\n    append(({head}{rows}))\n    counts[{q!r}] += 1\n", "out",
                            {"append": raw.append, "counts": counts, "trigger": self.trigger})
        if isinstance(rule, Insert):
            c = self.containers[(rule.layout, epoch)]
            # c.insert is looked up per call: it is recompiled when the container gains an index
            if rule.order is None:
                return compile_function("def put(t):\n    c.insert(t)\n", "put", {"c": c})
            return compile_function("def put(t):\n    c.insert((" + "".join(f"t[{i}], " for i in rule.order) + "))\n",
                                    "put",
                            {"c": c})
        outs = [fn(o) for o in rule.outs]
        counter = self.counters.setdefault((pidx, rule.label), [0])
        groups: list = self._reach_groups(rule, epoch)  # kept current by refresh()
        gaps: list = [None]
        self.groups.append((rule, groups, epoch, gaps))
        onward = any(not isinstance(self.rules.edges[o], Emit) for o in rule.outs)
        probe = self.compile_probe(rule, groups, counter, outs, gaps, onward)
        return probe if self.admission is None else gated(probe, self.admission(rule), self.clock)

    def compile_probe(self, rule: Probe, groups: list, counter: list[int], outs: list[Callable],
                      gaps: list | None = None, onward: bool = False) -> Callable:
        """The function that probes the containers in ``groups`` (kept current by
        :meth:`refresh`: ``[(route, p, [index dicts of each container], [epochs])]``) and
        sends each result to ``outs``."""
        env: dict[str, Any] = {"groups": groups, "clock": self.clock, "counter": counter, "ops": self.ops,
                               "partition_of": partition_of, "reach": self.reach, "mk": rule.layout.mir,
                               "gaps": gaps if gaps is not None else [None], "expand": self.expand, "rule": rule}
        env.update({f"f{i}": f for i, f in enumerate(outs)})
        env.update({f"w{i}": win for i, (_, win) in enumerate(rule.windows)})
        key, null = key_expr("t", rule.key), null_test("t", rule.key)
        emit = []
        for i, (c, _) in enumerate(rule.windows):
            emit += [f"if {outside_source('T', f'm[{c}][1]', f'w{i}')}:", "    continue"]
        emit += ["r = t + m"] + [f"f{i}(r)" for i in range(len(outs))]
        if self.ops is not None and onward:
            emit.insert(len(emit) - len(outs), "ops[3] += 1")

        count = self.ops is not None
        if self.static and len(groups) == 1 and len(groups[0][2]) == 1:
            return self._compile_static_probe(rule, groups[0], env, key, null, emit, self.ops is not None)
        lines = ["def probe(t):", "    T = clock[0]"]
        dynamic = not self.static
        if dynamic:
            lines += ["    lo = reach(mk, T)"]
        lines += [f"    null = {null}", "    k = None if null else " + key,
                  "    for route, p, dictss, epochs in groups:"]
        if dynamic:
            lines += ["        live = [d for d, e in zip(dictss, epochs) if e >= lo]",
                      "        if not live:", "            continue"]
        else:
            lines += ["        live = dictss"]
        lines += ["        if route is None:",
                  "            counter[0] += p",
                  "            if null:", "                continue",
                  "            for dicts in live:",
                  "                for d in dicts:"]
        lines += _lookup(" " * 20, "d.get(k)", "continue", count, emit)
        lines += ["        else:",
                  "            counter[0] += 1",
                  "            if null:", "                continue",
                  "            v = t[route[0]][route[1]]",
                  "            for dicts in live:",
                  "                n = len(dicts)",
                  f"                part = 0 if n == 1 else ({int_partition_expr('v')} % n if v.__class__ is int else "
                  "partition_of(v, n))"]
        lines += _lookup(" " * 16, "dicts[part].get(k)", "continue", count, emit)
        if dynamic and (len(rule.mir.relations) > 1 or rule.mir.selection):
            lines += ["    missing = gaps[0]",
                      "    if missing and not null:",
                      "        g = [e for e in missing if e >= lo]",
                      "        if g:",
                      "            for r in expand(rule, t, T, set(g)):"]
            lines += [f"                f{i}(r)" for i in range(len(outs))]
        return compile_function("\n".join(lines) + "\n", "probe", env)

    @staticmethod
    def _compile_static_probe(rule: Probe, group: tuple, env: dict[str, Any], key: str, null: str, emit: list[str],
                              count: bool) -> Callable:
        """The probe of a static plan: one container, its index and route bound as constants
        (``count``: also count the operations, see :meth:`mqjoin.runtime.executor.Executor.operations`)."""
        route, p, (dicts,), _ = group
        env = {**env, "dicts": dicts}
        lines = ["def probe(t):"]
        if route is None:
            lines += [f"    counter[0] += {p}", f"    if {null}:", "        return", f"    k = {key}",
                      "    T = clock[0]", "    for d in dicts:"]
            lines += _lookup(" " * 8, "d.get(k)", "continue", count, emit)
        else:
            rc, rf = route
            n = len(dicts)
            lines += ["    counter[0] += 1", f"    if {null}:", "        return"]
            lines += ["    d = dicts[0]"] if n == 1 else [
                f"    v = t[{rc}][{rf}]",
                f"    d = dicts[{int_partition_expr('v')} % {n} if v.__class__ is int else partition_of(v, {n})]"]
            lines += _lookup(" " * 4, f"d.get({key})", "return", count, emit, ("T = clock[0]",))
        return compile_function("\n".join(lines) + "\n", "probe", env)

    def refresh(self) -> None:
        """Recompute, for every probe of the current plan, the containers it reaches (after
        containers were established or dropped)."""
        for rule, groups, epoch, gaps in self.groups:
            groups[:] = self._reach_groups(rule, epoch)
            # an MIR, or a filtered base store (docs/model.md §7), may lack containers in older epochs
            gaps[0] = self.missing(rule.layout.mir, epoch) if len(rule.mir.relations) > 1 or rule.mir.selection \
                else None
        self.adhoc.clear()

    def _reach_groups(self, rule: Probe, top: int) -> list:
        by_layout: dict[Layout, list] = {}
        for e2, layouts in sorted(self.by_mir.get(rule.layout.mir, {}).items()):
            if e2 <= top:
                layout = choose_layout(rule, layouts, self.fields)
                by_layout.setdefault(layout, []).append((e2, self.containers[(layout, e2)]))
        out = []
        for layout, conts in by_layout.items():
            dictss = [c.index(rule.pattern) for _, c in conts]
            out.append((rule.route_into(layout, self.fields), conts[0][1].p, dictss, [e for e, _ in conts]))
        return out

    # -- iterative probing of older partners ----------------------------------------------------

    def _adhoc_probe(self, rule: Probe, top: int) -> Callable:
        """A compiled probe of ``rule`` over the containers up to epoch ``top`` whose results go
        to the innermost list of ``self.sinks`` (iterative probing; cached until containers
        change)."""
        key = (rule, top)
        fn = self.adhoc.get(key)
        if fn is None:
            sinks = self.sinks
            fn = self.adhoc[key] = self.compile_probe(rule, self._reach_groups(rule, top), self.history,
                                                      [lambda r: sinks[-1].append(r)],
                                                      [self.missing(rule.layout.mir, top)])
        return fn

    def expand(self, rule: Probe, t: tuple, T: float, gaps: set[int]) -> list[tuple]:
        """Iterative probing: the MIR's combinations whose latest component arrived in an epoch
        of ``gaps`` (no container of the MIR there).  The MIR's relations are joined one at a
        time from their base containers — each probed under the rules of its epoch — until the
        relations left form an MIR that has containers itself (e.g. the older plan's ``TU`` when
        ``STU`` is new): that one is probed as a whole (recursively the same way), as the older
        plan did.  Combinations whose latest component is not in a gap are found directly in
        the MIR's own containers, so they are dropped here."""
        mir = rule.mir
        rels = list(mir.relations)
        joined = list(rule.travelling)
        order: list[str] = []
        rank = self.w.relation_rank
        while len(order) < len(rels):
            nxt = [r for r in rels if r not in order and any(c.member_of(r) and c.relations & set(joined)
                                                           for c in rule.classes)]
            if not nxt:
                raise PlanError(f"cannot probe {mir.label} from {', '.join(joined)}: not connected")
            r = min(nxt, key=lambda x: rank[x])
            order.append(r)
            joined.append(r)
        top = max(gaps)
        partials: list[tuple] = [t]
        layout_rels = list(rule.travelling)
        for k, r in enumerate(order):
            rest = order[k:]
            if k > 0 and len(rest) > 1:
                sub = MIR.of(self.w, rest, mir.classes)
                if mir_key(sub) in self.by_mir and is_connected(sub.relations, sub.classes):
                    partials = self._probe_whole(rule.classes, sub, layout_rels, partials, top)
                    layout_rels.extend(sub.relations)
                    break
            partials = self._probe_relation(rule.classes, r, layout_rels, partials, top)
            layout_rels.append(r)
            if not partials:
                return []
        # keep the combinations whose latest component is in a gap; reorder to the MIR's layout
        n0 = len(rule.travelling)
        perm = [layout_rels.index(r) for r in rels]
        epoch_of = self.epoch_of
        out = []
        for x in partials:
            latest = max(x[n0:], key=lambda b: b[1])
            if epoch_of(latest[1]) in gaps:
                out.append(t + tuple(x[i] for i in perm))
        return out

    def _hop(self, classes: tuple[JoinClass, ...], target: MIR, joined: list[str]) -> Probe:
        """The probe of one hop of iterative probing: ``joined`` partial tuples into ``target``."""
        travelling = tuple(joined)
        if target.is_base:
            pred = probe_pairs(classes, target.relations[0], joined)
        else:
            pred = []
            for c in classes:
                left = [a for a in c.members if a.relation in travelling]
                right = [a for a in c.members if a.relation in target.relation_set]
                if left and right:
                    pred.append((left[0], right[0]))
        f = self.fields
        windows = windows_of(self.w, target.relations)
        return Probe("", Layout("", mir_key(target), None), target, tuple(classes), travelling,  # type: ignore[arg-type]
                     tuple((travelling.index(a.relation), f[a.relation][a.name]) for a, _ in pred),
                     tuple((target.relations.index(b.relation), f[b.relation][b.name]) for _, b in pred),
                     None, windows, ())

    def _probe_relation(self, classes, r: str, joined: list[str], partials: list[tuple], top: int) -> list[tuple]:
        """One hop of iterative probing: the partials probe relation ``r``'s base containers of
        every epoch up to ``top`` (routed where the container's partitioning allows)."""
        return self._probe_partials(self._hop(classes, MIR.of(self.w, [r], ()), joined), partials, top)

    def _probe_whole(self, classes, sub: MIR, joined: list[str], partials: list[tuple], top: int) -> list[tuple]:
        """The partials probe the MIR ``sub`` as a whole (its containers up to epoch ``top``,
        older partners of its own gaps iteratively)."""
        return self._probe_partials(self._hop(classes, sub, joined), partials, top)

    def _probe_partials(self, rule: Probe, partials: list[tuple], top: int) -> list[tuple]:
        fn = self._adhoc_probe(rule, top)
        self.sinks.append([])
        try:
            for x in partials:
                fn(x)
        finally:
            out = self.sinks.pop()
        return out


def _lookup(ind: str, lookup: str, miss: str, count: bool, emit: list[str], before: tuple[str, ...] = ()) -> list[str]:
    """Source lines of one index look-up at indent ``ind``: ``matches = <lookup>``, ``miss``
    (``continue`` or ``return``) when there are none, ``before`` and then ``emit`` for every
    match; ``count``: also count the hash and the comparisons (see
    :meth:`mqjoin.runtime.executor.Executor.operations`)."""
    lines = [ind + "ops[0] += 1"] if count else []
    lines += [f"{ind}matches = {lookup}", f"{ind}if not matches:", f"{ind}    {miss}"]
    lines += [ind + "ops[2] += len(matches)"] if count else []
    lines += [ind + x for x in before]
    return lines + [ind + "for m in matches:"] + [ind + "    " + x for x in emit]
