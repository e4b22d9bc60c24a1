"""A case's definition, field by field (glassllm/course/versions.py): what feeds the
numbers or the expected answers is in it and named when it changes; the text, hints,
points and feedback are not; a version is part of the key, not of the fields."""

from __future__ import annotations

import pytest

from glassllm.course import build_case, load
from glassllm.course.exercise import SHIPPED
from glassllm.course.versions import changed, definition, of_exercise
from glassllm.course.zoo import mystery

BASE = '''
id = "ce-versions"
title = "Cross-entropy"
text = "Work it out by hand."
points = 4
hints = ["Softmax first."]
[case]
expression = "cross_entropy(logits, targets) * scale"
[case.variables.logits]
shape = [3, 4]
distribution = "normal"
std = 1.0
decimals = 1
[case.variables.targets]
shape = [3]
distribution = "integers"
high = 4
[case.variables.scale]
value = [2.0]
[answer]
kind = "grads"
grads = ["logits"]
grad_output = { distribution = "uniform", low = 0.5, high = 1.5 }
'''


def _load(tmp_path, text, name="ex.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load(path)


@pytest.mark.parametrize("old, new", [
    ('title = "Cross-entropy"', 'title = "Cross-entropy, the gradient"'),
    ('text = "Work it out by hand."', 'text = "Work it out by hand, to 4 digits."'),
    ('hints = ["Softmax first."]', 'hints = ["Softmax first.", "Then subtract."]'),
    ("points = 4", "points = 5\ndigits = 3\nfeedback = \"pattern\"\nmax_attempts = 2"),
    ("points = 4", 'points = 4\nopens = 2027-01-10T09:00:00Z\nhide = ["rule"]'),
    ("std = 1.0", "std = 1"),                 # the same number, written otherwise
    ("std = 1.0", ""),                        # the default, left out
    ("cross_entropy(logits, targets) * scale",  # spaces and parentheses: the same tree
     "(cross_entropy(logits,targets))  *  scale"),
])
def test_what_feeds_no_number_is_not_in_the_definition(tmp_path, old, new):
    base, edited = _load(tmp_path, BASE), _load(tmp_path, BASE.replace(old, new), "b.toml")
    assert BASE.replace(old, new) != BASE
    assert of_exercise(base).fingerprint == of_exercise(edited).fingerprint
    a, b = build_case(base, "ada", "s"), build_case(edited, "ada", "s")
    assert a.variables["logits"].tobytes() == b.variables["logits"].tobytes()
    assert a.expected["logits"].tobytes() == b.expected["logits"].tobytes()


@pytest.mark.parametrize("old, new, field", [
    ("shape = [3, 4]", "shape = [3, 5]", "case.variables.logits.shape"),
    ("std = 1.0", "std = 2.0", "case.variables.logits.std"),
    ("decimals = 1", "decimals = 2", "case.variables.logits.decimals"),
    ('distribution = "normal"\nstd = 1.0', 'distribution = "uniform"',
     "case.variables.logits.distribution"),
    ("high = 4\n", "high = 3\n", "case.variables.targets.high"),
    ("value = [2.0]", "value = [3.0]", "case.variables.scale.value"),
    ("value = [2.0]", "value = [2]", "case.variables.scale.value"),   # an int64 now
    ("value = [2.0]", "value = [2.0]\nrequires_grad = false",
     "case.variables.scale.requires_grad"),
    ("* scale", "* scale * 2.0", "case.expression"),
    ('grads = ["logits"]', 'grads = ["logits", "scale"]', "answer.grads"),
    ("low = 0.5, high = 1.5", "low = 0.5, high = 2.5", "answer.grad_output.high"),
    ('grad_output = { distribution = "uniform", low = 0.5, high = 1.5 }', "",
     "answer.grad_output"),
])
def test_each_change_to_the_case_is_named_by_its_field(tmp_path, old, new, field):
    assert old in BASE
    base, edited = _load(tmp_path, BASE), _load(tmp_path, BASE.replace(old, new), "b.toml")
    before, now = of_exercise(base), of_exercise(edited)
    assert before.fingerprint != now.fingerprint
    assert changed(before.fields, now.fields)[0] == field


def test_the_variables_order_is_named_when_only_the_draws_move(tmp_path):
    """The variables are drawn in the file's order: swapping two tables changes every
    student's numbers, with no single variable's own fields changed."""
    swapped = BASE.replace(
        '[case.variables.logits]\nshape = [3, 4]\ndistribution = "normal"\nstd = 1.0\n'
        'decimals = 1\n[case.variables.targets]\nshape = [3]\ndistribution = "integers"\n'
        'high = 4\n',
        '[case.variables.targets]\nshape = [3]\ndistribution = "integers"\nhigh = 4\n'
        '[case.variables.logits]\nshape = [3, 4]\ndistribution = "normal"\nstd = 1.0\n'
        'decimals = 1\n')
    assert swapped != BASE
    before, now = of_exercise(_load(tmp_path, BASE)), of_exercise(_load(tmp_path, swapped,
                                                                        "b.toml"))
    assert changed(before.fields, now.fields) == ["case.variables"]


def test_a_function_exercises_edge_cases_and_returns_are_fields(tmp_path):
    text = (SHIPPED / "rmsnorm-backward.toml").read_text(encoding="utf-8")
    base = of_exercise(_load(tmp_path, text))
    assert {"answer.function.params", "answer.function.returns",
            "answer.function.cases[0]"} <= set(base.fields)
    edited = text.replace('name = "a row of zeros"', 'name = "zeros in a row"')
    assert edited != text
    now = of_exercise(_load(tmp_path, edited, "b.toml"))
    assert changed(base.fields, now.fields) == ["answer.function.cases[0]"]


def test_the_version_keys_the_definition_not_its_fields(tmp_path):
    a, b = _load(tmp_path, BASE), _load(tmp_path, "version = 7\n" + BASE, "b.toml")
    da, db = of_exercise(a), of_exercise(b)
    assert (da.version, db.version) == (1, 7) and da.fields == db.fields
    assert (da.kind, da.id, da.file) == ("exercise", "ce-versions", str(tmp_path / "ex.toml"))


@pytest.mark.parametrize("bad", ["0", "-1", "1.5", '"2"', "true", "1000001"])
def test_a_version_is_an_integer_from_1(tmp_path, bad):
    from glassllm.course import ExerciseFileError
    with pytest.raises(ExerciseFileError, match=r"ex.toml: version: must be"):
        _load(tmp_path, f"version = {bad}\n" + BASE)


def test_a_mystery_keeps_its_bug_through_a_typo_and_names_a_changed_pool(tmp_path):
    src = mystery.MYSTERIES_DIR / "mystery-mlp.toml"
    text = src.read_text(encoding="utf-8")
    base = mystery.load(src)
    assert base.version == 1 and len(base.bugs) == 6
    (tmp_path / "typo.toml").write_text(text.replace("your neighbour's", "your neighbours'"),
                                        encoding="utf-8")
    typo = mystery.load(tmp_path / "typo.toml")
    assert typo.text != base.text and typo.content_hash != base.content_hash
    assert definition(typo).fingerprint == definition(base).fingerprint
    picks = [mystery.bug_for(base, f"s{k}", "salt").id for k in range(40)]
    assert [mystery.bug_for(typo, f"s{k}", "salt").id for k in range(40)] == picks
    assert len(set(picks)) > 1
    (tmp_path / "pool.toml").write_text(text.replace(', "where-both-branches"]', "]"),
                                        encoding="utf-8")
    pool = mystery.load(tmp_path / "pool.toml")
    assert len(pool.bugs) == 5
    assert changed(definition(base).fields, definition(pool).fields) == ["bugs"]
    (tmp_path / "v2.toml").write_text("version = 2\n" + text, encoding="utf-8")
    again = mystery.load(tmp_path / "v2.toml")
    assert again.version == 2
    assert [mystery.bug_for(again, f"s{k}", "salt").id for k in range(40)] != picks
