"""Source positions as Python's tokenizer counts them, and one
message per kind of refusal in every slot of the expression evaluator (H4).

Positions in the API are Unicode code points (Python ``str`` indices, docs/http.md
#positions); Python's ``ast`` gives (line, UTF-8 byte column), its SyntaxError (line,
code point column), and lines end at ``\\r\\n``, ``\\r`` or ``\\n``.
"""

from __future__ import annotations

import ast

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import glassllm.sandbox.expr as E
from glassllm.sandbox.expr.parser import SourcePositions
from glassllm_service.app import create_app
from glassllm_service.settings import Settings


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def post(client, expression: str, variables: dict, status: int) -> dict:
    r = client.post("/api/v1/eval", json={"expression": expression, "variables": variables})
    assert r.status_code == status, r.text
    return r.json()


XY = {"x": [1.0], "y": [2.0]}


# --------------------------------------------------------------------------------------
# item 5: positions for every line ending, tabs and non-ASCII text
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("newline", ["\r", "\n", "\r\n"])
def test_a_line_ending_inside_brackets_is_evaluated_with_exact_spans(client, newline):
    """`(x\\r+ y)` was a 500 (IndexError: the line table counted only \\n)."""
    expression = f"(x{newline}+\ty)"
    body = post(client, expression, XY, 200)
    assert body["value"] == [3.0]
    spans = {n["text"]: n["span"] for n in body["nodes"]}
    y = expression.index("y")
    assert spans["y"] == [y, y + 1] and spans["x"] == [1, 2]
    assert spans[f"x{newline}+\ty"] == [1, y + 1]


@pytest.mark.parametrize("newline", ["\r", "\n", "\r\n"])
def test_an_error_after_a_line_ending_points_at_the_name(client, newline):
    expression = f"(x{newline}+ {newline}\tzz)"
    body = post(client, expression, XY, 422)["error"]
    assert body["position"] == expression.index("zz")
    assert body["span"] == [expression.index("zz"), expression.index("zz") + 2]


@pytest.mark.parametrize(("expression", "where"), [
    ("(x +\r* y)", "*"),        # the parser's offset on the second line
    ("(x\r+ y", "("),           # the unclosed bracket on the first
    ("x\r\n\t+ y", "\t"),     # "unexpected indent": the tab, one character
    ("(x\r\n\t+ y]", "]"),
])
def test_syntax_errors_after_a_line_ending_point_at_the_token(client, expression, where):
    body = post(client, expression, XY, 422)["error"]
    assert body["position"] == expression.index(where), body


def test_source_positions_map_utf8_byte_columns_to_code_points():
    source = "(é\r+ \tyé)\r\nαβ"
    sp = SourcePositions(source)
    assert sp.starts == [0, 3, 11]
    assert sp.offset(1, 1) == 1 and sp.offset(1, 3) == 2        # é is 2 bytes
    assert sp.offset(2, 3) == 6                                  # "+ \t" then yé
    assert sp.offset(2, 6) == 8                                  # after "yé" (3 bytes)
    assert sp.offset(3, 2) == 12                                 # after α
    assert sp.char_offset(3, 1) == 12
    assert sp.char_offset(9, 99) == len(source)                  # clamped, never IndexError


def test_non_ascii_text_is_refused_at_its_code_point():
    with pytest.raises(E.ExprError) as exc:
        E.parse("x\r+ é\t+ y")
    assert exc.value.position == 4


TOKENS = ["x", "y", "zz", "ab", "1", "2.5", "+", "*", "-", "(", ")", "(", ")", "[", "]",
          ",", "softmax(", " ", "\t", "\r", "\n", "\r\n", "é", "α", "ж", "\U0001d400"]
NAMES = ["x", "y", "zz", "é", "αβ", "жx", "x\u00e9"]   # NFKC-stable, as ast keeps them


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=14).map("".join))
def test_fuzz_parse_raises_only_expr_errors_with_positions_in_the_text(expression):
    """The library function: an `ExprError` with a position inside the text, or a tree
    whose every node's span cuts exactly its own source out of the text."""
    try:
        parsed = E.parse(expression)
    except E.ExprError as exc:
        assert exc.position is None or 0 <= exc.position <= len(expression)
        return
    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.Name):
            assert parsed.text(node) == node.id
        if isinstance(node, ast.expr):
            start, end = parsed.span(node)
            assert 0 <= start <= end <= len(expression)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*NAMES, " + ", "*", "(", ")", " ", "\t", "\r", "\n",
                                 "\r\n"]), min_size=1, max_size=12).map("".join))
def test_fuzz_span_mapping_matches_the_tokenizer_for_non_ascii_names(source):
    """`SourcePositions` directly, on text `parse` would refuse (non-ASCII): for every
    name Python's parser found, the mapped span is exactly that name."""
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        if exc.lineno and exc.offset:
            assert 0 <= SourcePositions(source).char_offset(exc.lineno, exc.offset - 1) \
                <= len(source)
        return
    sp = SourcePositions(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            start = sp.offset(node.lineno, node.col_offset)
            end = sp.offset(node.end_lineno, node.end_col_offset)
            assert source[start:end] == node.id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=12).map("".join))
def test_fuzz_eval_answers_200_or_422_never_500(client, expression):
    r = client.post("/api/v1/eval", json={"expression": expression,
                                          "variables": {"x": [1.0, 2.0], "y": [3.0, 4.0],
                                                        "ab": [0.5, 0.25]}})
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        position = r.json()["error"].get("position")
        assert position is None or 0 <= position <= len(expression)


# --------------------------------------------------------------------------------------
# item 6: one message per kind, in every slot
# --------------------------------------------------------------------------------------

SCORES = {"scores": [[1.0, 2.0]], "mask": [[False, True]]}


@pytest.mark.parametrize(("expression", "variables", "name", "suggestion"), [
    ("softmax(masked_fill(scores, msk, -inf))", SCORES, "msk", "mask"),     # bool_mask slot
    ("embedding(weight, idz)", {"weight": [[1.0], [2.0]], "ids": [1]}, "idz", "ids"),
    ("cross_entropy(logits, target)", {"logits": [[1.0, 2.0]], "targets": [1]}, "target",
     "targets"),
    ("scores.sum(axis=axs)", {"scores": [[1.0]], "axes": [0]}, "axs", "axes"),   # literal
    ("scores[idx]", {"scores": [1.0], "ids": [0]}, "idx", "ids"),            # index slot
    ("scores[0:stop]", {"scores": [1.0], "stops": [0]}, "stop", "stops"),    # slice bound
    ("scores * maks", SCORES, "maks", "mask"),                               # tensor slot
])
def test_an_undefined_name_gets_one_message_in_every_slot(client, expression, variables,
                                                          name, suggestion):
    err = post(client, expression, variables, 422)["error"]
    listed = ", ".join(sorted(variables))
    assert err["message"] == (f"undefined name '{name}'; the variables are: {listed};"
                              f" did you mean '{suggestion}'? (at position"
                              f" {expression.index(name)})")
    assert err["span"] == [expression.index(name), expression.index(name) + len(name)]


def test_an_undefined_name_without_a_close_match_lists_the_variables():
    with pytest.raises(E.ExprError) as exc:
        E.evaluate("embedding(w, qqq)", {"w": [[1.0]]})
    assert str(exc.value) == "undefined name 'qqq'; the variables are: w (at position 13)"


def test_a_variable_in_a_literal_only_slot_is_named_as_a_variable():
    with pytest.raises(E.ExprError, match="got the variable 'k'"):
        E.evaluate("x.reshape(k)", {"x": [1.0], "k": [1]})


def test_an_unknown_op_suggests_close_op_names():
    with pytest.raises(E.ExprError) as exc:
        E.evaluate("sofmax(x)", {"x": [1.0]})
    assert "did you mean softmax" in str(exc.value) and exc.value.position == 0


def test_the_op_name_is_not_repeated(client):
    err = post(client, "cross_entropy(logits, [0, 1])", {"logits": [[1.0, 2.0]]}, 400)["error"]
    assert err["message"].count("cross_entropy:") == 1, err["message"]
    assert err["message"].startswith("`cross_entropy(logits, [0, 1])`: cross_entropy: targets")
    assert err["span"] == [22, 28]
    # and on the op route, which prefixes the op the same way
    r = client.post("/api/v1/ops/cross_entropy",
                    json={"inputs": {"logits": [[1.0, 2.0]], "targets": [0, 1]}})
    assert r.status_code == 400 and r.json()["error"]["message"].count("cross_entropy:") == 1


@pytest.mark.parametrize(("expression", "variables", "argument"), [
    ("cross_entropy(logits, targets)", {"logits": [[1.0, 2.0]], "targets": [5]}, "targets"),
    ("cross_entropy(logits, [5])", {"logits": [[1.0, 2.0]]}, "[5]"),
    ("embedding(w, ids)", {"w": [[1.0, 2.0]], "ids": [3]}, "ids"),
    ("x[4]", {"x": [1.0]}, "4"),
])
def test_an_out_of_range_id_points_at_its_argument_and_is_not_labelled_numpy(
        client, expression, variables, argument):
    err = post(client, expression, variables, 400)["error"]
    start = expression.index(argument, 2)
    assert err["position"] == start and err["span"] == [start, start + len(argument)]
    assert err["code"] == "invalid_value"           # glassllm's own bounds check
    assert "IndexError" not in err["message"] and "out of bounds" in err["message"]


def test_numpy_own_errors_keep_their_label_and_point_at_the_axis(client):
    err = post(client, "softmax(x, axis=3)", {"x": [1.0]}, 400)["error"]
    assert err["code"] == "numpy_error" and "AxisError: axis 3" in err["message"]
    assert err["span"] == [16, 17]
    err = post(client, "x + y", {"x": [1.0, 2.0], "y": [1.0, 2.0, 3.0]}, 400)["error"]
    assert err["code"] == "numpy_error" and err["span"] == [0, 5]
    assert err["message"].startswith("`x + y`: add: ValueError: shape mismatch")
