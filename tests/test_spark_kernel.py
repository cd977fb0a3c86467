"""Spark in a Jupyter kernel that is restarted: the page hears nothing.

A kernel asked to shut down (JupyterLab's *Restart Kernel*) terminates its child processes, the
JVM among them, while it still forwards its stderr to the page; without
:func:`mqjoin.runtime.spark.session.stop_with_the_kernel` the JVM's end broke PySpark's
accumulator connection and its ``EOFError`` traceback reached JupyterLab's log console.  The
test runs a real kernel (this interpreter) through jupyter_client, starts the session and a
job on Python workers in it (the accumulator connection), restarts the kernel and listens to
everything the kernel broadcasts meanwhile.  Slow: a JVM starts (about a minute on a loaded
2-core machine).
"""

from __future__ import annotations

import os
import queue
import sys
import time

import pytest

from _kernels import kernel_manager

pytest.importorskip("pyspark")
pytest.importorskip("ipykernel")
jupyter_client = pytest.importorskip("jupyter_client")

pytestmark = pytest.mark.slow

START = """
from mqjoin.runtime.spark.session import spark_session, warm_up
spark = spark_session("local[2]")
assert warm_up(spark)  # a read on Python workers: the JVM connects to the accumulator server
from pyspark import SparkContext
print(SparkContext._active_spark_context is not None)
"""


def _broadcast_errors(msg: dict) -> str | None:
    """The text of an error or a stderr traceback a kernel broadcast (what the log console shows)."""
    kind, content = msg["msg_type"], msg["content"]
    if kind == "error":
        return f"{content.get('ename')}: {content.get('evalue')}"
    if kind == "stream" and content.get("name") == "stderr" and ("Traceback" in content["text"] or
                                                                  "Error" in content["text"]):
        return content["text"]
    return None


def test_restarting_the_kernel_with_spark_live_broadcasts_no_traceback(tmp_path, kernel_runtime):
    from jupyter_client.kernelspec import KernelSpecManager

    ksm = KernelSpecManager(kernel_dirs=[])  # ipykernel's native spec only: this interpreter
    km = kernel_manager(jupyter_client.KernelManager, kernel_runtime, kernel_name="python3", kernel_spec_manager=ksm)
    assert km.kernel_spec.argv[0] == sys.executable
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYDEVD_DISABLE_FILE_VALIDATION": "1",
           "IPYTHONDIR": str(tmp_path / "ipython")}
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    heard: list[str] = []
    try:
        kc.wait_for_ready(timeout=120)
        mine = kc.execute(START)
        out = []
        while True:
            msg = kc.get_iopub_msg(timeout=600)
            if msg["parent_header"].get("msg_id") != mine:
                continue
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            assert msg["msg_type"] != "error", msg["content"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        assert "".join(out).strip() == "True"
        km.restart_kernel(now=False)  # as JupyterLab's Restart Kernel: a shutdown request first
        deadline = time.monotonic() + 20  # the restarted kernel's start, and anything the old one left
        while time.monotonic() < deadline:
            try:
                msg = kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            text = _broadcast_errors(msg)
            if text is not None:
                heard.append(text)
        assert heard == [], heard[0][-2000:]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
