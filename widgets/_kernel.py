"""Widget updates that no request caused: sent so that they bind a widget to no page.

A Jupyter kernel with *subshells* (ipykernel 7) remembers, per widget, the subshell of the
request that was current when the widget last sent an update, and routes every later message
from the page to that widget (a click, a slider's new value) through that subshell.  An update
sent from a thread the kernel did not start has no request of its own: the kernel falls back
on the request it handled last, whichever page sent it.  When that page has been reloaded or
closed its subshell is gone, and every later click on the widget is routed to a subshell that
no longer exists and dropped — a Deploy button that a run's end re-enabled from a background
thread would stay dead until the cell is run again.

:func:`unbound` sends the updates of a block with no parent request, so the kernel keeps
routing the widget's messages the way the page's own last request set it; :func:`spawn` runs a
thread's whole body that way, and :class:`~mqjoin.widgets.live.Redraw` draws that way.  Outside
a kernel (scripts, tests) both change nothing.

>>> seen = []
>>> t = spawn(lambda: seen.append(current_parent()), "mqjoin-example")
>>> t.join(); seen
[{}]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


def _parent_var() -> ContextVar | None:
    """The kernel's variable holding the request being handled (None outside a kernel, or
    a kernel that keeps it otherwise)."""
    try:
        from ipykernel.kernelbase import Kernel
    except ImportError:  # no kernel package: nothing routes widget messages by request
        return None
    if not Kernel.initialized():
        return None
    var = getattr(Kernel.instance(), "_shell_parent", None)
    return var if isinstance(var, ContextVar) else None


def current_parent() -> dict:
    """The request the widget updates sent here would name as their parent ({} for none,
    and outside a kernel)."""
    var = _parent_var()
    if var is None:
        return {}
    from ipykernel.kernelbase import Kernel

    return Kernel.instance().get_parent()


@contextmanager
def unbound() -> Iterator[None]:
    """Within the block, widget updates name no parent request (see the module doc); the
    request current before is current again after it."""
    var = _parent_var()
    if var is None:
        yield
        return
    token = var.set({})
    try:
        yield
    finally:
        var.reset(token)


def spawn(target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
    """Start a daemon thread running ``target(*args)`` with its widget updates
    :func:`unbound`; returns the thread."""

    def run() -> None:
        with unbound():
            target(*args)

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t
