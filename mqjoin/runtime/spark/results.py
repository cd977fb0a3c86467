"""The results a deployment committed: one Parquet part per micro-batch (and task) under
``OUT/_batches`` (the plan's engines) or ``OUT/_native`` (the native baseline), written by the
sink of every batch (:mod:`.frames`), so a failing deployment keeps what it committed.

:class:`Committed` reads them back three ways: counted from their ``query`` column, written
as ``OUT/<query>.parquet`` one record batch at a time (memory bounded by a batch, not by the
results), or as Python sets of row tuples — for comparing result sets (tests, notebooks)
only; the run's own path never builds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from mqjoin.model.tables import ResultWriter
from mqjoin.model.workload import Workload


@dataclass(frozen=True)
class Committed:
    """The committed results of a deployment writing under ``out`` with engine ``engine``
    (``mqjoin``: ``OUT/_batches``; ``native``: ``OUT/_native``)."""

    out: Path
    engine: str

    @property
    def parts(self) -> list[Path]:
        """The committed per-batch result files, in batch order."""
        from mqjoin.runtime.spark.frames import committed_parts

        return committed_parts(self.out / ("_batches" if self.engine == "mqjoin" else "_native"))

    def sets(self, queries: Iterable[str]) -> dict[str, set[tuple[int, ...]]]:
        """Query → set of result tuples (row indices in the query's relation order)."""
        from mqjoin.runtime.spark.frames import read_parts

        out: dict[str, set[tuple[int, ...]]] = {q: set() for q in queries}
        for q, rows in read_parts(self.parts):
            out[q].update(map(tuple, rows.tolist()))
        return out

    def counts(self, queries: Iterable[str]) -> dict[str, int]:
        """Query → results, from the parts' ``query`` column alone."""
        from mqjoin.runtime.spark.frames import count_parts

        counts = count_parts(self.parts)
        return {q: counts.get(q, 0) for q in queries}

    def write(self, workload: Workload) -> Path:
        """Write ``OUT/<query>.parquet`` in the CLI's output format for ``workload``'s queries,
        one record batch of a part at a time; rows in batch order, then as each batch's parts
        hold them."""
        from mqjoin.runtime.spark.frames import read_part_tables

        with ResultWriter(workload, self.out) as put:
            for q, table in read_part_tables(self.parts):
                put.add(q, table)
        return put.dir
