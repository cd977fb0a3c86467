"""The integer linear program of docs/model.md §5, built from the candidates: its variables,
rows and the tie-break weights that make the chosen plan canonical.

The formulation is the tight, "disaggregated" one; probe orders and steps unpartitioned:

* ``x_o ∈ {0,1}`` per candidate probe order; ``Σ_o x_o = 1`` per (query, start) and
  ``Σ_o x_o = m_M`` per (MIR, start), where ``m_M`` says whether MIR ``M`` is materialised;
  ``Σ_{o ∈ G, M ∈ o} x_o ≤ m_M`` per (owner, start) group ``G`` and MIR element ``M``.
* ``y_s ≥ Σ_{o ∈ G, s ∈ o} x_o`` per group and step ``s`` (the paper aggregates these into one
  ``Σ c·y − C·x ≥ 0`` row per order, whose LP relaxation is much weaker; a group chooses one
  order, so summing over the group is as tight as one row per order and needs fewer rows).
* ``single`` policy: ``z_{M,A} ∈ {0,1}`` per (store, partition attribute), ``Σ_A z_{M,A} = 1``
  per store with several candidates and parallelism > 1, and a broadcast indicator
  ``b_s ≥ y_s − Σ_{A known to s} z_{M,A}`` per step whose prefix may not know the store's
  attribute: a step that cannot be routed by the chosen attribute is sent to every instance.
* ``replicas`` policy: a step can always target a replica partitioned by an attribute its
  prefix knows (every element shares a class with its prefix), so no ``z`` and no broadcasts.
* ``budget`` policy: ``single`` with ``Σ_A z_{M,A} ≥ u_M`` (a used store has a replica) and the
  memory of the replicas beyond the first within a budget (see :func:`build_model`).
* objective ``Σ c_s·y_s + Σ c_s·(p − 1)·b_s``, with ``p`` the store's parallelism.
* optional MIR memory budget ``B`` (tuples): ``Σ_M mem(M)·m_M ≤ B`` (the memory of one
  replica; base stores are needed by every plan and not counted, nor are extra replicas under
  ``replicas``).  A large intermediate result that does not fit is then not materialised, and
  is once it shrinks (paper Section VII-B, Figure 8(b)).

``y``, ``m``, ``u`` and ``b`` are continuous (``u`` binary): they are integral whenever ``x``
and ``z`` are.  :func:`components` splits the model into independent parts (variables linked
through rows), which :mod:`mqjoin.planning.ilp.solving` solves one by one.

Among equal-cost optima the plan is made canonical by a second, lexicographic objective: every
binary that stands for a choice (a probe order, a partition attribute) has a fixed, integral
tie-break weight (:func:`tie_weight`), and the tie-break minimises the weight of the chosen
choices at the optimal cost.  The weights depend on nothing but the candidates, so neither does
the plan: any HiGHS version and CBC return the same one.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.candidates import enumerate_candidates
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q: "R(a), S(a,b), T(b)"}
... ''')
>>> mdl = build_model(enumerate_candidates(w, mirs=False))
>>> [n for n in mdl.names if n[0] in "xzb"]
['z_S_a', 'z_S_b', 'b_R_to_S', 'b_T_to_S', 'x_q_R_S_T', 'x_q_S_R_T', 'x_q_S_T_R', 'x_q_T_S_R']
>>> next((lo, [mdl.names[i] for i in idx], coef) for name, idx, coef, lo, hi in mdl.rows if name == "bcast_R_to_S")
(0.0, ['b_R_to_S', 'y_R_to_S', 'z_S_a'], [1.0, -1.0, 1.0])
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mqjoin.model.schema import Attr
from mqjoin.planning.candidates import MIR, Candidates, Owner, Step, owner_label
from mqjoin.planning.options import BUDGET, check_budget, check_policy
from mqjoin.support.unionfind import find_root, link_rows


#: a row of a model: its name, its columns, their coefficients, its lower and upper bounds
Row = tuple[str, list[int], list[float], float, float]


@dataclass(frozen=True)
class Names:
    """What a model's names are made of that depends on a name alone: each name as written →
    sanitized (:func:`_sanitize`), each step → its rendering cleaned (:func:`_clean`), each
    variable's name → the hash of its tie-break weight (:func:`tie_hash`).  A model keeps those
    of its own names; a build reads the model's before it (a re-plan: most names recur) and
    computes only the others."""

    clean: dict[str, str] = field(default_factory=dict)
    steps: dict[Step, str] = field(default_factory=dict)
    hashes: dict[str, int] = field(default_factory=dict)


@dataclass
class Model:
    """A sparse 0-1 model with named variables and rows, plus what each variable means."""

    candidates: Candidates
    policy: str
    names: list[str] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    tie: list[float] = field(default_factory=list)  # secondary (tie-break) objective, see tie_weight
    rows: list[Row] = field(default_factory=list)
    x: dict[tuple[Owner, str, int], int] = field(default_factory=dict)
    y: dict[Step, int] = field(default_factory=dict)
    m: dict[MIR, int] = field(default_factory=dict)
    z: dict[tuple[MIR, Attr], int] = field(default_factory=dict)
    b: dict[Step, int] = field(default_factory=dict)
    order_steps: dict[int, list[int]] = field(default_factory=dict)  # x column → the y columns of its steps
    order_mirs: dict[int, list[int]] = field(default_factory=dict)  # x column → the m columns of its MIRs
    part_row: dict[MIR, int] = field(default_factory=dict)  # store with z → the row of its partition choice
    bcast_row: dict[Step, int] = field(default_factory=dict)  # step with b → the row of its broadcast
    build_seconds: float = 0.0
    #: the parts of this model's names that a later build may read (:class:`Names`)
    name_parts: Names = field(default_factory=Names)
    _used: set[str] = field(default_factory=set)
    _before: Names = field(default_factory=Names)  # the model's before it, read while it is built
    _keys: dict[object, Any] = field(default_factory=dict)  # keys_of, z_index and the last components()
    # the stems that were taken and got a suffix, each with its column when a choice's (ranked:
    # its name makes its weight), else None (read by :func:`~mqjoin.planning.ilp.changed.extend_model`)
    _renamed: list[tuple[str, int | None]] = field(default_factory=list)

    def var(self, name: str, cost: float = 0.0, integer: bool = False, upper: float = 1.0,
            rank: int | None = None, step: Step | None = None) -> int:
        """A new variable named ``name``, followed by ``step``'s rendering (:meth:`_name`);
        ``rank`` (binaries that stand for a choice) gives it a tie-break weight
        (:func:`tie_weight`)."""
        name = self._name(name, step, None if rank is None else len(self.names))
        self.names.append(name)
        self.cost.append(cost)
        self.integer.append(integer)
        self.upper.append(upper)
        if rank is None:
            self.tie.append(0.0)
        else:
            h = self._before.hashes.get(name)
            self.name_parts.hashes[name] = h = tie_hash(name) if h is None else h
            self.tie.append(hashed_weight(rank, h))
        return len(self.names) - 1

    def row(self, name: str, idx: list[int], coef: list[float], lo: float, hi: float,
            step: Step | None = None) -> int:
        """A new row (its index) named ``name``, followed by ``step``'s rendering (as :meth:`var`)."""
        self.rows.append((self._name(name, step), idx, coef, lo, hi))
        return len(self.rows) - 1

    def _name(self, name: str, step: Step | None, choice: int | None = None) -> str:
        """:meth:`_stem` made unique by a suffix where taken (noted in ``_renamed``, with the
        column ``choice`` when the name is a choice's)."""
        stem = self._stem(name, step)
        unique = _unique(stem, self._used)
        if unique is not stem:
            self._renamed.append((stem, choice))
        return unique

    def _stem(self, name: str, step: Step | None) -> str:
        """A name before it is made unique: :func:`_sanitize` of ``name``, or with a step, of
        ``name_R`` (``R`` the step's rendering; ``name`` clean already, its own :func:`_clean`).

        Sanitizing turns the run of other characters around the joint into one underscore, so
        ``name`` and ``R`` are cleaned apart and joined: ``R`` once per step (the names of
        several variables and rows hold it), ``name`` by the caller.  Both are read from
        :class:`Names` where known."""
        own = self.name_parts
        if step is None:
            clean = own.clean.get(name)
            if clean is None:
                clean = self._before.clean.get(name)
                own.clean[name] = clean = _sanitize(name) if clean is None else clean
            return clean
        tail = own.steps.get(step)
        if tail is None:
            tail = self._before.steps.get(step)
            own.steps[step] = tail = _clean(step.render()) if tail is None else tail
        return (f"{name}_{tail}" if tail else name)[:NAME_LENGTH]

    def keys_of(self, kind: str) -> dict[int, Any]:
        """Each column of ``self.x`` or ``self.y`` (``kind``: ``"x"`` or ``"y"``) → its key there,
        in column order; computed once per model (a model made from it by ``replace`` shares
        the cache, as it shares the variables)."""
        at = (kind, len(self.names))
        if at not in self._keys:
            self._keys[at] = {c: key for key, c in getattr(self, kind).items()}
        keys: dict[int, Any] = self._keys[at]
        return keys

    def read_by_keys(self) -> tuple[list[Any], ...]:
        """The lists :func:`part_key` reads of a model.  A model made by ``replace`` shares the
        cache (``_keys``) but may hold other lists: what a cache entry says of a part's key holds
        only for a model with these very lists (compared by identity, :func:`same_lists`)."""
        return self.names, self.rows, self.cost, self.upper, self.integer, self.tie

    def z_index(self) -> dict[int, tuple[MIR, int]]:
        """Each ``z`` column → its store and its index among the store's candidates (the order
        the model lists them in, which every choice ``store → index`` refers to); computed once
        per model, as :meth:`keys_of`."""
        at = ("z", len(self.names))
        if at not in self._keys:
            out: dict[int, tuple[MIR, int]] = {}
            seen: dict[MIR, int] = {}
            for (st, _), c in self.z.items():
                out[c] = (st, seen.get(st, 0))
                seen[st] = out[c][1] + 1
            self._keys[at] = out
        index: dict[int, tuple[MIR, int]] = self._keys[at]
        return index

    @property
    def num_variables(self) -> int:
        return len(self.names)

    @property
    def num_constraints(self) -> int:
        return len(self.rows)

    @property
    def num_binaries(self) -> int:
        return sum(self.integer)


#: bits of the tie-break weight's pseudo-random part
TIE_BITS = 20

#: time of the tie-break solve by HiGHS's or CBC's MIP: at most TIE_SHARE × the first solve's,
#: or TIE_MIN_SECONDS (proving the canonical optimum can take far longer than finding an
#: optimum by HiGHS's MIP — ``benchmarks/RESULTS.md``, section ILP; the coupled search and the
#: branch and bound break ties without a budget)
TIE_SHARE = 0.25
TIE_MIN_SECONDS = 0.25

#: relative slack of the cost row in the tie-break solve: optima whose costs differ by less
#: are equal (solvers accept values within 1e-6 of integral, so costs carry such noise)
TIE_SLACK = 1e-7


def tie_weight(rank: int, name: str) -> float:
    """The tie-break weight of a choice variable: ``rank · 2^20 + h``, with ``rank`` its
    position in the canonical order of its alternatives (probe orders as enumerated: fewer and
    smaller MIRs first; partition attributes alphabetically) and ``h ∈ [1, 2^20]`` a fixed hash
    of its name.  Integral, so weight sums are exact in floating point.

    >>> tie_weight(0, "z_S_b") < tie_weight(1, "z_S_c") < tie_weight(2, "z_S_a")
    True
    >>> tie_weight(3, "x_q_R_S_T") == tie_weight(3, "x_q_R_S_T")
    True
    """
    return hashed_weight(rank, tie_hash(name))


def tie_hash(name: str) -> int:
    """The pseudo-random part of a choice's tie-break weight (:func:`tie_weight`): a fixed hash
    of its name below ``2^20``."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") % (1 << TIE_BITS)


def hashed_weight(rank: int, h: int) -> float:
    """:func:`tie_weight` of a rank and a name's hash."""
    return float((rank << TIE_BITS) + h + 1)


_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")

#: the longest name of a variable or row
NAME_LENGTH = 200


def _sanitize(name: str) -> str:
    """A name solvers and LP files accept: runs of other characters (underscores included)
    become one underscore.

    >>> _sanitize("y_R » S[a]→T"), _sanitize("m_R⋈S"), _sanitize("__")
    ('y_R_S_a_to_T', 'm_RS', 'v')
    """
    return _clean(name)[:NAME_LENGTH] or "v"


def _clean(name: str) -> str:
    """:func:`_sanitize` without its limits (length, non-empty).  Names joined by an underscore
    are sanitized apart:

    >>> _sanitize("link_q_R » S[a]→T") == "link_q_" + _clean("R » S[a]→T")
    True
    """
    s = name.replace("→", "_to_").replace("⋈", "")
    return _NOT_ALNUM.sub("_", s).strip("_")


def _unique(name: str, used: set[str]) -> str:
    if name not in used:
        used.add(name)
        return name
    k = 2
    while f"{name}_{k}" in used:
        k += 1
    used.add(f"{name}_{k}")
    return f"{name}_{k}"


def build_model(cands: Candidates, policy: str = "single", mir_budget: float | None = None,
                replica_budget: float | None = None, names: Names | None = None) -> Model:
    """Build the ILP of docs/model.md §5 for the candidates under a partitioning policy, with an
    optional memory budget (tuples) for the materialised MIRs.

    Policy ``budget``: the ``single`` model with ``Σ_A z_{M,A} ≥ u_M`` instead of ``= 1``
    (``u_M ≥ y_s`` for the steps into ``M``: a used store has at least one replica) and the
    row ``Σ_{M,A} mem(M)·z_{M,A} − Σ_M mem(M)·u_M ≤ replica_budget``: the memory of the
    replicas beyond the first of every store.  At 0 it is ``single``; unbounded (None) it
    costs what ``replicas`` costs.

    ``names``: the :attr:`~Model.name_parts` of a model built before (a re-plan's), read
    instead of computing those parts again; the model is the same model."""
    check_policy(policy)
    check_budget(mir_budget)
    check_budget(replica_budget, "replica memory budget")
    t0 = time.perf_counter()
    mdl = Model(cands, policy, _before=Names() if names is None else names)

    # materialisation indicators
    for owner in cands.owners:
        if isinstance(owner, MIR):
            mdl.m[owner] = mdl.var(f"m_{owner.label}")
    if mir_budget is not None and mdl.m:
        mirs = sorted(mdl.m, key=lambda m: m.sort_key())
        mdl.row("mir_memory_budget", [mdl.m[m] for m in mirs], [cands.memory(m) for m in mirs], -math.inf,
                float(mir_budget))

    # steps
    for s, c in sorted(cands.step_cost.items(), key=lambda kv: kv[0].sort_key()):
        mdl.y[s] = mdl.var("y", cost=c, step=s)

    if policy in ("single", BUDGET):
        _partition_rows(mdl, replica_budget)
    order_rows(mdl)
    mdl._before = Names()  # (kept no longer than the build: a model keeps its own names only)
    mdl.build_seconds = time.perf_counter() - t0
    return mdl


def same_lists(one: tuple[list[Any], ...], two: tuple[list[Any], ...]) -> bool:
    """Whether two :meth:`Model.read_by_keys` are the same lists (not only equal ones)."""
    return len(one) == len(two) and all(a is b for a, b in zip(one, two))


def _partition_rows(mdl: Model, replica_budget: float | None) -> None:
    """The partition choices ``z`` and broadcast indicators ``b`` of policies ``single`` and
    ``budget`` (with the latter's ``u`` and replica memory row)."""
    cands = mdl.candidates
    used: dict[MIR, int] = {}
    for store, attrs in cands.partition_candidates.items():
        p = cands.parallelism(store)
        if p > 1 and len(attrs) > 1:
            idx = [mdl.var(f"z_{store.render_partition(a)}", integer=True, rank=r) for r, a in enumerate(attrs)]
            for a, i in zip(attrs, idx):
                mdl.z[(store, a)] = i
            if mdl.policy == "single":
                mdl.part_row[store] = mdl.row(f"part_{store.label}", idx, [1.0] * len(idx), 1.0, 1.0)
            else:  # at least one replica of a used store (u binary: see backends.solve_highs)
                u = used[store] = mdl.var(f"u_{store.label}", integer=True)
                mdl.row(f"part_{store.label}", idx + [u], [1.0] * len(idx) + [-1.0], 0.0, math.inf)
    if mdl.policy == BUDGET:
        for s, yi in mdl.y.items():
            if s.target in used:
                mdl.row("used", [used[s.target], yi], [1.0, -1.0], 0.0, math.inf, step=s)
        if used and replica_budget is not None:
            zs = sorted(mdl.z.items(), key=lambda kv: kv[1])
            stores = sorted(used, key=lambda m: used[m])
            mdl.row("replica_memory_budget", [i for _, i in zs] + [used[m] for m in stores],
                    [cands.memory(m) for (m, _), _ in zs] + [-cands.memory(m) for m in stores],
                    -math.inf, float(replica_budget))
    broadcast_rows(mdl, mdl.y.items())


#: per target store: its parallelism, its candidates and their z columns (several candidates)
_Targets = dict[MIR, tuple[int, frozenset[Attr], list[tuple[Attr, int]]]]


def broadcast_rows(mdl: Model, steps: Iterable[tuple[Step, int]]) -> None:
    """The broadcast indicator ``b`` and its row of each step (with its ``y`` column) whose
    prefix may not know its store's partition attribute (every ``z`` made already); a step
    with a ``b`` already gets its row anew, in place (:func:`~mqjoin.planning.ilp.changed.extend_model`)."""
    cands = mdl.candidates
    targets: _Targets = {}
    for s, yi in steps:
        at = targets.get(s.target)
        if at is None:
            attrs = cands.partition_candidates[s.target]
            p = cands.parallelism(s.target)
            at = targets[s.target] = (p, frozenset(attrs), [(a, mdl.z[(s.target, a)]) for a in attrs]
                                      if p > 1 and len(attrs) > 1 else [])
        p, every, by_z = at
        if p == 1 or s.known >= every:
            continue
        bi = mdl.b.get(s)
        if bi is None:
            bi = mdl.b[s] = mdl.var("b", cost=mdl.cost[yi] * (p - 1), upper=math.inf, step=s)
        known = [zi for a, zi in by_z if a in s.known]
        # b_s - y_s + Σ_known z ≥ 0
        row = ([bi, yi] + known, [1.0, -1.0] + [1.0] * len(known), 0.0, math.inf)
        if s in mdl.bcast_row:
            at_row = mdl.bcast_row[s]
            mdl.rows[at_row] = (mdl.rows[at_row][0], *row)
        else:
            mdl.bcast_row[s] = mdl.row("bcast", *row, step=s)


#: add the group broadcast rows (see _group_broadcast_rows) to models of at most this many
#: candidate probe orders: on larger models they make the root LP several times slower
#: (measurements in benchmarks/RESULTS.md, section ILP)
STRENGTHEN_MAX_ORDERS = 5000


def order_rows(mdl: Model, owners: Iterable[Owner] | None = None) -> None:
    """The probe orders ``x`` and their rows, of every owner (or of ``owners``).  Within one
    (owner, start) group exactly one order is chosen (or none for an unmaterialised MIR), so the
    links aggregate over the group: ``y_s ≥ Σ_{o ∈ G, s ∈ o} x_o`` and
    ``Σ_{o ∈ G, M ∈ o} x_o ≤ m_M``, which imply the per-order links and have a tighter LP
    relaxation."""
    cands = mdl.candidates
    strengthen = strengthened(cands)
    for owner in cands.orders if owners is None else owners:
        by_start = cands.orders[owner]
        olabel = owner_label(owner)
        steps_of = cands.steps[owner]
        for start, orders in by_start.items():
            idx = []
            step_users: dict[Step, list[int]] = {}
            mir_users: dict[MIR, list[int]] = {}
            for i, (o, steps) in enumerate(zip(orders, steps_of[start])):
                xi = mdl.var(f"x_{olabel}_{o.render()}", integer=True, rank=i)
                mdl.x[(owner, start, i)] = xi
                mdl.order_steps[xi], mdl.order_mirs[xi] = [], []
                idx.append(xi)
                for m in o.elements:
                    if not m.is_base:
                        mir_users.setdefault(m, []).append(xi)
                for st in steps:
                    step_users.setdefault(st, []).append(xi)
            for m, xs in mir_users.items():
                mi = mdl.m[m]
                mdl.row(f"use_{olabel}_{start}_{m.label}", xs + [mi], [1.0] * len(xs) + [-1.0], -math.inf, 0.0)
                for xi in xs:
                    mdl.order_mirs[xi].append(mi)
            link = _clean(f"link_{olabel}_{start}")
            for st, xs in step_users.items():
                yi = mdl.y[st]
                mdl.row(link, [yi] + xs, [1.0] + [-1.0] * len(xs), 0.0, math.inf, step=st)
                for xi in xs:
                    mdl.order_steps[xi].append(yi)
            if mdl.b and strengthen:
                _group_broadcast_rows(mdl, f"{olabel}_{start}", step_users)
            if isinstance(owner, MIR):
                mdl.row(f"mat_{owner.label}_{start}", idx + [mdl.m[owner]], [1.0] * len(idx) + [-1.0], 0.0, 0.0)
            else:
                mdl.row(f"one_{owner}_{start}", idx, [1.0] * len(idx), 1.0, 1.0)


def strengthened(cands: Candidates) -> bool:
    """Whether a model of ``cands`` has the group broadcast rows (:func:`_group_broadcast_rows`)."""
    return cands.size["probe_orders"] <= STRENGTHEN_MAX_ORDERS


def _group_broadcast_rows(mdl: Model, label: str, step_users: dict[Step, list[int]]) -> None:
    """Valid rows that cut a weakness of the broadcast indicators (``single``/``budget``).

    ``b_s ≥ y_s − Σ_{A∈K(s)} z_{M,A}`` lets the LP serve *several* steps of one (owner, start)
    group into store ``M`` from the same fraction of ``z_{M,A}``: half the group's flow through
    one order, half through another, both "served" by ``z_{M,A} = ½``.  But a group chooses one
    order, and an order has at most one step into ``M``, so for every set ``K`` of attributes
    ``Σ_{o ∈ G whose step into M knows ⊆ K} x_o ≤ Σ_{A∈K} z_{M,A} + Σ_{s ∈ G into M, K(s) ⊆ K} b_s``
    (the chosen order's step is served by a kept attribute of ``K`` or broadcast).  Added for
    every ``K`` that is some step's known set, where two or more steps are involved."""
    cands = mdl.candidates
    by_store: dict[MIR, dict[Step, frozenset[Attr]]] = {}
    for st in step_users:
        if st in mdl.b:
            attrs = cands.partition_candidates[st.target]
            if (st.target, attrs[0]) in mdl.z:
                by_store.setdefault(st.target, {})[st] = frozenset(a for a in attrs if a in st.known)
    for store, known in by_store.items():
        for k in sorted(set(known.values()), key=sorted):
            inside = [st for st, kk in known.items() if kk <= k]
            if not k or len(inside) < 2:
                continue
            xs = sorted({x for st in inside for x in step_users[st]})
            zs = [mdl.z[(store, a)] for a in sorted(k)]
            bs = [mdl.b[st] for st in inside]
            mdl.row(f"gbcast_{label}_{store.label}_{'_'.join(a.name for a in sorted(k))}", xs + zs + bs,
                    [1.0] * len(xs) + [-1.0] * (len(zs) + len(bs)), -math.inf, 0.0)


def linked(cols: Iterable[int], rows: Iterable[list[int]]) -> dict[int, int]:
    """Each column → the root of its group: columns are linked when a row holds both
    (``rows``: each row's columns, all among ``cols``; every column of a row joins the group of
    its first).  The root is one column of the group, the same for the same input: that of
    :class:`~mqjoin.support.unionfind.UnionFind` linking the rows in turn (which column is a
    root depends on the links alone, not on how paths are shortened).

    >>> root = linked([0, 1, 2, 3], [[0, 2], [3, 2]])
    >>> root[0] == root[2] == root[3] != root[1]
    True
    """
    parent = {c: c for c in cols}
    link_rows(parent, rows)
    return {c: find_root(parent, c) for c in parent}


def plain_links(mdl: Model) -> tuple[list[int], list[int]]:
    """Each column → the root of its group linked through rows without counting the partition
    choices ``z`` (:func:`linked` over all columns: a coupled part's blocks,
    :func:`~mqjoin.planning.ilp.blocks.split_blocks`), and the rows that hold a ``z``.  Kept
    with the model's cache for its list of rows, as :func:`components` keeps its answer: both
    read it, so the model's rows are linked once."""
    hit = mdl._keys.get("plain")
    if hit is not None and hit[0] is mdl.rows and hit[1] == (len(mdl.rows), mdl.num_variables):
        out: tuple[list[int], list[int]] = hit[2]
        return out
    with_z: set[int] = set()
    out = plain_roots(mdl, list(range(mdl.num_variables)), range(len(mdl.rows)), with_z), sorted(with_z)
    mdl._keys["plain"] = (mdl.rows, (len(mdl.rows), mdl.num_variables), out)
    return out


def plain_roots(mdl: Model, parent: list[int], rows: Iterable[int], with_z: set[int]) -> list[int]:
    """Link the columns of each of ``rows`` but its ``z`` into ``parent`` (column → its parent,
    a root its own; the rows holding a ``z`` go to ``with_z``), and every column's root."""
    zs = set(mdl.z.values())

    def plain() -> Iterable[list[int]]:
        for ri in rows:
            idx = mdl.rows[ri][1]
            if zs.isdisjoint(idx):
                yield idx
            else:
                with_z.add(ri)
                yield [i for i in idx if i not in zs]

    link_rows(parent, plain())
    return [find_root(parent, c) for c in range(len(parent))]


def components(mdl: Model) -> list[tuple[list[int], list[int]]]:
    """Independent parts of the model: (variable indices, row indices) per component: the
    groups of :func:`plain_links` joined through the rows that hold a ``z``.  The last answer
    is kept with the model's cache (which models made by ``replace`` share) for its list of
    rows: asked again for the same rows, the parts come without a second pass."""
    hit = mdl._keys.get("components")
    if hit is not None and hit[0] is mdl.rows and hit[1] == (len(mdl.rows), mdl.num_variables):
        return [(list(c), list(r)) for c, r in hit[2]]
    plain, with_z = plain_links(mdl)
    joined: dict[int, int] = {}  # the plain groups' roots that rows with a z join
    for ri in with_z:
        for i in mdl.rows[ri][1]:
            joined.setdefault(plain[i], plain[i])
    link_rows(joined, ([plain[i] for i in mdl.rows[ri][1]] for ri in with_z))
    root = [find_root(joined, r) if r in joined else r for r in plain]
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for v in range(mdl.num_variables):
        groups.setdefault(root[v], ([], []))[0].append(v)
    for ri, (_, idx, _, _, _) in enumerate(mdl.rows):
        groups[root[idx[0]]][1].append(ri)
    out = sorted(groups.values(), key=lambda g: g[0][0])
    mdl._keys["components"] = (mdl.rows, (len(mdl.rows), mdl.num_variables), [(tuple(c), tuple(r)) for c, r in out])
    return out


#: what a part is (:func:`part_key`): its columns and rows by name, with costs and bounds
PartKey = frozenset[tuple[Any, ...]]


def part_key(mdl: Model, cols: list[int], rows: list[int], tie: list[float] | None = None) -> PartKey:
    """What a part is, independent of where its columns and rows stand in the model: its
    columns (name, cost, tie-break weight — ``tie``'s, the model's by default —, bound,
    integrality) and rows (name, columns by name with coefficients, bounds).  Two models with a
    part of the same key have the same optima there (components share no row), and the same
    canonical optimum.

    >>> from mqjoin.datasets.random_workloads import random_workload
    >>> from mqjoin.planning.candidates import enumerate_candidates
    >>> w = random_workload(6, 30, 3, seed=4)
    >>> one = build_model(enumerate_candidates(w))
    >>> two = build_model(enumerate_candidates(w.restricted_to([q.name for q in w.queries[1:]])))
    >>> keys = {part_key(one, c, r) for c, r in components(one)}
    >>> sum(part_key(two, c, r) in keys for c, r in components(two)), len(components(two))
    (2, 3)
    """
    names, tie = mdl.names, mdl.tie if tie is None else tie
    return frozenset([(names[c], mdl.cost[c], tie[c], mdl.upper[c], mdl.integer[c]) for c in cols]
                     + [(name, tuple(names[i] for i in idx), tuple(coef), lo, hi)
                        for name, idx, coef, lo, hi in (mdl.rows[r] for r in rows)])
