"""A Jupyter kernel with subshells in the test process, for the tests of how widget messages
are routed after a page is reloaded (see ``mqjoin.widgets._kernel``).

* ``kernel``: an ipykernel kernel whose IOPub messages go nowhere and whose widgets get the
  kernel's comms, as in a notebook (subshells and their routing included).
* :func:`request_from`: what the kernel does on a message of a page: the message becomes the
  request being handled, on a thread of its own as a subshell handles it.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def kernel(monkeypatch):
    kernelbase = pytest.importorskip("ipykernel.kernelbase")
    ipycomm = pytest.importorskip("ipykernel.comm.comm")
    import comm
    from jupyter_client.session import Session

    class Nowhere:
        def send_multipart(self, parts, copy=True, **kw):
            pass

    k = kernelbase.Kernel.instance()
    k.session, k.iopub_socket = Session(), Nowhere()
    monkeypatch.setattr(comm, "create_comm", lambda *a, **kw: ipycomm.Comm(*a, show_warning=False, **kw))
    try:
        yield k
    finally:
        kernelbase.Kernel.clear_instance()


def request_from(k, subshell: str | None, handle: Callable[[], Any] | None = None) -> None:
    """A message of the page that uses ``subshell`` handled by ``k``: it becomes the request
    being handled, and ``handle()`` (what the message does, if anything) runs under it."""

    def run() -> None:
        k.set_parent(b"", {"header": {"msg_id": f"m-{subshell}", "subshell_id": subshell, "msg_type": "comm_msg"}})
        if handle is not None:
            handle()

    t = threading.Thread(target=run)
    t.start()
    t.join()
