"""Input and output tables of a run (docs/model.md §6).

Input of relation ``R`` is ``DIR/R.parquet`` or ``DIR/R.csv`` with a column ``ts`` (event
time, seconds) and ``R``'s attributes; a tuple's identity is its 0-based row index.  Values
are compared as read: Parquet keeps its stored types; a CSV column is numeric when all its
(non-empty) values are.  Empty CSV cells, nulls and NaN are nulls, which join with nothing.

Output of query ``q`` is ``OUT/q.parquet`` with one int64 column per relation of the query
holding that relation's row index, one row per result, in the order the engine produced them
(not sorted: a query's answer is a set; :func:`read_results` reads it back as one).

>>> t = Table.from_columns("R", {"ts": [0.0, 1.5], "a": [1, 2]})
>>> len(t), t.value("a", 1)
(2, 2)
"""

from __future__ import annotations

import csv
import math
from itertools import chain
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from mqjoin.model.errors import DataError, UnknownRelationError
from mqjoin.model.workload import Workload

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


class Column(Sequence[Any]):
    """A read-only column of numbers held as one numpy array — what :func:`read_parquet` makes
    of a numeric column without nulls, so an input of millions of rows costs 8 bytes a value,
    not a Python object each.  It reads like the tuple it stands for (items, slices and
    iteration give Python numbers), while bulk readers take the array itself
    (``np.asarray(column)``, no copy).

    >>> import numpy as np
    >>> c = Column(np.array([3, 1, 2]))
    >>> c[0], c[1:], list(c), len(c), 2 in c, c == (3, 1, 2)
    (3, (1, 2), [3, 1, 2], 3, True, True)
    >>> type(c[0]).__name__, np.asarray(c) is c.array, c
    ('int', True, Column((3, 1, 2)))
    """

    __slots__ = ("array",)
    _CHUNK = 1 << 16  # values converted to Python numbers at a time while iterating

    def __init__(self, array: "np.ndarray") -> None:
        array = array.view()
        array.flags.writeable = False
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self.array[i].tolist())
        return self.array[i].item()

    def __iter__(self) -> Iterator[Any]:
        for k in range(0, len(self.array), self._CHUNK):
            yield from self.array[k:k + self._CHUNK].tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> "np.ndarray":
        return self.array if dtype is None else self.array.astype(dtype, copy=False)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Column):
            return len(self) == len(other) and bool((self.array == other.array).all())
        if isinstance(other, (tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, so not hashable like one

    def __repr__(self) -> str:
        return f"Column({tuple(self)!r})"


@dataclass(frozen=True)
class Table:
    """One relation's input: ``ts`` plus attribute columns (row = identity), each a tuple or a
    :class:`Column` (numbers read from Parquet)."""

    relation: str
    ts: Sequence[float]
    columns: Mapping[str, Sequence[Any]]
    source: str = ""

    @staticmethod
    def from_columns(relation: str, data: Mapping[str, Sequence[Any]], source: str = "") -> "Table":
        where = source or f"table of {relation}"
        if "ts" not in data:
            raise DataError(f"{where} has no 'ts' column (columns: {', '.join(data) or 'none'}); "
                            f"add the event time in seconds")
        n = len(data["ts"])
        ts = []
        for i, v in enumerate(data["ts"]):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
                raise DataError(f"{where}: row {i} has ts {v!r}; ts must be a number (seconds)")
            ts.append(float(v))
        cols = {}
        for name, values in data.items():
            if name == "ts":
                continue
            if len(values) != n:
                raise DataError(f"{where}: column {name!r} has {len(values)} values but ts has {n}")
            cols[name] = tuple(_normalise(v) for v in values)
        return Table(relation, tuple(ts), cols, source)

    def __len__(self) -> int:
        return len(self.ts)

    def value(self, column: str, row: int) -> Any:
        return self.columns[column][row]

    def require(self, attributes: Iterable[str]) -> None:
        for a in attributes:
            if a not in self.columns:
                raise DataError(f"{self.source or self.relation} has no column {a!r} (columns: ts, "
                                f"{', '.join(self.columns)}); relation {self.relation} needs it for a join")


def _normalise(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _infer_csv_column(values: list[str]) -> list[Any]:
    present = [v for v in values if v != ""]
    for conv in (int, float):
        try:
            converted = {v: conv(v) for v in set(present)}
        except ValueError:
            continue
        return [None if v == "" else converted[v] for v in values]
    return [None if v == "" else v for v in values]


def time_range(tables: Mapping[str, Table]) -> tuple[float, float]:
    """The first ``ts`` and the event-time span of a set of inputs (``(0.0, 0.0)`` when every
    table is empty): the span over which runs are measured and predicted.

    >>> time_range({"R": Table.from_columns("R", {"ts": [2, 5]}), "S": Table.from_columns("S", {"ts": [3.5]}),
    ...             "T": Table.from_columns("T", {"ts": []})})
    (2.0, 3.0)
    """
    ts = [t for tb in tables.values() if len(tb.ts) for t in bounds(tb.ts)]
    return (min(ts), max(ts) - min(ts)) if ts else (0.0, 0.0)


def bounds(values: Sequence[float], default: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """The least and the greatest of ``values`` (``default`` when there is none), a
    :class:`Column`'s without a Python number per row.

    >>> import numpy as np
    >>> bounds((2.0, 0.5, 1.0)), bounds(Column(np.array([2.0, 0.5]))), bounds(())
    ((0.5, 2.0), (0.5, 2.0), (0.0, 0.0))
    """
    if not len(values):
        return default
    if isinstance(values, Column):
        return values.array.min().item(), values.array.max().item()
    return min(values), max(values)


def read_csv(path: Path, relation: str) -> Table:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise DataError(f"{path} is empty; it needs a header 'ts,<attributes>'")
            header = [h.strip() for h in header]
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"cannot read {path}: {e}") from None
    if len(set(header)) != len(header):
        raise DataError(f"{path}: header {header} repeats a column name")
    cols: dict[str, list[str]] = {h: [] for h in header}
    lines = []  # the file's line number of each row kept (blank lines are skipped)
    for i, row in enumerate(rows):
        if not row:
            continue
        if len(row) != len(header):
            raise DataError(f"{path}: line {i + 2} has {len(row)} fields, the header has {len(header)}")
        lines.append(i + 2)
        for h, v in zip(header, row):
            cols[h].append(v.strip())
    data = {h: _infer_csv_column(v) for h, v in cols.items()}
    bad = next((i for i, v in enumerate(cols.get("ts", ())) if not _finite_number(v)), None)
    if bad is not None:
        raise DataError(f"{path}: line {lines[bad]} has ts {cols['ts'][bad]!r}; ts must be a number (seconds)")
    return Table.from_columns(relation, data, str(path))


def _finite_number(text: str) -> bool:
    """Whether ``text`` reads as a finite number (a CSV field that can be a ``ts``).

    >>> [_finite_number(t) for t in ("0.5", "3", "", "nan", "noon")]
    [True, True, False, False, False]
    """
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def read_parquet(path: Path, relation: str, attributes: Iterable[str] | None = None) -> Table:
    """The input of ``relation`` in the Parquet file ``path``: ``ts`` and the ``attributes``
    the file has (all its columns when None).  Numeric columns without nulls (``ts`` included)
    become :class:`Column` arrays; the others Python values, checked as
    :meth:`Table.from_columns` checks them."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        f = pq.ParquetFile(path)
        names = f.schema_arrow.names
        if attributes is not None:
            keep = {"ts", *attributes}
            names = [n for n in names if n in keep]
        t = f.read(columns=names)
    except ImportError:  # pragma: no cover
        raise DataError("reading Parquet needs pyarrow: pip install pyarrow") from None
    except Exception as e:  # noqa: BLE001 — pyarrow raises many types for corrupt files
        raise DataError(f"cannot read {path}: {e}") from None
    data: dict[str, Any] = {}
    arrays: dict[str, Column] = {}
    for name in t.column_names:
        col = t.column(name)
        if pa.types.is_timestamp(col.type) and name == "ts":
            unit = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[t.schema.field(name).type.unit]
            col = pc.divide(col.cast(pa.int64()).cast(pa.float64()), float(unit))
        numbers = _numbers(col)
        if numbers is not None:
            arrays[name] = Column(numbers.astype("float64", copy=False) if name == "ts" else numbers)
        else:
            data[name] = col.to_pylist()
    if "ts" not in arrays:  # no ts, or one with nulls, NaN or no numbers: checked and said as Python values
        return Table.from_columns(relation, {n: list(arrays[n]) if n in arrays else data[n] for n in t.column_names},
                                  str(path))
    return Table(relation, arrays["ts"], {n: arrays[n] if n in arrays else tuple(_normalise(v) for v in data[n])
                                          for n in t.column_names if n != "ts"}, str(path))


def _numbers(col: Any) -> "np.ndarray | None":
    """An Arrow column of integers or floats without nulls or NaN as one numpy array (int64 or
    float64), else None."""
    import numpy as np
    import pyarrow as pa

    if col.null_count or not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        return None
    if pa.types.is_unsigned_integer(col.type) and col.type.bit_width == 64:
        return None  # may exceed int64: read as Python ints
    a: np.ndarray = col.to_numpy()
    if a.dtype.kind == "f" and np.isnan(a).any():
        return None
    out: np.ndarray = a.astype(np.float64 if a.dtype.kind == "f" else np.int64, copy=False)
    return out


def read_inputs(workload: Workload, data_dir: str | Path, relations: Iterable[str] | None = None,
                every_attribute: bool = False) -> dict[str, Table]:
    """Read the input of every relation that some query uses (or of ``relations``): ``ts`` and
    the attributes its queries join on or filter (``every_attribute``: every attribute the
    workload declares, for queries added later), not the file's other columns."""
    d = Path(data_dir)
    if not d.is_dir():
        raise DataError(f"data directory {str(d)!r} does not exist")
    needed = tuple(relations) if relations is not None else workload.used_relations
    used_attrs = workload.input_attributes()
    out = {}
    for r in needed:
        pq_path, csv_path = d / f"{r}.parquet", d / f"{r}.csv"
        if pq_path.exists() and csv_path.exists():
            raise DataError(f"both {pq_path.name} and {csv_path.name} exist in {d}; keep one input per relation")
        if pq_path.exists():
            t = read_parquet(pq_path, r, _declared(workload, r) if every_attribute else used_attrs.get(r, ()))
        elif csv_path.exists():
            t = read_csv(csv_path, r)
        else:
            raise DataError(f"no input for relation {r}: expected {pq_path} or {csv_path}")
        t.require(sorted(used_attrs[r]))
        out[r] = t
    return out


def _declared(workload: Workload, relation: str) -> tuple[str, ...] | None:
    """The attributes ``workload`` declares for ``relation`` (None: it declares no such
    relation), the columns of its input worth reading."""
    try:
        return tuple(workload.relation(relation).attributes)
    except UnknownRelationError:
        return None


def write_inputs(tables: Mapping[str, Table], data_dir: str | Path, fmt: str = "parquet") -> Path:
    """Write tables in the input format (``parquet`` or ``csv``)."""
    d = Path(data_dir)
    d.mkdir(parents=True, exist_ok=True)
    for r, t in tables.items():
        cols = {"ts": list(t.ts), **{k: list(v) for k, v in t.columns.items()}}
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table(cols), d / f"{r}.parquet")
        elif fmt == "csv":
            with open(d / f"{r}.csv", "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(list(cols))
                for row in zip(*cols.values()):
                    w.writerow(["" if v is None else repr(v) if isinstance(v, float) else v for v in row])
        else:
            raise DataError(f"unknown data format {fmt!r} (choose parquet or csv)")
    return d


def result_rows(rows: "np.ndarray | Sequence[tuple[int, ...]]", width: int) -> "np.ndarray":
    """Results as one ``n × width`` int64 array: an array as given, a sequence of row-index
    tuples (what a per-tuple executor collects) converted in bulk, without a Python list per
    column.

    >>> result_rows([(1, 2), (3, 4)], 2).tolist(), result_rows([], 3).shape
    ([[1, 2], [3, 4]], (0, 3))
    """
    import numpy as np

    if isinstance(rows, np.ndarray):
        return rows.reshape(len(rows), width).astype(np.int64, copy=False)
    n = len(rows)
    return np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=n * width).reshape(n, width)


def _out_dir(out_dir: str | Path) -> Path:
    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create output directory {str(d)!r}: {e}") from None
    return d


class ResultWriter:
    """``OUT/<query>.parquet`` written a part at a time (:meth:`add`; :meth:`close` writes the
    empty files of queries that got nothing): an engine hands over results as column arrays
    while it runs and no result set is ever held whole.  Rows stay in the order they were
    added.

    >>> import tempfile, numpy as np
    >>> from mqjoin.model.workload import parse_workload
    >>> w = parse_workload("{defaults: {selectivity: 0.5}, relations: {R: {attributes: [a]}, S: {attributes: [a]}}, "
    ...                    "queries: {q: 'R(a), S(a)'}}")
    >>> out = tempfile.mkdtemp()
    >>> with ResultWriter(w, out) as put:
    ...     put.add("q", np.array([[2, 0]])); put.add("q", np.array([[0, 1], [1, 1]]))
    >>> result_counts(w, out), sorted(read_results(w, out)["q"])
    ({'q': 3}, [(0, 1), (1, 1), (2, 0)])
    """

    def __init__(self, workload: Workload, out_dir: str | Path):
        self.dir = _out_dir(out_dir)
        self.relations = {q.name: q.relations for q in workload.queries}
        self._writers: dict[str, Any] = {}
        self._closed = False

    def _schema(self, query: str) -> Any:
        import pyarrow as pa

        return pa.schema([(r, pa.int64()) for r in self.relations[query]])

    def add(self, query: str, rows: "np.ndarray | Sequence[tuple[int, ...]] | pa.Table") -> None:
        """Append results of ``query``: ``n × k`` row indices in its relation order, or an
        Arrow table of ``k`` integer columns in that order (written as they are, whatever
        their names: no copy through numpy)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rels = self.relations[query]
        if isinstance(rows, pa.Table):
            cols = [c.cast(pa.int64()) for c in rows.columns]
        else:
            rows = result_rows(rows, len(rels))
            cols = [pa.array(rows[:, i]) for i in range(len(rels))]
        if not len(cols[0]):
            return
        if query not in self._writers:
            # row indices rarely repeat: a dictionary per column page costs half the writing
            self._writers[query] = pq.ParquetWriter(self.dir / f"{query}.parquet", self._schema(query),
                                                    use_dictionary=False)
        self._writers[query].write_table(pa.Table.from_arrays(cols, schema=self._schema(query)))

    def close(self) -> Path:
        """Finish every file (once: closing again changes nothing)."""
        import pyarrow.parquet as pq

        if self._closed:
            return self.dir
        self._closed = True
        for q in self.relations:
            w = self._writers.pop(q, None)
            if w is not None:
                w.close()
            else:
                pq.write_table(self._schema(q).empty_table(), self.dir / f"{q}.parquet")
        return self.dir

    def __enter__(self) -> "ResultWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_results(workload: Workload, results: Mapping[str, "np.ndarray | Sequence[tuple[int, ...]]"],
                  out_dir: str | Path) -> Path:
    """Write ``OUT/<query>.parquet`` (one int64 column per relation, one row per result, in
    the order given: the answer is a set) from query → results, each an ``n × k`` array or a
    sequence of row-index tuples."""
    with ResultWriter(workload, out_dir) as put:
        for q in workload.queries:
            put.add(q.name, results.get(q.name, ()))
    return put.dir


def result_counts(workload: Workload, out_dir: str | Path) -> dict[str, int]:
    """Results per query of ``OUT/<query>.parquet``, from the files' metadata (no row read)."""
    import pyarrow.parquet as pq

    return {q.name: pq.ParquetFile(Path(out_dir) / f"{q.name}.parquet").metadata.num_rows for q in workload.queries}


def read_results(workload: Workload, out_dir: str | Path) -> dict[str, set[tuple[int, ...]]]:
    """Read ``OUT/<query>.parquet`` back as sets of row-index tuples — to compare result sets
    (tests, ``run --check``); a run's own path never builds them."""
    import pyarrow.parquet as pq

    out = {}
    for q in workload.queries:
        t = pq.read_table(Path(out_dir) / f"{q.name}.parquet")
        cols = [t.column(r).to_numpy() for r in q.relations]
        out[q.name] = set(zip(*(c.tolist() for c in cols))) if cols and len(cols[0]) else set()
    return out
