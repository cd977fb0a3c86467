"""Planning with CLASH: candidates (MIRs, probe orders, steps) → costs → the integer linear
program → a plan of probe trees; plus what is built on the optimiser (anytime solving, the
probe-cost/memory frontier, comparisons, plan diffs, guarded runs).

The flow, one module per stage::

    cost        join sizes, step costs, store memory
    candidates  MIRs, probe orders, steps, partition candidates
    ilp         the optimisation problem, built and solved
    optimizer   modes and policies: candidates → ILP → choices → plan
    plan        chosen probe orders merged into probe trees, stores and rules
"""
