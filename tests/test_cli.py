"""The CLI contract (issues 2 and 11): JSON shapes, output files, every command, one-line errors
with exit code 2 for bad input and 3 for internal errors (results that differ from the oracle)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from _cli import cli_process, run_cli
from mqjoin.runtime.oracle import oracle_results
from mqjoin.datasets.uniform import uniform_streams
from mqjoin.model.tables import read_inputs, read_results, write_inputs
from mqjoin.model.workload import load_workload

WORKLOADS = Path(__file__).resolve().parents[1] / "mqjoin" / "workloads"


def test_optimize_json_contract(capsys):
    code, out, err = run_cli(capsys, "optimize", str(WORKLOADS / "paper_v2.yaml"), "--no-mirs", "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["probe_cost"] == 800.0
    assert d["probe_orders"]["q1"]["S"] == "S » T[b] » R[a]"
    assert set(d["probe_orders"]) == {"q1", "q2"} and set(d["probe_orders"]["q1"]) == {"R", "S", "T"}
    ilp = d["ilp"]
    assert ilp["variables"] > 0 and ilp["constraints"] > 0 and ilp["status"] == "optimal"
    assert ilp["build_seconds"] >= 0 and ilp["solve_seconds"] >= 0
    # when the first plan came and when its gap was within the anytime goal (optimal: at the latest, the end)
    anytime = d["anytime"]
    assert anytime["gap"] == 0.02 and 0 <= anytime["first_plan_seconds"] <= anytime["within_gap_seconds"]
    assert anytime["first_plan_seconds"] == d["progress"][0]["seconds"]
    assert {r for s in d["stores"] for r in s["relations"]} == {"R", "S", "T", "U"}
    # each query's share of the probe cost (own steps, shares of shared ones) sums to it
    assert {q: v["total"] for q, v in d["cost_by_query"].items()} == {"q1": 400.0, "q2": 400.0}


@pytest.mark.parametrize("mode,mirs,cost", [("individual", False, 950.0), ("mqo", False, 800.0),
                                            ("individual", True, 800.0), ("mqo", True, 700.0)])
def test_optimize_paper_numbers_through_the_cli(capsys, mode, mirs, cost):
    args = ["optimize", "paper_v2.yaml", "--mode", mode, "--json"] + ([] if mirs else ["--no-mirs"])
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and json.loads(out)["probe_cost"] == cost


def test_optimize_text_summary_and_exports(capsys, tmp_path):
    lp, plan = tmp_path / "m.lp", tmp_path / "plan.json"
    code, out, _ = run_cli(capsys, "optimize", "paper_fig3.yaml", "--tree", "--export", str(lp),
                           "--plan-out", str(plan))
    assert code == 0
    assert "probe orders:" in out and "R » " in out and "ILP (highs)" in out
    text = lp.read_text()
    assert "Minimize" in text or "MINIMIZE" in text
    assert "one_q1_R" in text  # constraints are named
    assert json.loads(plan.read_text())["format"] == "mqjoin-plan/1"


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_run_writes_results_equal_to_oracle(capsys, tmp_path, fmt):
    w = load_workload(WORKLOADS / "paper_fig3.yaml").with_defaults(selectivity=0.1, window=0.3)
    wl = tmp_path / "w.yaml"
    wl.write_text(w.to_yaml())
    write_inputs(uniform_streams(w, seed=2), tmp_path / "data", fmt)
    code, out, err = run_cli(capsys, "run", str(wl), "--data", str(tmp_path / "data"), "--out",
                             str(tmp_path / "out"), "--mode", "shared", "--partitioning", "replicas", "--json")
    assert code == 0, err
    d = json.loads(out)
    want = oracle_results(w, read_inputs(w, tmp_path / "data"))
    assert read_results(w, tmp_path / "out") == want
    assert {q: v["results"] for q, v in d["queries"].items()} == {q: len(v) for q, v in want.items()}
    assert d["probe_messages"] > 0


@pytest.mark.parametrize("args,needle", [
    (["optimize", "nonexistent.yaml"], "does not exist"),
    (["optimize", "paper_v2.yaml", "--mode", "bogus"], "invalid choice"),
    (["run", "paper_v2.yaml", "--data", "/nonexistent", "--out", "/tmp/x"], "data directory"),
    (["frobnicate"], "invalid choice"),
])
def test_errors_are_one_line_with_exit_code_2(capsys, args, needle):
    try:
        code, out, err = run_cli(capsys, *args)
    except SystemExit as e:  # argparse errors exit through SystemExit(2)
        code = e.code
        out, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("mqjoin: error:") and needle in err
    assert "Traceback" not in err


def test_bad_workload_file_error_names_the_culprit(capsys, tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("relations: {R: {attributes: [a]}, S: {attributes: [a]}}\nqueries: {q1: \"R(a), X(a)\"}\n")
    code, _, err = run_cli(capsys, "optimize", str(p))
    assert code == 2 and "q1" in err and "'X'" in err and err.count("\n") == 1


def test_missing_input_column_is_a_clear_error(capsys, tmp_path):
    (tmp_path / "d").mkdir()
    for r in "RSTU":
        (tmp_path / "d" / f"{r}.csv").write_text("ts,zz\n0,1\n")
    code, _, err = run_cli(capsys, "run", "paper_v2.yaml", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"))
    assert code == 2 and "has no column 'a'" in err


def test_console_script_runs_as_a_process(tmp_path):
    r = cli_process("optimize", "paper_v2.yaml", "--json", timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["probe_cost"] == 700.0
    r = cli_process("optimize", tmp_path / "none.yaml", timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_time_limited_optimize_states_incumbent_bound_and_gap(capsys, tmp_path):
    """A solve stopped by --time-limit says what it has: the incumbent's cost,
    the proven bound and the gap between them (JSON, text and the warning on stderr)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import _ref_optimizer as ref

    w = ref.random_workload(2, n_rel=(8, 8), n_attr=(2, 3), n_q=(10, 10), q_size=(4, 4), par=(4, 4),
                            dpar=(4, 4), extra_eq=0, selectivity=0.01)  # HiGHS needs seconds to prove it
    path = tmp_path / "w.yaml"
    path.write_text(w.to_yaml(), encoding="utf-8")
    code, out, err = run_cli(capsys, "optimize", str(path), "--time-limit", "0.5", "--json")
    assert code == 0
    ilp = json.loads(out)["ilp"]
    assert ilp["status"] == "time_limit"
    assert 0 <= ilp["bound"] < ilp["objective"]
    assert ilp["gap"] == pytest.approx(1 - ilp["bound"] / ilp["objective"])
    assert f"incumbent {ilp['objective']:g}" in err and f"bound {ilp['bound']:g}" in err
    code, out, err = run_cli(capsys, "optimize", str(path), "--time-limit", "0.5")
    assert code == 0 and "status time_limit: incumbent " in out and ", bound " in out and ", gap " in out


# --------------------------------------------------------------------------------------------
# candidates, compare, synth, demo (every command has a test)
# --------------------------------------------------------------------------------------------


def test_candidates_lists_figure_3(capsys):
    code, out, err = run_cli(capsys, "candidates", "paper_fig3.yaml", "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["mirs"] == ["R", "S", "T", "U", "RS", "ST", "TU"]  # docs/model.md §3, paper Figure 3
    assert d["partition_candidates"]["S"] == ["S.b", "S.c"] and d["partition_candidates"]["ST"] == ["S.b", "T.d"]
    assert d["probe_orders"]["q1"]["R"] == ["R » S » T", "R » ST"]
    assert d["probe_orders"]["ST"] == {"S": ["S » T"], "T": ["T » S"]}  # an MIR's own sub-query
    code, out, _ = run_cli(capsys, "candidates", "paper_fig3.yaml")
    assert code == 0 and "MIRs: R, S, T, U, RS, ST, TU" in out and "  R: R » S » T, R » ST" in out
    assert out.rstrip().endswith(f"{d['size']['probe_orders']} probe orders, {d['size']['steps']} distinct steps, "
                                 f"{d['size']['stores']} stores")
    code, out, _ = run_cli(capsys, "candidates", "paper_fig3.yaml", "--no-mirs", "--json")
    assert code == 0 and json.loads(out)["mirs"] == ["R", "S", "T", "U"]


def test_compare_reproduces_the_readme_table(capsys):
    code, out, err = run_cli(capsys, "compare", "paper_fig3.yaml")
    assert code == 0 and err == ""
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows if r[5] == "clash"] == [
        ("single", "individual", "800.0", "800.0", "8"), ("single", "shared", "800.0", "700.0", "7"),
        ("single", "mqo", "900.0", "500.0", "5"), ("replicas", "individual", "800.0", "800.0", "8"),
        ("replicas", "shared", "800.0", "700.0", "7"), ("replicas", "mqo", "600.0", "600.0", "6")]
    assert {r[5] for r in rows} == {"clash", "mjoin", "tree", "ajoin"}  # the operator-level planners beside CLASH
    code, out, _ = run_cli(capsys, "compare", "paper_fig3.yaml", "--json", "--no-mirs", "--solver", "cbc")
    d = [r for r in json.loads(out) if r["planner"] == "clash"]
    assert code == 0 and len(d) == 6 and all(r["status"] == "optimal" for r in d)
    assert {(r["mode"], r["partitioning"]) for r in d} == {(m, p) for m in ("individual", "shared", "mqo")
                                                           for p in ("single", "replicas")}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_synth_writes_the_uniform_streams(capsys, tmp_path, fmt):
    out_dir = tmp_path / "d"
    code, out, err = run_cli(capsys, "synth", "paper_fig3.yaml", "--out", str(out_dir), "--duration", "0.5",
                             "--scale", "0.4", "--seed", "3", "--format", fmt)
    assert code == 0 and err == ""
    w = load_workload(WORKLOADS / "paper_fig3.yaml")
    assert sorted(p.name for p in out_dir.iterdir()) == [f"{r}.{fmt}" for r in "RSTU"]
    got = read_inputs(w, out_dir)
    want = uniform_streams(w, duration=0.5, scale=0.4, seed=3)
    for r in "RSTU":  # rate 100 × 0.5 s × 0.4 = 20 tuples, the same values as the Python API's
        assert len(got[r]) == round(w.rate(r) * 0.5 * 0.4) == 20
        assert got[r].ts == pytest.approx(want[r].ts)
        assert {a: list(v) for a, v in got[r].columns.items() if a != "ts"} == \
            {a: list(v) for a, v in want[r].columns.items() if a != "ts"}
    assert out.strip() == f"wrote 80 tuples of 4 relations to {out_dir}"


def test_demo_on_the_reference_engine_checks_every_plan_against_the_oracle(capsys, tmp_path):
    code, out, err = run_cli(capsys, "demo", "--engine", "reference", "--duration", "0.3", "--out",
                             str(tmp_path / "demo"))
    assert code == 0, err
    rows = [line for line in out.splitlines() if re.match(r"(individual|shared|mqo)/(single|replicas) +\d", line)]
    assert len(rows) == 6 and all(line.endswith("= oracle") for line in rows), out
    w = load_workload(WORKLOADS / "demo.yaml")
    assert read_results(w, tmp_path / "demo") == oracle_results(w, uniform_streams(w, duration=0.3, seed=0))
    assert "probe trees:" in out and "on Spark Structured Streaming" not in out  # --engine reference: no JVM
    # shared/single beats mqo/single on probe cost only by keeping replicas, and the demo says so
    cost = {line.split()[0]: float(line.split()[1].replace(",", "")) for line in rows}
    assert cost["shared/single"] < cost["mqo/single"] and cost["mqo/replicas"] <= cost["shared/single"]
    assert "keeps S[a] and S[b]; T[b] and T[c]: replicas" in out


@pytest.mark.slow
def test_demo_main_job_with_spark_as_a_process(tmp_path):
    """The README's main job, end to end, Spark included (its own process: its own JVM)."""
    r = cli_process("demo", "--duration", "0.3", "--out", tmp_path / "demo", "--master", "local[2]", timeout=900,
                    cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Spark results = reference results = oracle" in r.stdout


# --------------------------------------------------------------------------------------------
# options and internal errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,needle", [
    (["optimize", "paper_v2.yaml", "--time-limit", "0"], "time limit must be a positive number of seconds, got 0.0"),
    (["optimize", "paper_v2.yaml", "--mir-budget", "-1"], "MIR memory budget must be a number of tuples ≥ 0"),
    (["compare", "paper_v2.yaml", "--time-limit", "-3"], "time limit"),
    (["run", "paper_v2.yaml", "--data", "/nonexistent", "--out", "/tmp/x", "--time-limit", "nan"], "time limit"),
])
def test_bad_options_are_one_line_errors_before_any_work(capsys, args, needle):
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err


def _fig3_run_args(tmp_path):
    w = load_workload(WORKLOADS / "paper_fig3.yaml").with_defaults(selectivity=0.1, window=0.3)
    (tmp_path / "w.yaml").write_text(w.to_yaml())
    write_inputs(uniform_streams(w, seed=5), tmp_path / "data")
    return ["run", str(tmp_path / "w.yaml"), "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]


def test_run_check_passes_with_exit_0(capsys, tmp_path):
    code, out, err = run_cli(capsys, *_fig3_run_args(tmp_path), "--check")
    assert code == 0 and err == "" and out.rstrip().endswith("equal to the oracle")


def test_a_result_mismatch_is_an_internal_error_with_exit_3(capsys, tmp_path, monkeypatch):
    """Not the user's fault: its own error type and exit code (2 means bad input)."""
    import mqjoin.runtime.oracle

    real = mqjoin.runtime.oracle.oracle_results

    def one_result_short(workload, tables):
        want = real(workload, tables)
        q = next(q for q, r in want.items() if r)
        want[q] = set(sorted(want[q])[1:])
        return want

    monkeypatch.setattr(mqjoin.runtime.oracle, "oracle_results", one_result_short)
    code, out, err = run_cli(capsys, *_fig3_run_args(tmp_path), "--check")
    assert code == 3 and err.count("\n") == 1, err
    assert err.startswith("mqjoin: internal error: results differ from the brute-force oracle")
    assert "DIFFERENT" in out
    from mqjoin.cli import EXIT_BAD_INPUT, EXIT_INTERNAL
    from mqjoin.model.errors import InternalError, MqjoinError, ResultMismatchError

    assert (EXIT_BAD_INPUT, EXIT_INTERNAL) == (2, 3)
    assert issubclass(ResultMismatchError, InternalError) and issubclass(InternalError, MqjoinError)


def test_demo_mismatch_is_an_internal_error(capsys, tmp_path, monkeypatch):
    import mqjoin.runtime.oracle

    monkeypatch.setattr(mqjoin.runtime.oracle, "oracle_results", lambda w, tables: {q.name: set() for q in w.queries})
    code, _, err = run_cli(capsys, "demo", "--engine", "reference", "--duration", "0.2", "--out", str(tmp_path / "d"))
    assert code == 3 and "internal error: individual/single results differ from the oracle" in err


class _FailingDeployment:
    """A deployment whose run fails with ``cause`` (what its batch raised)."""

    def __init__(self, cause: BaseException) -> None:
        from mqjoin.model.errors import EngineError

        self.error = EngineError(f"the mqjoin deployment failed: {cause}")
        self.error.__cause__ = cause
        self.stopped = False

    def subscribe(self, callback):
        return lambda: None

    def wait(self, timeout=None):
        raise self.error

    def stop(self):
        self.stopped = True

    def cleanup(self):
        pass


@pytest.mark.parametrize("cause,code,prefix", [
    (RuntimeError("[CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_5_1 not found!"), 4, "engine error"),
    ("data", 2, "error"),
])
def test_a_failed_deployment_is_an_engine_error_with_exit_4_unless_the_data_caused_it(
        capsys, tmp_path, monkeypatch, cause, code, prefix):
    """A Spark job that fails mid-run is not bad input (exit 2) nor a bug of mqjoin (exit 3);
    bad data that a batch found is still bad input."""
    pytest.importorskip("pyspark")
    import mqjoin.runtime.spark.launch as launch
    import mqjoin.runtime.spark.session as session
    from mqjoin.cli import EXIT_ENGINE
    from mqjoin.model.errors import DataError

    if cause == "data":
        cause = DataError("value 'x' of column a is not a number")
    d = _FailingDeployment(cause)
    monkeypatch.setattr(session, "install_java", lambda: None)
    monkeypatch.setattr(session, "start_ahead", lambda *a, **k: None)  # no JVM: the deployment is a stand-in
    monkeypatch.setattr(launch, "deploy", lambda *a, **k: d)
    got, out, err = run_cli(capsys, *_fig3_run_args(tmp_path), "--engine", "spark", "--json")
    assert got == code and err.count("\n") == 1 and err.startswith(f"mqjoin: {prefix}: the mqjoin deployment failed")
    assert d.stopped and out == "" and EXIT_ENGINE == 4


@pytest.mark.slow
def test_run_on_spark_says_which_mode_auto_chose_and_reports_partitions(tmp_path):
    """``--spark-mode auto`` on a local master: the choice and its reason on stderr and in
    ``--json`` (``spark_mode``), and every store's counts per logical partition."""
    args = _fig3_run_args(tmp_path)
    r = cli_process(*args, "--engine", "spark", "--master", "local[1]", "--json", timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    assert d["spark_mode"]["mode"] == "driver", d["spark_mode"]
    assert re.fullmatch(r"estimated state [\d.]+ [kMG]?B \([\d,]+ rows\) ≤ 50 % of available memory [\d.]+ [kMGT]?B",
                        d["spark_mode"]["reason"]), d["spark_mode"]
    plan = json.loads(cli_process("optimize", args[1], "--json", timeout=300).stdout)
    parts = d["partitions"]
    assert set(parts) == {s["id"] for s in plan["stores"]}
    for s in plan["stores"]:
        p = parts[s["id"]]
        assert p["partitions"] == s["parallelism"] == len(p["messages"]) == len(p["rows"])
    assert sum(sum(p["messages"]) for p in parts.values()) == d["probe_messages"] > 0
    assert sum(sum(p["rows"]) for p in parts.values()) > 0
    assert all(p["rows_skew"] is None or 1 <= p["rows_skew"] <= p["partitions"] for p in parts.values())
    r = cli_process(*args[:-1], tmp_path / "out2", "--engine", "spark", "--master", "local[1]", "--spark-mode",
                    "distributed", timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "mqjoin: spark mode distributed — asked for (--spark-mode distributed)" in r.stderr


@pytest.mark.parametrize("extra,executor", [([], "vector"), (["--max-rows-per-batch", "7"], "vector"),
                                            (["--executor", "per-tuple"], "per-tuple")])
def test_run_picks_the_vector_executor_for_a_static_plan_and_both_equal_the_oracle(capsys, tmp_path, extra,
                                                                                  executor):
    """The default engine runs a static plan a batch at a time on the vectorised executor (any
    batch size), or tuple by tuple when asked: the same result sets (the oracle's), the same
    probe messages, and the summary says which executor ran and why."""
    code, out, err = run_cli(capsys, *_fig3_run_args(tmp_path), "--json", "--check", *extra)
    assert code == 0, err
    d = json.loads(out)
    assert d["engine"] == "reference" and d["executor"] == executor and d["executor_reason"]
    assert d["check"] == "equal to the oracle"
    (tmp_path / "other").mkdir()
    code, out, _ = run_cli(capsys, *_fig3_run_args(tmp_path / "other"), "--json",
                           "--executor", "vector" if executor == "per-tuple" else "per-tuple")
    other = json.loads(out)
    assert other["probe_messages"] == d["probe_messages"] and other["queries"] == d["queries"]
    def messages(summary):  # the predicted block's probe messages, measured as the per-tuple executor counts them
        return [s for s in summary["predicted"]["steps"] if s["kind"] == "messages"]
    assert messages(other) == messages(d) and messages(d)


@pytest.mark.parametrize("extra,needle", [
    (["--executor", "vector", "--cpu-budget", "10"], "--cpu-budget runs on the per-tuple executor"),
    (["--executor", "vector", "--adaptive"], "--adaptive/--changes/--static runs on the per-tuple executor"),
    (["--executor", "per-tuple", "--engine", "spark"], "leave it out with --engine spark"),
    (["--max-rows-per-batch", "0"], "--max-rows-per-batch must be at least 1, not 0"),
])
def test_executor_options_that_cannot_hold_are_one_line_errors(capsys, tmp_path, extra, needle):
    code, _, err = run_cli(capsys, *_fig3_run_args(tmp_path), *extra)
    assert code == 2 and needle in err and err.count("\n") == 1, err
