"""Micro-batches of the replay log as the vectorised executor's frames, and its results as the
Arrow table every mode writes: shared by the driver mode (:mod:`.driver`, on the driver) and
the distributed mode (:mod:`.distributed`, in the tasks that hold the shards).

A batch of the replay log (:mod:`.source`) is one Arrow table with a row per input tuple;
:func:`log_frames` splits it per relation into one-component
:class:`~mqjoin.runtime.vector.Frame` values carrying only the fields the plan reads.  The
results of a batch are written as one part per query (:func:`result_tables`): per result its
query, its row indices in the query's relation order as fixed-width columns ``r0`` …, and
the arrival number and arrival time of the tuple that produced it — what
:meth:`.deployment.Deployment.results` reads back and what latencies are measured from.

>>> import numpy as np
>>> ts = result_tables({"q": (np.array([4]), np.array([[2, 3]]))}, lambda seq: seq * 0.5)
>>> ts["q"].to_pylist()
[{'query': 'q', 'r0': 2, 'r1': 3, '_seq': 4, '_arrival': 2.0}]
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


def result_tables(results: Mapping[str, tuple[np.ndarray, np.ndarray]],
                  arrival_of: Callable[[np.ndarray], np.ndarray]) -> dict[str, pa.Table]:
    """The results of a batch (query → (triggers, rows)) as one table per query with a result:
    ``query`` (one dictionary value), ``r0`` … ``r<k−1>`` (its row indices in the query's
    relation order, fixed-width columns that Arrow writes without a list per row), ``_seq``
    and ``_arrival``; ``arrival_of`` maps the triggers' arrival numbers to their arrival times.
    The query's name is in the schema's metadata too, so that its results are counted from a
    file's footer alone (:func:`count_parts`)."""
    out = {}
    for q, (trig, rows) in results.items():
        n, k = rows.shape
        if n:
            cols = {"query": pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), pa.array([q])),
                    **{row_column(i): rows[:, i] for i in range(k)},
                    "_seq": np.asarray(trig, dtype=np.int64),
                    "_arrival": np.asarray(arrival_of(trig), dtype=np.float64)}
            out[q] = pa.table(cols).replace_schema_metadata({QUERY_KEY: q})
    return out


def row_column(i: int) -> str:
    """The column of a result part holding the row indices of the query's ``i``-th relation."""
    return f"r{i}"


#: the schema metadata key of a result part that names its query
QUERY_KEY = "mqjoin.query"


def write_parts(tables: Mapping[str, pa.Table], directory: Path, stem: str) -> None:
    """Write :func:`result_tables`' tables as ``directory/<stem>.<query>.parquet``."""
    for q, t in tables.items():
        write_part(t, directory / f"{stem}.{q}.parquet")


def committed_parts(root: Path) -> list[Path]:
    """The Parquet parts under ``root`` (``OUT/_batches`` or ``OUT/_native``) in batch order,
    then by name: a deterministic order to read results in."""
    def key(p: Path):
        batch = p.parent.name.partition("=")[2]
        return (int(batch) if batch.isdigit() else -1, str(p))
    return sorted(root.rglob("*.parquet"), key=key) if root.is_dir() else []


def read_part_tables(parts: list[Path], batch_rows: int = 1 << 20) -> Iterator[tuple[str, pa.Table]]:
    """The results of committed parts as ``(query, table)``, the table's columns the row
    indices in the query's relation order, one record batch of a file at a time: what is held
    at once is bounded by ``batch_rows``, not by the number of results.  Parts of
    :func:`result_tables` are read column by column; parts with a list column ``rows`` (the
    native baseline's, written by Spark) are cut per query.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> ts = result_tables({"q": (np.array([4, 5]), np.array([[2, 3], [0, 1]])), "p": (np.array([5]), np.array([[7]]))},
    ...                    lambda seq: seq * 0.5)
    >>> write_parts(ts, d, "part-0")
    >>> [(q, t.column_names, t.to_pylist()) for q, t in read_part_tables(committed_parts(d))]
    [('p', ['r0'], [{'r0': 7}]), ('q', ['r0', 'r1'], [{'r0': 2, 'r1': 3}, {'r0': 0, 'r1': 1}])]
    """
    for path in parts:
        f = pq.ParquetFile(path, read_dictionary=["query"])
        names = f.schema_arrow.names
        if "rows" in names:
            for q, rows in _list_rows(f, batch_rows):
                yield q, pa.table({row_column(i): rows[:, i] for i in range(rows.shape[1])})
            continue
        q = _part_query(f)
        cols = [c for c in names if c not in ("query", "_seq", "_arrival")]
        for rb in f.iter_batches(batch_size=batch_rows, columns=cols):
            if rb.num_rows:
                yield q, pa.Table.from_batches([rb])


def read_parts(parts: list[Path], batch_rows: int = 1 << 20) -> Iterator[tuple[str, np.ndarray]]:
    """:func:`read_part_tables` as ``(query, n × k row indices)``.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> write_parts(result_tables({"q": (np.array([4, 5]), np.array([[2, 3], [0, 1]]))}, lambda s: s * 0.5), d, "p")
    >>> [(q, rows.tolist()) for q, rows in read_parts(committed_parts(d))]
    [('q', [[2, 3], [0, 1]])]
    """
    for q, t in read_part_tables(parts, batch_rows):
        yield q, np.column_stack([c.to_numpy() for c in t.columns]).astype(np.int64, copy=False)


def _part_query(f: pq.ParquetFile) -> str:
    meta = f.schema_arrow.metadata or {}
    if QUERY_KEY.encode() in meta:
        return meta[QUERY_KEY.encode()].decode("utf-8")
    return f.read_row_group(0, columns=["query"]).column(0)[0].as_py()  # pragma: no cover  (no metadata)


def _list_rows(f: pq.ParquetFile, batch_rows: int) -> Iterator[tuple[str, np.ndarray]]:
    """A part with ``query`` and a list column ``rows`` (the native baseline's) as
    ``(query, n × k row indices)``, one record batch at a time."""
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
    """Results per query of committed parts: from a part's footer (:func:`result_tables`'),
    else from its ``query`` column alone."""
    counts: dict[str, int] = {}
    for path in parts:
        f = pq.ParquetFile(path, read_dictionary=["query"])
        if "rows" not in f.schema_arrow.names:
            q = _part_query(f)
            counts[q] = counts.get(q, 0) + f.metadata.num_rows
            continue
        col = f.read(columns=["query"]).column(0)
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
    pq.write_table(table, tmp, compression="lz4", use_dictionary=["query"], write_statistics=False)
    tmp.replace(path)
