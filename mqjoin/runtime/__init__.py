"""Engines that execute plans: the in-process executor (``executor``: the feed loop over
``containers`` of every store and epoch and the ``probes`` compiled from a plan's rules, run
statically by ``reference`` and adaptively by ``epochs``), its vectorised form (``vector``),
the counts per logical partition of every store and their projection (``partitions``), and
the Spark Structured Streaming deployment (``spark``, needs the ``spark`` extra)."""
