"""Jupyter kernels started by the tests talk over Unix sockets, not TCP ports.

jupyter_client picks a kernel's five TCP ports by binding port 0 and releasing it; under a
parallel suite (Spark UIs, other servers and kernels starting at the same moment) another process
can take one of them before the kernel binds it, and the kernel then fails to start or loses its
heartbeat with ``Address already in use``.  With ``transport="ipc"`` there is no port to lose:
each channel is a socket file in the kernel's runtime directory.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def ipc_runtime_dir(link: Path) -> Iterator[Path]:
    """A new, empty Jupyter runtime directory with a short path, also reachable as ``link``;
    removed when the block ends.  A socket's path must stay under the 107 bytes Linux allows
    (``runtime/kernel-<uuid>-ipc-1`` is 50 bytes of it; a test's ``tmp_path`` alone can be
    longer than the rest), so the directory lives directly in the system's temporary folder.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with ipc_runtime_dir(Path(tmp) / "runtime") as runtime:
    ...         (Path(tmp) / "runtime").resolve() == runtime.resolve(), len(str(runtime)) < 40
    ...     runtime.exists()
    (True, True)
    False
    """
    short = Path(tempfile.mkdtemp(prefix="mqjr"))
    try:
        link.symlink_to(short, target_is_directory=True)
        yield short
    finally:
        shutil.rmtree(short, ignore_errors=True)


def kernel_manager(cls, runtime: Path, **kwargs):
    """A ``cls`` (a jupyter_client kernel manager class) whose kernel listens on Unix sockets in
    ``runtime`` (see :func:`ipc_runtime_dir`)."""
    return cls(transport="ipc", connection_file=str(runtime / "kernel.json"), **kwargs)
