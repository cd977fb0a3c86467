"""The contracts of the runtime: what an engine, a deployment and a live adaptive run offer
to whoever drives them (the command line, the widgets, the tests), as typed Protocols.

* :class:`Engine` — ``engine(plan, tables)`` runs a plan over input tables to the end and
  returns an :class:`EngineRun` (its result sets and a summary of what it cost).  The
  in-process engines are ones as they are (:func:`~mqjoin.runtime.reference.run_reference`,
  :func:`~mqjoin.runtime.vector.run_vector`); the adaptive one chooses its own plans from the
  plan's workload (:func:`~mqjoin.runtime.epochs.adaptive_engine` makes it one) and Spark runs a
  deployment to its end (:func:`~mqjoin.runtime.spark.launch.spark_engine`).
* :class:`BatchEngine` — what a Spark deployment hands every micro-batch to: the driver and
  vector-driver engines (:mod:`mqjoin.runtime.spark.driver`), the sharded engine
  (:mod:`mqjoin.runtime.spark.distributed`) and the adaptive driver engine
  (:mod:`mqjoin.runtime.spark.epochs`).
* :class:`Deployment` — a run that goes on while it is watched: what the Deploy panel
  (:mod:`mqjoin.widgets.deploy_panel`) relies on, and all it relies on.
* :class:`AdaptiveSource` — a live adaptive run: what the epoch timeline, the query changes
  panel and the Adaptivity tab (:mod:`mqjoin.widgets.live`) rely on.

Every implementation is checked against its Protocol by the tests, method by method (names
and parameter names), so a fake used in a test is the interface and nothing else.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.model.tables import Table
>>> from mqjoin.planning.optimizer import optimize
>>> from mqjoin.runtime.reference import run_reference
>>> from mqjoin.runtime.vector import run_vector
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> tables = {"R": Table.from_columns("R", {"ts": [0, 5], "a": [1, 1]}),
...           "S": Table.from_columns("S", {"ts": [0.5, 1.5], "a": [1, 1]})}
>>> engines: list[Engine] = [run_reference, run_vector]
>>> [e(optimize(w).plan, tables).result_sets() for e in engines]
[{'q': {(0, 0)}}, {'q': {(0, 0)}}]
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from mqjoin.model.tables import Table

if TYPE_CHECKING:
    from mqjoin.planning.plan import Plan
    from mqjoin.runtime.epochs import AdaptiveRun


class EngineRun(Protocol):
    """What a finished run gives back: ``result_sets()`` — query → the set of its results (a
    tuple of row indices, one per relation in the query's order), equal for every engine on
    the same plan and input (docs/model.md §6); ``summary()`` — what the run did and cost,
    JSON-ready (input tuples, probe messages, seconds, …; keys vary by engine)."""

    def result_sets(self) -> dict[str, set[tuple[int, ...]]]: ...

    def summary(self) -> dict[str, Any]: ...


class Engine(Protocol):
    """The contract of an engine: ``engine(plan, tables)`` runs ``plan`` over ``tables``
    (relation → :class:`~mqjoin.model.tables.Table`, each relation's input) to the end of the
    input and returns an :class:`EngineRun`.  Its results equal the brute-force oracle's; bad
    input (a relation without its table, a column missing) is a typed error
    (:mod:`mqjoin.model.errors`) before anything runs.  Options of one engine (a batch size, a
    CPU budget) are keywords with defaults beyond these two, or bound by an adapter."""

    def __call__(self, plan: Plan, tables: Mapping[str, Table], /) -> EngineRun: ...


class BatchEngine(Protocol):
    """The contract of a micro-batch engine inside a Spark deployment: ``process(batch,
    batch_id)`` runs one micro-batch (a Spark ``DataFrame`` of the packed input log) and
    records its results and metrics, exactly once per ``batch_id`` even when Spark replays a
    batch after a restart; ``close()`` releases what it holds (threads, cached programs) when the
    deployment stops."""

    def process(self, batch: Any, batch_id: int) -> None: ...

    def close(self) -> None: ...


class Deployment(Protocol):
    """The contract of a deployment as the Deploy panel watches it: ``plan`` (what runs;
    ``None`` for Spark's own joins), ``total`` (input rows it will read), ``done`` (all input
    consumed and committed), ``ui_url`` (Spark's web UI, or None); the metrics so far as
    frames — ``batches`` (one row per micro-batch: ``batch``, ``input_rows``, ``started``,
    ``seconds``, ``state_rows``), ``queries`` (one row per micro-batch and query: results and
    latencies) and ``progress`` (Spark's progress reports); ``subscribe(callback)`` calls
    ``callback(event)`` on the deployment's thread for every report (``kind``: ``batch``,
    ``query``, ``progress`` or ``status``; a ``failed`` status says in ``ended`` whether the
    run ended with it, and is sent again with ``ended`` true if the run ends after a failure
    reported while it ran) and ``stop()`` stops it, keeping what it reported.
    The panel reads nothing else (``mode_choice``, ``stores``, ``tables`` where present)."""

    plan: Plan | None
    total: int

    @property
    def done(self) -> bool: ...

    @property
    def ui_url(self) -> str | None: ...

    @property
    def batches(self) -> Any: ...

    @property
    def queries(self) -> Any: ...

    @property
    def progress(self) -> Any: ...

    def subscribe(self, callback: Callable[[dict], None]) -> Any: ...

    def stop(self) -> None: ...


class AdaptiveSource(Protocol):
    """The contract of a live adaptive run (an in-process replay or a Spark adaptive
    deployment) as the views of :mod:`mqjoin.widgets.live` watch it: ``subscribe(callback)``
    (events ``epoch``, ``switch``, ``change``, ``status``), ``snapshot()`` (the run so far, an
    :class:`~mqjoin.runtime.epochs.AdaptiveRun`), ``submit(change, add=, remove=,
    selectivities=)`` (queries added and removed now; returns the epoch they take effect in),
    ``status``, ``error``, ``event_time`` (the input's time reached, None before the first
    tuple) and ``stop()``."""

    status: str
    error: Any

    @property
    def event_time(self) -> float | None: ...

    def subscribe(self, callback: Callable[[dict], None]) -> Any: ...

    def snapshot(self) -> AdaptiveRun: ...

    def submit(self, change: Any = None, *, add: Mapping[str, str] | None = None, remove: Any = (),
               selectivities: Mapping[str, float] | None = None) -> int: ...

    def stop(self) -> None: ...


def members(protocol: type) -> dict[str, str]:
    """The members a Protocol asks for: name → ``method``, ``property`` or ``attribute``.

    >>> members(BatchEngine)
    {'close': 'method', 'process': 'method'}
    """
    out: dict[str, str] = {}
    for name in sorted(set(getattr(protocol, "__annotations__", {})) | set(vars(protocol))):
        if name.startswith("_") and name != "__call__":
            continue
        value = vars(protocol).get(name)
        out[name] = ("property" if isinstance(value, property) else "method" if callable(value) else "attribute")
    return out


def mismatches(protocol: type, implementation: Any) -> list[str]:
    """What ``implementation`` (a class, an instance or a function) lacks of ``protocol``: a
    member missing, a method that is not one, a method that cannot be called as the Protocol's
    (:func:`_fits`: its parameters by name and kind).  Empty: it conforms.  (An
    ``isinstance`` check against a runtime-checkable Protocol sees names only.)

    >>> class Half:
    ...     def process(self, frame, batch_id): ...
    >>> mismatches(BatchEngine, Half)
    ['close: missing', 'process: parameters (frame, batch_id) where the contract has (batch, batch_id)']
    """
    problems = []
    for name, kind in members(protocol).items():
        if name == "__call__":
            got = implementation if not isinstance(implementation, type) else getattr(implementation, "__call__", None)  # noqa: B004 — the method itself, not a test
        else:
            got = inspect.getattr_static(implementation, name, _MISSING)
            if got is _MISSING and not isinstance(implementation, type):
                got = getattr(implementation, name, _MISSING)
        if got is _MISSING:
            if kind == "attribute" and isinstance(implementation, type) and name in _init_attributes(implementation):
                continue
            problems.append(f"{name}: missing")
            continue
        if kind != "method":
            continue
        if isinstance(got, (staticmethod, classmethod)):
            got = got.__func__
        if not callable(got):
            problems.append(f"{name}: not a method")
            continue
        want, have = _parameters(vars(protocol)[name]), _parameters(got)
        if not _fits(want, have):
            problems.append(f"{name}: parameters ({_show(have)}) where the contract has ({_show(want)})")
    return problems


_MISSING = object()


def _init_attributes(cls: type) -> set[str]:
    """The attributes ``cls.__init__`` assigns to ``self`` (read off its code's names)."""
    init = vars(cls).get("__init__")
    names = set(init.__code__.co_names) if init is not None else set()
    for base in cls.__mro__[1:]:
        names |= _init_attributes(base) if "__init__" in vars(base) and base is not object else set()
    return names


def _parameters(fn: Callable) -> list[inspect.Parameter]:
    """A function's parameters but ``self``."""
    params = list(inspect.signature(fn).parameters.values())
    return params[1:] if params and params[0].name == "self" else params


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _fits(want: list[inspect.Parameter], have: list[inspect.Parameter]) -> bool:
    """Whether a function with parameters ``have`` can be called as one with ``want``: the
    contract's positional parameters in order (by the same names unless positional-only), its
    keyword-only ones by name, and every other parameter of its own with a default."""
    rest = list(have)
    for w in want:
        if w.kind in _POSITIONAL:
            if not rest or rest[0].kind not in _POSITIONAL or (w.kind is not w.POSITIONAL_ONLY
                                                               and rest[0].name != w.name):
                return False
            rest.pop(0)
        else:
            match = [h for h in rest if h.name == w.name and h.kind in (w.KEYWORD_ONLY, w.POSITIONAL_OR_KEYWORD)]
            if not match:
                return False
            rest.remove(match[0])
    return all(h.default is not h.empty for h in rest)


def _show(params: list[inspect.Parameter]) -> str:
    return ", ".join(p.name for p in params)
