"""Data sets and workloads for mqjoin, installed as ``mqjoin.datasets``.

(The folder is top-level ``datasets/`` in the repository; it is mapped to
``mqjoin.datasets`` so that it never shadows the popular ``datasets`` package.)
"""
