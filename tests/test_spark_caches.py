"""The per-process caches of the Spark engine's Python workers are bounded: the replay logs
read last (each an open file, closed when it leaves) and the shard programs of the last plans."""

from __future__ import annotations

import types

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")  # the modules live with the Spark engine (its tasks run them)

from mqjoin.runtime.spark import sharded, source
from mqjoin.support.lru import LRU


def test_the_least_recently_used_entry_leaves_first_and_is_handed_over():
    gone: list[int] = []
    c: LRU[str, int] = LRU(3, evicted=gone.append)
    for i, k in enumerate("abcd"):
        c[k] = i
        c.get("a")  # a stays the most recently used
    assert list(c) == ["c", "d", "a"] and gone == [1]
    c.clear()
    assert len(c) == 0 and sorted(gone) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="at least one"):
        LRU(0)


def _log(path, n: int) -> str:
    t = pa.table({"_seq": list(range(n)), "_rel": [0] * n, "_ts": [float(i) for i in range(n)]})
    return str(source.write_replay_log(t, path))


def test_replay_logs_beyond_the_bound_are_closed_and_forgotten(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "_FILES", LRU(source.FILES_KEPT, evicted=lambda e: e[1].close()))
    monkeypatch.setattr(source, "_GROUPS", LRU(4))
    paths = [_log(tmp_path / f"log{i}", 3 + i) for i in range(source.FILES_KEPT + 3)]
    opened = []
    for p in paths:
        assert source._rows(p, 1, 3)["_seq"].to_pylist() == [1, 2]
        opened.append(source._FILES.get(p)[1])
    assert len(source._FILES) == source.FILES_KEPT and len(source._GROUPS) <= 4
    assert [f.closed for f in opened] == [True] * 3 + [False] * source.FILES_KEPT
    # a log rewritten at its path is read anew, and the old file closed
    kept = opened[-1]
    _log(paths[-1], 50)
    assert source._rows(paths[-1], 40, 42)["_seq"].to_pylist() == [40, 41]
    assert kept.closed and not source._FILES.get(paths[-1])[1].closed


def test_shard_programs_of_the_last_plans_are_kept(monkeypatch):
    built = []
    monkeypatch.setattr(sharded, "_PROGRAMS", LRU(sharded.PROGRAMS_KEPT))
    monkeypatch.setattr(sharded, "ShardProgram", lambda plan, shards: built.append(plan) or object())

    def program(token: str):
        return sharded.Batch(types.SimpleNamespace(value=token), token, 1, 0, None).program()

    first = program("p0")
    assert program("p0") is first and built == ["p0"]  # built once, reused by every task
    for i in range(1, sharded.PROGRAMS_KEPT + 2):
        program(f"p{i}")
    assert len(sharded._PROGRAMS) == sharded.PROGRAMS_KEPT and "p0" not in sharded._PROGRAMS
    assert program("p0") is not first and built.count("p0") == 2
