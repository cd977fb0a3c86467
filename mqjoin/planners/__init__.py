"""The planners: CLASH's ILP (:mod:`mqjoin.planning.clash`) and the planners it is compared
with, each of them producing ordinary plans: MJoin and binary join trees (:mod:`.trees`),
AJoin (:mod:`.ajoin`), PMJoin (:mod:`.pmjoin`) and JAQPOT's binary plans under a CPU limit
(:mod:`.jaqpot`).  Every planner is a :class:`~mqjoin.planners.contract.Planner` (workload and
options → result); :mod:`.registry` names them, holds each one's plan function and says which
options fit it, so ``optimize(..., planner=...)`` runs whichever is named.
"""
