"""A class-data archive for the Spark driver's JVM: Spark starts faster from the second time on.

Most of a local Spark start is the JVM loading, verifying and linking the classes of Spark's
jars — the same thousands of classes every time.  Java's class-data sharing (CDS) can dump the
classes a JVM loaded into an archive when it exits (``-XX:ArchiveClassesAtExit``) and map that
archive into later JVMs (``-XX:SharedArchiveFile``), which then skip that work.

* **Where.**  One archive per Spark install and Java runtime, under the cache
  (:func:`~mqjoin.support.cachedir.cache_root`): ``jvm/spark-<version>-<place>-<build>.jsa``
  (:func:`archive_path`).  The place is a digest of the ``java`` executable's real path and
  Spark's jar folder; the build a digest of the size and modification time of every jar there
  and of the Java runtime's own library.  The JVM checks both before it maps an archive and
  silently runs without one that does not match, so a reinstall of PySpark into the same
  environment (new files, new times) must lead to a new archive, not to a stale one used
  never again.  A new archive replaces the ones of its place (:func:`_remove_superseded`).
* **Made once, beside the work.**  The first start that finds no archive starts as before, and
  sets off a detached, low-priority process (``python -m mqjoin.runtime.spark.cds PATH``,
  :func:`make`) that starts a Spark session of its own, runs a small batch query, a Python
  function and a streaming query, stops, waits for its JVM to write the archive, and only then
  renames it into place.  A JVM given a partly written archive would crash, so no archive is
  ever under its final name before it is whole; one maker at a time (a lock file next to it).
* **Used when there.**  :func:`java_options` gives the driver JVM the archive (its messages
  silenced); a start that fails with it is retried without, and the archive removed
  (:func:`forget`) when that start works, so an archive can cost a start's seconds but never
  a start; one that fails without it too (a bad master URL) was not the archive's doing.

``MQJOIN_SPARK_CDS=0`` neither makes nor uses one.  ``python benchmarks/spark_start.py``
compares Spark's start with and without the archive.

>>> import os, tempfile
>>> os.environ["MQJOIN_CACHE"] = tempfile.mkdtemp()
>>> p = archive_path()
>>> p.parent.name, p.name.startswith("spark-"), p.suffix
('jvm', True, '.jsa')
>>> java_options(make_missing=False)  # no archive yet: nothing to add
''
>>> _ = p.parent.mkdir(parents=True); _ = p.write_bytes(b"x")
>>> java_options(make_missing=False) == f"-XX:SharedArchiveFile={p} -Xlog:cds*=off"
True
>>> forget(p); p.exists()
False
>>> os.environ["MQJOIN_SPARK_CDS"] = "0"; _ = p.write_bytes(b"x"); java_options()
''
>>> del os.environ["MQJOIN_SPARK_CDS"], os.environ["MQJOIN_CACHE"]
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from mqjoin.support.cachedir import cache_root

log = logging.getLogger(__name__)

#: ``0`` turns the archive off (neither made nor used)
ENV = "MQJOIN_SPARK_CDS"
#: a maker's lock older than this (seconds) is taken to be left by a maker that died
STALE_LOCK = 1800.0
#: how long a maker waits for its JVM to write the archive and exit (seconds)
DUMP_TIMEOUT = 900.0
#: the JVM option that keeps its class-sharing messages (e.g. an archive of another class path) quiet
QUIET = "-Xlog:cds*=off"


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip() not in ("0", "false", "no", "off")


def _spark_jars() -> str:
    home = os.environ.get("SPARK_HOME")
    if home:
        return str(Path(home) / "jars")
    spec = importlib.util.find_spec("pyspark")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return str(Path(locations[0]) / "jars") if locations else ""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java") or "java"
    return os.path.realpath(java)


def _place() -> str:
    """Where this Spark and Java are: the digest of the ``java`` executable's real path and
    Spark's jar folder."""
    return hashlib.sha1(f"{_java()}\n{_spark_jars()}".encode()).hexdigest()[:12]


def _build() -> str:
    """Which files are there: the digest of the name, size and modification time of every jar
    in Spark's jar folder and of the Java runtime's library (what the JVM compares with the
    archive's record before it maps it).

    >>> import tempfile
    >>> was = os.environ.get("SPARK_HOME")
    >>> home = Path(tempfile.mkdtemp()); (home / "jars").mkdir(); os.environ["SPARK_HOME"] = str(home)
    >>> _ = (home / "jars" / "a.jar").write_bytes(b"x"); before = _build()
    >>> before == _build()
    True
    >>> os.utime(home / "jars" / "a.jar", ns=(0, 0)); before == _build()  # the same jar installed anew
    False
    >>> _ = os.environ.pop("SPARK_HOME") if was is None else os.environ.update(SPARK_HOME=was)
    """
    java = Path(_java())
    files = [java.parent.parent / "lib" / "server" / "libjvm.so", java]
    with contextlib.suppress(OSError):
        files += sorted(Path(_spark_jars()).glob("*.jar"))
    digest = hashlib.sha1()
    for f in files:
        with contextlib.suppress(OSError):
            st = f.stat()
            digest.update(f"{f.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:12]


def archive_path() -> Path:
    """The archive for this Spark install and Java runtime (whether it exists or not)."""
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return cache_root() / "jvm" / f"spark-{version}-{_place()}-{_build()}.jsa"


def java_options(make_missing: bool = True) -> str:
    """The driver JVM's options for the archive: it, if it exists; else nothing, and (with
    ``make_missing``) a maker started in the background for the next start (:func:`start_maker`)."""
    if not enabled():
        return ""
    path = archive_path()
    if path.is_file():
        return f"-XX:SharedArchiveFile={path} {QUIET}"
    if make_missing:
        start_maker(path)
    return ""


def forget(path: Path | None = None) -> None:
    """Remove the archive (a JVM failed to start with it)."""
    with contextlib.suppress(OSError):
        (path or archive_path()).unlink()


def start_maker(path: Path) -> bool:
    """Set off :func:`make` for ``path`` in a detached process of low priority, unless one is at
    work; ``True`` if one was started.  The process is not this one's child (a shell starts it
    in the background and exits), so it neither holds up nor dies with the command that
    started it; and it runs in a session of its own, so it does not die with this process's
    group either (a Jupyter kernel's restart or shutdown terminates the kernel's group)."""
    if _locked(path):
        return False
    try:
        subprocess.run(["/bin/sh", "-c", 'exec "$0" -m mqjoin.runtime.spark.cds "$1" </dev/null >/dev/null 2>&1 &',
                        sys.executable, str(path)], check=True, timeout=30, start_new_session=True)
    except (OSError, subprocess.SubprocessError) as e:
        log.info("could not start making the Spark class archive: %s", e)
        return False
    return True


def _lock(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _locked(path: Path) -> bool:
    """Whether a maker holds ``path``'s lock (a lock older than :data:`STALE_LOCK` does not count)."""
    try:
        return time.time() - _lock(path).stat().st_mtime < STALE_LOCK
    except OSError:
        return False


def make(path: Path) -> bool:
    """Make the archive at ``path`` in this process: start a local Spark session whose JVM
    writes the classes it loaded when it exits, exercise it, stop it, wait for the archive and
    rename it into place.  ``True`` when the archive is there afterwards."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(path)
    if _locked(path):
        return False
    with contextlib.suppress(OSError):
        lock.unlink()  # a stale one
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    for stale in path.parent.glob(f"{path.name}.*.part"):  # of makers that died (only a lock holder writes)
        with contextlib.suppress(OSError):
            stale.unlink()
    _remove_orphans(path.parent)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    try:
        code = _dump(part)
        if code == 0 and part.is_file() and part.stat().st_size > 0:
            os.replace(part, path)
            _remove_superseded(path)
            return True
        log.info("the JVM exited with %s without a whole class archive", code)
        return False
    finally:
        with contextlib.suppress(OSError):
            part.unlink()
        with contextlib.suppress(OSError):
            lock.unlink()


def _remove_orphans(folder: Path) -> None:
    """Remove the partial archives that makers of any key left when they died (their process,
    named in the file, is gone): each is as large as an archive, and only a maker of its own
    key would look for it otherwise.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> for name in (f"spark-a.jsa.{os.getpid()}.part", "spark-b.jsa.999999999.part", "spark-c.jsa"):
    ...     _ = (d / name).write_bytes(b"x")
    >>> _remove_orphans(d); sorted(p.name for p in d.iterdir()) == sorted([f"spark-a.jsa.{os.getpid()}.part",
    ...                                                                    "spark-c.jsa"])
    True
    """
    for part in folder.glob("spark-*.jsa.*.part"):
        try:
            os.kill(int(part.suffixes[-2].lstrip(".")), 0)
        except ValueError:  # not a maker's name
            continue
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                part.unlink()
        except OSError:  # alive, another user's
            continue


def _remove_superseded(path: Path) -> None:
    """Remove the archives that ``path`` replaces: those of the same place (Java and Spark
    folder) for other files there, whichever Spark version, and those named by the place alone
    (made before the name had a build).  A JVM that has one mapped keeps it until it exits.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> for name in ("spark-4.0.0-aaa-old.jsa", "spark-4.0.0-aaa.jsa", "spark-4.1.0-aaa-new.jsa",
    ...              "spark-4.1.0-bbb-new.jsa", "spark-4.1.0-aaa-new.jsa.lock"):
    ...     _ = (d / name).write_bytes(b"x")
    >>> _remove_superseded(d / "spark-4.1.0-aaa-new.jsa"); sorted(p.name for p in d.iterdir())
    ['spark-4.1.0-aaa-new.jsa', 'spark-4.1.0-aaa-new.jsa.lock', 'spark-4.1.0-bbb-new.jsa']
    """
    place = path.stem.split("-")[2]
    for other in path.parent.glob("spark-*.jsa"):
        if other != path and other.stem.split("-")[2:3] == [place]:
            with contextlib.suppress(OSError):
                other.unlink()


def _dump(part: Path) -> int | None:
    """A local Spark session whose JVM dumps its classes to ``part`` when it exits; the classes
    of a batch query, a Python function over Arrow batches and a streaming query with a
    Python ``foreachBatch`` loaded; the JVM's exit code."""
    from pyspark.sql import SparkSession

    from mqjoin.runtime.spark import LOG4J

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # as a session of the product's (session.py)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("mqjoin-class-archive")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.driver.extraJavaOptions",
                     f"-XX:ArchiveClassesAtExit={part} -Xlog:disable -Dlog4j2.configurationFile=file:{LOG4J}")
             .getOrCreate())
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        _exercise(spark)
    except BaseException:
        spark.stop()
        if proc is not None:
            proc.kill()  # killed, it writes nothing: no part left to a later rename
        raise
    spark.stop()
    if proc is None:
        return None
    if proc.stdin is not None:
        proc.stdin.close()  # the JVM exits when its standard input closes
    try:
        return proc.wait(timeout=DUMP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        return None


def _exercise(spark) -> None:
    """Load the classes of a batch query, a Python function over Arrow batches and a streaming
    query with a Python ``foreachBatch``."""
    spark.sparkContext.setLogLevel("OFF")
    spark.range(10_000).selectExpr("id % 7 AS k", "id").groupBy("k").count().toPandas()
    spark.range(1_000).mapInArrow(lambda batches: batches, "id long").count()

    def each(df, _batch: int) -> None:
        df.count()

    query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
             .writeStream.foreachBatch(each).trigger(processingTime="0.5 seconds").start())
    time.sleep(3)
    query.stop()


if __name__ == "__main__":
    with contextlib.suppress(OSError):
        os.nice(10)
    sys.exit(0 if make(Path(sys.argv[1])) else 1)
