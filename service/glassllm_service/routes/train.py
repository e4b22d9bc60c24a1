"""``/api/v1/train`` (train a tiny LM; the answer is the run's event stream) and
``/api/v1/model/attention`` (a model's attention and its gradients). Stateless: any worker
or replica answers any request (docs/training.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm_service import compute, schemas
from glassllm_service.body import read_json
from glassllm_service.deps import SettingsDep, TrainingRunsDep
from glassllm_service.requests import attention, training_run

router = APIRouter(prefix="/api/v1", tags=["train"])
STREAM = {200: {"content": {"text/event-stream": {"schema": {
    "type": "string", "description": "server-sent events (docs/training.md)"}}}}}


@router.post("/train", operation_id="start_training", openapi_extra=training_run.BODY,
             responses={**STREAM, **schemas.error_responses(413, 415, 422, 429)},  # no slot
             summary="Train a tiny LM; the response is the run's event stream")
async def start_training(request: Request, settings: SettingsDep,
                         runs: TrainingRunsDep) -> Response:
    """Starts a run in a niced child process and streams its events (SSE).

    Events: ``start`` {run_id, steps, parameters, corpus_bytes, config}, ``step``
    {step, loss, grad_norm}, ``stats`` {step, lr, grad_norms, sample}, ``done`` {step,
    loss, seconds, weights}, ``error`` {code, message}. Every event carries ``run_id``
    and ``time`` (Unix seconds when the child made it). Close the stream to stop the run.
    """
    # the run is a child process counted by `runs`, not a compute slot: queued=False
    body, _ = await read_json(request, settings, send=training_run.SEND, queued=False)
    return training_run.start(training_run.prepare(body, settings), settings, runs)


@router.post("/model/attention", operation_id="model_attention", openapi_extra=attention.BODY,
             response_model=schemas.AttentionResult,
             responses=schemas.error_responses(413, 415, 422, 503),  # no run slot: no 429
             summary="Attention probabilities and their gradients")
async def model_attention(request: Request, settings: SettingsDep) -> Response:
    """Per layer and head: P (L, H, n, n), ∂loss/∂P (L, H, n, n), and the n tokens.

    loss = mean next-token cross-entropy of the prompt itself (t < n−1), so the last
    row's gradients are 0. Shapes: probs, grads (L, H, n, n) nested lists; tokens (n,).
    """
    return await compute.answer(request, settings, attention.prepare, send=attention.SEND,
                                prepare_in_thread=True)
