"""Writing relation streams in the CLI's input format, and the data cache.

A stream of relation ``R`` is ``DIR/R.parquet`` with a float64 column ``ts`` (event time in
seconds) first, then ``R``'s attributes — the format :func:`mqjoin.model.tables.read_inputs` reads
(docs/model.md §6; a tuple's identity is its row index).  The generators here produce NumPy/Arrow
columns of up to millions of rows, so they write them with Arrow directly instead of going
through :class:`mqjoin.model.tables.Table` (whose Python tuples are meant for the engine's inputs);
the tests read every generated directory back with ``read_inputs``.

Generated data lives outside git, under :func:`~mqjoin.support.cachedir.cache_root` (``$MQJOIN_CACHE``, else
``~/.cache/mqjoin``).  Every generated directory has a ``manifest.json`` that records how it
was made, so a second request with the same parameters is answered from the cache.

>>> import tempfile, numpy as np
>>> from mqjoin.model.tables import read_parquet
>>> d = tempfile.mkdtemp()
>>> p = write_stream(d, "R", np.array([0.0, 0.5]), {"a": np.array([1, 2])})
>>> t = read_parquet(p, "R")
>>> t.ts, t.columns["a"]  # numeric columns without nulls are read as array-backed Columns
(Column((0.0, 0.5)), Column((1, 2)))
>>> t.ts == (0.0, 0.5) and list(t.columns["a"]) == [1, 2]
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from mqjoin.model.errors import DataError

MANIFEST = "manifest.json"


def ensure_dir(path: str | Path) -> Path:
    """Create ``path`` (and parents); a :class:`~mqjoin.model.errors.DataError` names it on failure."""
    d = Path(path).expanduser()
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create directory {str(d)!r}: {e.strerror or e}; choose another --out") from None
    return d


def write_stream(out_dir: str | Path, relation: str, ts: Any, columns: Mapping[str, Any]) -> Path:
    """Write ``out_dir/<relation>.parquet``: ``ts`` (float64) then ``columns`` (arrays or Arrow
    arrays of equal length).  Returns the file's path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = ensure_dir(out_dir)
    ts_arr = pa.array(np.asarray(ts, dtype=np.float64))
    cols = {"ts": ts_arr}
    for name, values in columns.items():
        if name == "ts":
            raise DataError(f"stream {relation}: attribute name 'ts' is reserved for the event time")
        arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
        if len(arr) != len(ts_arr):
            raise DataError(f"stream {relation}: column {name!r} has {len(arr)} values but ts has {len(ts_arr)}")
        cols[name] = arr
    path = d / f"{relation}.parquet"
    try:
        pq.write_table(pa.table(cols), path)
    except OSError as e:
        raise DataError(f"cannot write {path}: {e}") from None
    return path


def write_manifest(out_dir: str | Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``manifest.json`` (sorted keys, so equal parameters give equal files)."""
    path = ensure_dir(out_dir) / MANIFEST
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def read_manifest(out_dir: str | Path) -> dict[str, Any] | None:
    """The manifest of a generated directory, ``None`` when there is none (or it is unreadable)."""
    path = Path(out_dir) / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
