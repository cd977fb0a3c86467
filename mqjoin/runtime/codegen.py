"""Generated Python source for the per-tuple path of the in-process executor.

Every edge of a plan becomes a specialised function built from source text: index positions,
windows and routes become constants, as ``collections.namedtuple`` builds its classes, so the
per-tuple path has no branching on the plan.  The store containers
(:mod:`mqjoin.runtime.containers`) compile their inserts this way and the probe compiler
(:mod:`mqjoin.runtime.probes`) its probes; this module holds the few pieces both write with.

An access pattern (``spec``) is a tuple of ``(component, field)`` positions of an entry; the
key it reads is a scalar for one attribute, else a tuple:

>>> key_expr("t", ((0, 2),)), key_expr("t", ((0, 2), (1, 3)))
('t[0][2]', '(t[0][2], t[1][3],)')
>>> null_test("t", ((0, 2), (1, 3)))
't[0][2] is None or t[1][3] is None'
>>> twice = compile_function("def twice(x):\\n    return k * x\\n", "twice", {"k": 2})
>>> twice(21)
42
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def key_expr(var: str, spec: tuple[tuple[int, int], ...]) -> str:
    """Source of the hash key read from ``var`` (a scalar for one attribute, else a tuple)."""
    if len(spec) == 1:
        (c, f), = spec
        return f"{var}[{c}][{f}]"
    return "(" + ", ".join(f"{var}[{c}][{f}]" for c, f in spec) + ",)"


def null_test(var: str, spec: tuple[tuple[int, int], ...]) -> str:
    """Source of the test that some attribute of the key read from ``var`` is missing."""
    return " or ".join(f"{var}[{c}][{f}] is None" for c, f in spec) or "False"


def compile_function(src: str, name: str, env: dict[str, Any]) -> Callable:
    """Build a specialised function from generated source: index positions and windows become
    constants, so the per-tuple path has no branching on the plan."""
    ns = dict(env)
    exec(compile(src, f"<mqjoin.executor {name}>", "exec"), ns)
    return ns[name]


def gated(probe: Callable, admit: Callable[[float], bool], clock: list[float]) -> Callable:
    """``probe`` behind a CPU budget: it runs only when ``admit(T)`` lets it."""

    def gated_probe(t: tuple) -> None:
        if admit(clock[0]):
            probe(t)
    return gated_probe
