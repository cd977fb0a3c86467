"""The Spark driver JVM's class archive (mqjoin/runtime/spark/cds.py): made once, used by later
starts, and never the reason a start fails."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from mqjoin.runtime.spark import cds

START = r"""
import json
from mqjoin.runtime.spark.session import spark_session
spark = spark_session()
jvm = spark.sparkContext._jvm
args = [str(a) for a in jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()]
maps = open(f"/proc/{spark.sparkContext._gateway.proc.pid}/maps").read()  # the files the JVM has mapped
print(json.dumps({"sum": spark.range(10).selectExpr("sum(id)").collect()[0][0], "args": args, "maps": maps}))
spark.stop()
"""


def start_spark(env: dict, cwd) -> dict:
    out = subprocess.run([sys.executable, "-c", START], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_maker_at_work_is_not_started_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("MQJOIN_CACHE", str(tmp_path))
    path = cds.archive_path()
    path.parent.mkdir(parents=True)
    cds._lock(path).write_text("1")
    assert cds.start_maker(path) is False and cds.make(path) is False and not path.exists()
    old = time.time() - cds.STALE_LOCK - 1  # a lock left by a maker that died no longer counts
    os.utime(cds._lock(path), (old, old))
    assert cds._locked(path) is False


@pytest.mark.slow
def test_a_broken_archive_costs_the_start_nothing_and_is_removed(tmp_path):
    """A partly written archive makes the JVM abort at once: the start is retried without it."""
    java = cds._java()
    tiny = tmp_path / "tiny.jsa"
    subprocess.run([java, f"-XX:ArchiveClassesAtExit={tiny}", "-Xlog:disable", "-version"], check=True,
                   capture_output=True)
    env = dict(os.environ, MQJOIN_CACHE=str(tmp_path / "cache"))
    path = subprocess.run([sys.executable, "-c", "from mqjoin.runtime.spark import cds; print(cds.archive_path())"],
                          env=env, capture_output=True, text=True, check=True).stdout.strip()
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(tiny.read_bytes()[:4096])
    broken = subprocess.run([java, f"-XX:SharedArchiveFile={path}", cds.QUIET, "-version"], cwd=tmp_path,
                            capture_output=True)
    assert broken.returncode != 0  # the JVM alone cannot start with it
    got = start_spark(env, tmp_path)
    assert got["sum"] == 45 and not any("SharedArchiveFile" in a for a in got["args"])
    assert not os.path.exists(path)


@pytest.mark.slow
def test_the_archive_made_once_is_used_by_the_next_start(tmp_path):
    path = cds.archive_path()  # the user's cache: made here if no start has made it yet
    deadline = time.monotonic() + 900
    while not path.is_file() and time.monotonic() < deadline:
        if cds._locked(path):  # another maker at work (a start set one off): wait for it
            time.sleep(5)
        else:
            assert cds.make(path)
    assert path.is_file()
    got = start_spark(dict(os.environ), tmp_path)
    assert got["sum"] == 45 and f"-XX:SharedArchiveFile={path}" in got["args"]
    assert str(path) in got["maps"]  # mapped: in use, not only named
    off = start_spark(dict(os.environ, MQJOIN_SPARK_CDS="0"), tmp_path)
    assert not any("SharedArchiveFile" in a for a in off["args"])


@pytest.mark.slow
def test_a_start_that_fails_without_the_archive_too_keeps_it(tmp_path):
    """A bad master URL fails the start with the archive and again without it: the archive was
    not the cause and stays for the next start (a user's typo must not cost the archive, nor
    a concurrent start its use)."""
    env = dict(os.environ, MQJOIN_CACHE=str(tmp_path / "cache"))
    code = ("from pathlib import Path\n"
            "from mqjoin.model.errors import EngineError\n"
            "from mqjoin.runtime.spark import cds\n"
            "from mqjoin.runtime.spark.session import spark_session\n"
            "p = cds.archive_path(); p.parent.mkdir(parents=True); p.write_bytes(b'not an archive')\n"
            "try:\n"
            "    spark_session('bogus://nowhere')\n"
            "except EngineError as e:\n"
            "    print('refused:', e)\n"
            "print('kept' if p.is_file() else 'removed')\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("refused: could not start Spark (bogus://nowhere)") and lines[-1] == "kept", lines


def test_a_maker_outlives_the_group_that_started_it(tmp_path, monkeypatch):
    """The maker runs in a session of its own: a Jupyter kernel's restart terminates the
    kernel's process group, and a maker in it would die before its archive is whole."""
    import signal

    monkeypatch.setenv("MQJOIN_CACHE", str(tmp_path))
    path = cds.archive_path()
    path.parent.mkdir(parents=True)
    assert cds.start_maker(path)
    deadline, pid = time.monotonic() + 60, None
    while pid is None and time.monotonic() < deadline:
        for proc in os.listdir("/proc"):
            try:
                with open(f"/proc/{proc}/cmdline", "rb") as f:
                    if str(path).encode() in f.read() and int(proc) != os.getpid():
                        pid = int(proc)
            except (OSError, ValueError):
                continue
        time.sleep(0.05)
    assert pid is not None, "no maker process found"
    own_group = os.getpgid(pid) != os.getpgid(0)
    try:
        assert os.getsid(pid) != os.getsid(0) and own_group
    finally:
        if own_group:
            os.killpg(os.getpgid(pid), signal.SIGKILL)  # the maker and its JVM
        else:  # in the test's own group: the maker alone, and its JVM if it started one
            children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == pid]
            for p in [pid, *children]:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
