"""``/api/v1/train`` (train a tiny LM; the answer is the run's event stream) and
``/api/v1/model/attention`` (a model's attention and its gradients). Stateless: any worker
or replica answers any request (docs/training.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm_service import compute, schemas
from glassllm_service.body import read_json
from glassllm_service.course_state import guarded
from glassllm_service.deps import CourseDep, SettingsDep, TrainingQueueDep
from glassllm_service.requests import attention, training_run
from glassllm_service.training_queue import run_owner

router = APIRouter(prefix="/api/v1", tags=["train"])
STREAM = {200: {"content": {"text/event-stream": {"schema": {
    "type": "string", "description": "server-sent events (docs/training.md)"}}}}}


@router.post("/train", operation_id="start_training", openapi_extra=training_run.BODY,
             responses={**STREAM, **schemas.error_responses(403, 413, 415, 422, 503, why={
                 403: "training is turned off on this sandbox (`training_off`)",
                 503: "this worker's training queue is full (`training_queue_full`)"})},
             summary="Train a tiny LM; the response is the run's event stream")
async def start_training(request: Request, settings: SettingsDep,
                         queue: TrainingQueueDep) -> Response:
    """Puts the run in this worker's training queue and streams its events (SSE); the run
    trains in a niced child process when its turn comes.

    Events: while it waits, ``queued`` then ``position`` {position, waiting, wait_s,
    run_s, runs_at_once}; then ``start`` {run_id, steps, parameters, corpus_bytes,
    config}, ``step`` {step, loss, grad_norm}, ``stats`` {step, lr, grad_norms, dead, sample},
    ``done`` {step, loss, seconds, weights}, ``error`` {code, message}. Every event
    carries ``run_id`` and ``time``. Close the stream to stop the run or leave the queue;
    a second start by the same client replaces its first run.
    """
    # the run waits in the training queue, not for a compute slot: queued=False
    body, _ = await read_json(request, settings, send=training_run.SEND, queued=False)
    run = request.app.state.course.hide(training_run.prepare(body, settings))
    return training_run.start(run, settings, queue,
                              run_owner(request, shared_token=bool(settings.api_token)))


@router.post("/model/attention", operation_id="model_attention", openapi_extra=attention.BODY,
             response_model=schemas.AttentionResult,
             responses=schemas.error_responses(403, 413, 415, 422, 503, why={
                 403: "course mode: weights of your own while an open exercise hides an op"
                      " the model runs (`hidden_by_exercise`)"}),
             summary="Attention probabilities and their gradients")
async def model_attention(request: Request, settings: SettingsDep, course: CourseDep
                          ) -> Response:
    """Per layer and head: P (L, H, n, n), ∂loss/∂P (L, H, n, n), and the n tokens.

    loss = mean next-token cross-entropy of the prompt itself (t < n−1), so the last
    row's gradients are 0. Shapes: probs, grads (L, H, n, n) nested lists; tokens (n,).
    """
    return await compute.answer(request, settings, guarded(attention.prepare, course),
                                send=attention.SEND, prepare_in_thread=True)
