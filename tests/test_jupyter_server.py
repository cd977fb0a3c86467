"""The Jupyter server extension: a page closed mid-message leaves no traceback in the server's
output, every other unhandled error still does, and the test environment enables it."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import subprocess
import sys

import pytest

pytest.importorskip("jupyterlab")
from tornado.websocket import WebSocketClosedError

from mqjoin.support.jupyter_server import install


def _unretrieved(loop: asyncio.AbstractEventLoop, exc: BaseException) -> None:
    """A task that fails with ``exc`` and is dropped without anyone reading its result, as
    tornado's websocket writes are."""
    async def write() -> None:
        raise exc

    task = loop.create_task(write())
    loop.run_until_complete(asyncio.sleep(0))
    assert task.done()
    del task
    gc.collect()


@pytest.mark.parametrize("installed", [False, True])
def test_a_write_to_a_closed_page_is_not_an_error_in_the_servers_output(caplog, installed):
    loop = asyncio.new_event_loop()
    try:
        if installed:
            install(loop, logging.getLogger("mqjoin.test.server"))
        with caplog.at_level(logging.DEBUG):
            _unretrieved(loop, WebSocketClosedError())
            _unretrieved(loop, ValueError("a real defect"))
    finally:
        loop.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    # the real defect is reported either way; the closed page only without the extension
    assert [type(r.exc_info[1]) for r in errors if r.exc_info] == (
        [ValueError] if installed else [WebSocketClosedError, ValueError])
    assert all(r.getMessage().startswith("Task exception was never retrieved") for r in errors)
    if installed:
        assert any("page that had closed" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)

def test_the_environment_enables_the_extension():
    out = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"],
                         capture_output=True, text=True, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert re.search(r"mqjoin\.support\.jupyter_server\s+enabled", text), (
        "the Jupyter server in this environment does not load mqjoin.support.jupyter_server "
        "(.ci/setup installs its configuration):\n" + text)
    assert re.search(r"mqjoin\.support\.jupyter_server\s+OK", text), text
