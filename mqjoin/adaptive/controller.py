"""The adaptive controller: the engine-independent half of adaptivity — *when* a plan changes
and *why* (paper Section VI).  Engines (the reference executor :mod:`mqjoin.runtime.epochs`, the
Spark engine) feed it per-epoch samples (:mod:`.sampling`) and ask it for the plan of each epoch;
which queries are active when is :mod:`.policy`.

**Hysteresis.**  A re-optimised plan replaces the running one only if it differs (other
probe orders or stores) and the running plan, re-costed under the new statistics
(:func:`mqjoin.planning.recost.recost`), would cost more than ``1 + threshold`` times as much — so sampling noise does
not make plans flap — or, with an MIR memory budget, if the running plan's MIR stores no longer fit it under the new
statistics (:func:`mqjoin.planning.recost.mir_memory`).  Every decision, kept or switched, is a :class:`Decision` with
its reason.

**Join sizes measured by the running plan.**  Besides one selectivity per class, the
controller measures what independence between classes gets wrong: the sizes of the running
plan's probe-order prefixes (its steps' probe messages in the epoch) and MIRs (its MIR
stores' rows), as ``mqjoin optimize --stats-from`` does for a whole run
(:func:`mqjoin.planning.measured.running_sizes`).  Each is kept as its ratio to the estimate
under the same epoch's statistics, and every later re-optimisation plans on the estimate
times that ratio (the workload's ``sizes``, docs/model.md §2): a foreign key's correlation
stays while the rates move.  Only sets of relations without a window are measured so: the
model's size of a set is its join over the whole input (§2), which a running plan's full
history counts, whereas a window counts only the partners within it — the same where
arrivals are uniform, not where matching tuples arrive close in time (the paper's synthetic
data), and the model's memory (§5) would then follow the window's count the wrong way.
``AdaptivePolicy(sizes=False)`` keeps to class selectivities.
"""


from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from mqjoin.adaptive.policy import AdaptivePolicy, QueryChange, active_queries, lifetimes, retained_relations
from mqjoin.adaptive.sampling import EpochSample, EpochStats, epoch_stats, estimated_size, tracked_pairs
from mqjoin.model.sizes import MeasuredSize
from mqjoin.model.errors import AdaptiveError, MqjoinError, OptimizerError
from mqjoin.model.workload import Attr, Workload
from mqjoin.planning.plan import Plan
from mqjoin.planning.recost import mir_memory, recost
from mqjoin.planning.result import OptimizeResult
from mqjoin.support.units import MEMORY_UNIT, PROBE_COST_UNIT, number, percent_change

#: rate written for a retained relation without any tuple in an epoch: half a tuple per epoch

#: a measured join size is taken as at most this many times the independence estimate, or
#: this many times less
MAX_SIZE_RATIO = 1000.0


# --------------------------------------------------------------------------------------------
# decisions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """One optimisation at the start of epoch ``epoch`` on the statistics of ``stats_epoch``,
    for the plan active from ``active_from`` (= ``epoch + 1``).  ``plan`` is the index of the
    plan active from then on (:attr:`AdaptiveController.plans`); ``running_cost`` is the
    previous plan re-costed under the new statistics, ``candidate_cost`` the re-optimised
    plan's cost."""

    epoch: int
    stats_epoch: int | None
    active_from: int
    switched: bool
    reason: str
    plan: int
    queries: tuple[str, ...]
    running_cost: float | None
    candidate_cost: float | None
    solve_seconds: float
    statistics: EpochStats | None = None

    @property
    def saving(self) -> float | None:
        if not self.running_cost or self.candidate_cost is None:
            return None
        return (self.running_cost - self.candidate_cost) / self.running_cost

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "statistics"}
        d["saving"] = self.saving
        if self.statistics is not None:
            d["statistics"] = {"tuples": dict(self.statistics.tuples), "rates": dict(self.statistics.rates),
                               "selectivities": {f"{a} = {b}": v for (a, b), v in self.statistics.pairs.items()},
                               "sizes": [{"query": m.query, "relations": list(m.relations), "value": m.value}
                                         for m in self.statistics.sizes]}
        return d


Optimizer = Callable[[Workload, AdaptivePolicy], Plan]


def default_optimizer(workload: Workload, policy: AdaptivePolicy) -> Plan:
    from mqjoin.planning.optimizer import plan_with

    return plan_with(workload, policy.optimize_options).plan


class Replanning:
    """A controller's optimiser by default: :func:`default_optimizer`'s plans, each re-planned
    from the last (:func:`mqjoin.planning.optimizer.replan`), so that the parts of the ILP that
    neither a query change nor the statistics of the epoch touched are not solved again (the
    plans are the same; only their time differs)."""

    def __init__(self) -> None:
        self.last: OptimizeResult | None = None

    def __call__(self, workload: Workload, policy: AdaptivePolicy) -> Plan:
        from mqjoin.planning.optimizer import plan_with, replan

        options = policy.optimize_options
        self.last = plan_with(workload, options) if self.last is None else replan(self.last, workload, options)
        return self.last.plan


class AdaptiveController:
    """Chooses the plan of every epoch (the one mutable object of adaptivity; engines drive it).

    Call :meth:`enter` with each epoch in increasing order, handing over the samples of the
    epochs that ended; it makes the pending decisions and returns the epoch's plan.  For live
    deployments, :meth:`submit` adds a query change at the current event time.

    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload('''
    ... defaults: {rate: 10, window: 2, parallelism: 2}
    ... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
    ... queries: {q: "R(a), S(a,b), T(b)"}
    ... selectivities: {R.a = S.a: 0.01, S.b = T.b: 0.5}
    ... ''')
    >>> c = AdaptiveController(w, AdaptivePolicy(epoch=1.0))
    >>> c.enter(0).probe_orders()["q"]["S"]
    'S » R[a] » T[b]'
    >>> a, b = Attr("R", "a"), Attr("S", "a")
    >>> s0 = EpochSample(0, {"R": 10, "S": 10, "T": 10}, {(a, b): 90, (Attr("S", "b"), Attr("T", "b")): 1})
    >>> c.enter(1, {0: s0}).probe_orders()["q"]["S"]       # decided now, active from epoch 2
    'S » R[a] » T[b]'
    >>> c.enter(2).probe_orders()["q"]["S"]
    'S » T[b] » R[a]'
    >>> c.switches()[-1].reason.split(";")[0]
    'predicted probe cost 120 → 31 tuples/s (−74.2 % > threshold 10 %)'
    """

    def __init__(self, workload: Workload, policy: AdaptivePolicy | None = None,
                 changes: Iterable[QueryChange] = (), optimizer: Optimizer | None = None):
        self.policy = policy or AdaptivePolicy()
        self.base = workload
        self.changes = list(changes)
        self.full, self.lives = lifetimes(workload, self.changes, self.policy)
        self.optimizer = optimizer or Replanning()
        self.plans: list[Plan] = []
        self.plan_of: dict[int, int] = {}  # epoch → index into plans
        self.decisions: list[Decision] = []
        self.stats: dict[int, EpochStats] = {}
        self.pair_values: dict[tuple[Attr, Attr], float] = {}
        self.rates: dict[str, float] = {}
        #: join sizes measured by the running plans: (query, relations) → (size, measured / estimate)
        self.sizes: dict[tuple[str | None, frozenset[str]], tuple[MeasuredSize, float]] = {}
        self.epoch: int | None = None  # the current epoch
        self.first: int | None = None

    # -- what is active ---------------------------------------------------------------------

    def queries(self, epoch: int) -> tuple[str, ...]:
        return active_queries(self.lives, epoch)

    def retained(self, epoch: int) -> frozenset[str]:
        return retained_relations(self.full, self.lives, epoch)

    def tracked(self, epoch: int) -> tuple[tuple[Attr, Attr], ...]:
        """The pairs to sample during ``epoch``: classes of the queries active then or in the
        next two epochs (so that added queries have statistics when they start)."""
        names = dict.fromkeys(q for e in (epoch, epoch + 1, epoch + 2) for q in self.queries(e))
        return tracked_pairs(self.full.restricted_to(names)) if names else ()

    def workload(self, epoch: int) -> Workload:
        """The workload the optimiser sees for ``epoch``: its active queries with the latest
        sampled statistics (declared values where nothing was sampled yet) and the join sizes
        the running plans measured, each as its latest measured / estimated ratio times the
        estimate under these statistics (a size moves with the rates, as an edit moves it)."""
        w = self._sampled(epoch)
        sizes = []
        for m, ratio in self.sizes.values():
            est = estimated_size(w, m)
            if est is not None:
                sizes.append(replace(m, value=ratio * est))
        return w.with_sizes(sizes, strict=False) if sizes else w

    def _sampled(self, epoch: int) -> Workload:
        from mqjoin.model.statistics import with_pair_values

        w = self.full.restricted_to(self.queries(epoch))
        if not self.pair_values and not self.rates:
            return w
        return with_pair_values(w, self.pair_values, rates=self.rates)

    def _measure_sizes(self, sample: EpochSample) -> tuple[MeasuredSize, ...]:
        """The join sizes the plan of ``sample``'s epoch measured in it (its prefixes' messages,
        its MIR stores' rows: :func:`~mqjoin.planning.measured.running_sizes`), of the sets
        without a window (see the module doc)."""
        from mqjoin.planning.measured import running_sizes

        idx = self.plan_of.get(sample.epoch)
        if not self.policy.sizes or idx is None or not sample.messages or sample.end <= sample.start:
            return ()
        plan = self.plans[idx]
        first = min(e for e, i in self.plan_of.items() if i == idx)
        plan_start = max(0.0, sample.start - (sample.epoch - first) * self.policy.epoch)
        return tuple(m for m in running_sizes(plan, sample.messages, sample.rows, sample.start, sample.end, plan_start)
                     if all(plan.workload.window(r) is None for r in m.relations))

    def plan_for(self, epoch: int) -> Plan:
        try:
            return self.plans[self.plan_of[epoch]]
        except KeyError:
            raise AdaptiveError(f"epoch {epoch} has not been entered yet (current: {self.epoch})") from None

    # -- driving ----------------------------------------------------------------------------

    def enter(self, epoch: int, samples: Mapping[int, EpochSample] | None = None) -> Plan:
        """Advance to ``epoch`` (≥ the current one), making the decisions of every epoch start
        passed on the way with the ``samples`` of the epochs that ended, and return the plan
        of ``epoch``."""
        samples = samples or {}
        if self.epoch is None:
            self.first = self.epoch = epoch
            self._schedule(epoch, self._optimise(epoch), None, "initial plan (declared statistics)", None, 0.0)
            self.plan_of[epoch + 1] = self.plan_of[epoch]
            return self.plan_for(epoch)
        if epoch < self.epoch:
            raise AdaptiveError(f"epochs must be entered in order: {epoch} after {self.epoch}")
        while self.epoch < epoch:
            self.epoch += 1
            self._decide(self.epoch, samples.get(self.epoch - 1))
        return self.plan_for(epoch)

    def submit(self, change: QueryChange) -> int:
        """Add a query change during a run; returns its activation epoch (``epoch_of(at) + 2``).
        A change for an epoch already decided is refused."""
        if self.epoch is not None and self.policy.epoch_of(change.at) + 1 < self.epoch:
            raise AdaptiveError(f"the change at {change.at:g} s is too late: epoch {self.epoch} has started, so its "
                                f"batch was decided; submit it with the current event time")
        changes = self.changes + [change]
        self.full, self.lives = lifetimes(self.base, changes, self.policy)
        self.changes = changes
        return self.policy.epoch_of(change.at) + 2

    # -- internals --------------------------------------------------------------------------

    def _optimise(self, epoch: int) -> tuple[Plan, float]:
        w = self.workload(epoch)
        t0 = time.perf_counter()
        if not w.queries:  # every query removed: nothing to store or probe until one is added
            from mqjoin.planning.probe_trees import build_plan

            return build_plan(w, (), self.policy.mode, self.policy.partitioning), 0.0
        try:
            plan = self.optimizer(w, self.policy)
        except MqjoinError as e:
            raise OptimizerError(f"re-optimisation for epoch {epoch} (queries {', '.join(w.query_names)}) "
                                 f"failed: {e}") from None
        return plan, time.perf_counter() - t0

    def _schedule(self, epoch: int, planned: tuple[Plan, float], stats: EpochStats | None, reason: str,
                  running: float | None, candidate: float | None) -> None:
        plan, seconds = planned
        self.plans.append(plan)
        self.plan_of[epoch] = len(self.plans) - 1
        self.decisions.append(Decision(epoch - 1, None if stats is None else stats.epoch, epoch, True, reason,
                                       len(self.plans) - 1, self.queries(epoch), running, candidate, seconds, stats))

    def _decide(self, epoch: int, sample: EpochSample | None) -> None:
        """At the start of ``epoch``: the plan for ``epoch + 1`` (and ``epoch``'s own plan,
        already decided, unless its query set was not known in time)."""
        from mqjoin.planning.diff import plan_diff

        if epoch not in self.plan_of:  # only the first epochs: ``enter`` jumped ahead
            self.plan_of[epoch] = self.plan_of[epoch - 1]
        if set(self.plans[self.plan_of[epoch]].workload.query_names) != set(self.queries(epoch)):
            # a change activating before its batch could be decided (submitted before the run)
            self._schedule(epoch, self._optimise(epoch), None, "query set at activation: " +
                           _query_delta(self.plans[self.plan_of[epoch]], self.queries(epoch)), None, None)
        stats = None
        if sample is not None and any(sample.tuples.values()):
            stats = epoch_stats(sample, self.policy, self.retained(sample.epoch))
            stats = replace(stats, sizes=self._measure_sizes(sample))
            self.stats[sample.epoch] = stats
            before = self.workload(epoch + 1)
            self.pair_values.update(stats.pairs)
            self.rates.update(stats.rates)
            plain = self._sampled(epoch + 1)  # the estimates the measured sizes are set against
            for m in stats.sizes:
                est = estimated_size(plain, m)
                if est:  # within what a sample can say (a far-off ratio is noise of a tiny count)
                    ratio = min(max(m.value / est, 1 / MAX_SIZE_RATIO), MAX_SIZE_RATIO)
                    self.sizes[m.query, frozenset(m.relations)] = (m, ratio)
        target = epoch + 1
        running_idx = self.plan_of[epoch]
        running = self.plans[running_idx]
        queries = self.queries(target)
        if set(running.workload.query_names) != set(queries):
            planned = self._optimise(target)
            self._schedule(target, planned, stats, "query change: " + _query_delta(running, queries),
                           None, planned[0].probe_cost)
            return
        if not self.policy.adapt or stats is None:
            why = "static plan (adaptation off)" if not self.policy.adapt else \
                f"no tuples in epoch {epoch - 1}: statistics unchanged"
            self.plan_of[target] = running_idx
            self.decisions.append(Decision(epoch, None if stats is None else stats.epoch, target, False, why,
                                           running_idx, queries, None, None, 0.0, stats))
            return
        w = self.workload(target)
        plan, seconds = self._optimise(target)
        old, new = recost(running, w), plan.probe_cost
        saving = (old - new) / old if old > 0 else 0.0
        moved = stats.describe(before)
        diff = plan_diff(running, plan)
        head = (f"predicted probe cost {number(old)} → {number(new)} {PROBE_COST_UNIT} "
                f"({percent_change(-saving)} {'>' if saving > self.policy.threshold else '≤'} threshold "
                f"{percent_change(self.policy.threshold, 0).lstrip('+')})")
        budget = self.policy.mir_budget
        over = budget is not None and mir_memory(running, w) > budget * (1 + 1e-9)
        if diff.plan_changed and (saving > self.policy.threshold or over):
            changes = "; ".join(diff.summary(max_lines=4).splitlines()[1:])
            if over:
                head = (f"the running plan's MIR stores would hold {number(mir_memory(running, w))} {MEMORY_UNIT}, "
                        f"over the budget of {number(budget)}; {head}")
            self._schedule(target, (plan, seconds), stats, f"{head}; statistics of epoch {epoch - 1}: {moved}; "
                           f"{changes}", old, new)
            return
        why = head if diff.plan_changed else ("re-optimised plan is the running one "
                                              f"(cost {number(new)} {PROBE_COST_UNIT})")
        self.plan_of[target] = running_idx
        self.decisions.append(Decision(epoch, stats.epoch, target, False, f"kept: {why}; statistics of epoch "
                                       f"{epoch - 1}: {moved}", running_idx, queries, old, new, seconds, stats))

    def switches(self) -> list[Decision]:
        """The decisions that installed a plan (the initial one included)."""
        return [d for d in self.decisions if d.switched]


def _query_delta(plan: Plan, queries: Iterable[str]) -> str:
    had, has = set(plan.workload.query_names), set(queries)
    parts = [f"+{q}" for q in sorted(has - had)] + [f"−{q}" for q in sorted(had - has)]
    return " ".join(parts) or "same queries"
