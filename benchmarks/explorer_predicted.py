"""Predicted beside measured as the explorer's probe trees colour them after a real Deploy: the
Deploy tab on the bundled TPC-H data at a scale factor (planned on that data), the plan run on
local Spark to its end — or stopped ``--stop-after`` seconds after its first micro-batch, compared then
with the prediction for the rows it reached — and the probe trees' check
(:meth:`mqjoin.widgets.trees.ProbeTreeView.check`): totals and the stores furthest from the
model among those holding ≥ 1 % of their kind's total, against the bounds ``mqjoin run``'s
comparison promises (totals within ±10 %, those stores within −20 % / +25 %).

    python benchmarks/explorer_predicted.py [--workload tpch_fig7a.yaml] [--sf 0.01] [--rate 20000]
                                            [--stop-after SECONDS]

The data is generated with ``tpchgen-cli`` into ``MQJOIN_CACHE`` on the first Deploy, as the
panel does for a user.
"""

from __future__ import annotations

import argparse
import html
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="tpch_fig7a.yaml")
    ap.add_argument("--sf", type=float, default=0.01)
    ap.add_argument("--rate", type=float, help="input tuples/s of the replay (default: the panel's)")
    ap.add_argument("--stop-after", type=float, help="stop the run this many seconds after its first batch")
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()

    from mqjoin.widgets.explorer import Explorer

    t0 = time.perf_counter()
    ex = Explorer(args.workload, debounce=0)
    panel = ex.deploy_panel
    panel.input.value = "tpch"
    panel.sf.value = args.sf
    if args.rate:
        panel.rate.value = args.rate
    try:
        panel.deploy()
        if not panel.wait_started(args.timeout):
            print("the deployment did not start", file=sys.stderr)
            return 1
        started = time.perf_counter()
        if args.stop_after is not None:  # counted from the first micro-batch: a run stopped before it counts nothing
            d = panel.deployments[-1][1]
            while not len(d.batches) and time.perf_counter() - t0 < args.timeout:
                time.sleep(0.2)
            time.sleep(args.stop_after)
            panel.stop()
        while ex.model.measured is None and time.perf_counter() - t0 < args.timeout:
            time.sleep(0.5)
        counts = ex.model.measured
        if counts is None:
            print("the run did not end within --timeout", file=sys.stderr)
            return 1
        check = ex.trees.check()
        if check is None:
            print("the probe trees show another plan than the run's", file=sys.stderr)
            return 1
        print(f"{args.workload} on TPC-H SF {args.sf:g}: started after {started - t0:.1f} s, ended after "
              f"{time.perf_counter() - t0:.1f} s; span compared {counts.span:.3f} s"
              f"{' (stopped: predicted on the rows reached)' if counts.workload is not None else ''}")
        print(html.unescape(ex.statistics_line.value.split(">", 1)[-1].rsplit("<", 1)[0]))
        print("\n| what | predicted | measured | measured / predicted | bounds |\n|---|---:|---:|---:|---|")
        within = True
        for kind in ("messages", "rows"):
            p, m = check.total(kind)
            ok = abs(m / p - 1) <= 0.10
            within &= ok
            print(f"| total {kind} | {p:,.0f} | {m:,.0f} | {m / p:.4f} | ±10 % {'✓' if ok else '✗'} |")
        for c in check.worst(n=1_000, share=0.01)[:6]:
            ok = 0.8 <= c.ratio <= 1.25
            within &= ok
            print(f"| {c.store} {c.kind} | {c.predicted:,.0f} | {c.measured:,.0f} | {c.ratio:.4f} | "
                  f"−20 % / +25 % {'✓' if ok else '✗'} |")
        print("\nevery store within the bounds" if within else "\nOUTSIDE the bounds")
        return 0 if within else 1
    finally:
        ex.close()


if __name__ == "__main__":
    raise SystemExit(main())
