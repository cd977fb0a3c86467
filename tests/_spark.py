"""Helpers of the Spark test modules (the session itself is the ``spark`` fixture of
``tests/conftest.py``, shared by all of them): the SQL executions of the Spark UI, and the
physical plans they executed, parsed and checked for what a plan's probes must not do."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass

#: SQL executions the Spark UI keeps (default 1000): test_spark_adaptive runs a few thousand,
#: and test_spark_engine reads the physical plans of its own runs back from the UI by offset
RETAINED_EXECUTIONS = 20000

TIMEOUT = 300  # seconds a deployment may take (a loaded 2-core machine is slow)


def sql_executions(spark, offset: int = 0, details: bool = True) -> list[dict]:
    """The SQL executions of ``spark``'s application from the Spark UI's REST API (with their
    physical plans when ``details``), from the ``offset``-th on."""
    sc = spark.sparkContext
    url = (f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/sql?details={str(details).lower()}"
           f"&planDescription={str(details).lower()}&offset={offset}&length=100000")
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


# --------------------------------------------------------------------------------------------
# executed physical plans, from the Spark UI's REST API
# --------------------------------------------------------------------------------------------

@dataclass
class PlanNode:
    name: str  # e.g. "ShuffledHashJoin Inner BuildLeft", "Scan ExistingRDD", "Exchange"
    id: int
    depth: int
    parent: int | None  # index in the node list
    args: str  # the node's "Arguments:" line(s) from the details section


_TREE_LINE = re.compile(r"^(?P<pre>[\s:+|-]*?)(?:\* )?(?P<name>[A-Za-z][\w ]*?) \((?P<id>\d+)\)")


def parse_plan(text: str) -> list[PlanNode]:
    """The tree of a formatted physical plan (``EXPLAIN FORMATTED`` layout)."""
    body = text.split("== Physical Plan ==", 1)[1].lstrip("\n")
    tree, _, rest = body.partition("\n\n")
    details = {}
    for block in re.split(r"\n(?=\(\d+\) )", "\n" + rest):
        m = re.match(r"\s*\((\d+)\) ", block)
        if m:
            details[int(m.group(1))] = block
    nodes: list[PlanNode] = []
    for line in tree.splitlines():
        m = _TREE_LINE.match(line)
        if not m:
            continue
        depth = len(m.group("pre"))
        parent = next((j for j in range(len(nodes) - 1, -1, -1) if nodes[j].depth < depth), None)
        nid = int(m.group("id"))
        nodes.append(PlanNode(m.group("name").strip(), nid, depth, parent, details.get(nid, "")))
    assert nodes, text[:2000]
    return nodes


def is_store_scan(n: PlanNode) -> bool:  # a store: a locally checkpointed, hash-partitioned RDD
    return n.name == "Scan ExistingRDD" and "localCheckpoint" in n.args


def above(nodes: list[PlanNode], i: int) -> PlanNode | None:
    """The nearest operator above node ``i`` that is not a Filter/Project/row conversion."""
    j = nodes[i].parent
    while j is not None and nodes[j].name.split()[0] in ("Filter", "Project", "ColumnarToRow", "InputAdapter"):
        j = nodes[j].parent
    return None if j is None else nodes[j]


def subtree(nodes: list[PlanNode], i: int) -> list[int]:
    out, frontier = [], {i}
    for j in range(i + 1, len(nodes)):
        if nodes[j].parent in frontier:
            frontier.add(j)
            out.append(j)
    return out


def children(nodes: list[PlanNode], i: int) -> list[int]:
    return [j for j in range(len(nodes)) if nodes[j].parent == i]


def is_join(n: PlanNode) -> bool:
    return "Join" in n.name.split()[0] or n.name.startswith("CartesianProduct")


def _join_between(nodes: list[PlanNode], top: int, j: int) -> bool:
    """Whether a join lies on the path from node ``top`` down to its descendant ``j``: then the
    rows reaching ``top`` are that join's results (travelling partial results), not the store's."""
    k = nodes[j].parent
    while k is not None and k != top:
        if is_join(nodes[k]):
            return True
        k = nodes[k].parent
    return False


def hash_parts(args: str) -> int | None:
    m = re.search(r"hashpartitioning\([^)]*,\s*(\d+)\)", args)
    return int(m.group(1)) if m else None


def executed_plans(spark, offset: int, writes: int, wait: float = 60.0) -> list[tuple[int | None, list[PlanNode]]]:
    """(micro-batch, plan) of the SQL executions from ``offset`` on, once ``writes`` output
    writes arrived (the UI learns about executions asynchronously)."""
    deadline = time.time() + wait
    while True:
        ex = sql_executions(spark, offset)
        done = sum("InsertIntoHadoopFsRelationCommand" in e.get("planDescription", "") for e in ex)
        if done >= writes or time.time() > deadline:
            break
        time.sleep(0.5)
    out = []
    for e in ex:
        if "== Physical Plan ==" in e.get("planDescription", ""):
            m = re.search(r"^batch = (\d+)$", e.get("description", ""), re.M)
            out.append((int(m.group(1)) if m else None, parse_plan(e["planDescription"])))
    return out


NO_VIOLATIONS = {"store_exchanged": [], "store_broadcast": [], "wrong_partitions": []}


def plan_violations(plans, batches=None) -> dict[str, list[str]]:
    """What the executed plans (of ``batches``, default all) did that a plan's probes must not
    do: reshuffle a store, broadcast a store, route tuples into a different partition count."""
    v: dict[str, list[str]] = {k: [] for k in NO_VIOLATIONS}
    for batch, nodes in plans:
        if batches is not None and batch not in batches:
            continue
        for i, n in enumerate(nodes):
            if is_store_scan(n):
                up = above(nodes, i)
                if up is not None and up.name.startswith("Exchange"):
                    v["store_exchanged"].append(f"{n.args.strip()[:300]} under {up.name}: {up.args.strip()[:200]}")
            if n.name.startswith("BroadcastExchange") and any(is_store_scan(nodes[j]) and not _join_between(nodes, i, j)
                                                              for j in subtree(nodes, i)):
                v["store_broadcast"].append(n.args.strip()[:300])
            if n.name.startswith("ShuffledHashJoin"):
                kids = children(nodes, i)
                store_side = [k for k in kids if any(is_store_scan(nodes[j]) for j in [k, *subtree(nodes, k)])
                              and not any(nodes[j].name.startswith("Exchange") for j in [k, *subtree(nodes, k)])]
                if len(store_side) != 1:
                    continue
                scan = next(nodes[j] for j in [store_side[0], *subtree(nodes, store_side[0])] if is_store_scan(nodes[j]))
                p = hash_parts(scan.args)
                for k in kids:
                    if k != store_side[0]:
                        top = k
                        while nodes[top].name.split()[0] in ("Filter", "Project"):
                            top = children(nodes, top)[0]
                        if nodes[top].name.startswith(("Exchange", "ReusedExchange")):
                            ok = hash_parts(nodes[top].args) in (None, p)
                        else:  # no exchange: already in place, the output of an earlier routed probe
                            ok = any(nodes[j].name.startswith("ShuffledHashJoin") and any(
                                is_store_scan(nodes[x]) and hash_parts(nodes[x].args) == p for x in subtree(nodes, j))
                                for j in subtree(nodes, top))
                        if not ok:
                            v["wrong_partitions"].append(f"store in {p} partitions, travelling side: "
                                                         f"{nodes[top].name} {nodes[top].args.strip()[:200]}")
    return v
