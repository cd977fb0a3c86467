"""Adaptivity on Spark (paper Section VI) against the adaptive reference executor and the oracle.

The adaptive reference executor (:mod:`mqjoin.runtime.epochs`) is the executable
specification: on the same workload, data, policy, changelog and optimiser, the Spark engine
(:mod:`mqjoin.runtime.spark.epochs`) must return the same results — equal to
:func:`mqjoin.runtime.oracle.adaptive_oracle_results` — and, epoch by epoch, the same plan, the same
decisions on the same sampled statistics, the same results per query and the same probe
messages (history messages of iterative probing included).  Plans are forced to switch at
every epoch (a cycling optimiser, every re-optimised plan taken), so containers of many
layouts and gaps in MIRs are probed across epochs.  Live submissions, stop/restart from the
checkpoint, the CLI and the errors are checked on top.

The run's one local[2] session (``spark`` in tests/conftest.py, as for test_spark_engine); each deployment a few
hundred tuples over 9–10 epochs of 1 s, in 2–3 micro-batches (every epoch of a batch is a
slice of its own, so the cost is per epoch, not per tuple).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from _cases import cases
from _cli import run_cli
from test_adaptive import W_FIG6, cycling_optimizer, fig6_tables, random_changes
from _spark import RETAINED_EXECUTIONS, TIMEOUT, sql_executions

import mqjoin.adaptive.controller as adaptive
from mqjoin.adaptive.policy import AdaptivePolicy, QueryChange, lifetimes
from mqjoin.model.errors import AdaptiveError, DataError, EngineError, UnknownRelationError
from mqjoin.runtime.oracle import adaptive_oracle_results
from mqjoin.runtime.epochs import run_adaptive
from mqjoin.model.tables import Table, read_results, write_inputs
from mqjoin.model.workload import parse_workload

pytestmark = pytest.mark.slow


def _case(seed: int, max_rows: int = 60):
    [(s, w, tables)] = cases(1, start=seed, max_rows=max_rows)
    assert s == seed, f"seed {seed} draws an invalid workload"
    return w, tables


def _committed_rows(out: Path) -> int:
    import pyarrow.dataset as ds

    return ds.dataset(str(out / "_batches"), format="parquet").to_table(columns=["query"]).num_rows


def _epoch_view(run) -> list[tuple]:
    """What the engines must agree on per epoch (latency, busy time and state are measured)."""
    return [(e.epoch, e.plan, tuple(e.queries), e.input_tuples, dict(e.results), e.probe_messages,
             e.history_messages) for e in run.epochs]


def _decision_view(run) -> list[tuple]:
    out = []
    for d in run.decisions:
        st = d.statistics
        stats = None if st is None else (dict(st.tuples), dict(st.rates), {str(k): v for k, v in st.pairs.items()})
        out.append((d.epoch, d.stats_epoch, d.active_from, d.switched, d.plan, tuple(d.queries), d.reason, stats))
    return out


class Scenario:
    def __init__(self, w, tables, policy, changes, ref, d, out):
        self.w, self.tables, self.policy, self.changes, self.ref, self.d, self.out = \
            w, tables, policy, changes, ref, d, out
        self.run = d.snapshot()
        self.full, self.lives = lifetimes(w, changes, policy)


def _scenario(w, tables, policy, changes, nbatches, spark, out) -> Scenario:
    """The reference run and the Spark run of one configuration, every re-optimised plan taken."""
    from mqjoin.runtime.spark.launch import run_spark

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(adaptive, "recost", lambda plan, w: 1e300)  # the running plan 'costs' more: switch
        ref = run_adaptive(w, tables, policy, changes, optimizer=cycling_optimizer())
        total = sum(len(t) for t in tables.values())
        d = run_spark(w, tables, out, spark=spark, adaptive=policy, changes=changes, optimizer=cycling_optimizer(),
                      max_rows_per_batch=-(-total // nbatches), timeout=TIMEOUT)
    return Scenario(w, tables, policy, list(changes), ref, d, out)


# --------------------------------------------------------------------------------------------
# 1. plan switches at every epoch (seed 7008: 2 queries over 4 relations, windows 0, 4 and null,
#    168 tuples, a switch at every epoch, gaps probed iteratively)
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def switching(spark, tmp_path_factory):
    w, tables = _case(7008, 80)
    return _scenario(w, tables, AdaptivePolicy(epoch=1.5, threshold=0.0), (), 2, spark,
                     tmp_path_factory.mktemp("switching"))


def test_forced_switches_results_equal_reference_and_oracle(switching):
    s = switching
    got = s.d.results()
    want = adaptive_oracle_results(s.w, s.tables, s.changes, s.policy)
    assert sum(map(len, want.values())) > 1000
    assert got == s.ref.result_sets(), "Spark differs from the adaptive reference executor"
    assert got == want, "Spark differs from the adaptive oracle"
    assert _committed_rows(s.out) == sum(map(len, got.values())), "a result was committed twice"
    assert read_results(s.full, s.out) == got  # OUT/<query>.parquet


def test_forced_switches_same_plans_decisions_and_messages_per_epoch(switching):
    s = switching
    assert len(s.run.epochs) >= 5 and len(s.run.switches) >= 5  # not vacuous
    assert sum(e.history_messages for e in s.ref.epochs) > 0  # gaps probed iteratively
    assert _epoch_view(s.run) == _epoch_view(s.ref)
    assert _decision_view(s.run) == _decision_view(s.ref)  # the statistics sampled in Spark included
    assert [p.probe_orders() for p in s.run.plans] == [p.probe_orders() for p in s.ref.plans]
    tl = s.d.timeline()
    assert list(tl["epoch"]) == [e.epoch for e in s.ref.epochs]
    # per-plan probe messages, so the explorer's Probe trees colour a Spark run as a reference one
    assert len(s.run.messages) == len(s.run.plans) and any(s.run.messages)
    assert s.run.messages == s.ref.messages
    assert (s.run.first_ts, s.run.span) == (s.ref.first_ts, s.ref.span)
    spark, ref = s.run.counts().check(), s.ref.counts().check()  # rows are state: measured at batch ends
    assert spark.steps == ref.steps and spark.total("messages") == ref.total("messages")
    assert [c for c in spark.stores if c.kind == "messages"] == [c for c in ref.stores if c.kind == "messages"]


# --------------------------------------------------------------------------------------------
# 2. queries added and removed (seed 7030: windows 1 and null, 109 tuples, 3 changes: two
#    queries added — answering from stored history — and one removed), sampled selectivities
#    (sample = 0.5: the hash sample in SQL)
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def changing(spark, tmp_path_factory):
    w, tables = _case(7030)
    w0, changes = random_changes(7030, w)
    return _scenario(w0, tables, AdaptivePolicy(epoch=1.5, threshold=0.0, sample=0.5), changes, 2, spark,
                     tmp_path_factory.mktemp("changing"))


def test_query_changes_results_equal_reference_and_oracle(changing):
    s = changing
    added = [lf for lf in s.lives if lf.added is not None]
    assert added and any(lf.removed is not None for lf in s.lives)
    got = s.d.results()
    assert set(got) == {lf.query for lf in s.lives}
    assert got == s.ref.result_sets()
    assert got == adaptive_oracle_results(s.w, s.tables, s.changes, s.policy)
    assert _committed_rows(s.out) == sum(map(len, got.values()))
    # an added query answered from history stored before its activation
    history = 0
    for lf in added:
        q = s.full.query(lf.query)
        history += sum(any(s.policy.epoch_of(s.tables[r].ts[i]) < lf.added for r, i in zip(q.relations, res))
                       for res in got[lf.query])
    assert history > 0


def test_query_changes_same_plans_decisions_and_messages_per_epoch(changing):
    s = changing
    assert _epoch_view(s.run) == _epoch_view(s.ref)
    assert _decision_view(s.run) == _decision_view(s.ref)
    reasons = [d.reason for d in s.run.switches]
    assert any(r.startswith("query change: +") for r in reasons)
    assert any("−" in r for r in reasons if r.startswith("query change"))
    assert {lf.query: (lf.added, lf.removed) for lf in s.run.lifetimes} == \
        {lf.query: (lf.added, lf.removed) for lf in s.lives}


# --------------------------------------------------------------------------------------------
# 3. live submit, stop mid-stream, restart from the checkpoint
# --------------------------------------------------------------------------------------------

W_LIVE = """
defaults: {selectivity: 0.3, window: 2.5, parallelism: 2}
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
queries: {q1: "R(a), S(a)"}
"""


def live_tables():
    rng = random.Random(5)
    out = {}
    for j, (r, cols) in enumerate((("R", ["a"]), ("S", ["a", "b"]), ("T", ["b"]))):
        ts = [k / 6 + j / 60 for k in range(60)] + [3.0] * 3  # 10 s, ties at 3.0
        out[r] = Table.from_columns(r, {"ts": ts, **{c: [rng.randint(0, 3) for _ in ts] for c in cols}})
    return out


def test_live_submit_is_persisted_and_a_restart_loses_and_duplicates_nothing(spark, tmp_path):
    from mqjoin.runtime.spark.launch import deploy

    w, tables = parse_workload(W_LIVE), live_tables()
    policy = AdaptivePolicy(epoch=1.0)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    events: list[dict] = []
    d = deploy(w, tables, out, spark=spark, adaptive=policy, checkpoint=ckpt, max_rows_per_batch=25)
    d.subscribe(events.append)
    try:
        assert d.wait_for_epoch(1, timeout=TIMEOUT), d.error
        with pytest.raises(UnknownRelationError):  # refused, changes nothing
            d.submit(add={"bad": "R(a), Z(a)"})
        activation = d.submit(add={"q2": "S(b), T(b)"})
        assert d.wait_for_epoch(activation + 1, timeout=TIMEOUT), d.error
        assert not d.done, "the input ran out before the stop: make it longer"
    finally:
        d.stop()
    first = d.results()
    assert first["q2"], "the live query produced nothing before the stop"
    logged = [json.loads(x) for x in (ckpt / "adaptive" / "changes.jsonl").read_text().splitlines()]
    assert [x["change"]["add"] for x in logged] == [{"q2": "S(b), T(b)"}]
    change = QueryChange(**{**logged[0]["change"], "remove": tuple(logged[0]["change"]["remove"])})
    assert policy.epoch_of(change.at) + 2 == activation
    assert any(e["kind"] == "change" and e["activation_epoch"] == activation for e in events)

    d2 = deploy(w, tables, out, spark=spark, adaptive=policy, checkpoint=ckpt, max_rows_per_batch=25)
    try:
        assert d2.wait(TIMEOUT)
    finally:
        d2.stop()
    got = d2.results()
    want = adaptive_oracle_results(w, tables, [change], policy)
    assert got == want
    assert got == run_adaptive(w, tables, policy, [change]).result_sets()
    assert all(first[q] <= got[q] for q in first)
    assert _committed_rows(out) == sum(map(len, got.values())), "a result was committed twice"
    assert any(b for b in d2.batches["rebuilt"])  # the restart rebuilt its state from the replay log
    assert {lf.query: lf.added for lf in d2.snapshot().lifetimes}["q2"] == activation
    # a checkpoint resumes only the deployment that wrote it
    with pytest.raises(AdaptiveError, match="another adaptive policy"):
        deploy(w, tables, out, spark=spark, adaptive=AdaptivePolicy(epoch=2.0), checkpoint=ckpt)


def test_a_checkpoint_of_an_older_version_resumes(spark, tmp_path):
    """A checkpoint written before AdaptivePolicy had its ``sizes`` field and before the
    epoch samples carried the plan's counts (a fresh checkpoint rewritten into that form)
    resumes under the default policy: the missing field is its default, and the replayed
    epochs measure no sizes, as when they were written."""
    import pickle

    from mqjoin.runtime.spark.launch import deploy

    w, tables = parse_workload(W_LIVE), live_tables()
    policy = AdaptivePolicy(epoch=1.0)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    d = deploy(w, tables, out, spark=spark, adaptive=policy, checkpoint=ckpt, max_rows_per_batch=25)
    try:
        assert d.wait_for_epoch(2, timeout=TIMEOUT), d.error
        assert not d.done, "the input ran out before the stop: make it longer"
    finally:
        d.stop()
    config = ckpt / "adaptive" / "config.json"
    old = json.loads(config.read_text())
    del old["policy"]["sizes"]
    config.write_text(json.dumps(old))
    stripped = 0
    for path in (ckpt / "adaptive" / "state").glob("*.pkl"):
        rec = pickle.loads(path.read_bytes())
        for _, _, sample, _ in rec["enters"]:
            if sample is not None:
                del sample.__dict__["messages"], sample.__dict__["rows"]
                stripped += 1
        path.write_bytes(pickle.dumps(rec))
    assert stripped, "no epoch sample in the journal: stop later"

    d2 = deploy(w, tables, out, spark=spark, adaptive=policy, checkpoint=ckpt, max_rows_per_batch=25)
    try:
        assert d2.wait(TIMEOUT), d2.error
    finally:
        d2.stop()
    assert any(b for b in d2.batches["rebuilt"])  # resumed from the journal, not started over
    assert d2.results() == adaptive_oracle_results(w, tables, [], policy)
    with pytest.raises(AdaptiveError, match="unknown field 'speed'"):  # a newer version's checkpoint
        config.write_text(json.dumps({**old, "policy": {**old["policy"], "speed": 1}}))
        deploy(w, tables, out, spark=spark, adaptive=policy, checkpoint=ckpt)


# --------------------------------------------------------------------------------------------
# 4. errors (before Spark does anything) and the CLI
# --------------------------------------------------------------------------------------------

def test_adaptive_on_the_native_engine_is_refused(tmp_path):
    from mqjoin.runtime.spark.launch import deploy

    w = parse_workload(W_FIG6)
    with pytest.raises(EngineError, match="adaptivity runs on the mqjoin engine, not on 'native'"):
        deploy(w, fig6_tables(), tmp_path, engine="native", adaptive=AdaptivePolicy())
    with pytest.raises(EngineError, match="deploy needs a plan"):
        deploy(w, fig6_tables(), tmp_path)


@pytest.mark.parametrize("changes,error,culprit", [
    ([QueryChange(at=2, remove=("q7",))], AdaptiveError, "removes q7"),
    ([QueryChange(at=2, add={"q1": "S(a), T(a)"})], AdaptiveError, "adds q1, a name already used"),
    ([QueryChange(at=2, add={"q2": "S(a), Z(a)"})], UnknownRelationError, "Z"),
])
def test_bad_changelog_is_refused_naming_the_culprit(spark, tmp_path, changes, error, culprit):
    from mqjoin.runtime.spark.launch import deploy

    with pytest.raises(error, match=culprit):
        deploy(parse_workload(W_FIG6), fig6_tables(), tmp_path / "o", spark=spark, adaptive=AdaptivePolicy(),
               changes=changes, checkpoint=tmp_path / "c")
    assert not (tmp_path / "o").exists()


def test_added_query_without_input_is_refused(spark, tmp_path):
    from mqjoin.runtime.spark.launch import deploy

    tables = {r: t for r, t in fig6_tables().items() if r != "T"}
    with pytest.raises(DataError, match="no input table for relation T"):
        deploy(parse_workload(W_FIG6), tables, tmp_path / "o", spark=spark, adaptive=AdaptivePolicy(),
               changes=[QueryChange(at=2, add={"q2": "S(a), T(a)"})])


def test_cli_adaptive_spark_run_matches_the_reference_cli(spark, tmp_path, capsys):
    (tmp_path / "w.yaml").write_text(W_FIG6)
    (tmp_path / "changes.yaml").write_text("- {at: 3.5, add: {q2: 'S(a), T(a)'}}\n- {at: 6.5, remove: [q1]}\n")
    write_inputs(fig6_tables(), tmp_path / "data")
    common = ["run", tmp_path / "w.yaml", "--data", tmp_path / "data", "--changes", tmp_path / "changes.yaml",
              "--check", "--json"]
    code, out, _ = run_cli(capsys, *common, "--out", tmp_path / "ref")
    assert code == 0
    ref = json.loads(out)
    code, out, _ = run_cli(capsys, *common, "--out", tmp_path / "spark", "--engine", "spark",
                           "--max-rows-per-batch", "20")
    assert code == 0
    got = json.loads(out)
    assert got["engine"] == "spark" and got["check"] == "equal to the oracle"
    assert set(ref) - {"engine", "executor", "executor_reason"} <= set(got)  # (the reference engine's executor)
    for key in ("queries", "lifetimes", "policy"):
        assert got[key] == ref[key], key
    for key in ("epoch", "plan", "queries", "input_tuples", "results", "probe_messages", "history_messages"):
        assert [e[key] for e in got["epochs"]] == [e[key] for e in ref["epochs"]], key
    assert [(d["active_from"], d["switched"], d["plan"]) for d in got["decisions"]] == \
        [(d["active_from"], d["switched"], d["plan"]) for d in ref["decisions"]]
    w = parse_workload(W_FIG6).with_query("q2", "S(a), T(a)")
    assert read_results(w, tmp_path / "spark") == read_results(w, tmp_path / "ref")


@pytest.mark.parametrize("extra,message", [
    (["--engine", "native", "--adaptive"], "--engine native"),
    (["--engine", "spark", "--changes", "bad.yaml"], "entry 1: unknown key 'drop'"),
    (["--engine", "spark", "--adaptive", "--epoch", "-1"], "epoch length"),
])
def test_cli_adaptive_spark_errors_are_one_line(tmp_path, capsys, extra, message):
    (tmp_path / "w.yaml").write_text(W_FIG6)
    (tmp_path / "bad.yaml").write_text("- {at: 3, drop: [q1]}\n")
    write_inputs(fig6_tables(), tmp_path / "data")
    extra = [tmp_path / x if x.endswith(".yaml") else x for x in extra]
    code, _, err = run_cli(capsys, "run", tmp_path / "w.yaml", "--data", tmp_path / "data", "--out", tmp_path / "o",
                           *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_ui_kept_every_execution_of_this_module(spark):
    """Runs last in this module: the UI still holds every SQL execution of the run so far — the
    shared session (tests/conftest.py) keeps RETAINED_EXECUTIONS whichever module started it."""
    n = len(sql_executions(spark, details=False))
    assert 0 < n < RETAINED_EXECUTIONS * 0.9, n
