"""The bug zoo: classic wrong backward rules, to hunt with the tools that find them.

Two tables. `BUGS`: wrong vector-Jacobian products of registry ops (the missing 1/N of a
mean cross-entropy, softmax's Jacobian taken as diagonal, ...), each with a sentence on
why people make it and a case that exposes it: on that case the Taylor test
(`glassllm.gradients.taylor_test`, through the evaluator's ``check``) reports first order
under the bug and second order (or an exact, linear prediction) under the real rule.
`ENGINE_BUGS` (`glassllm.course.zoo.engine_bugs`): mistakes of the engine and the
optimizer, each caught by comparing with a reference accumulation or a reference step.

The bugs live apart from the real rules. No real rule imports this package (the "never"
rules of docs/architecture.json, checked by tests/repository/test_architecture.py); a
bug reaches an evaluation only through the one seam, the evaluator's ``rules`` mapping,
given for one call (`rules_for`): nothing global is switched, so a worker that answered a
request with a bug answers the next without it. Mystery mode (`glassllm.course.zoo.mystery`)
picks one bug per student and grades the proof.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from glassllm.course.zoo import wrong_rules as W
from glassllm.layers import rope_angles

__all__ = ["BUGS", "Bug", "rules_for"]


@dataclass(frozen=True)
class Bug:
    """One wrong backward rule.

    Attributes:
        id: a short name (never shown to a student in mystery mode).
        op: the registry op it replaces.
        rule: the wrong function, the op's inputs and forward.
        title: the mistake in a few words; ``why``: why people make it.
        exposes: the case that shows it, as its sentence and an eval request
            (``expression``, ``variables``, maybe ``grad_output``).
    """

    id: str
    op: str
    rule: Callable[..., Any]
    title: str
    why: str
    exposes: str
    case: dict = field(default_factory=dict)


def _case(expression: str, **variables: Any) -> dict:
    grad_output = variables.pop("grad_output", None)
    case = {"expression": expression, "variables": variables}
    if grad_output is not None:
        case["grad_output"] = grad_output
    return case


_Z = [[0.3, -1.2, 0.8, 0.1], [1.5, 0.2, -0.4, -0.9], [-0.6, 0.7, 0.05, 1.1]]
_G = [[0.4, -0.7, 1.3, 0.2], [-1.1, 0.6, 0.3, -0.5], [0.9, 0.1, -0.8, 1.4]]
_COS4, _SIN4 = (t.tolist() for t in rope_angles(3, 4))
_COS2, _SIN2 = (t.tolist() for t in rope_angles(3, 2))
_X = [[[0.5, -0.3, 0.8, 0.1], [-0.7, 0.9, 0.2, -0.4], [0.3, 0.6, -0.5, 0.7]]]    # (1, 3, 4)
_W4 = [[0.6, -0.2, 0.3, 0.1], [0.2, 0.5, -0.4, 0.3], [-0.3, 0.1, 0.7, -0.2],
       [0.4, -0.6, 0.2, 0.5]]
_W2 = [[0.3, -0.5], [0.6, 0.2], [-0.4, 0.7], [0.1, 0.4]]                          # (4, 2)

BUGS: tuple[Bug, ...] = (
    Bug("ce-missing-mean", "cross_entropy", W.cross_entropy_without_mean,
        "cross-entropy's gradient without the 1/N of the mean",
        "The per-row formula softmax − one-hot is what every derivation shows; the mean"
        " over the batch is one line above it and easy to leave behind.",
        "any batch of more than one row: the gradient is N times too large",
        _case("cross_entropy(z, t)", z=_Z, t=[0, 3, 1])),
    Bug("attention-missing-scale", "attention", W.attention_without_scale,
        "attention's backward without the 1/√dk of the scores",
        "The scale looks like a constant of the forward pass; a hand-written backward"
        " through the scores forgets to multiply by it again.",
        "any key width dk > 1: q's and k's gradients are √dk times too large",
        _case("attention(x, wq, wk, wv, wo, 2, 1, cos, sin)", x=_X, wq=_W4, wk=_W2, wv=_W2,
              wo=_W4, cos=_COS2, sin=_SIN2,
              grad_output=[[[0.5, -1.0, 0.3, 0.8], [1.2, 0.4, -0.6, 0.1],
                            [-0.3, 0.9, 0.7, -1.1]]])),
    Bug("softmax-diagonal", "softmax", W.softmax_diagonal,
        "softmax's Jacobian taken as diagonal",
        "Elementwise ops have diagonal Jacobians, and softmax looks elementwise; but every"
        " output depends on every input of its row through the sum.",
        "a row of more than one entry and an incoming gradient that is not constant",
        _case("softmax(z)", z=_Z, grad_output=_G)),
    Bug("matmul-not-transposed", "matmul", W.matmul_not_transposed,
        "a matmul gradient not transposed: ∂a = g @ b",
        "On square matrices the shapes agree either way, so the missing transpose runs;"
        " only the numbers are wrong.",
        "square b that is not symmetric",
        _case("a @ b", a=[[0.2, -0.5, 0.9], [1.1, 0.3, -0.7], [-0.4, 0.8, 0.6]],
              b=[[0.5, 1.2, -0.3], [-0.8, 0.1, 0.7], [0.4, -0.6, 1.0]],
              grad_output=[[1.0, -0.5, 0.3], [0.2, 0.9, -1.1], [-0.7, 0.4, 0.6]])),
    Bug("rope-sign-flipped", "rope", W.rope_sign_flipped,
        "RoPE's backward rotating by +θ instead of −θ",
        "The backward of a rotation is the rotation back (its transpose); copying the"
        " forward's formula keeps the sine's sign.",
        "any position with a non-zero angle (sin θ ≠ 0): every position but the first",
        _case("rope(x, cos, sin)", x=[[[[0.5, -0.3, 0.8, 0.1], [-0.7, 0.9, 0.2, -0.4],
                                         [0.3, 0.6, -0.5, 0.7]]]],
              cos=_COS4, sin=_SIN4,
              grad_output=[[[[0.4, -0.7, 1.3, 0.2], [-1.1, 0.6, 0.3, -0.5],
                             [0.9, 0.1, -0.8, 1.4]]]])),
    Bug("repeat-kv-not-summed", "repeat_kv", W.repeat_kv_first_only,
        "repeat_kv's backward not summed over the group",
        "repeat_kv looks like a copy, and a copy's backward looks like a pick; but each"
        " K/V head is read by every query head of its group, and uses add up.",
        "repeats > 1 with query heads whose gradients differ",
        _case("repeat_kv(x, 2)", x=[[[[0.5, -0.3]], [[0.8, 0.1]]]],
              grad_output=[[[[0.4, -0.7]], [[1.3, 0.2]], [[-1.1, 0.6]], [[0.3, -0.5]]]])),
    Bug("rmsnorm-missing-mean-term", "rms_norm", W.rms_norm_without_mean_term,
        "RMSNorm's backward without its mean term",
        "Treating the rms as a constant divisor gives g · w / rms, but the rms depends on"
        " every element of its row too.",
        "any row of more than one element",
        _case("rms_norm(x, w)", x=[[0.5, -1.3, 0.8, 0.2], [1.1, 0.4, -0.6, -0.9]],
              w=[1.0, 0.5, -0.8, 1.2], grad_output=[[0.4, -0.7, 1.3, 0.2],
                                                   [-1.1, 0.6, 0.3, -0.5]])),
    Bug("embedding-no-scatter-add", "embedding", W.embedding_assigned,
        "an embedding gradient written with assignment, not scatter-add",
        "grad[ids] = g reads like the forward weight[ids]; NumPy's fancy assignment keeps"
        " one write per repeated index, where np.add.at adds them all.",
        "a batch where one id appears twice",
        _case("embedding(w, ids)", w=[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]],
              ids=[1, 3, 1], grad_output=[[0.4, -0.7], [1.3, 0.2], [-1.1, 0.6]])),
    Bug("masked-fill-leaks", "masked_fill", W.masked_fill_leaks,
        "gradient let through masked positions",
        "Before a softmax, −∞ scores already get a zero gradient, so a leaking mask passes"
        " every attention test; applied to values, it does not.",
        "a mask applied to values (filled with 0), not to scores before a softmax",
        _case("masked_fill(v, m, 0.0)", v=[[0.5, -0.3, 0.8], [0.1, -0.7, 0.9]],
              m=[[False, True, False], [True, False, False]],
              grad_output=[[0.4, -0.7, 1.3], [0.2, -1.1, 0.6]])),
    Bug("sigmoid-as-s", "sigmoid", W.sigmoid_as_s,
        "sigmoid's derivative taken as s instead of s(1 − s)",
        "exp's derivative is itself, and sigmoid is built from exp; the output is saved"
        " for the backward, and it is tempting to use it as is.",
        "any input: s and s(1 − s) differ everywhere",
        _case("sigmoid(z)", z=_Z, grad_output=_G)),
    Bug("silu-missing-term", "silu", W.silu_without_second_term,
        "SiLU's derivative without its second term",
        "silu(a) = a · sigmoid(a) is a product; taking sigmoid(a) as its slope forgets the"
        " derivative of the second factor, a · s(1 − s).",
        "any input away from 0",
        _case("silu(z)", z=_Z, grad_output=_G)),
    Bug("where-both-branches", "where", W.where_to_both,
        "where's gradient sent to both branches",
        "where looks like an add of its two branches, whose gradient goes to both; but"
        " each position took one branch only.",
        "a condition with both true and false positions",
        _case("where(c, a, b)", c=[[True, False, True], [False, True, False]],
              a=[[0.5, -0.3, 0.8], [0.1, -0.7, 0.9]], b=[[1.2, 0.4, -0.6], [-0.2, 0.3, 0.7]],
              grad_output=[[0.4, -0.7, 1.3], [0.2, -1.1, 0.6]])),
    Bug("tanh-missing-square", "tanh", W.tanh_without_square,
        "tanh's derivative taken as 1 − t instead of 1 − t²",
        "The saved output t is right there, and 1 − t² is one square away from 1 − t.",
        "any input away from 0",
        _case("tanh(z)", z=_Z, grad_output=_G)),
)

_BY_ID = {b.id: b for b in BUGS}


def rules_for(bug_id: str | None) -> Mapping[str, Callable[..., Any]] | None:
    """The ``rules`` mapping that swaps one bug into one evaluation (the evaluator's
    ``rules=`` argument), or None for no bug. Raises KeyError for an unknown id."""
    if bug_id is None:
        return None
    bug = _BY_ID[bug_id]
    return {bug.op: bug.rule}


def bug(bug_id: str) -> Bug:
    """The bug called `bug_id`; KeyError if none."""
    return _BY_ID[bug_id]
