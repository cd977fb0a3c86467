"""Helpers of the Spark test modules (the session itself is the ``spark`` fixture of
``tests/conftest.py``, shared by all of them): how long a deployment may take, and the SQL
executions of the Spark UI."""

from __future__ import annotations

import json
import urllib.request

#: SQL executions the Spark UI keeps (default 1000): test_spark_adaptive runs a few thousand
RETAINED_EXECUTIONS = 20000

TIMEOUT = 300  # seconds a deployment may take (a loaded 2-core machine is slow)


def sql_executions(spark, offset: int = 0, details: bool = True) -> list[dict]:
    """The SQL executions of ``spark``'s application from the Spark UI's REST API (with their
    physical plans when ``details``), from the ``offset``-th on."""
    sc = spark.sparkContext
    url = (f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/sql?details={str(details).lower()}"
           f"&planDescription={str(details).lower()}&offset={offset}&length=100000")
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)
