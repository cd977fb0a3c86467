"""PMJoin (Zhou et al.): distributed multi-way stream joins placed by a rate-based model,
and value-partitioned plans where each group of join values gets its own placement.

Streams arrive at processing **nodes** (``relations: {S1: {node: n1, …}}``; a relation
without a node is its own node, named after it).  The goal is the least **communication
cost**: bytes per second shipped between nodes.

**Rate-based model** (Section 3.2).  A stream ``S_i`` has rate ``λ_i`` and ``W_i = λ_i · T_i``
tuples in its window (``T_i``: the relation's window, ``defaults.horizon`` when unbounded).
Joining two streams with selectivity ``f`` gives (Equations 2 and 3)::

    λ_ij = f · (λ_i · W_j + λ_j · W_i)        W_ij = f · W_i · W_j

Equation 2 is the steady state of sliding windows.  An unbounded window holds the history
so far, ``λ_j · t`` at time ``t``, so its join's rate grows over the run; the model takes
its mean over the horizon ``H`` (``λ_ij = f · λ_i · λ_j · H`` for two unbounded streams,
half of Equation 2 with ``T = H``): the bytes a run over the horizon ships are then the
results it produces (docs/model.md §4), and the placement is the same in any time unit.

Applied recursively, a set ``P`` of relations has ``W_P = F(P) · Π W_i`` and
``λ_P = F(P) · Σ_i λ_i · Π_{j≠i} W_j`` (the product averaged over the horizon where windows
are unbounded) with ``F(P) = Π_c s_c^(k_c(P)−1)`` (docs/model.md §2's
factor): independent of how the join is done, as the paper notes.  Where the workload gives
a **measured size** of ``P`` (``sizes``, docs/model.md §2), ``F(P) = |⋈P| / Π λ_i`` instead: the
correlation independence misses (a foreign key) changes the streams' rates and the placement as
it changes CLASH's costs.  With **per-value
rates** ``λ_i^v`` of a class (from data, :func:`value_rates`), that class is not a factor
``s_c`` but summed exactly over its values: ``λ_P = F'(P) · Σ_v Σ_i λ_i(v) · Π_{j≠i} W_j(v)``
(relations outside the class do not depend on ``v``).  This is how Table 1's
``λ_{1,2} = 9.003`` arises from the per-value rates of Example 1.

**Tuple sizes.**  A result tuple is as large as its inputs together (Example 1:
``sizes="sum"``, the default: a stream of ``k`` relations costs ``k`` bytes per tuple) or every
tuple has the same size (Example 2's simplification: ``sizes="unit"``).  Algorithm 1 uses the
same sizes ("we can always incorporate the tuple sizes … without changing the algorithm").

**Schemes** (Example 1): *centralized* — ship every stream to the one node where that is
cheapest; *distributed* — :func:`stream_join_opt` (the paper's Algorithm 1, STREAMJOINOPT);
*partition-based* — split the streams into ``D`` groups of join values and run Algorithm 1
on every group's substreams (:func:`partition_values`: hash, range or the paper's rate-based
partitioning by rank vectors).

**Which PMJoins** (multi-attribute queries): FINDPARTITION (Algorithm 2) marks operators
whose joins are all on one class, merging children partitionable on the same class; the
heuristic then keeps the ones with the largest input rates, under the two constraints (no
PMJoin is the right child of an operator, no PMJoin is the child of another PMJoin).

**In our plan vocabulary.**  Algorithm 1's output is an operator tree of MJoins; as for the
``mjoin``/``tree`` planners (:mod:`mqjoin.planners.trees`) it becomes an ordinary
:class:`~mqjoin.planning.plan.Plan` (every inner MJoin's output an MIR store, probing sequences inside
each MJoin), so ``--planner pmjoin`` optimises, runs and compares on every engine.  That plan
is the *unpartitioned* placement: our engines route by a store's partition attribute, not by
value group, so a deployed plan cannot switch shape per value.  The per-group plans are
reported beside it (:class:`PMJoinReport`); each is itself an ordinary plan (the query's tree
with the PMJoin replaced by the group's tree, :func:`group_plan`) that runs on that group's
substreams: :func:`group_results` runs every group's plan on its substreams and unites the
results, which equal the oracle's (the groups split the values of one class, so they split
the results).  The probe cost of these plans is CLASH's (docs/model.md §4); the communication cost
is this module's.

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload(EXAMPLE_1)
>>> r = pmjoin_report(w, groups=3, method="range", rates=EXAMPLE_1_VALUE_RATES)
>>> qp = r.queries[0]
>>> qp.tree
((S3 ⋈ S2)@n2 ⋈ S1)@n1
>>> round(qp.centralized, 4), round(qp.distributed, 4), round(qp.partitioned, 4)
(100.1, 54.0316, 0.0696)
>>> for g in qp.pmjoins[0].groups:
...     print(g.values, g.tree, round(g.cost, 4))
('a',) ((S2 ⋈ S1)@n1 ⋈ S3)@n3 0.036
('b',) ((S3 ⋈ S1)@n1 ⋈ S2)@n2 0.012
('c',) ((S3 ⋈ S2)@n2 ⋈ S1)@n1 0.0216

The package is split by job: :mod:`.streams` (the rate-based model, placed operator trees,
Algorithm 1), :mod:`.values` (per-value rates and value partitioning) and :mod:`.placement`
(Algorithm 2, the schemes of every query, the plans); every public name is importable from
here.
"""

from mqjoin.planners.pmjoin.placement import (
    GroupPlan, PMJoin, PMJoinOptions, PMJoinReport, QueryPMJoin, find_pmjoins, group_plan, group_results,
    group_tree, partition_class, plan_query, pmjoin_built, pmjoin_plan, pmjoin_report,
)
from mqjoin.planners.pmjoin.streams import (
    EXAMPLE_1, EXAMPLE_1_VALUE_RATES, EXAMPLE_2, Operator, SIZES, StreamModel, ValueRates, centralized_cost,
    check_sizes, communication_cost, node_of, optimal_plan, stream_join_opt, value_sort_key,
)
from mqjoin.planners.pmjoin.values import (
    METHODS, ValueGroups, check_partitioning, partition_values, plain_value, rank_vector, render_value_rates,
    value_rates,
)

__all__ = [
    'EXAMPLE_1', 'EXAMPLE_1_VALUE_RATES', 'EXAMPLE_2', 'GroupPlan', 'METHODS', 'Operator', 'PMJoin',
    'PMJoinOptions', 'PMJoinReport', 'QueryPMJoin', 'SIZES', 'StreamModel', 'ValueGroups', 'ValueRates',
    'centralized_cost', 'check_partitioning', 'check_sizes', 'communication_cost', 'find_pmjoins', 'group_plan',
    'group_results', 'group_tree', 'node_of', 'optimal_plan', 'partition_class', 'partition_values', 'plain_value',
    'plan_query', 'pmjoin_built', 'pmjoin_plan', 'pmjoin_report', 'rank_vector', 'render_value_rates',
    'stream_join_opt', 'value_rates', 'value_sort_key',
]
