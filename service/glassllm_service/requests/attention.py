"""A model's attention and its gradients, ``POST /api/v1/model/attention``.

The weights of a ``done`` event (or a fresh model's ``seed`` and ``model`` size) and a
prompt; the answer holds every layer's and head's attention probabilities P (L, H, n, n),
their gradients ∂loss/∂P with respect to the prompt's next-token loss, and the tokens.
Stateless: the weights come with the request, so any worker or replica answers it.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field

from glassllm.course import Hidden
from glassllm.modules import GlassLM
from glassllm.tokenizer import ByteTokenizer
from glassllm.training import WeightsError, attention_maps, count_parameters, decode_weights
from glassllm_service.body import check_answer
from glassllm_service.course_state import CourseState, Uses
from glassllm_service.envelope import model
from glassllm_service.http_errors import ApiError
from glassllm_service.requests.training_run import (
    ModelSize,
    check_size,
    check_work,
    config_of,
    model_runs,
)
from glassllm_service.settings import Settings
from glassllm_service.trained_weights import key_of, signed

SEND = '{"prompt": "The cat", "seed": 0}'          # what an empty body is told to send


class AttentionRequest(BaseModel):
    """Weights from a ``done`` event, or a fresh model's ``seed`` and ``model`` size."""

    model_config = ConfigDict(extra="forbid")
    prompt: Annotated[str, Field(min_length=1)]
    weights: dict[str, Any] | None = None
    seed: Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)] | None = None
    model: ModelSize = ModelSize()


BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": AttentionRequest.model_json_schema(),
    "example": {"prompt": "The cat", "seed": 0}}}}}


class AttentionMaps:
    """A model and a prompt past every check, and the planned cost: elements of the largest
    activation, multiply-adds of forward + backward ≈ 3 · parameters · tokens. `chosen`:
    its weights are the student's own (given, and not signed as a training run's of this
    course)."""

    __slots__ = ("chosen", "cost", "ids", "model")

    def __init__(self, model: GlassLM, ids: np.ndarray, cost: tuple[int, int],
                 chosen: bool = False) -> None:
        self.model, self.ids, self.cost, self.chosen = model, ids, cost, chosen

    def uses(self) -> Uses:
        """What it runs, for the open exercises' hiding: the model's ops through their
        composed lines. Its answer is P = softmax of the scores and ∂loss/∂P, which, on
        weights the student writes, a student who writes out the model can steer a hidden
        op's numbers into; on a fresh model from a seed, or on weights a training run of
        this sandbox gave back (signed), no number is the student's choice."""
        return Uses(model_runs("attention"), chosen=self.chosen)

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        err = course.refusal(self.uses(), hidden)
        if err is not None:
            err.input = "weights"
            raise err

    def answer(self) -> bytes:
        """Run in a worker thread, inside a compute slot: P, ∂loss/∂P and the tokens."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = attention_maps(self.model, self.ids)
        if not (np.all(np.isfinite(out["probs"])) and np.all(np.isfinite(out["grads"]))):
            raise ApiError(422, "non_finite", "the model's attention is not finite for this "
                           "prompt (its weights overflow)", input="weights")
        return orjson.dumps({
            "tokens": [_token_label(int(b)) for b in self.ids], "ids": self.ids.tolist(),
            "loss": out["loss"] if math.isfinite(out["loss"]) else None,
            "shape": list(out["probs"].shape),
            "probs": out["probs"], "grads": out["grads"],
        }, option=orjson.OPT_SERIALIZE_NUMPY)


def _token_label(byte: int) -> str:
    """A byte as a label: printable ASCII as itself, anything else as \\xNN."""
    return chr(byte) if 32 <= byte < 127 else f"\\x{byte:02x}"


def _model(req: AttentionRequest, settings: Settings) -> GlassLM:
    if req.weights is None:
        config = config_of(req.model, req.seed or 0)
        check_size(config, settings)
        return GlassLM(config)
    try:
        return decode_weights(req.weights, max_parameters=settings.max_parameters)
    except WeightsError as exc:
        status = 413 if "GLASSLLM_MAX_PARAMETERS" in str(exc) else 422
        raise ApiError(status, "invalid_weights", str(exc), input=exc.input) from None


def prepare(body: Any, maybe_bools: bool, settings: Settings) -> AttentionMaps:
    """Every check of an attention request, before any forward work (decoding the weights
    is work: the route runs this in a worker thread)."""
    req = model(AttentionRequest, body)
    glass = _model(req, settings)
    ids = ByteTokenizer().encode(req.prompt)
    config, n = glass.config, len(ids)
    if not 2 <= n <= config.max_seq_len:
        raise ApiError(422, "invalid_prompt", f"prompt: must be 2 to {config.max_seq_len}"
                       f" bytes (the model's max_seq_len); got {n}", input="prompt")
    biggest = check_work(1, n, config, settings.max_result_elements, "prompt")
    # held: the weights; returned: probabilities and their gradients, (L, H, n, n) each
    check_answer(count_parameters(config) + 2 * config.n_layers * config.n_heads * n * n,
                 settings, input="prompt", what="the attention maps and their gradients")
    chosen = req.weights is not None and not signed(req.weights, key_of(settings.course_salt))
    return AttentionMaps(glass, ids, (biggest, 3 * count_parameters(config) * n), chosen)
