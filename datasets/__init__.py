"""Data sets and workloads for mqjoin, installed as ``mqjoin.datasets``.

(The folder is top-level ``datasets/`` in the repository; it is mapped to
``mqjoin.datasets`` so that it never shadows the popular ``datasets`` package.)

Modules:

* :mod:`mqjoin.datasets.arrivals` — arrival processes for the ``ts`` column (constant,
  Poisson, bursts; seeded);
* :mod:`mqjoin.datasets.streams` — writing relation streams in the input format, the data
  cache (``$MQJOIN_CACHE`` or ``~/.cache/mqjoin``);
* :mod:`mqjoin.datasets.tpch` — TPC-H tables (``tpchgen-cli``, offline) as streams, the
  potential joins of the CLASH paper's Section VII-A, the Figure 7(a) and ten-query
  workloads and the random TPC-H query generator;
* :mod:`mqjoin.datasets.synthetic_paper` — the Section VII-B data sets
  (``selectivity-change``, ``skewed-rates``) with their workloads;
* :mod:`mqjoin.datasets.stats` — rates and class selectivities estimated from data (exact or
  sampled, with stated precision), written into a workload.

The random workloads of Figure 9 are :func:`mqjoin.datasets.random_workloads.random_workload`.

Bundled workloads (``workloads/*.yaml``; the CLI finds them by file name, e.g.
``mqjoin optimize tpch_fig7a.yaml``) and a tiny TPC-H sample (``samples/tpch_tiny``, CSV).

>>> from mqjoin.model.workload import load_workload
>>> from mqjoin.datasets.tpch import WORKLOADS
>>> load_workload(WORKLOADS / "tpch_fig7a.yaml")
Workload(8 relations, 5 queries: q1, q2, q3, q4, q5)
"""
