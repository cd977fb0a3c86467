"""A foreign-key stream where the independence estimate of join sizes is wrong, for the tests
of predicted beside measured (test_measured, test_widgets_measured, test_adaptive)."""

from __future__ import annotations

from mqjoin.model.workload import parse_workload


def foreign_keys(seed=0):
    """L references P by its (pk, sk) key and O by ok, arrivals uniform over one time unit:
    independence puts |P ⋈ L| at a tenth of its size."""
    import random

    from mqjoin.model.tables import Table

    rng = random.Random(seed)
    w = parse_workload("""
defaults: {window: null, parallelism: 4}
relations: {P: {attributes: [pk, sk], rate: 200}, L: {attributes: [pk, sk, ok], rate: 2000},
            O: {attributes: [ok], rate: 500}}
queries: {q: "P(pk, sk), L(pk, sk, ok), O(ok)", p: "P(sk), L(sk)"}
selectivities: {P.pk = L.pk: 0.005, P.sk = L.sk: 0.1, L.ok = O.ok: 0.002}
""")
    parts = [(i, i % 10) for i in range(200)]
    picks = [rng.choice(parts) for _ in range(2000)]

    def table(name, cols):
        n = len(next(iter(cols.values())))
        return Table.from_columns(name, {"ts": sorted(rng.random() for _ in range(n)), **cols})

    tables = {"P": table("P", {"pk": [p for p, _ in parts], "sk": [s for _, s in parts]}),
              "L": table("L", {"pk": [p for p, _ in picks], "sk": [s for _, s in picks],
                               "ok": [rng.randrange(500) for _ in range(2000)]}),
              "O": table("O", {"ok": list(range(500))})}
    return w, tables
