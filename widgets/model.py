"""The explorer's state: one small observable object that every view watches.

:class:`ExplorerModel` holds a :class:`~mqjoin.model.workload.Workload` and the optimiser options
(mode, partitioning policy, MIRs, solver, time limit), recomputes the
:class:`~mqjoin.planning.optimizer.OptimizeResult` after every edit (debounced) and notifies its
observers.  Views never optimise on their own and never hold state of their own beyond
what they draw: they call the model's edit methods and redraw when told.

Edits are validated at once: a bad edit (an unknown relation in a query text, a selectivity
outside (0, 1] …) raises nothing — it sets :attr:`ExplorerModel.error` to the engine's
message and keeps the previous workload.  A successful edit clears the error and schedules
a recomputation ``debounce`` seconds later (``0``: at once, which is what tests use).

Background work — the debounce timer outside a kernel's event loop, the anytime improvement
— runs on daemon threads the model keeps; :meth:`ExplorerModel.close` cancels it and waits
for them (the widget that made a model closes it with itself).

>>> from mqjoin.model.workload import parse_workload
>>> w = parse_workload('''
... defaults: {rate: 100, selectivity: 0.01}
... relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}}
... queries: {q1: "R(a), S(a,b), T(b)"}
... ''')
>>> m = ExplorerModel(w, debounce=0)
>>> m.result.probe_cost
400.0
>>> seen = []
>>> m.observe(lambda change: seen.append(change["name"]), "result")
>>> m.set_rate("R", 1000)
True
>>> seen, m.result.probe_cost
(['result'], 1300.0)
>>> m.add_query("q2", "R(a), X(a)")
False
>>> m.error
"query q2: relation 'X' is not declared (declared: R, S, T)"
>>> m.workload.query_names
('q1',)
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from mqjoin.datasets.commands import load_named_workload
from mqjoin.model.errors import FilterError, MissingFractionError, MqjoinError, OptionError, PlannerError
from mqjoin.planning.ilp import POLICIES
from mqjoin.planning.optimizer import OptimizeResult, optimize
from mqjoin.planning.options import OptimizeOptions
from mqjoin.planners.registry import check_fit
from mqjoin.model.statistics import SelectivityGroup, with_class_selectivity
from mqjoin.model.workload import Workload, load_workload, parse_workload

from mqjoin.planning.diff import PlanDiff, plan_diff
from mqjoin.support.gcpause import paused_gc
from mqjoin.support.threads import join_threads
from mqjoin.widgets._kernel import spawn, unbound
from mqjoin.widgets.guarded import CLOSE_WAIT

_log = logging.getLogger(__name__)

#: names of the events an :class:`ExplorerModel` emits
EVENTS = ("workload", "options", "result", "error", "busy", "progress", "improving", "measured", "data")

#: the fields of :class:`~mqjoin.planning.options.OptimizeOptions` a model edits (attributes of
#: the model; the others keep their defaults)
OPTIONS = ("mode", "partitioning", "mirs", "solver", "time_limit", "planner", "tree_shape")


def as_workload(workload: Workload | str) -> Workload:
    """A workload from a :class:`Workload`, a path to a YAML file, a bundled workload's file
    name (``"paper_v2.yaml"``, ``"tpch_fig7a.yaml"``) or YAML text.

    >>> as_workload("paper_v2.yaml")
    Workload(4 relations, 2 queries: q1, q2)
    """
    if isinstance(workload, Workload):
        return workload
    if not isinstance(workload, str):
        import os

        if isinstance(workload, os.PathLike):
            return load_workload(workload)
        raise TypeError(f"expected a Workload, a file name or YAML text, got {type(workload).__name__}")
    text = workload.strip()
    if "\n" in text or ":" in text and not text.endswith((".yaml", ".yml")):
        return parse_workload(workload)
    return load_named_workload(text)  # a file, else a bundled workload, else the "file not found" error


# --------------------------------------------------------------------------------------------
# the observable model
# --------------------------------------------------------------------------------------------


def parse_fractions(text: str) -> dict[str, float]:
    """Pass fractions typed as ``"V: 0.2, W: 0.5"`` (relation → f).

    >>> parse_fractions("V: 0.2, W:.5"), parse_fractions("")
    ({'V': 0.2, 'W': 0.5}, {})
    >>> parse_fractions("V 0.2")
    Traceback (most recent call last):
    ...
    ValueError: cannot read the pass fraction 'V 0.2': write relation: fraction, e.g. 'V: 0.2, W: 0.5'
    """
    out = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        rel, sep, value = item.partition(":")
        try:
            if not sep or not rel.strip():
                raise ValueError
            out[rel.strip()] = float(value)
        except ValueError:
            raise ValueError(f"cannot read the pass fraction {item!r}: write relation: fraction, "
                             f"e.g. 'V: 0.2, W: 0.5'") from None
    return out


def render_fractions(query) -> str:
    """A query's pass fractions as :func:`parse_fractions` reads them."""
    return ", ".join(f"{f.relation}: {f.fraction:g}" for f in query.filters if f.fraction is not None)


class ExplorerModel:
    """Workload + options → :class:`OptimizeResult`, with observers (see the module doc).

    Observers are called as ``callback(change)`` with ``change = {"name", "old", "new", "owner"}`` (the shape of a
    traitlets change), for the events in :data:`EVENTS`: ``workload`` (an edit was accepted), ``options``, ``result`` (a
    new plan; also :attr:`diff` is updated first), ``error``, ``busy``, and for anytime solving (see
    ``interactive_budget``) ``progress`` (a round or an improvement inside one reported) and ``improving``
    (started/ended), ``measured`` (a run ended: :attr:`measured`, set by the Deploy and Adaptivity panels).
    """

    def __init__(self, workload: Workload | str, *, mode: str = "mqo", partitioning: str = "single",
                 mirs: bool = True, solver: str = "highs", time_limit: float | None = None,
                 debounce: float = 0.3, optimize_fn: Callable[[Workload, OptimizeOptions], OptimizeResult] = optimize,
                 compute: bool = True, interactive_budget: float | None = None,
                 background: Callable[[Callable[[], None]], Any] | None = None, planner: str = "clash",
                 tree_shape: str | None = None, data: Any = None):
        self._observers: dict[str, list[Callable[[dict], Any]]] = {e: [] for e in EVENTS}
        self._lock = threading.RLock()
        self._timer: Any = None
        self._pending = False
        self._running = False
        self.optimize_fn = optimize_fn
        self.debounce = float(debounce)
        self.workload: Workload = as_workload(workload)
        #: the data given (``data=``: a folder of ``R.csv`` / ``R.parquet`` per relation, or the
        #: tables), read; None without.  The workload is then the one ``mqjoin run`` plans on for
        #: it (:func:`mqjoin.datasets.fitting.fit_inputs`): the horizon its span, the statistics
        #: measured again where the data contradicts them
        self.data: dict[str, Any] | None = None
        #: one line: which statistics the plan is chosen on and what they were taken on ('' without data)
        self.statistics = ""
        #: the workload as written and edited, without the data's statistics (None while no data
        #: is chosen: then it is :attr:`workload`); :meth:`plan_on` fits it to other data
        self.written: Workload | None = None
        self._fitted: Any = None  # (what the data is, the workload fitted) of the data planned on
        if data is not None:
            from mqjoin.datasets.fitting import fit_inputs

            self.data, fit = fit_inputs(self.workload, data)
            self.written, self._fitted = self.workload, (_data_key(data), self.workload)
            self.workload, self.statistics = fit.workload, fit.line()
        self.mode, self.partitioning, self.mirs = mode, partitioning, mirs
        self.solver, self.time_limit = solver, time_limit
        #: the plan family (:data:`mqjoin.planners.registry.PLANNERS`) and, for ``tree``, its shape
        self.planner, self.tree_shape = planner, tree_shape
        self._check_options()
        self.result: OptimizeResult | None = None
        self.previous: OptimizeResult | None = None
        self.diff: PlanDiff | None = None
        self.error: str = ""
        self.busy: bool = False
        #: seconds the last recomputation took (optimise + notify observers, i.e. redraw)
        self.last_seconds: float = 0.0
        self.revision = 0
        #: anytime solving: a solve gets ``interactive_budget`` seconds; a plan not proven
        #: optimal by then is shown at once and improved in the background (``background(job)``
        #: runs the job: a daemon thread by default), each round reported in :attr:`progress`
        #: (event ``progress``); an edit or option change cancels it (:attr:`generation`)
        self.interactive_budget = interactive_budget
        self.background = background or (lambda job: spawn(job, "mqjoin-anytime"))
        self._workers: list[Any] = []  # what background() returned (threads to join on close)
        self.closed = False
        self.progress: tuple[Any, ...] = ()
        self.improving = False
        self.generation = 0
        #: what the latest run counted (:class:`~mqjoin.planning.measured.RunCounts`), or None
        self.measured: Any = None
        try:
            import asyncio

            self._loop = asyncio.get_running_loop()  # a kernel: post results to its thread
        except RuntimeError:
            self._loop = None
        if compute:
            self.recompute()

    # -- observers ------------------------------------------------------------------------------

    def observe(self, callback: Callable[[dict], Any], names: str | Iterable[str] = "result") -> None:
        """Call ``callback(change)`` on each of the events ``names`` (see :data:`EVENTS`)."""
        for n in [names] if isinstance(names, str) else names:
            if n not in self._observers:
                raise ValueError(f"unknown event {n!r} (events: {', '.join(EVENTS)})")
            if callback not in self._observers[n]:
                self._observers[n].append(callback)

    def unobserve(self, callback: Callable[[dict], Any], names: str | Iterable[str] = EVENTS) -> None:
        for n in [names] if isinstance(names, str) else names:
            if callback in self._observers.get(n, []):
                self._observers[n].remove(callback)

    def _notify(self, name: str, old: Any, new: Any) -> None:
        for cb in list(self._observers[name]):
            try:
                cb({"name": name, "old": old, "new": new, "owner": self})
            except Exception as e:  # noqa: BLE001 — one broken view must not stop the others
                _log.exception("an observer of %r failed", name)
                if name != "error":
                    self._set("error", f"a view failed to update ({type(e).__name__}: {e}); please report this")

    def _set(self, name: str, value: Any) -> None:
        old = getattr(self, name)
        setattr(self, name, value)
        if name in ("error", "busy", "improving") and old == value:
            return
        self._notify(name, old, value)

    # -- options --------------------------------------------------------------------------------

    def _check_options(self) -> None:
        if self.partitioning not in POLICIES:
            raise ValueError(f"unknown partitioning {self.partitioning!r} (choose {' or '.join(POLICIES)})")
        try:
            check_fit(self.options)
        except (OptionError, PlannerError) as e:
            raise ValueError(str(e)) from None

    @classmethod
    def from_report(cls, source: Any, **model_kw: Any) -> "ExplorerModel":
        """The model of a handout written by :func:`mqjoin.widgets.report.write_report` (its path,
        or the page's text): the same workload, edits and optimiser options."""
        from mqjoin.widgets._html import handout_contents

        text, state = handout_contents(source)
        return cls(parse_workload(text), **{**state["options"], **model_kw})

    @property
    def options(self) -> OptimizeOptions:
        """The optimiser options (:data:`OPTIONS` of them the model edits) as the value
        :func:`mqjoin.planning.optimizer.optimize` takes."""
        return OptimizeOptions(**{k: getattr(self, k) for k in OPTIONS})

    def set_options(self, **options: Any) -> bool:
        """Change optimiser options (:data:`OPTIONS`) and recompute (debounced)."""
        for k in options:
            if k not in OPTIONS:
                self._set("error", f"unknown option {k!r} (options: {', '.join(OPTIONS)})")
                return False
        saved = {k: getattr(self, k) for k in OPTIONS}
        old = self.options
        for k, v in options.items():
            setattr(self, k, v)
        try:
            self._check_options()
        except ValueError as e:
            for k, v in saved.items():
                setattr(self, k, v)
            self._set("error", str(e))
            return False
        if self.options != old:
            self._notify("options", old, self.options)
            self.schedule()
        return True

    # -- edits ----------------------------------------------------------------------------------

    def edit(self, change: Workload | Callable[[Workload], Workload]) -> bool:
        """Replace the workload (or apply ``change(workload)``), validated at once; on an engine
        error keep the workload and show the message in :attr:`error`.  Returns success."""
        try:
            new = change(self.workload) if callable(change) else change
            if not isinstance(new, Workload):
                raise TypeError(f"an edit must give a Workload, got {type(new).__name__}")
        except MqjoinError as e:
            self._set("error", str(e))
            return False
        except Exception as e:  # noqa: BLE001 — a widget never shows a traceback
            _log.exception("an edit of the workload failed")
            self._set("error", f"{type(e).__name__}: {e}")
            return False
        old = self.workload
        if callable(change) and self.written is not None:  # planned on data: the edit is the workload's too
            try:
                self.written = change(self.written)
            except Exception:  # noqa: BLE001 — it applied to the data's workload: the written one keeps the old
                _log.debug("an edit did not apply to the workload as written", exc_info=True)
        if new == old:
            self._set("error", "")
            return True
        self.workload = new
        self._set("error", "")
        self._notify("workload", old, new)
        self.schedule()
        return True

    def set_rate(self, relation: str, rate: float) -> bool:
        """Set a relation's rate (tuples per second)."""
        return self.edit(lambda w: w.with_relation(relation, rate=rate))

    def set_window(self, relation: str, window: float | None) -> bool:
        """Set a relation's window in seconds (``None``: unbounded)."""
        return self.edit(lambda w: w.with_relation(relation, window=window))

    def set_parallelism(self, relation: str, parallelism: int) -> bool:
        """Set the number of partitions of a relation's store."""
        return self.edit(lambda w: w.with_relation(relation, parallelism=parallelism))

    def set_node(self, relation: str, node: str | None) -> bool:
        """Place a relation's stream at a processing node (PMJoin); ``None`` or ``""``: its own."""
        return self.edit(lambda w: w.with_relation(relation, node=node or None))

    def set_mir_parallelism(self, parallelism: int) -> bool:
        """Set ``defaults.parallelism``: the number of partitions of every MIR store."""
        return self.edit(lambda w: w.with_defaults(parallelism=parallelism))

    def set_selectivity(self, group: SelectivityGroup | str, value: float) -> bool:
        """Set the selectivity of a class (given by a :class:`SelectivityGroup` or an equality
        text such as ``"R.a = S.a"``); every class sharing a pair with it follows."""
        return self.edit(lambda w: with_class_selectivity(w, group, value))

    def add_query(self, name: str, text: str, where: str = "", fractions: str = "") -> bool:
        """Add (or replace) a query written in paper notation (``R(a), S(a,b)``) or as
        equalities (``R.a = S.a AND S.b = T.b``), with an optional filter (``where``, docs/model.md §7)
        and its pass fractions (``"V: 0.2, W: 0.5"``)."""
        name = name.strip()
        if not name:
            self._set("error", "give the query a name (letters, digits, _), e.g. q3")
            return False
        try:
            given = parse_fractions(fractions)
        except ValueError as e:
            self._set("error", str(e))
            return False
        spec = {"join": text, "where": where} if where.strip() else text

        def added(w: Workload) -> Workload:
            try:
                new = w.with_query(name, spec, given)
                new.selections(name)  # its filter's pass fractions, checked now: not when the plan is solved
                return new
            except MissingFractionError as e:  # say where the fraction goes here, not in YAML
                if e.query != name:
                    raise
                raise FilterError(f"query {name}: the filter on {e.relation} needs its pass fraction (the share of "
                                  f"{e.relation}'s tuples that pass, in (0, 1]): type '{e.relation}: 0.2' in the "
                                  "'pass f' box beside the filter") from None

        return self.edit(added)

    def remove_query(self, name: str) -> bool:
        """Remove a query (the last one cannot be removed: a plan needs a query)."""
        if name in self.workload.query_names and len(self.workload.queries) == 1:
            self._set("error", f"cannot remove {name}: it is the only query, and a plan needs one")
            return False
        return self.edit(lambda w: w.without_query(name))

    # -- recomputation --------------------------------------------------------------------------

    def schedule(self) -> None:
        """Recompute after ``debounce`` seconds without a further edit (at once when 0).

        Inside a running asyncio loop (a Jupyter kernel) the recomputation is a loop
        callback, so it runs on the kernel's thread like every widget callback; elsewhere a
        timer thread.  Either way its widget updates answer no request of the page
        (:func:`~mqjoin.widgets._kernel.unbound`): the edit that scheduled it may have come
        from a page that is gone by then."""
        with self._lock:
            self._pending = True
            self.generation += 1  # a background improvement of the old state is stale now
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self.debounce <= 0 or self.closed:
                self.flush()
                return
            try:
                import asyncio

                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self.debounce, self._flush_unbound)
            except RuntimeError:
                t = threading.Timer(self.debounce, self._flush_unbound)
                t.daemon = True
                self._timer = t
                t.start()

    @property
    def pending(self) -> bool:
        """Whether an edit waits for (or is in) its debounced recomputation."""
        return self._pending or self._running

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no recomputation is pending (for scripts; a notebook never needs it).
        Returns whether the model settled within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.pending:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _flush_unbound(self) -> None:
        with unbound():
            self.flush()

    def flush(self) -> OptimizeResult | None:
        """Run a pending recomputation now (no-op when none is pending)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._pending:
                return self.result
            return self.recompute()

    def recompute(self) -> OptimizeResult | None:
        """Optimise the current workload with the current options and notify observers.

        On an engine error the previous result stays, and :attr:`error` says why."""
        with self._lock:
            self._running = True
            try:
                with paused_gc():  # no full collection mid-redraw (widgets/_gc.py)
                    return self._recompute()
            finally:
                self._running = False

    def _recompute(self) -> OptimizeResult | None:
        self._pending = False
        t0 = time.perf_counter()
        self._set("busy", True)
        self.generation += 1
        options = self.options
        budget = self.interactive_budget
        if budget is not None:
            limit = options.time_limit
            options = options.changed(time_limit=budget if limit is None else min(limit, budget))
        if self.result is not None and options.planner == "clash" and options.mode == "mqo":
            # an edit re-plans from the last result: the ILP's parts the edit leaves alone keep their answers
            options = options.changed(previous=self.result)
        try:
            res = self.optimize_fn(self.workload, options)
        except MqjoinError as e:
            self._set("busy", False)
            self._set("error", str(e))
            return None
        except Exception as e:  # noqa: BLE001 — never a traceback in a widget
            _log.exception("optimising the workload failed")
            self._set("busy", False)
            self._set("error", f"{type(e).__name__}: {e}")
            return None
        old = self.result
        self.previous = old
        self.diff = None if old is None else plan_diff(old.plan, res.plan)
        self.result = res
        self.revision += 1
        self._set("busy", False)
        self._set("error", "")
        self._notify("result", old, res)
        self.last_seconds = time.perf_counter() - t0
        self._start_improving(res, self.last_seconds)
        return res

    # -- anytime --------------------------------------------------------------------------------

    def _start_improving(self, res: OptimizeResult, seconds: float) -> None:
        from mqjoin.planning.anytime import improve, progress_of

        first = progress_of(res, seconds)
        self._set("progress", (first,))
        budget = self.interactive_budget
        if budget is None or res.ilp.status == "optimal" or self.closed:
            self._set("improving", False)
            return
        gen, workload, options = self.generation, self.workload, self.options
        self._set("improving", True)

        def stale() -> bool:
            return gen != self.generation

        def reported(r: Any) -> None:  # an incumbent or bound improved inside a round
            self._post(lambda: stale() or self._set("progress", self.progress + (r,)))

        def job() -> None:
            try:
                for p in improve(workload, 2 * budget, max_limit=options.time_limit, cancelled=stale,
                                 start=first, optimize_fn=self.optimize_fn, on_report=reported, options=options):
                    self._post(lambda p=p: self._improved(gen, p))
            except Exception as e:  # noqa: BLE001 — never a traceback in a widget
                _log.exception("improving the plan in the background failed")
                self._post(lambda e=e: stale() or self._set("error", f"{type(e).__name__}: {e}"))
            self._post(lambda: stale() or self._set("improving", False))

        worker = self.background(job)
        self._workers = [w for w in self._workers if w.is_alive()]
        if isinstance(worker, threading.Thread):
            self._workers.append(worker)

    def _post(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` (a report of background work) on the kernel's thread when there is
        one; its widget updates answer no request of the page."""
        def run() -> None:
            with unbound():
                fn()

        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(run)
        else:
            run()

    def _improved(self, gen: int, p: Any) -> None:
        """A round of the background improvement finished: show its plan if it is better."""
        if gen != self.generation:  # an edit came in meanwhile: the round answers an old question
            return
        if p.result is not self.result and p.result.probe_cost <= self.result.probe_cost:
            old = self.result
            self.previous = old
            self.diff = plan_diff(old.plan, p.result.plan)
            self.result = p.result
            self.revision += 1
            self._notify("result", old, p.result)
        self._set("progress", self.progress + (p,))

    def close(self, timeout: float | None = None) -> bool:
        """Stop the background work: the debounced recomputation is cancelled (the edit stays,
        unsolved until the next one), the anytime improvement too (its running round finishes
        unreported), and their threads are waited for — at most ``timeout`` seconds; returns
        whether none is left.  A closed model still answers edits, at once in the caller's
        thread, and improves nothing in the background."""
        with self._lock:
            self.closed = True
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            self._pending = False
            self.generation += 1  # the improvement running now is stale: it reports nothing more
            workers = ([timer] if isinstance(timer, threading.Thread) else []) + self._workers
            self._workers = []
        self._set("improving", False)
        return join_threads(workers, timeout)

    def set_measured(self, counts: Any) -> None:
        """Keep what a run counted (:class:`~mqjoin.planning.measured.RunCounts`, from any
        thread) for the views that set predictions beside it (event ``measured``)."""
        self._post(lambda: self._set("measured", counts))

    # -- the data planned on ---------------------------------------------------------------------

    def plan_on(self, data: Any, progress: Callable[[str], None] | None = None):
        """The plan for a run over ``data`` — a folder of ``R.csv`` / ``R.parquet`` per relation,
        or the tables — chosen as ``ExplorerModel(workload, data=...)`` chooses it: the workload as
        written (with its edits) fitted to the data (:func:`mqjoin.datasets.fitting.fit_inputs`:
        the horizon the data's span, the statistics measured again where a sampled check
        disagrees), every view re-planned on it, :attr:`statistics` saying which data the plan is
        for (event ``data``).  ``None``: back to the workload's own statistics.  Callable from
        any thread (the Deploy panel's start): the data is read and measured there,
        ``progress(message)`` hearing each stage, and the model changed on the kernel's thread.
        Unreadable data raises its :class:`~mqjoin.model.errors.DataError` with the model as it
        was; data already planned on is not measured again.

        >>> from mqjoin.model.tables import Table
        >>> w = parse_workload('''
        ... relations: {R: {attributes: [a], rate: 10}, S: {attributes: [a], rate: 10}}
        ... queries: {q: "R(a), S(a)"}
        ... selectivities: {R.a = S.a: 0.5}''')
        >>> m = ExplorerModel(w, debounce=0)
        >>> tables = {r: Table.from_columns(r, {"ts": [i / 10 for i in range(101)], "a": [i % 50 for i in range(101)]})
        ...           for r in "RS"}
        >>> plan = m.plan_on(tables)
        >>> print(m.statistics[:m.statistics.index(" (")]); plan.workload.defaults.horizon
        the workload's statistics describe other data than the data given
        10.0
        >>> m.set_rate("R", 20)  # an edit on the data's statistics is the written workload's too
        True
        >>> m.plan_on(None).workload == w.with_relation("R", rate=20), m.statistics
        (True, '')
        """
        if data is None:
            return self._on_kernel(self._use_written)
        from mqjoin.datasets.fitting import fit_inputs

        key = _data_key(data)
        while True:
            base = self.written or self.workload
            if self._fitted == (key, base):
                return self._on_kernel(self.current_plan)
            tables, fit = fit_inputs(base, data, progress=progress)
            plan = self._on_kernel(functools.partial(self._use_data, base, key, tables, fit))
            if plan is not None:
                return plan  # else an edit came in while the data was measured: measured again with it

    def _use_data(self, base: Workload, key: Any, tables: dict[str, Any], fit: Any):
        """Plan on ``fit``'s workload for ``tables`` (on the kernel's thread); None when the
        workload was edited since ``base`` was fitted."""
        if (self.written or self.workload) is not base:
            return None
        old = self.statistics
        self.edit(fit.workload)
        self.written, self._fitted, self.data, self.statistics = base, (key, base), tables, fit.line()
        self._notify("data", old, self.statistics)
        return self.current_plan()

    def _use_written(self):
        """Plan on the workload's own statistics again (on the kernel's thread)."""
        if self.written is not None:
            written, old = self.written, self.statistics
            self.written = self._fitted = self.data = None
            self.statistics = ""
            self.edit(written)
            self._notify("data", old, "")
        return self.current_plan()

    def _on_kernel(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the kernel's thread (:meth:`_post`), waited for; its error raised here."""
        try:
            import asyncio

            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if self._loop is None or here is self._loop or not self._loop.is_running():
            return fn()
        done, out = threading.Event(), {}

        def call() -> None:
            try:
                out["value"] = fn()
            except BaseException as e:  # noqa: BLE001 — raised again on the caller's thread
                out["error"] = e
            finally:
                done.set()

        self._post(call)
        while not done.wait(0.1):
            if self.closed or not self._loop.is_running():
                raise MqjoinError("the explorer was closed before it planned on the data")
        if "error" in out:
            raise out["error"]
        return out["value"]

    def current_plan(self):
        """The current plan (what a Deploy panel deploys); recomputes a pending edit first."""
        self.flush()
        if self.result is None:
            raise MqjoinError(self.error or "no plan yet")
        return self.result.plan

    def __repr__(self) -> str:
        cost = "no plan" if self.result is None else f"probe cost {self.result.probe_cost:g}"
        return f"ExplorerModel({self.workload!r}, {self.mode}/{self.partitioning}, {cost})"


def _data_key(data: Any) -> Any:
    """What data planned on is, to tell it again: a folder's path, else the tables' identity."""
    import os

    if isinstance(data, (str, os.PathLike)):
        return "folder", os.path.abspath(os.path.expanduser(str(data)))
    return "tables", id(data)


class ModelView:
    """What a view on an :class:`ExplorerModel` does about the model's lifetime: a view given
    a workload makes its own model (:meth:`own_model`) and closes it with itself, waiting for
    its threads briefly (:data:`~mqjoin.widgets.guarded.CLOSE_WAIT`); a model it was given is
    the caller's.  Mixed in before the widget class."""

    def own_model(self, model: "ExplorerModel | Workload | str", **model_kw: Any) -> ExplorerModel:
        #: whether the view made its model (then it closes the model with itself)
        self.owns_model = not isinstance(model, ExplorerModel)
        self.model = ExplorerModel(model, **model_kw) if self.owns_model else model
        return self.model

    def close(self) -> None:
        # getattr: ipywidgets also closes a half-built view when it is collected
        if getattr(self, "owns_model", False) and getattr(self, "model", None) is not None:
            self.model.close(CLOSE_WAIT)
        super().close()

