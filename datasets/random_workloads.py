"""Seeded random workloads for the paper's ILP experiments (Section VII-C, Figure 9).

All relations have the same rate ``λ`` and every equivalence class the selectivity ``1/λ``.
A query is drawn as the paper describes: pick a random relation, then add random joins until
the query has the wanted size — each join equates a random attribute of a random relation
already in the query with a random attribute of a random relation not yet in it.  Exact
duplicate queries are drawn again.

>>> w = random_workload(5, n_relations=10, query_size=3, seed=1)
>>> len(w.queries), {len(q.relations) for q in w.queries}
(5, {3})
>>> w.relations[0].name, w.relations[0].attributes, w.relations[0].rate
('R0', ('a', 'b', 'c'), 1000.0)
>>> random_workload(5, 10, 3, seed=1) == w
True
"""

from __future__ import annotations

import math
import random
import string

from mqjoin.model.errors import GeneratorError
from mqjoin.model.workload import Workload

__all__ = ["random_workload", "attribute_names", "relation_names"]


def attribute_names(n: int) -> list[str]:
    """``n`` attribute names ``a, b, …, z, aa, ab, …`` (``ts`` is skipped: it is reserved).

    >>> attribute_names(3), attribute_names(28)[-3:]
    (['a', 'b', 'c'], ['z', 'aa', 'ab'])
    """
    out: list[str] = []
    k = 0
    while len(out) < n:
        name, i = "", k
        while True:
            name = string.ascii_lowercase[i % 26] + name
            i = i // 26 - 1
            if i < 0:
                break
        if name != "ts":
            out.append(name)
        k += 1
    return out


def relation_names(n: int) -> list[str]:
    """``R0 … R{n-1}``, zero-padded so that they sort naturally.

    >>> relation_names(3), relation_names(100)[:2], relation_names(100)[-1]
    (['R0', 'R1', 'R2'], ['R00', 'R01'], 'R99')
    """
    width = len(str(n - 1))
    return [f"R{i:0{width}d}" for i in range(n)]


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise GeneratorError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise GeneratorError(f"{name} must be at least {minimum}, got {value}")
    return value


def _max_distinct(n_relations: int, query_size: int, attributes: int) -> int:
    """An upper bound on the number of distinct queries: relation subsets × labelled spanning
    trees (Cayley) × attribute choices per edge."""
    k = query_size
    return math.comb(n_relations, k) * k ** (k - 2) * attributes ** (2 * (k - 1))


def random_workload(n_queries: int, n_relations: int, query_size: int, attributes: int = 3,
                    rate: float = 1000.0, parallelism: int = 4, seed: int = 0) -> Workload:
    """A random workload like those of Figure 9 of the CLASH paper.

    ``n_relations`` relations ``R0…`` (names zero-padded) with ``attributes`` attributes
    ``a, b, c, …`` each, rate ``rate`` and parallelism ``parallelism`` (also
    ``defaults.parallelism``, used by MIR stores); ``defaults.selectivity = 1 / rate``.
    ``n_queries`` distinct queries ``q1…`` of ``query_size`` relations each, written as
    explicit equalities (``"R3.a = R7.c, R7.b = R1.a"``).  Two queries are duplicates when
    they have the same equivalence classes (in particular the same set of equalities); a
    duplicate is drawn again.  Deterministic for a given ``seed``; the first ``n`` queries
    of a workload do not depend on ``n_queries``.

    >>> w = random_workload(3, n_relations=4, query_size=2, attributes=1, seed=7)
    >>> [q.text for q in w.queries]
    ['R2.a = R3.a', 'R0.a = R3.a', 'R1.a = R2.a']
    >>> random_workload(7, n_relations=4, query_size=2, attributes=1)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    mqjoin.model.errors.GeneratorError: cannot draw 7 distinct queries: at most 6 exist with n_relations=4,
    query_size=2, attributes=1
    """
    n_queries = _check_int(n_queries, "n_queries", 1)
    n_relations = _check_int(n_relations, "n_relations", 2)
    query_size = _check_int(query_size, "query_size", 2)
    attributes = _check_int(attributes, "attributes", 1)
    parallelism = _check_int(parallelism, "parallelism", 1)
    if query_size > n_relations:
        raise GeneratorError(f"query_size ({query_size}) must not exceed n_relations ({n_relations})")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate < 1:
        raise GeneratorError(f"rate must be a finite number >= 1 (the selectivity is 1/rate), got {rate!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise GeneratorError(f"seed must be an integer, got {seed!r}")
    bound = _max_distinct(n_relations, query_size, attributes)
    if n_queries > bound:
        raise GeneratorError(f"cannot draw {n_queries} distinct queries: at most {bound} exist with "
                         f"n_relations={n_relations}, query_size={query_size}, attributes={attributes}")

    rng = random.Random(seed)
    rels = relation_names(n_relations)
    attrs = attribute_names(attributes)
    max_failures = 10_000 + 100 * n_queries  # consecutive duplicate draws before giving up

    seen: set[frozenset[frozenset[tuple[str, str]]]] = set()
    queries: dict[str, str] = {}
    width = len(str(n_queries))
    failures = 0
    while len(queries) < n_queries:
        text, key = _draw_query(rng, rels, attrs, query_size)
        if key in seen:
            failures += 1
            if failures > max_failures:
                raise GeneratorError(
                    f"cannot draw {n_queries} distinct queries with n_relations={n_relations}, "
                    f"query_size={query_size}, attributes={attributes}: only {len(queries)} distinct "
                    f"ones found before {max_failures} duplicate draws in a row (seed={seed})")
            continue
        failures = 0
        seen.add(key)
        queries[f"q{len(queries) + 1:0{width}d}"] = text

    relations = {r: {"attributes": list(attrs), "rate": float(rate), "parallelism": parallelism} for r in rels}
    defaults = {"rate": float(rate), "parallelism": parallelism, "selectivity": 1.0 / rate}
    return Workload.build(relations, queries, {}, defaults)


def _draw_query(rng: random.Random, rels: list[str], attrs: list[str],
                size: int) -> tuple[str, frozenset[frozenset[tuple[str, str]]]]:
    """One query as text and its canonical key (its equivalence classes)."""
    inside = [rng.choice(rels)]
    equalities = []
    class_of: dict[tuple[str, str], int] = {}  # attribute → class id
    classes: list[set[tuple[str, str]]] = []
    while len(inside) < size:
        left = rng.choice(inside)
        left_attr = rng.choice(attrs)
        right = rng.choice([r for r in rels if r not in inside])
        right_attr = rng.choice(attrs)
        equalities.append(f"{left}.{left_attr} = {right}.{right_attr}")
        inside.append(right)
        # `right` is new to the query, so (right, right_attr) is a fresh attribute: it joins left's class
        cid = class_of.get((left, left_attr))
        if cid is None:
            cid = class_of[(left, left_attr)] = len(classes)
            classes.append({(left, left_attr)})
        class_of[(right, right_attr)] = cid
        classes[cid].add((right, right_attr))
    return ", ".join(equalities), frozenset(frozenset(c) for c in classes)
