"""The model after a change made from the model before (mqjoin.planning.ilp.changed): a model
grown by queries added or shrunk by queries removed is the model built anew, by name, its
blocks keep their keys where they stand, and where it cannot be it is built anew."""

from __future__ import annotations

from dataclasses import replace

import pytest

from _replan import CHANGES, largest, query_names, same
from mqjoin.datasets.random_workloads import random_workload
from mqjoin.planning.candidates import enumerate_candidates
from mqjoin.planning.ilp import build_model, components
from mqjoin.planning.optimizer import optimize, replan

pytestmark = pytest.mark.usefixtures("tie_breaks_to_the_end")  # two optima compared: both canonical

def _model_by_name(mdl):
    """A model as its names say: every column (name, cost, tie-break weight, bound, integrality),
    every row (name, its columns by name with coefficients, bounds), every part (its columns by
    name) and every partition choice (its store and index), each sorted: what two models must
    share to be the same model, wherever their columns and rows stand."""
    names = mdl.names
    cols = sorted((names[c], mdl.cost[c], mdl.tie[c], mdl.upper[c], mdl.integer[c]) for c in range(len(names)))
    rows = sorted((n, tuple(sorted((names[i], a) for i, a in zip(idx, coef))), lo, hi)
                  for n, idx, coef, lo, hi in mdl.rows)
    parts = sorted(sorted(names[c] for c in cols) for cols, _ in components(mdl))
    choices = sorted((names[c], st.label, j) for c, (st, j) in mdl.z_index().items())
    return cols, rows, parts, choices


#: (queries, relations, query size, seed, policy, MIRs): workloads whose last two queries, added
#: one at a time, take no name made already (their models compare by name exactly; names that took a
#: suffix: below)
GROWN = [(8, 40, 3, 2, "single", True), (10, 40, 4, 0, "single", True), (10, 40, 4, 2, "single", False),
         (8, 40, 3, 4, "replicas", True), (12, 30, 4, 2, "single", True), (8, 30, 5, 6, "single", True)]


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", GROWN)
def test_a_model_grown_by_a_query_is_the_model_built_anew(n, rels, k, seed, policy, mirs, monkeypatch):
    """The model of a re-plan after a query was added, grown from the model before
    (:func:`extend_model`), is the model built from scratch: the same columns, rows, parts and
    partition choices by name; the columns before keep their places and names, and the links
    without ``z`` it extends are those computed anew.  (Models this small get the group
    broadcast rows, which a grown model does not: they are left out here.)"""
    from mqjoin.planning.ilp import extend_model, model as ilp_model
    from mqjoin.planning.ilp.model import plain_links

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    w = random_workload(n, rels, k, seed=seed)
    before, after = CHANGES["query added"](w)
    old = build_model(enumerate_candidates(before, mirs=mirs), policy)
    plain_links(old)  # (the links a solve computed, which the grown model extends)
    grown = extend_model(old, enumerate_candidates(after, mirs=mirs, previous=old.candidates), policy)
    assert grown is not None
    whole = build_model(enumerate_candidates(after, mirs=mirs), policy)
    assert _model_by_name(grown) == _model_by_name(whole)
    assert grown.names[:len(old.names)] == old.names and grown.num_variables > old.num_variables
    root, with_z = plain_links(grown)
    grown._keys.clear()
    again, with_z_again = plain_links(grown)
    assert with_z == with_z_again
    assert {tuple(c for c in range(len(root)) if root[c] == r) for r in set(root)} == \
        {tuple(c for c in range(len(again)) if again[c] == r) for r in set(again)}


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs",
                         [g for g in GROWN if g[4] == "single"] + [(10, 16, 4, 0, "single", True)])
def test_a_grown_models_blocks_take_their_keys_where_they_stand(n, rels, k, seed, policy, mirs, monkeypatch):
    """The blocks of a grown model's coupled part that stand where blocks of the model before
    stood take those blocks' keys without reading their names again — the same objects —, and
    every key is the one read from the names (:func:`part_key`), those taken included.  (In the
    last case a block stands where it stood, but one of its stores is shared now: another key.)
    A model made from the grown one by ``replace`` shares its cache but not its keys."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model, orders_relaxed

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    old, grown, keys, again = _keys_before_and_after("query added", extend_model, n, rels, k, seed, policy, mirs)
    taken = [k for k in again if any(k is o for o in keys)]
    assert 0 < len(taken) == sum(k in set(keys) for k in again) < len(again)
    _checked_keys(orders_relaxed(grown))  # (the same cache, other integrality: no key taken where it stands)
    _checked_keys(orders_relaxed(old))  # (the cache of the model before now holds another's keys)
    _checked_keys(extend_model(old, enumerate_candidates(grown.candidates.workload, mirs=mirs,
                                                         previous=old.candidates), policy))


def _checked_keys(mdl):
    """The keys of the blocks of a model's largest part (:func:`block_keys`), each checked to be
    the one read from the names (:func:`part_key`)."""
    from mqjoin.planning.ilp.model import part_key
    from mqjoin.planning.ilp.prices import block_keys

    part = largest(mdl)
    keys = block_keys(part)
    assert keys == [part_key(mdl, b.cols, b.rows, part.tie) for b in part.blocks]
    return keys


def _keys_before_and_after(change, made_from, n, rels, k, seed, policy, mirs):
    """A model built before a change, the model after it made from that one (``made_from``:
    grown or shrunk), and the keys of their largest parts' blocks (:func:`_checked_keys`)."""
    before, after = CHANGES[change](random_workload(n, rels, k, seed=seed))
    old = build_model(enumerate_candidates(before, mirs=mirs), policy)
    keys = _checked_keys(old)
    made = made_from(old, enumerate_candidates(after, mirs=mirs, previous=old.candidates), policy)
    return old, made, keys, _checked_keys(made)


def test_some_grown_models_repartition_a_store():
    """The cases above include stores that the added query gives a new partition candidate:
    their choice and broadcast rows are written anew, not only added to."""
    grew = 0
    for n, rels, k, seed, _, mirs in GROWN:
        w = random_workload(n, rels, k, seed=seed)
        before, after = CHANGES["query added"](w)
        old, new = enumerate_candidates(before, mirs=mirs), enumerate_candidates(after, mirs=mirs)
        grew += sum(attrs != new.partition_candidates[st] for st, attrs in old.partition_candidates.items())
    assert grew >= 3


@pytest.mark.parametrize("change", ["query removed", "rate", "parallelism", "attributes"])
def test_a_model_is_built_anew_unless_queries_were_only_added(change, monkeypatch):
    """Any change but queries added (a query removed, statistics, parallelism, relations
    declared otherwise) gives no grown model: the re-plan builds it anew."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    before, after = CHANGES[change](random_workload(10, 40, 4, seed=0))
    old = build_model(enumerate_candidates(before))
    assert extend_model(old, enumerate_candidates(after, previous=old.candidates)) is None


def test_a_model_is_built_anew_for_budgets_and_group_rows(monkeypatch):
    """Nor is a model grown under policy ``budget``, with a MIR budget, or where it has the group
    broadcast rows (small models)."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model

    before, after = CHANGES["query added"](random_workload(10, 40, 4, seed=0))
    old = enumerate_candidates(before)
    new = enumerate_candidates(after, previous=old)
    assert extend_model(build_model(old), new) is None  # the group broadcast rows
    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    assert extend_model(build_model(old), new) is not None
    assert extend_model(build_model(old, "budget"), new, "budget") is None
    assert extend_model(build_model(old, mir_budget=1e9), new, mir_budget=1e9) is None


#: two queries over the same relations joined on other attributes: their MIRs have the same
#: labels, so their probe orders', steps' and rows' names the same stems
CLASHING = '''
defaults: {rate: 100, selectivity: 0.01, parallelism: 4}
relations: {R: {attributes: [a, b]}, S: {attributes: [a, b]}, T: {attributes: [a, b]}}
queries: {%s}
'''


def _unsuffixed(mdl):
    """:func:`_model_by_name` with the suffix that makes a name unique taken off every name
    that weighs nothing in the tie-break (steps' columns, rows): those may be numbered in
    another order by a grown model than by the build."""
    import re

    ranked = {mdl.names[c] for c in range(mdl.num_variables) if mdl.tie[c]}
    bare = [n if n in ranked else re.sub(r"_[0-9]+$", "", n) for n in mdl.names]
    return _model_by_name(replace(mdl, names=bare, rows=[(re.sub(r"_[0-9]+$", "", n), *rest) for n, *rest in mdl.rows]))


@pytest.mark.parametrize("first", [True, False])
def test_a_model_grown_by_an_owner_whose_label_is_taken(first, monkeypatch):
    """A new owner whose label is an old one's (a MIR of the same relations joined otherwise)
    names its probe orders with the suffixes the build gives them when the candidates list it
    after the old one (the query before comes first in the workload): the model is grown,
    its choices named and weighed as the build's, only steps' columns and rows possibly
    numbered otherwise, and the re-plan is the solve from scratch.  Listed before the old
    one (the new query comes first), the build would number the new owner's orders first:
    the model is built anew."""
    from mqjoin.model.workload import parse_workload
    from mqjoin.planning import clash
    from mqjoin.planning.ilp import extend_model, model as ilp_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    q1, q2 = 'q1: "R(a), S(a), T(a)"', 'q2: "R(b), S(b), T(b)"'
    w = parse_workload(CLASHING % (f"{q1}, {q2}" if first else f"{q2}, {q1}"))
    one = enumerate_candidates(w.restricted_to(["q1"]))
    two = enumerate_candidates(w, previous=one)
    assert {m.label for m in one.orders if not isinstance(m, str)} & \
        {m.label for m in two.orders if not isinstance(m, str) and m not in one.orders}
    old = build_model(one)
    grown, whole = extend_model(old, two), build_model(two)
    if not first:
        assert grown is None
        return
    assert grown is not None and any(c is not None for _, c in grown._renamed)  # (a choice took a suffix)
    def ranked(m):
        return sorted((m.names[c], m.tie[c], m.cost[c]) for c in range(m.num_variables) if m.tie[c])

    assert ranked(grown) == ranked(whole)
    assert _unsuffixed(grown) == _unsuffixed(whole)
    grew = []
    real = clash.extend_model
    monkeypatch.setattr(clash, "extend_model", lambda *a, **k: grew.append(real(*a, **k)) or grew[-1])
    res = optimize(w.restricted_to(["q1"]), mode="mqo", partitioning="single")
    same(replan(res, w), optimize(w, mode="mqo", partitioning="single"))
    assert grew and grew[0] is not None


def test_which_choices_that_took_a_suffix_are_named_as_built():
    """Which choices that took a suffix are named as the build names them: a probe order whose
    stem an order of an owner listed before it took, or that no order took before; not one
    whose stem an order of an owner listed after it took, nor a store's partition choice."""
    from mqjoin.planning.ilp.changed import _named_as_built

    mdl = build_model(enumerate_candidates(random_workload(6, 20, 3, seed=1)))
    c = next(iter(mdl.z.values()))
    assert _named_as_built(mdl, replace(mdl, _renamed=[]))
    assert not _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[c], c)]))
    first, last = next(iter(mdl.x.values())), list(mdl.x.values())[-1]  # (orders of the first and last owner)
    assert _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[first] + "_new", first)]))  # (no order took it)
    assert _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[first], last)]))  # (taken by an owner before)
    assert not _named_as_built(mdl, replace(mdl, _renamed=[(mdl.names[last], first)]))  # (taken by one after)


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", GROWN)
def test_replans_from_grown_models_equal_solves_from_scratch(n, rels, k, seed, policy, mirs, monkeypatch):
    """Two queries added one at a time, each re-planned from the result before on a grown
    model (the first re-plan's model grown from the solve's, the second's from the first's):
    each plan is the one a solve from scratch gives; then the first query removed, on the model
    shrunk from the second's (:func:`shrink_model`) but where a name would be numbered otherwise
    (one case here: built anew)."""
    from mqjoin.planning import clash
    from mqjoin.planning.ilp import model as ilp_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    grown, shrunk = [], []

    def spy(real, made):
        def call(*args, **kwargs):
            out = real(*args, **kwargs)
            made.append(out is not None)
            return out
        return call

    monkeypatch.setattr(clash, "extend_model", spy(clash.extend_model, grown))
    monkeypatch.setattr(clash, "shrink_model", spy(clash.shrink_model, shrunk))
    w = random_workload(n, rels, k, seed=seed)
    names = query_names(w)
    res = optimize(w.restricted_to(names[:-2]), partitioning=policy, mirs=mirs)
    for step in (w.restricted_to(names[:-1]), w, w.restricted_to(names[1:])):
        res = replan(res, step)
        same(res, optimize(step, partitioning=policy, mirs=mirs))
    assert grown == [True, True, False] and shrunk == [(n, seed) != (12, 2)]


@pytest.mark.parametrize("grow", [False, True])
@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", GROWN)
def test_a_model_shrunk_by_a_query_is_the_model_built_anew(n, rels, k, seed, policy, mirs, grow, monkeypatch):
    """The model of a re-plan after a query was removed, shrunk from the model before
    (:func:`shrink_model`: built, or grown by a query first), is the model built from scratch:
    the same columns, rows, parts and partition choices by name (the choices weighed alike:
    a store that lost a partition candidate ranks the ones left anew), only fewer columns and
    rows where they were."""
    from mqjoin.planning.ilp import extend_model, model as ilp_model, shrink_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    w = random_workload(n, rels, k, seed=seed)
    before, after = CHANGES["query removed"](w)
    first = before.restricted_to(query_names(before)[:-1]) if grow else before
    old = build_model(enumerate_candidates(first, mirs=mirs), policy)
    if grow:
        old = extend_model(old, enumerate_candidates(before, mirs=mirs, previous=old.candidates), policy)
    new = enumerate_candidates(after, mirs=mirs, previous=old.candidates)
    shrunk = shrink_model(old, new, policy)
    assert shrunk is not None and shrunk.num_variables < old.num_variables and len(shrunk.rows) < len(old.rows)
    assert _model_by_name(shrunk) == _model_by_name(build_model(enumerate_candidates(after, mirs=mirs), policy))
    kept = set(shrunk.names)
    assert [name for name in old.names if name in kept] == shrunk.names  # (in their order)


@pytest.mark.parametrize("n,rels,k,seed,policy,mirs", [g for g in GROWN if g[4] == "single"])
def test_a_shrunk_models_blocks_take_their_keys_where_they_stand_now(n, rels, k, seed, policy, mirs, monkeypatch):
    """The blocks of a shrunk model's coupled part that are as they were (none of their columns
    removed or weighed anew, none of their rows written anew) take the keys of the model before
    where their columns and rows stand now — the same objects —, and every key is the one read
    from the names (:func:`part_key`)."""
    from mqjoin.planning.ilp import model as ilp_model, shrink_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    _, _, keys, again = _keys_before_and_after("query removed", shrink_model, n, rels, k, seed, policy, mirs)
    taken = [k for k in again if any(k is o for o in keys)]
    assert 0 < len(taken) == sum(k in set(keys) for k in again) <= len(again)


def test_some_shrunk_models_repartition_a_store():
    """The cases above remove partition candidates (a store's choices ranked anew) and
    broadcasts of steps that a store's candidates left all serve."""
    lost = 0
    for n, rels, k, seed, _, mirs in GROWN:
        before, after = CHANGES["query removed"](random_workload(n, rels, k, seed=seed))
        old, new = enumerate_candidates(before, mirs=mirs), enumerate_candidates(after, mirs=mirs)
        lost += sum(attrs != old.partition_candidates[st] for st, attrs in new.partition_candidates.items())
    assert lost >= 3


def test_a_model_is_built_anew_where_a_choice_would_be_numbered_otherwise(monkeypatch):
    """Where a probe order's name took a suffix after a name of the query removed (MIRs of the
    same relations joined otherwise), the build would number it otherwise, and so weigh it
    otherwise: no shrunk model, and the re-plan is the solve from scratch all the same."""
    from mqjoin.planning import clash
    from mqjoin.planning.ilp import model as ilp_model, shrink_model

    monkeypatch.setattr(ilp_model, "STRENGTHEN_MAX_ORDERS", 0)
    w = random_workload(16, 12, 4, seed=1)  # (16 queries over 12 relations: labels taken often)
    fewer = w.restricted_to(query_names(w)[1:])
    old = build_model(enumerate_candidates(w))
    assert shrink_model(old, enumerate_candidates(fewer, previous=old.candidates)) is None
    made = []
    real = clash.shrink_model
    monkeypatch.setattr(clash, "shrink_model", lambda *a, **kw: made.append(real(*a, **kw)) or made[-1])
    same(replan(optimize(w, partitioning="single"), fewer), optimize(fewer, partitioning="single"))
    assert made == [None]


def test_a_large_replan_grows_the_model_and_equals_a_solve_from_scratch():
    """At the size where it pays (no group broadcast rows: more than
    ``STRENGTHEN_MAX_ORDERS`` probe orders), a query added re-plans on a grown model: its
    columns before keep their places, and the plan is the one a solve from scratch gives."""
    w = random_workload(101, 100, 4, seed=0)
    first = optimize(w.restricted_to(query_names(w)[:-1]), partitioning="single")
    assert first.model.candidates.size["probe_orders"] > 5000
    again = replan(first, w)
    assert again.model.names[:first.model.num_variables] == first.model.names
    same(again, optimize(w, partitioning="single"))
