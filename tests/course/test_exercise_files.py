"""Exercise files: every shipped one loads, and each kind of malformed file is refused with
one message naming the file, the field (its dotted path) and the rule (docs/exercises.md)."""

from __future__ import annotations

import datetime as dt

import pytest

from glassllm.apps.cli import main
from glassllm.course import ExerciseFileError, build_case, load, load_dir
from glassllm.course.exercise import LESSONS_DIR, SHIPPED, load_all

BASE = '''
id = "ce-logits"
title = "Cross-entropy's logits gradient"
text = "Work out the gradient of the logits."
digits = 4
hints = ["Softmax first."]

[case]
expression = "cross_entropy(logits, targets)"

[case.variables.logits]
shape = [3, 4]
distribution = "normal"
decimals = 1

[case.variables.targets]
shape = [3]
distribution = "integers"
low = 0
high = 4

[answer]
kind = "grads"
grads = ["logits"]
'''
FUNCTION = '''
id = "rms"
title = "RMSNorm backward"
text = "Write it."

[case]
expression = "rms_norm(x, weight)"
[case.variables.x]
shape = [2, 4]
distribution = "normal"
[case.variables.weight]
value = [1.0, 1.0, 1.0, 1.0]

[answer]
kind = "function"
[answer.function]
name = "rms_norm_backward"
params = ["x", "weight", "g"]
returns = ["dx", "dweight"]
reference = "rms_norm"
[[answer.function.cases]]
name = "zeros"
x = [[0.0, 0.0, 0.0, 0.0]]
weight = [1.0, 1.0, 1.0, 1.0]
g = [[1.0, 1.0, 1.0, 1.0]]
'''


def write(tmp_path, text: str, name: str = "ex.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(tmp_path, text: str) -> ExerciseFileError:
    path = write(tmp_path, text)
    with pytest.raises(ExerciseFileError) as info:
        load(path)
    err = info.value
    assert str(err) == f"{path}: {err.field}: {err.rule}"       # file: field: rule
    return err


def test_every_shipped_exercise_and_lesson_loads_and_builds():
    exercises = load_all([LESSONS_DIR, SHIPPED])
    ids = [ex.id for ex in exercises]
    assert {"rmsnorm-backward", "softmax-ce-logits", "attention-scale", "broadcast-bias",
            "masked-softmax", "softmax-value", "neuron", "rms-norm"} <= set(ids)
    assert len(ids) == len(set(ids))
    kinds = {ex.answer.kind for ex in exercises}
    assert kinds == {"value", "grads", "function"}
    for ex in exercises:
        case = build_case(ex, "ada")
        assert case.answers and set(case.expected) == {a.key for a in case.answers}
        assert ex.content_hash and len(ex.content_hash) == 64


def test_glassllm_exercises_check_reads_them_all(capsys, tmp_path):
    assert main(["exercises", "check"]) == 0
    out = capsys.readouterr().out
    assert "rmsnorm-backward version 1 (function" in out and "are well-formed" in out
    bad = write(tmp_path, BASE.replace('feedback', 'x').replace("digits = 4", "digits = 0"))
    assert main(["exercises", "check", str(tmp_path)]) == 1
    assert f"error: {bad}: digits: must be from 1 to 15, not 0" in capsys.readouterr().err


def test_a_function_exercise_that_reveals_its_arrays_is_warned_of(capsys, tmp_path):
    """The sandbox grades a function exercise's own case as arrays; unless it hides
    `expected`, reveal hands a student what the offline grader checks (the shipped one
    hides it: no warning)."""
    open_file = write(tmp_path, FUNCTION, "fn.toml")        # it hides nothing
    assert main(["exercises", "check", str(open_file)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {open_file}: a function exercise that does not hide \"expected\"" in err
    assert main(["exercises", "check"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_well_formed_file_reads_as_written(tmp_path):
    ex = load(write(tmp_path, BASE))
    assert (ex.id, ex.digits, ex.feedback, ex.hints) == ("ce-logits", 4, None,
                                                         ("Softmax first.",))
    assert ex.hide_ops == frozenset({"cross_entropy"})        # the op the case calls
    assert [v.name for v in ex.variables] == ["logits", "targets"]
    fn = load(write(tmp_path, FUNCTION, "fn.toml")).answer.function
    assert (fn.grad_param, fn.grads_of, fn.signature) == (
        "g", ("x", "weight"), "rms_norm_backward(x, weight, g) -> (dx, dweight)")


def test_dates_are_utc_and_need_their_offset(tmp_path):
    ex = load(write(tmp_path, "opens = 2027-01-10T10:00:00+01:00\n"
                              "closes = 2027-01-17T23:59:00Z\n" + BASE))
    assert ex.opens == dt.datetime(2027, 1, 10, 9, tzinfo=dt.UTC)
    assert ex.is_open(dt.datetime(2027, 1, 12, tzinfo=dt.UTC))
    assert not ex.is_open(dt.datetime(2027, 1, 18, tzinfo=dt.UTC))


# (what to do to BASE, the field named, a piece of the rule)
MALFORMED = [
    (lambda t: t + "\nnope = [", "-", "is not valid TOML"),
    (lambda t: t.replace('id = "ce-logits"\n', ""), "id", "is required"),
    (lambda t: t.replace('"ce-logits"', '"Ce_Logits"'), "id", "a-z, 0-9 and -"),
    (lambda t: t.replace('title = "Cross-entropy\'s logits gradient"', 'title = """a\nb"""'),
     "title", "one line"),
    (lambda t: "feedbak = \"pattern\"\n" + t, "feedbak",
     "unknown key (did you mean 'feedback'?)"),
    (lambda t: "zzz = 1\n" + t, "zzz", "unknown key (a typo?); the keys here are: answer,"),
    (lambda t: "feedback = \"some\"\n" + t, "feedback", "must be one of"),
    (lambda t: t.replace("digits = 4", "digits = 4\natol = 1e-3"), "digits", "not both"),
    (lambda t: t.replace("digits = 4", "digits = 99"), "digits", "from 1 to 15"),
    (lambda t: t.replace("digits = 4", "digits = 4.5"), "digits", "must be an integer"),
    (lambda t: "max_attempts = 0\n" + t, "max_attempts", "from 1 to 1000"),
    (lambda t: "opens = 2027-01-10T09:00:00\n" + t, "opens", "needs its UTC offset"),
    (lambda t: "opens = 2027-01-10\n" + t, "opens", "date-time with its offset"),
    (lambda t: "opens = 2027-01-10T09:00:00Z\ncloses = 2027-01-09T09:00:00Z\n" + t, "closes",
     "later than opens"),
    (lambda t: 'hide = ["rules"]\n' + t, "hide[0]", "'rules' is not one of"),
    (lambda t: 'hide = ["rule", "rule"]\n' + t, "hide", "more than once"),
    (lambda t: 'hide_ops = ["rmsnorm"]\n' + t, "hide_ops[0]", "not an op of the registry"),
    (lambda t: t.replace('hints = ["Softmax first."]', "hints = [1]"), "hints[0]",
     "non-empty string"),
    (lambda t: t.replace("[case]\n", '[case]\nop = "softmax"\n'), "case",
     "exactly one of op"),
    (lambda t: t.replace("cross_entropy(logits, targets)", "cross_entropy(logits,"),
     "case.expression", "syntax error"),
    (lambda t: t.replace("cross_entropy(logits, targets)", "__import__('os')"),
     "case.expression", ""),
    (lambda t: t.replace('distribution = "normal"', 'distribution = "gauss"'),
     "case.variables.logits.distribution", "must be one of"),
    (lambda t: t.replace("decimals = 1", "decimals = 1\nsdt = 2"),
     "case.variables.logits.sdt", "unknown key"),
    (lambda t: t.replace("decimals = 1", "std = 0"), "case.variables.logits.std",
     "greater than 0"),
    (lambda t: t.replace("high = 4", "high = 0"), "case.variables.targets.high",
     "greater than low"),
    (lambda t: t.replace("low = 0\nhigh = 4", "low = 0"), "case.variables.targets.high",
     "is required"),
    (lambda t: t.replace("shape = [3, 4]", "shape = [3, 0]"),
     "case.variables.logits.shape", "positive integers"),
    (lambda t: t.replace("shape = [3, 4]", "shape = [1000, 1000]"),
     "case.variables.logits.shape", "at most 100000"),
    (lambda t: t.replace('shape = [3, 4]\ndistribution = "normal"\ndecimals = 1',
                         "value = [[1.0, 2.0], [3.0]]"), "case.variables.logits.value",
     "rectangular array"),
    (lambda t: t.replace('shape = [3, 4]\ndistribution = "normal"\ndecimals = 1',
                         'value = [1.0]\ndistribution = "normal"'),
     "case.variables.logits.value", "not both"),
    (lambda t: t.replace('shape = [3, 4]\ndistribution = "normal"\ndecimals = 1', ""),
     "case.variables.logits", "needs a fixed value"),
    (lambda t: t.replace("[case.variables.targets]", "[case.variables.if]"),
     "case.variables.if", "Python identifier"),
    (lambda t: t.replace("shape = [3]\n", "shape = [2]\n"), "case",
     "targets"),                                          # planned, and refused, at load
    (lambda t: t.replace('kind = "grads"', 'kind = "grad"'), "answer.kind", "must be one of"),
    (lambda t: t.replace('grads = ["logits"]', 'grads = ["logit"]'), "answer.grads[0]",
     "'logit' is not a variable of the case"),
    (lambda t: t.replace('grads = ["logits"]', 'grads = ["targets"]'), "answer.grads",
     "gets no gradient"),
    (lambda t: t + 'grad_output = "zeros"\n', "answer.grad_output", "must be \"ones\""),
    (lambda t: t + "grad_output = [1.0, 2.0]\n", "answer.grad_output", "shape"),
    (lambda t: t + "[[answer.factors]]\nname = \"N\"\nsays = \"rows\"\nvalue = 3\n"
                   "variable = \"logits\"\n", "answer.factors[0]", "exactly one of value"),
    (lambda t: t + "[[answer.factors]]\nname = \"N\"\nsays = \"rows\"\nvariable = \"x\"\n",
     "answer.factors[0].variable", "not a variable of the case"),
    (lambda t: t + "[[notes]]\ntext = \"x\"\nclaims = [{path = \"value\", kind = \"zero\"}]\n",
     "notes", "fixed"),
    (lambda t: t + "[answr]\nkind = 1\n", "answr", "unknown key"),
]


@pytest.mark.parametrize(("edit", "field", "rule"), MALFORMED,
                         ids=[f"{k}-{m[1]}" for k, m in enumerate(MALFORMED)])
def test_each_malformed_kind_names_the_file_field_and_rule(tmp_path, edit, field, rule):
    err = refused(tmp_path, edit(BASE))
    assert err.field == field
    assert rule in err.rule


FUNCTION_MALFORMED = [
    (lambda t: t.replace('params = ["x", "weight", "g"]', 'params = ["x", "weight", "g", "h"]'),
     "answer.function.params", "the one left is the incoming gradient"),
    (lambda t: t.replace('returns = ["dx", "dweight"]', 'returns = ["dx"]'),
     "answer.function.returns", "one return per gradient"),
    (lambda t: t.replace('reference = "rms_norm"', 'reference = "layer_norm"'),
     "answer.function.reference", "not the case's forward"),
    (lambda t: t.replace('name = "zeros"', 'name = "generated"'),
     "answer.function.cases[0].name", "must be unique"),
    (lambda t: t.replace("g = [[1.0, 1.0, 1.0, 1.0]]\n", ""),
     "answer.function.cases[0].g", "is required"),
    (lambda t: t.replace("g = [[1.0, 1.0, 1.0, 1.0]]", "g = [[1.0, 1.0]]"),
     "answer.function.cases[0]", "grad_output has shape"),
]


@pytest.mark.parametrize(("edit", "field", "rule"), FUNCTION_MALFORMED,
                         ids=[m[1] for m in FUNCTION_MALFORMED])
def test_each_malformed_function_answer_is_named(tmp_path, edit, field, rule):
    err = refused(tmp_path, edit(FUNCTION))
    assert err.field == field
    assert rule in err.rule


def test_the_same_id_twice_names_both_files(tmp_path):
    first = write(tmp_path, BASE, "a.toml")
    second = write(tmp_path, BASE, "b.toml")
    with pytest.raises(ExerciseFileError) as info:
        load_dir(tmp_path)
    assert info.value.file == str(second) and str(first) in info.value.rule


def test_a_file_that_is_not_text_or_too_large(tmp_path):
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe id = 1")
    with pytest.raises(ExerciseFileError, match="is not UTF-8 text"):
        load(path)
    path.write_bytes(b"#" * 1_000_001)
    with pytest.raises(ExerciseFileError, match="larger than"):
        load(path)
    with pytest.raises(ExerciseFileError, match="is not a directory"):
        load_dir(tmp_path / "missing")
