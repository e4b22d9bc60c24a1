"""One expression, ``POST /api/v1/eval``: every node's value and adjoint (envelope, prepare,
run).

The work is `glassllm.sandbox.expr.evaluate`, the same function a notebook calls, in its
two halves: `prepare` reads the envelope (`glassllm_service.envelope.EXPRESSION`) and
`expr.prepare`s the body (parse, graph, every shape planned, every refusal) before the
request waits; `Evaluation.answer` `expr.run`s it inside a compute slot. An `ExprError`
becomes 422 / 413 / 400 with the offending position in the app's exception handlers
(`glassllm_service.http_errors`, H4). An expression case of a batch or a check
(`glassllm_service.requests.case`) goes through the same `prepare` and `run`.
"""

from __future__ import annotations

from typing import Any

from glassllm.course import Hidden
from glassllm.sandbox import expr, float_warnings
from glassllm.sandbox.examples import EXAMPLES
from glassllm.sandbox.expr import computation
from glassllm.sandbox.expr.checking import MODES as CHECK_MODES
from glassllm_service.body import check_answer
from glassllm_service.codec import dumps, encode_as, encoding_of
from glassllm_service.course_state import CourseState, Redaction, Uses
from glassllm_service.envelope import EXPRESSION, read
from glassllm_service.requests import public_cases
from glassllm_service.settings import Settings

SEND = '{"expression": ...}'          # what an empty body is told to send
BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"title": "EvalRequest", "type": "object", "required": ["expression"],
               "additionalProperties": False, "properties": {
                   "expression": {"type": "string"},
                   "variables": {"type": "object", "additionalProperties": {
                       "anyOf": [{"$ref": "#/components/schemas/FloatArray"},
                                 {"type": "object", "required": ["value"],
                                  "properties": {"value": {},
                                                 "requires_grad": {"type": "boolean"}}}]}},
                   "grad_output": {"anyOf": [{"type": "null"},
                                             {"$ref": "#/components/schemas/FloatArray"}]},
                   "check": {"anyOf": [{"type": "boolean"}, {
                       "type": "object", "required": ["modes"], "additionalProperties": False,
                       "properties": {
                           "modes": {"type": "array", "minItems": 1, "uniqueItems": True,
                                     "items": {"enum": list(CHECK_MODES)}},
                           "float32": {"type": "boolean"},
                           "eps": {"anyOf": [{"type": "null"}, {
                               "type": "number", "exclusiveMinimum": 0, "maximum": 1}]},
                           "seed": {"type": "integer", "minimum": 0,
                                    "maximum": 2 ** 32 - 1}}}],
                             "description": "true: finite differences per variable; an"
                             " object: the modes finite_differences, taylor, adjoint,"
                             " eps_sweep, maybe in emulated float32"},
                   "encoding": {"enum": ["json", "base64"]},
                   "expand": {"type": "boolean", "description":
                              "open composite ops (cross_entropy, attention, rms_norm,"
                              " swiglu, transformer_block): each such node gets an"
                              " `expansion`, its composition of primitive ops with every"
                              " value and gradient"},
                   "paths": {"type": "boolean", "description":
                             "answer paths: each node read by more than one op input (or"
                             " by repeat_kv), its gradient split by those edges"},
                   "dead": {"type": "boolean", "description":
                            "answer dead: every variable whose gradient is missing or at"
                            " most 1e-12 of grad_output's scale, with the reason in words"
                            " and the node where its path was cut"}}},
    "example": EXAMPLES[1]["request"]}}}}


class Evaluation:
    """An expression past every check: the planned graph, the float warnings met while
    planning, and the answer's encoding."""

    __slots__ = ("encoding", "messages", "prepared", "redaction")

    def __init__(self, prepared: expr.PreparedExpression, messages: list[str],
                 encoding: str) -> None:
        self.prepared, self.messages, self.encoding = prepared, messages, encoding
        self.redaction: Redaction | None = None

    def uses(self, nodes: bool = True) -> Uses:
        """What it runs, for the open exercises' hiding (docs/modes.md): every op of its
        graph with what each runs, its expansions' too (`computation.runs`), on numbers
        the student chose unless it is a public case (a lesson's, a mystery's own).
        `nodes`: its answer holds the graph's nodes (eval's does, a batch's or a check's
        case not)."""
        p = self.prepared
        return Uses(computation.runs(p), check=bool(p.check), expand=p.expand, nodes=nodes,
                    chosen=public_cases.chosen(p))

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        """Refused (403) for what an open exercise hides; else its answer leaves out the
        hidden steps and inner gradients (kept as `redaction`)."""
        uses = self.uses()
        err = course.refusal(uses, hidden)
        if err is not None:
            raise err
        self.redaction = course.redaction(uses, hidden)

    @property
    def cost(self) -> tuple[int, int]:
        """Planned (elements, multiply-adds): the admission lane."""
        return self.prepared.cost

    def answer(self) -> bytes:
        """Run in a worker thread, inside a compute slot: the response bytes, value and
        grads in the asked encoding (the nodes stay JSON). A binary answer is written
        straight from the float64 arrays, so a NaN keeps its sign and payload (H3); it
        never goes through the JSON token "NaN"."""
        binary = self.encoding != "json"
        result = run(self, arrays=binary)
        if self.redaction is not None:
            result = self.redaction.apply(result)
        if binary:
            result["value"] = encode_as(result["value"], self.encoding)
            result["grads"] = {k: encode_as(g, self.encoding)
                               for k, g in result["grads"].items()}
        return dumps(result)


def prepare(body: Any, maybe_bools: bool, settings: Settings,
            rules: Any = None) -> Evaluation:
    """The envelope, then `glassllm.sandbox.expr.prepare`: every refusal (an ApiError, or
    an ExprError mapped by the app's handlers) before any compute. NumPy's
    `warnings`-module warnings met on the way are kept for the answer. `rules`: ops
    computed by other functions in this one evaluation (mystery mode's bug), else None."""
    encoding = encoding_of(body)
    read(body, EXPRESSION)
    messages: list[str] = []
    kwargs = {"expression": body["expression"], "variables": body.get("variables"),
              "grad_output": body.get("grad_output"), "check": body.get("check", False),
              "expand": body.get("expand", False), "paths": body.get("paths", False),
              "dead": body.get("dead", False),
              "limits": settings.limits, "maybe_bools": maybe_bools, "rules": rules}
    prepared = float_warnings.run_recording(lambda: expr.prepare(**kwargs), messages)
    opened = " and its opened composites" if prepared.expand else ""
    shares = ", the split of shared gradients" if prepared.paths else ""
    check_answer(prepared.answer_elements, settings, input="expression",
                 what=f"the expression's nodes{opened} (each value and gradient){shares}")
    return Evaluation(prepared, messages, encoding)


def run(evaluation: Evaluation, arrays: bool = False) -> dict:
    """`glassllm.sandbox.expr.run` (compute only): its dict (wire JSON; with `arrays`, value
    and grads as float64 NumPy arrays, bit-exact), every float warning in it."""
    messages = evaluation.messages
    result = float_warnings.run_recording(
        lambda: expr.run(evaluation.prepared, arrays=arrays), messages)
    result["warnings"] += [m for m in messages if m not in result["warnings"]]
    return result
