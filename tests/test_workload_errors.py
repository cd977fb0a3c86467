"""docs/model.md §1: every invalid workload raises a typed error whose message names the culprit;
valid spellings of the same workload give identical values."""

from __future__ import annotations

import textwrap

import pytest

from mqjoin.model.errors import (
    DisconnectedQueryError,
    MqjoinError,
    SelectivityError,
    SelfJoinError,
    SizeError,
    UnknownAttributeError,
    UnknownRelationError,
    ValueRangeError,
    WorkloadError,
    WorkloadSyntaxError,
)
from mqjoin.model.workload import Attr, Workload, load_workload, parse_workload

RST = {"R": {"attributes": ["a"]}, "S": {"attributes": ["a", "b"]}, "T": {"attributes": ["b"]}}
SEL = {"selectivity": 0.1}


def build(relations=None, queries=None, selectivities=None, defaults=None):
    return Workload.build(RST if relations is None else relations,
                          {"q1": "R(a), S(a,b), T(b)"} if queries is None else queries,
                          selectivities, SEL if defaults is None else defaults)


def raises(exc, *culprits):
    """Context manager: ``exc`` (exactly that class or a subclass) whose message contains
    every culprit string."""

    class _Ctx:
        def __enter__(self):
            self.cm = pytest.raises(exc)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *a):
            handled = self.cm.__exit__(*a)
            if not handled:  # another exception type: let it propagate
                return False
            msg = str(self.info.value)
            for c in culprits:
                assert c in msg, f"message {msg!r} does not name {c!r}"
            assert isinstance(self.info.value, MqjoinError)
            return handled

    return _Ctx()


def test_error_hierarchy():
    for e in (WorkloadSyntaxError, UnknownRelationError, UnknownAttributeError, DisconnectedQueryError,
              SelfJoinError, SelectivityError, ValueRangeError):
        assert issubclass(e, WorkloadError) and issubclass(e, MqjoinError)


# -- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["R(a), X(a)", "R.a = X.a", "X.a = R.a, R.a = S.a"])
def test_undeclared_relation_in_query(text):
    with raises(UnknownRelationError, "q9", "'X'"):
        build(queries={"q9": text})


def test_undeclared_relation_in_selectivity():
    with raises(UnknownRelationError, "X.a = R.a", "'X'"):
        build(selectivities={"X.a = R.a": 0.1})


@pytest.mark.parametrize("text", ["R(a), S(z)", "R(z), S(z)", "R.a = S.z", "S.b = T.b, R.zz = S.a"])
def test_undeclared_attribute_in_query(text):
    culprit = "'zz'" if "zz" in text else "'z'"
    with raises(UnknownAttributeError, "q2", culprit):
        build(queries={"q2": text})


def test_undeclared_attribute_in_selectivity():
    with raises(UnknownAttributeError, "R.b", "'b'"):
        build(selectivities={"R.b = S.b": 0.1})


# -- query shape ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["R(a), S(a), T(b), U(b)", "R.a = S.a, T.b = U.b"])
def test_disconnected_query(text):
    rels = dict(RST, T={"attributes": ["b"]}, U={"attributes": ["b"]})
    with raises(DisconnectedQueryError, "q7", "R", "T", "U"):
        build(relations=rels, queries={"q7": text})


def test_self_join_relation_twice():
    with raises(SelfJoinError, "q1", "relation R appears twice"):
        build(queries={"q1": "R(a), S(a), R(a)"})


@pytest.mark.parametrize("text", ["R.a = S.a, S.a = R.b", "R.a = S.a = R.b", "R.a = R.b, R.a = S.a"])
def test_self_join_two_attributes_of_one_relation_in_a_class(text):
    rels = {"R": {"attributes": ["a", "b"]}, "S": {"attributes": ["a"]}}
    with raises(SelfJoinError, "q3", "R.a", "R.b"):
        build(relations=rels, queries={"q3": text})


def test_self_join_in_selectivity_key():
    with raises(SelfJoinError, "S.a", "S.b"):
        build(selectivities={"S.a = S.b": 0.1})


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_query(text):
    with raises(WorkloadSyntaxError, "q1", "empty"):
        build(queries={"q1": text})


def test_null_query():
    with raises(WorkloadSyntaxError, "q1"):
        parse_workload("relations: {R: {attributes: [a]}, S: {attributes: [a]}}\nqueries: {q1: }\n")


@pytest.mark.parametrize("text", ["R(a)", "R.a = R.a"])
def test_single_relation_query(text):
    with raises(WorkloadSyntaxError, "q1", "R"):
        build(queries={"q1": text})


def test_flow_mapping_query_with_unquoted_comma():
    text = """
    relations: {R: {attributes: [a]}, S: {attributes: [a]}}
    queries: {q1: R(a), S(a)}
    defaults: {selectivity: 0.1}
    """
    with raises(WorkloadSyntaxError, "S(a)", "quote"):
        parse_workload(textwrap.dedent(text))
    # quoted, it is fine
    w = parse_workload(textwrap.dedent(text).replace("q1: R(a), S(a)", 'q1: "R(a), S(a)"'))
    assert w.query("q1").relations == ("R", "S")


def test_unreadable_query_item():
    with raises(WorkloadSyntaxError, "q1", "S a"):
        build(queries={"q1": "R(a), S a"})


# -- selectivities ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, -0.5, 1.0001, 7])
def test_selectivity_out_of_range(value):
    with raises(SelectivityError, "R.a = S.a", "(0, 1]"):
        build(selectivities={"R.a = S.a": value})


@pytest.mark.parametrize("value", [0, -1, 2])
def test_default_selectivity_out_of_range(value):
    with raises(SelectivityError, "defaults.selectivity"):
        build(defaults={"selectivity": value})


def test_selectivity_one_is_allowed():
    w = build(selectivities={"R.a = S.a": 1})
    assert w.query("q1").classes[0].selectivity == 1.0


def test_non_numeric_selectivity():
    with raises(WorkloadError, "R.a = S.a", "'high'"):
        build(selectivities={"R.a = S.a": "high"})


def test_missing_selectivity_without_default():
    with raises(SelectivityError, "q1", "S.b", "T.b"):
        build(selectivities={"R.a = S.a": 0.1}, defaults={})


def test_two_given_values_in_one_class():
    rels = {"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}, "T": {"attributes": ["a"]}}
    with raises(SelectivityError, "q1", "R.a = S.a", "S.a = T.a"):
        build(relations=rels, queries={"q1": "R(a), S(a), T(a)"},
              selectivities={"R.a = S.a": 0.1, "S.a = T.a": 0.2}, defaults={})


def test_same_pair_given_twice_differently():
    with raises(SelectivityError, "R.a = S.a", "S.a = R.a"):
        build(selectivities={"R.a = S.a": 0.1, "S.a = R.a": 0.2})


def test_two_queries_imply_different_values():
    rels = {"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}, "T": {"attributes": ["a"]}}
    # q1's class {R.a=S.a=T.a} takes 0.1 from R.a = S.a; q2's {S.a=T.a} takes the default 0.5
    with raises(SelectivityError, "q1", "q2", "S.a = T.a"):
        build(relations=rels, queries={"q1": "R(a), S(a), T(a)", "q2": "S(a), T(a)"},
              selectivities={"R.a = S.a": 0.1}, defaults={"selectivity": 0.5})


def test_consistent_values_in_one_class_are_fine():
    rels = {"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}, "T": {"attributes": ["a"]}}
    w = build(relations=rels, queries={"q1": "R(a), S(a), T(a)", "q2": "S(a), T(a)"},
              selectivities={"R.a = S.a": 0.1, "S.a = T.a": 0.1}, defaults={})
    assert [c.selectivity for c in w.query("q2").classes] == [0.1]


# -- numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, -0.001, "fast", None, True, float("nan"), float("inf")])
def test_bad_rate(value):
    with raises(ValueRangeError, "relation S", "rate"):
        build(relations=dict(RST, S={"attributes": ["a", "b"], "rate": value}))


@pytest.mark.parametrize("value", [0, -3])
def test_bad_default_rate(value):
    with raises(ValueRangeError, "defaults.rate"):
        build(defaults={"selectivity": 0.1, "rate": value})


@pytest.mark.parametrize("value", [-1, -0.5, "long"])
def test_bad_window(value):
    with raises(ValueRangeError, "relation T", "window"):
        build(relations=dict(RST, T={"attributes": ["b"], "window": value}))


def test_window_zero_and_null_are_fine():
    w = build(relations=dict(RST, T={"attributes": ["b"], "window": 0}, R={"attributes": ["a"], "window": None}))
    assert w.window("T") == 0 and w.window("R") is None


@pytest.mark.parametrize("value", [2.5, 0, -2, "4", True, None])
def test_bad_parallelism(value):
    with raises(ValueRangeError, "relation R", "parallelism"):
        build(relations=dict(RST, R={"attributes": ["a"], "parallelism": value}))


@pytest.mark.parametrize("value", [1.5, 0])
def test_bad_default_parallelism(value):
    with raises(ValueRangeError, "defaults.parallelism"):
        build(defaults={"selectivity": 0.1, "parallelism": value})


# -- keys and syntax --------------------------------------------------------------------------


@pytest.mark.parametrize("yaml_text, culprit", [
    ("relations: {R: {attributes: [a]}, S: {attributes: [a]}}\nquerys: {q1: 'R(a), S(a)'}\n", "'querys'"),
    ("relations: {R: {attributes: [a], rates: 5}, S: {attributes: [a]}}\nqueries: {q1: 'R(a), S(a)'}\n", "'rates'"),
    ("defaults: {paralelism: 2}\nrelations: {R: {attributes: [a]}, S: {attributes: [a]}}\n"
     "queries: {q1: 'R(a), S(a)'}\n", "'paralelism'"),
    ("relations: {R: {attribute: [a]}, S: {attributes: [a]}}\nqueries: {q1: 'R(a), S(a)'}\n", "'attribute'"),
])
def test_unknown_keys(yaml_text, culprit):
    with raises(WorkloadSyntaxError, culprit, "unknown key"):
        parse_workload(yaml_text + "selectivities: {R.a = S.a: 0.1}\n")


@pytest.mark.parametrize("yaml_text", [
    "relations: {R: [a\nqueries: {}\n",
    "relations:\n  R: {attributes: [a]}\n queries: x\n",
    "relations: {R: {attributes: [a]}}\nqueries: {q1: 'R(a), S(a)'\n",
])
def test_yaml_syntax_error(yaml_text):
    with raises(WorkloadSyntaxError, "YAML", "line"):
        parse_workload(yaml_text)


@pytest.mark.parametrize("yaml_text", ["- a\n- b\n", "just text\n", ""])
def test_not_a_mapping(yaml_text):
    with raises(WorkloadSyntaxError, "mapping"):
        parse_workload(yaml_text)


def test_load_workload_names_the_file(tmp_path):
    p = tmp_path / "typo.yaml"
    p.write_text("relations: {R: {attributes: [a]}, S: {attributes: [a]}}\nqueries: {q1: 'R(a), X(a)'}\n")
    with raises(UnknownRelationError, "typo.yaml", "q1", "'X'"):
        load_workload(p)
    with raises(WorkloadError, "does not exist"):
        load_workload(tmp_path / "missing.yaml")


# -- positive cases ---------------------------------------------------------------------------

PAPER = "R(a), S(a,b), T(b)"


@pytest.mark.parametrize("explicit", ["R.a = S.a, S.b = T.b", "R.a = S.a AND S.b = T.b",
                                      "S.b = T.b and S.a = R.a", "T.b=S.b,R.a=S.a"])
def test_paper_notation_and_explicit_equalities_agree(explicit):
    w = build(queries={"p": PAPER, "e": explicit}, selectivities={"R.a = S.a": 0.01, "S.b = T.b": 0.02},
              defaults={})
    p, e = w.query("p"), w.query("e")
    assert p.classes == e.classes
    assert [str(c) for c in p.classes] == ["{R.a=S.a}", "{S.b=T.b}"]
    assert [c.selectivity for c in p.classes] == [0.01, 0.02]
    assert p.relation_set == e.relation_set == {"R", "S", "T"}


@pytest.mark.parametrize("text", ["R.a = S.a, S.a = T.a", "S.a = T.a AND R.a = S.a", "R.a = S.a = T.a",
                                  "R(a), S(a), T(a)"])
def test_union_find_merges_chains(text):
    rels = {"R": {"attributes": ["a"]}, "S": {"attributes": ["a"]}, "T": {"attributes": ["a"]}}
    w = build(relations=rels, queries={"q": text})
    (cls,) = w.query("q").classes
    assert cls.members == (Attr("R", "a"), Attr("S", "a"), Attr("T", "a"))


def test_union_find_across_attribute_names():
    rels = {"R": {"attributes": ["x"]}, "S": {"attributes": ["y", "z"]}, "T": {"attributes": ["w"]},
            "U": {"attributes": ["v"]}}
    w = build(relations=rels, queries={"q": "R.x = S.y, T.w = U.v, U.v = S.y"})
    (cls,) = w.query("q").classes
    assert [str(a) for a in cls.members] == ["R.x", "S.y", "T.w", "U.v"]


SPEC_YAML = """
defaults: {rate: 3, window: 2.5, parallelism: 2, selectivity: 0.2, horizon: 4}
relations:
  R: {attributes: [a], rate: 100, window: 5, parallelism: 4}
  S: {attributes: [a, b], rate: 100}
  T: {attributes: [b, c], window: null}
  U: {attributes: [c]}
queries:
  q1: R(a), S(a,b), T(b)
  q2: R.a = S.a AND S.b = T.b
  q3: T.c = U.c, S.b = T.b
selectivities:
  R.a = S.a: 0.01
  S.b = T.b: 0.015
"""


def test_to_spec_round_trips():
    w = parse_workload(SPEC_YAML)
    again = Workload.build(**w.to_spec())
    assert again == w
    assert parse_workload(w.to_yaml()) == w
    assert again.to_spec() == w.to_spec()
    # the values survive, not just equality of two empty things
    assert w.rate("T") == 3 and w.window("R") == 5 and w.window("T") is None and w.window("U") == 2.5
    assert w.parallelism("S") == 2 and w.defaults.horizon == 4
    assert [c.selectivity for c in w.query("q3").classes] == [0.015, 0.2]


def test_edits_return_new_validated_workloads():
    w = parse_workload(SPEC_YAML)
    spec_before = w.to_spec()

    w2 = w.with_relation("R", rate=7, parallelism=3)
    assert (w2.rate("R"), w2.parallelism("R")) == (7, 3)
    assert (w.rate("R"), w.parallelism("R")) == (100, 4)

    w3 = w.with_selectivity("S.b = T.b", 0.5)
    assert w3.query("q1").classes[1].selectivity == 0.5
    assert w3.query("q3").classes[0].selectivity == 0.5  # the class of every query that has the pair
    assert w.query("q1").classes[1].selectivity == 0.015

    w4 = w.with_query("q4", "R(a), S(a)")
    assert w4.query_names == ("q1", "q2", "q3", "q4")
    assert w.query_names == ("q1", "q2", "q3")
    w5 = w.without_query("q2")
    assert w5.query_names == ("q1", "q3")

    with raises(ValueRangeError, "relation R", "rate"):
        w.with_relation("R", rate=-1)
    with raises(WorkloadSyntaxError, "'rates'"):
        w.with_relation("R", rates=1)
    with raises(UnknownRelationError, "'X'"):
        w.with_relation("X", rate=1)
    with raises(SelectivityError, "S.b = T.b"):
        w.with_selectivity("S.b = T.b", 1.5)
    with raises(UnknownRelationError, "q4", "'X'"):
        w.with_query("q4", "R(a), X(a)")
    with raises(DisconnectedQueryError, "q4"):
        w.with_query("q4", "R.a = S.a, T.c = U.c")
    with raises(WorkloadError, "q9"):
        w.without_query("q9")
    with raises(WorkloadError, "q9"):
        w.restricted_to(["q9"])
    assert w.to_spec() == spec_before  # nothing above mutated w


# -- measured sizes (docs/model.md §2) --------------------------------------------------------

SIZES_BASE = """
relations: {R: {attributes: [a, x], rate: 10}, S: {attributes: [a, b], rate: 10}, T: {attributes: [a, b], rate: 10}}
queries: {q1: "R(a), S(a,b), T(b)", q2: {join: "R(a), S(a)", where: "R.x < 3"}, q3: "R(a), S(b), T(a, b)"}
filters: {q2.R: 0.5}
selectivities: {R.a = S.a: 0.1, S.b = T.b: 0.1, R.a = T.a: 0.1}
"""


@pytest.mark.parametrize("sizes, exc, culprits", [
    ('{"R ⋈ U": 4}', UnknownRelationError, ("'R ⋈ U'", "'U'")),
    ('{"R ⋈ S": -4}', ValueRangeError, ("'R ⋈ S'", "-4")),
    ('{"R ⋈ S": 0}', ValueRangeError, ("'R ⋈ S'", "positive")),
    ('{"R ⋈ S": .inf}', ValueRangeError, ("'R ⋈ S'",)),
    ('{"R ⋈ S": yes}', ValueRangeError, ("'R ⋈ S'", "number")),
    ('{"R - S": 4}', WorkloadSyntaxError, ("'R - S'", "⋈")),
    ('{"R ⋈ ": 4}', WorkloadSyntaxError, ("'R ⋈ '",)),
    ('{"R ⋈ R": 4}', WorkloadSyntaxError, ("'R ⋈ R'", "twice")),
    ('{R: 4}', WorkloadSyntaxError, ("'R'", "one relation", "rate")),
    ('{q1: 4}', WorkloadSyntaxError, ("'q1'", "q1: {R ⋈ S")),
    ('{"R ⋈ S": {"R ⋈ S": 4}}', WorkloadSyntaxError, ("'R ⋈ S'", "unknown key", "{size:")),
    ('{"R S": {"R ⋈ S": 4}}', WorkloadSyntaxError, ("'R S'", "query name")),
    # the order of arrival: {size: …, last: {relation: share}}
    ('{"R ⋈ S": {last: {R: 0.5, S: 0.5}}}', WorkloadSyntaxError, ("'R ⋈ S'", "no size")),
    ('{"R ⋈ S": {size: 4, last: 0.5}}', WorkloadSyntaxError, ("'R ⋈ S'", "last must map")),
    ('{"R ⋈ S": {size: 4, last: {R: 0.5, U: 0.5}}}', UnknownRelationError, ("'R ⋈ S'", "'U'", "not declared")),
    ('{"R ⋈ S": {size: 4, last: {R: 0.5, S: 0.2, T: 0.3}}}', SizeError, ("'R ⋈ S'", "T is not a relation of the set")),
    ('{"R ⋈ S": {size: 4, last: {R: 1}}}', SizeError, ("'R ⋈ S'", "no share for S")),
    ('{"R ⋈ S": {size: 4, last: {R: -0.5, S: 1.5}}}', ValueRangeError, ("'R ⋈ S'", "share of R", "[0, 1]")),
    ('{"R ⋈ S": {size: 4, last: {R: 0.5, S: 0.6}}}', ValueRangeError, ("'R ⋈ S'", "sum to 1.1")),
    ('{"R ⋈ S": {size: 4, last: {R: x, S: 1}}}', ValueRangeError, ("'R ⋈ S'", "share of R")),
    ('{q2: {"R ⋈ S": {size: -4, last: {R: 0.5, S: 0.5}}}}', ValueRangeError, ("q2: 'R ⋈ S'", "positive")),
    ('[4]', WorkloadSyntaxError, ("sizes", "mapping")),
    ('{q9: {"R ⋈ S": 4}}', SizeError, ("q9", "does not exist")),
    ('{q2: {"S ⋈ T": 4}}', SizeError, ("q2", "does not join T")),
    ('{"R ⋈ S": 4, "S, R": 5}', SizeError, ("R ⋈ S = 4", "R ⋈ S = 5")),
    # q3 joins R and S only through T, q1 directly: the set has one size only per query
    ('{"R ⋈ S ⋈ T": 4}', SizeError, ("q1, q3", "per query")),
])
def test_size_errors(sizes, exc, culprits):
    with raises(exc, *culprits):
        parse_workload(SIZES_BASE + f"sizes: {sizes}\n")


def test_size_of_a_set_no_query_joins_connected():
    w = """
relations: {R: {attributes: [a]}, S: {attributes: [a, b]}, T: {attributes: [b]}, U: {attributes: [a]}}
queries: {q1: "R(a), S(a,b), T(b)", q2: "R(a), U(a)"}
defaults: {selectivity: 0.1}
"""
    with raises(DisconnectedQueryError, "'R ⋈ T'", "{R} and {T}"):
        parse_workload(w + 'sizes: {"R ⋈ T": 4}')
    with raises(SizeError, "'S ⋈ U'", "no query joins"):
        parse_workload(w + 'sizes: {"S ⋈ U": 4}')
    with raises(DisconnectedQueryError, "q1", "'R ⋈ T'"):
        parse_workload(w + 'sizes: {q1: {"R ⋈ T": 4}}')


def test_sizes_round_trip_and_spellings():
    w = parse_workload(SIZES_BASE + 'sizes: {"S ⋈ R": 40, q2: {"R, S": 7}, q3: {"R ⋈ S ⋈ T": 2.5}}\n')
    assert [str(m) for m in w.sizes] == ["R ⋈ S = 40", "q2: R ⋈ S = 7", "q3: R ⋈ S ⋈ T = 2.5"]
    assert Workload.from_spec(w.to_spec()) == w and parse_workload(w.to_yaml()) == w
    assert w.to_spec()["sizes"] == {"R ⋈ S": 40.0, "q2": {"R ⋈ S": 7.0}, "q3": {"R ⋈ S ⋈ T": 2.5}}
    assert w != parse_workload(SIZES_BASE)
    split = parse_workload(SIZES_BASE + 'sizes: {q2: {"S, R": {size: 7, last: {S: 0.6, R: 0.4}}}}\n')
    assert [str(m) for m in split.sizes] == ["q2: R ⋈ S = 7 (last: R 0.4, S 0.6)"]
    assert Workload.from_spec(split.to_spec()) == split and parse_workload(split.to_yaml()) == split
