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

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
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


def committed_parts(root: Path) -> list[Path]:
    """The Parquet parts under ``root`` (``OUT/_batches`` or ``OUT/_native``) in batch order,
    then by name: a deterministic order to read results in."""
    def key(p: Path):
        batch = p.parent.name.partition("=")[2]
        return (int(batch) if batch.isdigit() else -1, str(p))
    return sorted(root.rglob("*.parquet"), key=key) if root.is_dir() else []


def read_parts(parts: list[Path], batch_rows: int = 1 << 20) -> Iterator[tuple[str, np.ndarray]]:
    """The results of committed parts (:func:`result_table`'s ``query`` and ``rows``) as
    ``(query, n × k row indices)``, one record batch of a file at a time: what is held at once
    is bounded by ``batch_rows``, not by the number of results.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> t = result_table({"q": (np.array([4, 5]), np.array([[2, 3], [0, 1]])), "p": (np.array([5]), np.array([[7]]))},
    ...                  lambda seq: seq * 0.5)
    >>> write_part(t, d / "part-0.parquet")
    >>> [(q, rows.tolist()) for q, rows in read_parts([d / "part-0.parquet"])]
    [('q', [[2, 3], [0, 1]]), ('p', [[7]])]
    >>> write_part(pa.concat_tables([t, t.slice(0, 1)]), d / "part-1.parquet")  # q's rows apart
    >>> [(q, rows.tolist()) for q, rows in read_parts([d / "part-1.parquet"])]
    [('q', [[2, 3], [0, 1], [2, 3]]), ('p', [[7]])]
    """
    for path in parts:
        f = pq.ParquetFile(path, read_dictionary=["query"])
        for rb in f.iter_batches(batch_size=batch_rows, columns=["query", "rows"]):
            if not rb.num_rows:
                continue
            query = rb.column(0)
            if not isinstance(query, pa.DictionaryArray):
                query = pc.dictionary_encode(query)
            codes = query.indices.to_numpy(zero_copy_only=False)
            rows = rb.column(1)
            offsets = rows.offsets.to_numpy()
            values = rows.values.to_numpy(zero_copy_only=False)
            for code, name in enumerate(query.dictionary.to_pylist()):
                idx = np.flatnonzero(codes == code)
                if not len(idx):
                    continue
                first, last = int(idx[0]), int(idx[-1])
                width = int(offsets[first + 1] - offsets[first])
                if last - first + 1 == len(idx):  # one run of rows (a part holds a query's results together)
                    yield name, values[offsets[first]:offsets[last + 1]].reshape(len(idx), width)
                else:
                    yield name, values[offsets[idx][:, None] + np.arange(width)]


def count_parts(parts: list[Path]) -> dict[str, int]:
    """Results per query of committed parts, from their ``query`` column alone."""
    counts: dict[str, int] = {}
    for path in parts:
        col = pq.read_table(path, columns=["query"], read_dictionary=["query"]).column(0)
        for chunk in col.chunks:
            if not isinstance(chunk, pa.DictionaryArray):
                chunk = pc.dictionary_encode(chunk)
            n = np.bincount(chunk.indices.to_numpy(zero_copy_only=False), minlength=len(chunk.dictionary))
            for name, k in zip(chunk.dictionary.to_pylist(), n.tolist()):
                counts[name] = counts.get(name, 0) + k
    return counts


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
