"""A Jupyter server extension: a page closed while the kernel still talks to it is not an error.

The explorer's widgets keep sending updates from the kernel (a Deploy's charts several times a
second).  When the page that shows them is reloaded or closed, the server may be half-way through
writing one of those messages to the page's websocket.  Tornado hands each such write back as an
``asyncio`` task that nobody awaits; when the socket closes under it the task ends with
``WebSocketClosedError``, and ``asyncio`` reports every such task, at garbage collection, as
"Task exception was never retrieved" with two tracebacks in the server's terminal.  The
message was for a page that no longer exists, so nothing is lost: the server already buffers what
the kernel sends until a page reconnects.

This extension installs an exception handler on the server's event loop that notes those writes
at debug level and passes every other unhandled exception on to the handler that was there
before (``asyncio``'s default, which logs it).  Installing ``mqjoin`` enables it in the
environment's ``etc/jupyter/jupyter_server_config.d/mqjoin.json``; ``jupyter server extension
list`` shows it as ``mqjoin.support.jupyter_server``.

>>> import asyncio, logging
>>> from tornado.websocket import WebSocketClosedError
>>> loop, seen = asyncio.new_event_loop(), []
>>> loop.set_exception_handler(lambda loop, context: seen.append(context["message"]))
>>> install(loop, logging.getLogger("quiet"))
>>> loop.call_exception_handler({"message": "Task exception was never retrieved",
...                              "exception": WebSocketClosedError()})
>>> loop.call_exception_handler({"message": "something else", "exception": KeyError("x")})
>>> seen
['something else']
>>> loop.close()
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "mqjoin.support.jupyter_server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    install(serverapp.io_loop.asyncio_loop, serverapp.log)


def install(loop: asyncio.AbstractEventLoop, log: logging.Logger) -> None:
    """Note writes to closed websockets on ``loop`` at debug level; hand anything else on."""
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if closed_page_write(context):
            log.debug("mqjoin: a kernel message to a page that had closed was dropped (%s)",
                      context.get("message"))
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def closed_page_write(context: dict[str, Any]) -> bool:
    """Whether an unhandled-exception ``context`` is a websocket write that found the page gone."""
    from tornado.websocket import WebSocketClosedError

    return isinstance(context.get("exception"), WebSocketClosedError)
