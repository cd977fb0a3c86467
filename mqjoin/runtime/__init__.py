"""Engines that execute plans: the in-process reference executor (``reference``) and the
Spark Structured Streaming deployment (``spark``, needs the ``spark`` extra)."""
