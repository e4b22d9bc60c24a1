"""Each student's numbers and the answers expected of them: the seed is the documented
HMAC, two students differ, the same student gets the same numbers again, and the expected
answers equal an independent computation (NumPy formulas, central differences)."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pytest

from glassllm.course import build_case, load, student_seed
from glassllm.course.exercise import SHIPPED, load_dir

EXERCISES = {ex.id: ex for ex in load_dir(SHIPPED)}


def test_the_seed_is_the_documented_hmac():
    ex = EXERCISES["softmax-ce-logits"]
    assert ex.version == 1                              # absent from the file: 1
    message = f"{ex.id}\x001\x00ada".encode()
    digest = hmac.new(b"course-salt", message, hashlib.sha256).digest()
    assert student_seed("course-salt", ex, "ada") == int.from_bytes(digest[:8], "big")
    assert ex.content_hash == hashlib.sha256(
        (SHIPPED / "softmax-ce-logits.toml").read_bytes()).hexdigest()


def test_the_numbers_are_drawn_from_pcg64_of_the_seed_in_file_order():
    ex = EXERCISES["softmax-ce-logits"]
    rng = np.random.Generator(np.random.PCG64(student_seed("s", ex, "ada")))
    logits = np.round(rng.normal(0.0, 1.0, (4, 5)), 1) + 0.0
    targets = rng.integers(0, 5, (4,))
    case = build_case(ex, "ada", "s")
    np.testing.assert_array_equal(case.variables["logits"], logits)
    np.testing.assert_array_equal(case.variables["targets"], targets)


@pytest.mark.parametrize("exercise", [e for e in EXERCISES if EXERCISES[e].variables[0].generated])
def test_two_students_differ_and_one_student_is_the_same_twice(exercise):
    ex = EXERCISES[exercise]
    a, b = build_case(ex, "ada", "s"), build_case(ex, "alan", "s")
    again = build_case(ex, "ada", "s")
    name = ex.variables[0].name
    assert not np.array_equal(a.variables[name], b.variables[name])
    np.testing.assert_array_equal(a.variables[name], again.variables[name])
    other_salt = build_case(ex, "ada", "another salt")
    assert not np.array_equal(a.variables[name], other_salt.variables[name])


def test_a_typo_fixed_keeps_every_students_numbers_bit_for_bit(tmp_path):
    """The text, title, hints, points and feedback are not in the seed: the file's bytes
    change, no one's numbers or expected answers do."""
    text = (SHIPPED / "softmax-ce-logits.toml").read_text(encoding="utf-8")
    edited = text.replace("points = 5", "points = 6").replace("**by hand**", "by hand,") \
        .replace("Softmax each row first", "Softmax each row, first")
    (tmp_path / "a.toml").write_text(text, encoding="utf-8")
    (tmp_path / "b.toml").write_text(edited, encoding="utf-8")
    a, b = load(tmp_path / "a.toml"), load(tmp_path / "b.toml")
    assert a.content_hash != b.content_hash
    assert (a.text != b.text, a.hints != b.hints, a.points, b.points) == (True, True, 5, 6)
    for student in ("ada", "alan", "grace"):
        ca, cb = build_case(a, student, "s"), build_case(b, student, "s")
        assert ca.seed == cb.seed
        for name in ("logits", "targets"):
            assert ca.variables[name].tobytes() == cb.variables[name].tobytes()
        assert ca.expected["logits"].tobytes() == cb.expected["logits"].tobytes()


def test_a_new_version_draws_everyones_numbers_anew(tmp_path):
    text = (SHIPPED / "softmax-ce-logits.toml").read_text(encoding="utf-8")
    (tmp_path / "b.toml").write_text("version = 2\n" + text, encoding="utf-8")
    a, b = EXERCISES["softmax-ce-logits"], load(tmp_path / "b.toml")
    assert (a.version, b.version) == (1, 2)
    message = b"softmax-ce-logits\x002\x00ada"
    digest = hmac.new(b"s", message, hashlib.sha256).digest()
    assert student_seed("s", b, "ada") == int.from_bytes(digest[:8], "big")
    for student in ("ada", "alan"):
        assert not np.array_equal(build_case(a, student, "s").variables["logits"],
                                  build_case(b, student, "s").variables["logits"])


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_cross_entropys_expected_gradient_is_softmax_minus_one_hot_over_n():
    case = build_case(EXERCISES["softmax-ce-logits"], "ada", "s")
    z, t = case.variables["logits"], case.variables["targets"]
    want = (softmax(z) - np.eye(z.shape[1])[t]) / z.shape[0]
    np.testing.assert_allclose(case.expected["logits"], want, rtol=1e-13, atol=1e-15)


def rms_norm_backward(x, weight, g, eps=1e-6):
    """RMSNorm's VJP written out by hand (not glassllm's): the oracle of the function."""
    d = x.shape[-1]
    r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    dx = weight * g * r - x * r**3 * (g * weight * x).sum(axis=-1, keepdims=True) / d
    dweight = (g * x * r).reshape(-1, d).sum(axis=0)
    return dx, dweight


def test_the_function_exercise_expects_rmsnorms_vjp_on_every_case():
    case = build_case(EXERCISES["rmsnorm-backward"], "ada", "s")
    assert [p.name for p in case.parts] == ["generated", "a row of zeros", "a large row"]
    for part in case.parts:
        v = part.variables
        dx, dw = rms_norm_backward(v["x"], v["weight"], v["g"])
        np.testing.assert_allclose(part.expected[f"{part.name}/dx"], dx, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(part.expected[f"{part.name}/dweight"], dw, rtol=1e-10,
                                   atol=1e-12)
    # the student's own g is drawn per student, shaped like the output
    assert case.parts[0].grad_output.shape == (4, 8)


def test_a_broadcast_bias_gets_the_sum_of_the_rows_gradients():
    case = build_case(EXERCISES["broadcast-bias"], "ada", "s")
    g, x = case.grad_output, case.variables["x"]
    np.testing.assert_array_equal(case.expected["b"], g.sum(axis=0))
    np.testing.assert_array_equal(case.expected["w"], x.T @ g)
    assert g.dtype == np.float64 and np.array_equal(g, np.round(g))


def central_differences(f, x, g, h=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        out[i] = np.sum((f(up) - f(down)) * g) / (2 * h)
    return out


def test_attentions_expected_gradients_match_finite_differences():
    case = build_case(EXERCISES["attention-scale"], "ada", "s")
    q, k, v = (case.variables[n] for n in "qkv")

    def loss_q(q_):
        return (softmax(q_ @ k.T * 0.5) @ v).sum()

    def loss_k(k_):
        return (softmax(q @ k_.T * 0.5) @ v).sum()

    np.testing.assert_allclose(case.expected["q"], central_differences(loss_q, q, 1.0),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(case.expected["k"], central_differences(loss_k, k, 1.0),
                               rtol=1e-6, atol=1e-8)


def test_the_masked_softmax_gradient_is_zero_where_masked():
    case = build_case(EXERCISES["masked-softmax"], "ada", "s")
    s, m, g = case.variables["scores"], case.variables["mask"], case.grad_output
    p = softmax(np.where(m, -np.inf, s))
    want = p * (g - (g * p).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(case.expected["scores"], want, rtol=1e-13, atol=1e-15)
    assert np.all(case.expected["scores"][m] == 0)
    assert set(case.masks) == {"mask"}


def test_a_value_exercise_expects_the_forward():
    case = build_case(EXERCISES["softmax-value"], "ada", "s")
    np.testing.assert_allclose(case.expected["value"], softmax(case.variables["logits"]),
                               rtol=1e-14)


def test_the_case_is_an_eval_request_with_concrete_values():
    from glassllm.sandbox.expr import evaluate

    case = build_case(EXERCISES["broadcast-bias"], "ada", "s")
    result = evaluate(**case.request)
    np.testing.assert_array_equal(result["grads"]["b"], case.expected["b"])


def test_the_recent_cases_a_worker_keeps_are_bounded_in_elements():
    from glassllm.course import cases

    recent = cases._Recent(limit=400)                # room for a few (4, 5) cases
    ex = EXERCISES["softmax-ce-logits"]
    for k in range(40):
        case = cases._build(ex, f"student-{k}", "s", cases.LIMITS)
        assert recent.put((k,), case) is case
        assert recent.held <= 400
    assert 0 < len(recent.cases) < 40 and recent.get((39,)) is not None
    assert recent.get((0,)) is None                  # the oldest went first
    assert cases.build_case(ex, "ada", "s") is cases.build_case(ex, "ada", "s")
