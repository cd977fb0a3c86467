"""The model: what a user writes down — relations, queries, equivalence classes, filters,
statistics — as immutable values, plus the typed errors and the input/output tables of a run.

Everything downstream (planning, planners, adaptivity, engines, views) takes these values;
nothing here imports from any other stage.
"""
