"""Schedules: the plan of every epoch, as the executor asks for it.

The in-process :class:`~mqjoin.runtime.executor.Executor` runs whatever a *schedule* says: which
epoch a timestamp falls in, when an epoch starts, the plan of an epoch, the relations it keeps
and the attribute pairs it samples.  The adaptive controller
(:class:`mqjoin.adaptive.controller.AdaptiveController`) is the schedule that re-optimises;
:class:`StaticSchedule` is the one for a fixed plan: one epoch (0), no switch, no sampling.

>>> from mqjoin.model.workload import parse_workload
>>> from mqjoin.planning.optimizer import optimize
>>> w = parse_workload('''
... defaults: {selectivity: 0.5, window: 1, parallelism: 2}
... relations: {R: {attributes: [a]}, S: {attributes: [a]}}
... queries: {q: "R(a), S(a)"}
... ''')
>>> s = StaticSchedule(optimize(w).plan)
>>> s.epoch_of(12.5), s.plan_of[7], sorted(s.retained(0)), s.queries(0)
(0, 0, ['R', 'S'], ('q',))
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mqjoin.planning.plan import Plan


class StaticSchedule:
    """One plan for the whole run: one epoch (0), no switch, no sampling — the adaptive
    executor with nothing to adapt.  Has the interface of
    :class:`~mqjoin.adaptive.controller.AdaptiveController` that the executor uses."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.full = plan.workload
        self.plans = [plan]
        self.plan_of: Mapping[int, int] = _Always(0)
        self.decisions: list = []
        self.lives: tuple = ()

    @staticmethod
    def epoch_of(ts: float) -> int:
        return 0

    @staticmethod
    def start(epoch: int) -> float:
        return -math.inf

    def enter(self, epoch: int, samples: Mapping | None = None) -> Plan:
        return self.plan

    def retained(self, epoch: int) -> frozenset[str]:
        return frozenset(s.mir.relations[0] for s in self.plan.stores if s.mir.is_base)

    def tracked(self, epoch: int) -> tuple:
        return ()

    def queries(self, epoch: int) -> tuple[str, ...]:
        return self.plan.workload.query_names


class _Always(dict):
    def __init__(self, value: int):
        super().__init__()
        self.value = value

    def __missing__(self, key: Any) -> int:
        return self.value

