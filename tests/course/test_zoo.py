"""The bug zoo (glassllm/course/zoo/): every wrong rule caught on its own exposing case by
the Taylor test, the real rule passing the same case; every engine and optimizer slip
caught by the reference accumulation or step; the one seam (the evaluator's ``rules``,
for one call) leaving no bug behind; mystery mode's pick and its grading."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from glassllm.course.zoo import BUGS, rules_for
from glassllm.course.zoo import mystery as M
from glassllm.course.zoo.engine_bugs import ENGINE_BUGS, _reference_adamw, adamw_step
from glassllm.sandbox import registry
from glassllm.sandbox.expr import evaluate

TAYLOR = {"modes": ["taylor"]}


def test_at_least_twelve_wrong_rules_each_with_why_and_its_case():
    assert len(BUGS) >= 12 and len({b.id for b in BUGS}) == len(BUGS)
    for b in BUGS:
        assert b.op in registry.OPS and len(b.why) > 40 and b.exposes and b.case


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.id)
def test_each_wrong_rule_is_caught_by_the_taylor_test_and_the_real_rule_passes(bug):
    real = evaluate(**bug.case, check=TAYLOR)
    wrong = evaluate(**bug.case, check=TAYLOR, rules=rules_for(bug.id))
    assert wrong["value"] == real["value"]              # the forward is the real one
    t_real, t_wrong = real["check"]["taylor"], wrong["check"]["taylor"]
    assert t_real["passed"] and (t_real["linear"] or t_real["order"] >= 1.8)
    assert not t_wrong["passed"] and not t_wrong["linear"] and t_wrong["order"] <= 1.2
    assert wrong["grads"] != real["grads"]


@pytest.mark.parametrize("bug", ENGINE_BUGS, ids=lambda b: b.id)
def test_each_engine_and_optimizer_slip_differs_from_the_reference(bug):
    wrong, reference = bug.run()
    assert np.max(np.abs(wrong - reference)) > 1e-3 * np.max(np.abs(reference))


def test_the_right_adamw_written_out_equals_the_reference_step_and_accumulation_is_right():
    from glassllm.course.zoo.engine_bugs import _BIG, _HYPER, _P, _SMALL
    for grads in (_SMALL, _BIG):
        np.testing.assert_allclose(adamw_step(_P, grads, **_HYPER),
                                   _reference_adamw(_P, grads, **_HYPER), rtol=1e-14, atol=0)
    x = np.array([0.3, -1.2, 0.8])                     # d/dx sum(x tanh x), by hand
    wrong, reference = ENGINE_BUGS[0].run()
    direct, through_tanh = np.tanh(x), x * (1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(reference, direct + through_tanh, rtol=1e-14)
    # overwriting keeps one path's part: whichever consumer the walk met last
    assert any(np.allclose(wrong, part, rtol=1e-14) for part in (direct, through_tanh))


def test_no_bug_is_active_without_the_seam_even_after_a_call_that_used_one():
    fns = {name: op.fn for name, op in registry.OPS.items()}
    before = {b.id: evaluate(**b.case)["grads"] for b in BUGS}
    for b in BUGS:
        evaluate(**b.case, rules=rules_for(b.id), check=TAYLOR, paths=True, dead=True)
        assert evaluate(**b.case)["grads"] == before[b.id]
    assert {name: op.fn for name, op in registry.OPS.items()} == fns
    assert rules_for(None) is None


def test_no_real_rule_imports_the_zoo():
    code = ("import sys, glassllm, glassllm.autograd, glassllm.layers, glassllm.optim,"
            " glassllm.gradients, glassllm.sandbox.expr, glassllm.sandbox.registry,"
            " glassllm.course.cases; print(sorted(m for m in sys.modules if '.zoo' in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# -- mystery mode ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def mysteries():
    return {m.id: m for m in M.load_dir()}


def test_the_shipped_mysteries_load_and_hide_their_pool(mysteries):
    assert set(mysteries) >= {"mystery-mlp", "mystery-attention", "mystery-block"}
    for m in mysteries.values():
        view = str(m.view())
        assert not any(b.id in view for b in BUGS) and "bugs" not in m.view()


def test_the_bug_is_picked_per_student_deterministically_from_the_salt(mysteries):
    m = mysteries["mystery-mlp"]
    picks = [M.bug_for(m, f"s{i}", "salt-a").id for i in range(40)]
    assert picks == [M.bug_for(m, f"s{i}", "salt-a").id for i in range(40)]
    assert len(set(picks)) >= 4 and set(picks) <= set(m.bugs)
    assert picks != [M.bug_for(m, f"s{i}", "salt-b").id for i in range(40)]


def student_with(m, bug_id, salt="salt-a"):
    return next(s for s in (f"s{i}" for i in range(500)) if M.bug_for(m, s, salt).id == bug_id)


def test_a_proof_is_graded_for_the_node_and_for_the_input(mysteries):
    m = mysteries["mystery-attention"]
    who = student_with(m, "masked-fill-leaks")
    answer = M.evaluate(m, who, "salt-a", expression=m.expression, variables=m.variables)
    node = next(n["id"] for n in answer["nodes"] if n["op"] == "masked_fill")
    full = M.grade(m, who, node, None, "salt-a")
    assert (full.node_right, full.input_exposes, full.score) == (True, True, m.points)
    assert full.orders["bug"] <= 1.2
    wrong_node = next(n["id"] for n in answer["nodes"] if n["op"] == "softmax")
    half = M.grade(m, who, wrong_node, None, "salt-a")
    assert (half.node_right, half.input_exposes, half.score) == (False, True, m.points / 2)
    # no padded position: the leak has nothing to leak, so these numbers prove nothing
    unpadded = {"pad": [[False] * 4] * 3}
    blind = M.grade(m, who, "masked_fill(repeat_kv(v, 2), pad, 0.0)", unpadded, "salt-a")
    assert (blind.node_right, blind.input_exposes) == (True, False)
    assert "passes there even under the bug" in blind.message
    with pytest.raises(ValueError, match="node"):
        M.grade(m, who, 999, None, "salt-a")
    with pytest.raises(ValueError, match="no variable 'zz'"):
        M.grade(m, who, node, {"zz": 1.0}, "salt-a")


def test_a_mystery_file_whose_case_cannot_expose_a_bug_is_refused(mysteries, tmp_path):
    text = (M.MYSTERIES_DIR / "mystery-mlp.toml").read_text()
    bad = text.replace('bugs = ["ce-missing-mean"', 'bugs = ["rope-sign-flipped"')
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(M.MysteryError, match="does not call"):
        M.load(tmp_path / "bad.toml")
