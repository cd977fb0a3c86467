"""The planners CLASH is compared with, each of them producing ordinary plans: MJoin and
binary join trees (:mod:`.trees`), AJoin (:mod:`.ajoin`), PMJoin (:mod:`.pmjoin`) and
JAQPOT's binary plans under a CPU limit (:mod:`.jaqpot`).  :mod:`.registry` names them and
says which options fit each (a :class:`~mqjoin.planners.registry.Planner` per planner);
:mod:`.dispatch` runs ``optimize(..., planner=...)`` on the planner that builds the plan.
"""
