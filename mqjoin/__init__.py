"""mqjoin: explore, optimise and run multiple multi-way stream joins (CLASH).

The engine is a flow of plain values (docs/architecture.md §1)::

    Workload → candidates → ILP → Plan → engine → metrics

>>> import mqjoin
>>> w = mqjoin.parse_workload('''
... defaults: {rate: 100, selectivity: 0.01}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> mqjoin.optimize(w).probe_cost
200.0
"""

from mqjoin.model.errors import MqjoinError
from mqjoin.model.workload import Attr, JoinClass, Query, Relation, Workload, load_workload, parse_workload

__version__ = "0.1.0"


def __getattr__(name):  # lazy: keep `import mqjoin` fast and free of heavy libraries
    if name in ("optimize", "OptimizeResult"):
        from mqjoin.planning import optimizer

        return getattr(optimizer, name)
    if name in ("Plan",):
        from mqjoin.planning import plan

        return getattr(plan, name)
    raise AttributeError(f"module 'mqjoin' has no attribute {name!r}")


__all__ = ["Attr", "JoinClass", "MqjoinError", "Query", "Relation", "Workload", "load_workload",
           "parse_workload", "optimize", "OptimizeResult", "Plan"]
