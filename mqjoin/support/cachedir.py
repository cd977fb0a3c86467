"""Where mqjoin keeps what it makes once and reuses: generated data sets and the JVM's class
archive for Spark (:mod:`mqjoin.runtime.spark.cds`)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache's root: ``$MQJOIN_CACHE`` if set, else ``~/.cache/mqjoin``.

    >>> old = os.environ.get("MQJOIN_CACHE")
    >>> os.environ["MQJOIN_CACHE"] = "/tmp/mq"; str(cache_root())
    '/tmp/mq'
    >>> _ = os.environ.pop("MQJOIN_CACHE") if old is None else os.environ.update(MQJOIN_CACHE=old)
    """
    env = os.environ.get("MQJOIN_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "mqjoin"
