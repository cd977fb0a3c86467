"""Micro-batches of the replay log as the vectorised executor's frames, and its results as the
Arrow table every mode writes: shared by the driver mode (:mod:`.driver`, on the driver) and
the distributed mode (:mod:`.distributed`, in the tasks that hold the shards).

A batch of the replay log (:mod:`.source`) is one Arrow table with a row per input tuple;
:func:`log_frames` splits it per relation into one-component
:class:`~mqjoin.runtime.vector.Frame` values carrying only the fields the plan reads.  The
results of a batch are written as ``query, rows, _seq, _arrival`` (:func:`result_table`):
per result its query, its row indices in the query's relation order, and the arrival number
and arrival time of the tuple that produced it — what :meth:`.deployment.Deployment.results`
reads back and what latencies are measured from.

>>> import numpy as np
>>> t = result_table({"q": (np.array([4]), np.array([[2, 3]]))}, lambda seq: seq * 0.5)
>>> t.to_pylist()
[{'query': 'q', 'rows': [2, 3], '_seq': 4, '_arrival': 2.0}]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mqjoin.runtime.vector import Frame, Need, values_array
from mqjoin.runtime.spark.source import attr_col


def log_frames(table: pa.Table, seq: np.ndarray, rel: np.ndarray, ts: np.ndarray, names: Mapping[int, str],
               need: Need, columns: Mapping[str, str] | None = None) -> dict[str, Frame]:
    """The arrivals of a replay-log batch per relation (``names``: relation rank → name),
    with the fields ``need`` lists; ``seq``, ``rel``, ``ts``: the table's ``_seq``, ``_rel``
    and ``_ts`` columns; ``columns``: where a packed log (:func:`.source.pack_replay_log`)
    holds each attribute column."""
    out = {}
    cols = set(table.column_names)
    for k in np.unique(rel).tolist():
        name = names[k]
        if name not in need:
            continue
        idx = np.flatnonzero(rel == k)
        take = pa.array(idx)
        fields: dict[int, np.ndarray] = {}
        for f in sorted(need[name]):
            if f == 0:
                fields[0] = table["_row"].take(take).to_numpy().astype(np.int64, copy=False)
            elif f == 1:
                fields[1] = ts[idx]
            else:
                c = attr_col(k, f - 2)
                c = columns.get(c, c) if columns is not None else c
                fields[f] = values_array(table[c].take(take)) if c in cols else np.full(len(idx), np.nan)
        out[name] = Frame((name,), [fields], seq[idx], ts[idx])
    return out


def result_table(results: Mapping[str, tuple[np.ndarray, np.ndarray]],
                 arrival_of: Callable[[np.ndarray], np.ndarray]) -> pa.Table | None:
    """The results of a batch (query → (triggers, rows)) as one table, or None when there is
    none; ``arrival_of`` maps the triggers' arrival numbers to their arrival times."""
    parts = []
    for q, (trig, rows) in results.items():
        n, k = rows.shape
        if n:
            offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
            parts.append(pa.table({"query": repeated(q, n),
                                   "rows": pa.ListArray.from_arrays(offsets, pa.array(rows.ravel())),
                                   "_seq": pa.array(trig), "_arrival": pa.array(arrival_of(trig))}))
    return pa.concat_tables(parts) if parts else None


def write_part(table: pa.Table, path: Path) -> None:
    """Write a part of a batch's results atomically (a task or batch run again replaces it
    with the same rows)."""
    tmp = path.with_name(path.name + ".tmp")
    # lz4: half snappy's time here; a dictionary only where values repeat (the query)
    pq.write_table(table, tmp, compression="lz4", use_dictionary=["query"])
    tmp.replace(path)


def repeated(text: str, n: int) -> pa.Array:
    """``text`` ``n`` times as a string array, built from its buffers: a list of ``n`` Python
    strings would cost more than the rest of a large batch's results.

    >>> repeated("q1", 3).to_pylist()
    ['q1', 'q1', 'q1']
    """
    b = text.encode("utf-8")
    if n * len(b) >= 2**31 - 1:
        return pa.array([text] * n, pa.string())
    offsets = np.arange(0, n * len(b) + 1, len(b), dtype=np.int32) if b else np.zeros(n + 1, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b * n))
