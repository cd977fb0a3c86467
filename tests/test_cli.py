"""The CLI contract of issue 2: JSON shapes, output files, one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mqjoin.cli import main
from mqjoin.oracle import oracle_results
from mqjoin.synthetic import uniform_streams
from mqjoin.tables import read_inputs, read_results, write_inputs
from mqjoin.workload import load_workload

WORKLOADS = Path(__file__).resolve().parents[1] / "mqjoin" / "workloads"


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


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
    assert {r for s in d["stores"] for r in s["relations"]} == {"R", "S", "T", "U"}


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
    w = load_workload(WORKLOADS / "paper_fig3.yaml").with_defaults(rate=40, selectivity=0.1, window=0.3)
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
    r = subprocess.run([sys.executable, "-m", "mqjoin.cli", "optimize", "paper_v2.yaml", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["probe_cost"] == 700.0
    r = subprocess.run([sys.executable, "-m", "mqjoin.cli", "optimize", str(tmp_path / "none.yaml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_time_limited_optimize_states_incumbent_bound_and_gap(capsys, tmp_path):
    """Issue 14, item 2: a solve stopped by --time-limit says what it has: the incumbent's cost,
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
