"""Store containers: where the in-process executor keeps the entries of every store and epoch.

* **Containers.**  A store keeps one container per epoch (paper Algorithm 4): a base store's
  container of epoch ``ℓ`` holds the relation's tuples that arrived in ``ℓ``, an MIR store's
  the MIR tuples whose latest component arrived in ``ℓ``.  A container is split into the
  store's ``parallelism`` partitions by its partition attribute; each partition keeps a hash
  index per access pattern (built when a probe first needs it).  Entries outside every window
  are purged periodically (base containers from the front — they fill in ``ts`` order — MIR
  containers by a scan), so memory stays bounded; probes check windows themselves.
* **Reference counting.**  When an epoch starts, containers of MIRs its plan does not use and
  of relations no active query uses are dropped, and so are containers no window reaches.

Three layers: :class:`Container` holds one container's entries and indexes;
:class:`ContainerIndex` is the bookkeeping every backend shares (which containers exist, the
reference counting; the distributed Spark backend keeps the entries in its own stores);
:class:`ContainerStore` is that bookkeeping with a :class:`Container` per (layout, epoch), the
base of :class:`~mqjoin.runtime.executor.Executor`.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> plan = optimize(w).plan
>>> stores = ContainerStore(lambda ts: 0, {"R": 1.0, "S": 1.0}, w)
>>> stores.open_epoch(0, plan, frozenset("RS"), 0.0, w)
>>> stores.count(), sorted(stores.store_rows(plan).values())
(2, [0, 0])
>>> (r, *_), = [c for c in stores.containers.values() if c.layout.mir.relations == ("R",)],
>>> r.insert(((0, 0.0, 7),)); r.insert(((1, 3.0, 8),)); r.rows()
2
>>> r.purge(3.0); r.rows()  # the first entry is out of R's window at time 3
1
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mqjoin.model.workload import Workload
from mqjoin.planning.candidates import MIR
from mqjoin.planning.plan import Plan
from mqjoin.runtime.codegen import compile_function, key_expr, null_test
from mqjoin.runtime.rules import (Layout, MirKey, field_positions, int_partition_expr, layout_of, mir_key, partition_of,
                                  windows_of)
from mqjoin.runtime.windows import compile_expired, expiry


class Container:
    """One store's entries of one epoch: ``p`` partitions, each with a hash index per access
    pattern (a tuple of (component, field) positions of a stored entry)."""

    def __init__(self, layout: Layout, epoch: int, p: int, part_pos: tuple[int, int],
                 windows: tuple[tuple[int, float], ...], ops: list[int] | None = None):
        self.ops = ops  # operation counters (hashes, moves, …) of an instrumented executor
        self.layout = layout
        self.epoch = epoch
        self.p = p
        self.part_pos = part_pos
        self.windows = windows
        self.expired = compile_expired(windows)
        self.fifo = len(layout.mir.relations) == 1  # base entries expire in insertion order
        self.entries: list = [deque() if self.fifo else [] for _ in range(p)]
        self.indexes: dict[tuple, list[dict]] = {}
        self.max_rows = 0
        self.journal: list | None = None  # entries inserted since the journal was opened
        finite = [w for _, w in windows]
        w = min(finite) if finite else math.inf
        self.interval = math.inf if not finite else ((w / 4 if self.fifo else w) if w > 0 else 0.0)
        self.next_purge = -math.inf if finite else math.inf
        self.insert: Callable[[tuple], None] = self._compile_insert()

    def rows(self) -> int:
        return sum(len(e) for e in self.entries)

    def _compile_insert(self) -> Callable[[tuple], None]:
        pc, pf = self.part_pos
        lines = ["def insert(e):",
                 "    part = 0" if self.p == 1 else
                 f"    v = e[{pc}][{pf}]\n    part = {int_partition_expr('v')} % {self.p} if v.__class__ is int else "
                 f"partition_of(v, {self.p})", "    entries[part].append(e)"]
        if self.journal is not None:
            lines.append("    journal.append(e)")
        if self.ops is not None:  # a move into the store, a hash per index
            lines.append(f"    ops[1] += 1\n    ops[0] += {len(self.indexes)}")
        env: dict[str, Any] = {"entries": self.entries, "partition_of": partition_of, "journal": self.journal,
                               "new_list": deque if self.fifo else list, "ops": self.ops}
        for i, (pat, dicts) in enumerate(self.indexes.items()):
            env[f"idx{i}"] = dicts
            lines += [f"    if not ({null_test('e', pat)}):",
                      f"        k = {key_expr('e', pat)}",
                      f"        lst = idx{i}[part].get(k)",
                      "        if lst is None:",
                      f"            idx{i}[part][k] = new_list((e,))",
                      "        else:",
                      "            lst.append(e)"]
        return compile_function("\n".join(lines) + "\n", "insert", env)

    def index(self, pat: tuple) -> list[dict]:
        """The per-partition hash index of access pattern ``pat`` (built on first use)."""
        dicts = self.indexes.get(pat)
        if dicts is None:
            dicts = self.indexes[pat] = [{} for _ in range(self.p)]
            new_list = deque if self.fifo else list
            for part, entries in enumerate(self.entries):
                d = dicts[part]
                for e in entries:
                    k = tuple(e[c][f] for c, f in pat)
                    if None not in k:
                        k = k[0] if len(k) == 1 else k
                        lst = d.get(k)
                        if lst is None:
                            d[k] = new_list((e,))
                        else:
                            lst.append(e)
            self.insert = self._compile_insert()
        return dicts

    def open_journal(self) -> list:
        """Record every entry inserted from now on (the Spark backend's state snapshots)."""
        self.journal = []
        self.insert = self._compile_insert()
        return self.journal

    def purge(self, T: float) -> None:
        """Drop the entries some window excludes at time ``T`` (probes at ``T`` or later cannot
        use them: event time only grows)."""
        self.max_rows = max(self.max_rows, self.rows())
        if not self.windows:
            self.next_purge = math.inf
            return
        keys = [(dicts, pat) for pat, dicts in self.indexes.items()]
        for part in range(self.p):
            q = self.entries[part]
            if self.fifo:
                expired = []
                while q and self.expired(q[0], T):
                    expired.append(q.popleft())
            else:
                live, expired = [], []
                for e in q:
                    (expired if self.expired(e, T) else live).append(e)
                q[:] = live
            for e in expired:
                for dicts, pat in keys:
                    k = tuple(e[c][f] for c, f in pat)
                    if None in k:
                        continue
                    k = k[0] if len(k) == 1 else k
                    lst = dicts[part][k]
                    if self.fifo:
                        lst.popleft()
                    else:
                        lst.remove(e)
                    if not lst:
                        del dicts[part][k]
        self.next_purge = T + self.interval if self.interval > 0 else math.nextafter(T, math.inf)



class ContainerIndex:
    """Which containers (layout, epoch) exist, and the reference counting that creates and
    drops them (paper Section VI) — the bookkeeping of every backend: the in-process executor
    keeps each container's entries in a :class:`Container`, the distributed Spark backend in
    a store per layout with an ``_ep`` column.  Subclasses extend :meth:`establish` (True when
    the container is new) and :meth:`drop` (the containers dropped)."""

    def __init__(self, epoch_of: Callable[[float], int], windows: Mapping[str, float | None]):
        self.epoch_of = epoch_of
        self.win = dict(windows)
        self.by_mir: dict[MirKey, dict[int, list[Layout]]] = {}  # established containers per epoch
        self.mirs: dict[MirKey, MIR] = {}
        self.p: dict[Layout, int] = {}  # parallelism per layout, as last established
        self.data_epochs: list[int] = []  # epochs with tuples, ascending
        self.version = 0  # changes whenever a container is established or dropped
        self._missing: dict[tuple[MirKey, int], list[int]] = {}

    def maxwin(self, mk: MirKey) -> float | None:
        ws = [self.win[r] for r in mk.relations]
        return None if any(x is None for x in ws) else max(ws)

    def reach(self, mk: MirKey, T: float) -> float:
        """The oldest epoch whose container of ``mk`` may hold a tuple within a window of ``T``
        (one epoch of margin: epoch boundaries are computed in floating point)."""
        mw = self.maxwin(mk)
        return -math.inf if mw is None else self.epoch_of(expiry(T, mw)) - 1

    def _changed(self) -> None:
        self._missing = {}
        self.version += 1

    def establish(self, layout: Layout, mir: MIR, epoch: int, p: int) -> bool:
        mk = layout.mir
        self.mirs[mk] = mir
        self.p[layout] = p
        by = self.by_mir.setdefault(mk, {})
        if layout in by.get(epoch, ()):
            return False
        by.setdefault(epoch, []).append(layout)
        self._changed()
        return True

    def drop(self, mk: MirKey, epochs: Iterable[int] | None = None) -> list[tuple[Layout, int]]:
        by = self.by_mir.get(mk, {})
        gone = [(layout, ep) for ep in list(by if epochs is None else epochs) for layout in by.pop(ep, ())]
        if not by:
            self.by_mir.pop(mk, None)
        if gone:
            self._changed()
        return gone

    def open_epoch(self, epoch: int, plan: Plan, retained: frozenset[str], T: float, w: Workload) -> None:
        """Enter ``epoch`` under ``plan``: drop the MIRs the plan does not use and the relations
        no active query uses (``retained``), expire what no window reaches, establish the
        plan's containers and a base container for every retained relation."""
        used = {mir_key(s.mir) for s in plan.stores}
        for mk in list(self.by_mir):
            rels = mk.relations
            if (len(rels) == 1 and rels[0] not in retained) or (len(rels) > 1 and mk not in used):
                self.drop(mk)
        self.expire(T)
        for s in plan.stores:
            self.establish(layout_of(s), s.mir, epoch, s.parallelism)
        base = {s.mir.relations[0] for s in plan.stores if s.mir.is_base and not s.mir.selection}
        # a retained relation whose plan keeps no base store of all its tuples (filtered stores,
        # docs/model.md §7, keep only what passes; a query added later may need the rest: history)
        for r in sorted(retained - base):
            m = MIR.of(w, [r], ())
            self.establish(Layout("", mir_key(m), w.relation(r).attr(w.relation(r).attributes[0])), m, epoch,
                           w.parallelism(r))
        self.data_epochs.append(epoch)
        self._changed()

    def expire(self, T: float) -> None:
        for mk, by in list(self.by_mir.items()):
            lo = self.reach(mk, T)
            old = [ep for ep in by if ep < lo]
            if old:
                self.drop(mk, old)

    def missing(self, mk: MirKey, epoch: int) -> list[int]:
        """Epochs with data (up to ``epoch``) that have no container of the MIR ``mk``."""
        got = self._missing.get((mk, epoch))
        if got is None:
            est = self.by_mir.get(mk, {})
            got = self._missing[(mk, epoch)] = [e for e in self.data_epochs if e <= epoch and e not in est]
        return got

    def epochs(self, layout: Layout) -> list[int]:
        return sorted(e for e, ls in self.by_mir.get(layout.mir, {}).items() if layout in ls)

    def count(self) -> int:
        return sum(len(ls) for by in self.by_mir.values() for ls in by.values())



class ContainerStore(ContainerIndex):
    """The containers of a :class:`ContainerIndex` with their entries: a :class:`Container` per
    (layout, epoch) of workload ``w`` (``ops``: the operation counters of an instrumented
    executor, shared with every container)."""

    def __init__(self, epoch_of: Callable[[float], int], windows: Mapping[str, float | None], w: Workload,
                 ops: list[int] | None = None):
        super().__init__(epoch_of, windows)
        self.w = w
        self.fields = field_positions(w)
        self.ops = ops
        self.containers: dict[tuple[Layout, int], Container] = {}
        self.dropped_rows: dict[Layout, int] = {}  # most entries of containers dropped since
        self.next_purge = math.inf

    def establish(self, layout: Layout, mir: MIR, epoch: int, p: int) -> bool:
        if not super().establish(layout, mir, epoch, p):
            return False
        part = layout.partition
        pos = (mir.relations.index(part.relation), self.fields[part.relation][part.name])
        c = self.containers[(layout, epoch)] = Container(layout, epoch, p, pos, windows_of(self.w, mir.relations),
                                                         self.ops)
        self.next_purge = min(self.next_purge, c.next_purge)
        return True

    def drop(self, mk: MirKey, epochs: Iterable[int] | None = None) -> list[tuple[Layout, int]]:
        gone = super().drop(mk, epochs)
        for key in gone:
            c = self.containers.pop(key)
            self.dropped_rows[c.layout] = max(self.dropped_rows.get(c.layout, 0), c.max_rows, c.rows())
        return gone

    def purge_all(self, T: float) -> None:
        """Purge every container now (a backend reporting its state after a micro-batch)."""
        for c in self.containers.values():
            c.purge(T)
        self.next_purge = min([c.next_purge for c in self.containers.values()], default=math.inf)


    def layout_name(self, layout: Layout, plan: Plan) -> str:
        for s in plan.stores:
            if layout_of(s) == layout:
                return s.id
        return (f"{layout.namespace}:" if layout.namespace else "") + self.mirs[layout.mir].render_partition(
            layout.partition)

    def store_rows(self, plan: Plan) -> dict[str, int]:
        """Entries held now, per store of ``plan``'s naming (all epochs' containers)."""
        rows: Counter = Counter()
        for (layout, _), c in self.containers.items():
            rows[self.layout_name(layout, plan)] += c.rows()
        return dict(rows)

    def max_store_rows(self, plan: Plan) -> dict[str, int]:
        """Most entries a store held at once (at purge times and now)."""
        best: dict[str, int] = {}
        for (layout, _), c in self.containers.items():
            n = self.layout_name(layout, plan)
            best[n] = max(best.get(n, 0), c.max_rows, c.rows())
        for layout, n_rows in self.dropped_rows.items():
            n = self.layout_name(layout, plan)
            best[n] = max(best.get(n, 0), n_rows)
        return best
