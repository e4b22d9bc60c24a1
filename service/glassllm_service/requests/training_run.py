"""``/api/v1/train`` and ``/api/v1/model/attention``: train a tiny LM, look at its attention.

Stateless (issue 15, design 1), so any worker or replica can answer any request:

* ``POST /api/v1/train`` answers with the run itself, a Server-Sent-Events stream
  (sse-starlette): ``start`` (with the run id), ``step`` per step, ``stats`` every
  ``every`` steps, and ``done`` with the final weights, or ``error``. Closing the stream
  cancels the run: there is nothing to DELETE, no run is kept after its stream ends.
* ``POST /api/v1/model/attention`` takes those weights back (or a fresh model's seed
  and size) and a prompt, and returns every layer's and head's attention probabilities,
  their gradients with respect to the prompt's next-token loss, and the tokens.

The run id (``secrets.token_urlsafe(16)``: 128 random bits) names the run in its events
and the server's log; nothing can be reached by it, so guessing it gains nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import secrets
import time
from typing import Annotated, Any, Literal

import anyio
import numpy as np
import orjson
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from glassllm.layers import GlassConfig
from glassllm.tokenizer import ByteTokenizer
from glassllm.training.loop import corpus_text, default_corpus
from glassllm.training.stream import (
    WeightsError,
    attention_maps,
    count_parameters,
    decode_weights,
)
from glassllm_service import schemas
from glassllm_service.admission import run_admitted
from glassllm_service.body import check_answer, read_json
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings
from glassllm_service.train_settings import TrainSettings
from glassllm_service.training_runner import ShuttingDown, WallTimeExceeded, events

log = logging.getLogger("glassllm.service.train")
router = APIRouter(prefix="/api/v1", tags=["train"])
# a run takes no compute slot (no 503); attention no run slot (no 429)
TRAIN_ERRORS = schemas.error_responses(413, 415, 422, 429)
ATTENTION_ERRORS = schemas.error_responses(413, 415, 422, 503)


class ModelSize(BaseModel):
    """The model's shape (``GlassConfig``); the defaults are the CLI's tiny model. Counts
    are strict JSON integers (H3): ``true``, ``"3"`` and ``64.0`` are refused (422)."""""

    model_config = ConfigDict(extra="forbid")
    d_model: Annotated[int, Field(strict=True, ge=2, le=1024)] = 64
    n_layers: Annotated[int, Field(strict=True, ge=1, le=16)] = 2
    n_heads: Annotated[int, Field(strict=True, ge=1, le=64)] = 4
    n_kv_heads: Annotated[int, Field(strict=True, ge=1, le=64)] = 2
    ffn_hidden: Annotated[int, Field(strict=True, ge=1, le=8192)] = 192
    max_seq_len: Annotated[int, Field(strict=True, ge=2, le=512)] = 64


class TrainRequest(BaseModel):
    """A run: model size, corpus (null: the shipped one), and the optimizer's settings."""

    model_config = ConfigDict(extra="forbid")
    model: ModelSize = ModelSize()
    corpus: str | None = None
    steps: Annotated[int, Field(strict=True, ge=1)] = 300
    lr: Annotated[float, Field(strict=True, gt=0, le=10, allow_inf_nan=False)] = 3e-3
    batch: Annotated[int, Field(strict=True, ge=1)] = 8
    seed: Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)] = 0
    optimizer: Literal["adamw", "sgd"] = "adamw"
    every: Annotated[int, Field(strict=True, ge=1, le=1_000_000)] = 25


class AttentionRequest(BaseModel):
    """Weights from a ``done`` event, or a fresh model's ``seed`` and ``model`` size."""

    model_config = ConfigDict(extra="forbid")
    prompt: Annotated[str, Field(min_length=1)]
    weights: dict[str, Any] | None = None
    seed: Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)] | None = None
    model: ModelSize = ModelSize()


def _validate(model: type[BaseModel], body: Any) -> Any:
    """pydantic's first complaint as a 422 naming the field (H4)."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request body"
        raise ApiError(422, "invalid_request", f"{where}: {first['msg']}", input=where) from None


def _config(size: ModelSize, seed: int) -> GlassConfig:
    try:
        return GlassConfig(seed=seed, **size.model_dump())
    except ValueError as exc:
        where = f"model.{getattr(exc, 'input', 'n_heads')}"
        raise ApiError(422, "invalid_model", f"{where}: {exc}", input=where) from None


def _check_size(config: GlassConfig, limits: TrainSettings) -> None:
    n = count_parameters(config)
    if n > limits.max_parameters:
        raise ApiError(413, "too_many_parameters", f"the model has {n} parameters; at most "
                       f"{limits.max_parameters} (GLASSLLM_MAX_PARAMETERS)", input="model")


def _check_work(batch: int, n: int, config: GlassConfig, max_elements: int, field: str) -> int:
    """The largest activations of one forward pass, from shapes, before any work: the
    attention scores (B, H, n, n) and the logits / SwiGLU hidden (B, n, max(V, F));
    returns that count."""
    biggest = max(batch * config.n_heads * n * n * config.n_layers,
                  batch * n * max(config.vocab, config.ffn_hidden))
    if biggest > max_elements:
        raise ApiError(413, "too_large", f"one forward pass would hold {biggest} elements "
                       f"(attention B·H·n²·L, logits B·n·V); at most {max_elements} "
                       "(GLASSLLM_MAX_RESULT_ELEMENTS)", input=field)
    return biggest


class RunCounter:
    """Training runs streaming in this process, at most ``limit`` (GLASSLLM_MAX_TRAINING_RUNS)."""

    def __init__(self, limit: int):
        self.limit, self.active = limit, 0

    def acquire(self) -> None:
        if self.active >= self.limit:
            raise ApiError(429, "too_many_runs", f"{self.active} training runs are already "
                           f"going in this worker, at most {self.limit} "
                           "(GLASSLLM_MAX_TRAINING_RUNS); stop one or retry later",
                           headers={"Retry-After": "5"})
        self.active += 1

    def release(self) -> None:
        self.active -= 1


TRAIN_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": TrainRequest.model_json_schema(),
    "example": {"steps": 300, "lr": 0.003, "batch": 8, "seed": 0, "every": 25}}}}}


@router.post("/train", summary="Train a tiny LM; the response is the run's event stream",
             responses={200: {"content": {"text/event-stream": {"schema": {
                 "type": "string", "description": "server-sent events (docs/training.md)"}}}},
                 **TRAIN_ERRORS}, operation_id="start_training",
             openapi_extra=TRAIN_BODY)
async def start_training(request: Request) -> Response:
    """Starts a run in a niced child process and streams its events (SSE).

    Events: ``start`` {run_id, steps, parameters, corpus_bytes, config}, ``step``
    {step, loss, grad_norm}, ``stats`` {step, lr, grad_norms, sample}, ``done`` {step,
    loss, seconds, weights}, ``error`` {code, message}. Every event carries ``run_id``
    and ``time`` (Unix seconds when the child made it). Close the stream to stop the run.
    """
    limits: TrainSettings = request.app.state.train_settings
    # the run is a child process counted by `RunCounter`, not a compute slot: queued=False
    body, _ = await read_json(request, request.app.state.settings,
                              send='{"steps": 300} (or {} for the defaults)', queued=False)
    req: TrainRequest = _validate(TrainRequest, body)
    if req.steps > limits.max_train_steps:
        raise ApiError(422, "too_many_steps", f"steps {req.steps} is more than "
                       f"{limits.max_train_steps} (GLASSLLM_MAX_TRAIN_STEPS)", input="steps")
    if req.batch > limits.max_train_batch:
        raise ApiError(422, "batch_too_large", f"batch {req.batch} is more than "
                       f"{limits.max_train_batch} (GLASSLLM_MAX_TRAIN_BATCH)", input="batch")
    config = _config(req.model, req.seed)
    _check_size(config, limits)
    _check_work(req.batch, config.max_seq_len, config,
                request.app.state.settings.max_result_elements, "batch")
    check_answer(count_parameters(config), request.app.state.settings, input="model",
                 what="the done event's weights")
    if req.corpus is None:
        corpus = default_corpus()
    else:
        size = len(req.corpus.encode("utf-8", errors="surrogatepass"))
        if size > limits.max_corpus_bytes:
            raise ApiError(413, "corpus_too_large", f"the corpus has {size} bytes; at most "
                           f"{limits.max_corpus_bytes} (GLASSLLM_MAX_CORPUS_BYTES)",
                           input="corpus")
        try:  # what `glassllm train` trains on for the same file (a leading BOM dropped)
            corpus = corpus_text(req.corpus)
        except ValueError as exc:
            raise ApiError(422, "invalid_corpus", f"corpus {exc}", input="corpus") from None
    if len(corpus.encode("utf-8")) < config.max_seq_len + 1:
        raise ApiError(422, "corpus_too_short", f"corpus: training windows need at least "
                       f"model.max_seq_len + 1 = {config.max_seq_len + 1} bytes",
                       input="corpus")
    runs: RunCounter = request.app.state.training_runs
    runs.acquire()
    run_id = secrets.token_urlsafe(16)  # 128 random bits
    kwargs = {"config": dataclasses.asdict(config), "corpus": corpus, "steps": req.steps,
              "lr": req.lr, "batch": req.batch, "seed": req.seed, "optimizer": req.optimizer,
              "every": req.every}
    log.info("training run %s: %d steps, %d parameters", run_id, req.steps,
             count_parameters(config))
    # sse-starlette sets `shutdown` when the server is told to stop (SIGTERM); the stream
    # then sends its `error` (code shutdown) and ends within the grace period, before
    # uvicorn's own graceful shutdown (10 s, glassllm_service/sandbox_cli.py) cancels what is left
    shutdown = anyio.Event()
    stream = _stream(run_id, kwargs, limits, runs, shutdown)
    return EventSourceResponse(stream, ping=15, headers={"Cache-Control": "no-store",
                                                         "X-Accel-Buffering": "no"},
                               shutdown_event=shutdown, shutdown_grace_period=5)


def _error(run_id: str, code: str, message: str) -> bytes:
    return orjson.dumps({"run_id": run_id, "event": "error", "code": code, "message": message,
                         "time": time.time()})


async def _stream(run_id: str, kwargs: dict[str, Any], limits: TrainSettings,
                  runs: RunCounter, shutdown: anyio.Event | None = None):
    """The SSE events of one run, ending with ``done`` or ``error`` (a child that died, the
    wall-time limit, the server shutting down); cancelled (the client gone) → the child is
    killed."""
    prefix = b'{"run_id":"' + run_id.encode() + b'",'
    counter = itertools.count()
    try:
        async for message in events(kwargs, limits.max_train_seconds, shutdown):
            name = message[10:message.index(b'"', 10)].decode()  # {"event":"<name>",...
            yield {"event": name, "id": str(next(counter)),
                   "data": (prefix + message[1:]).decode()}
    except WallTimeExceeded:
        yield {"event": "error", "id": str(next(counter)), "data": _error(
            run_id, "time_limit", f"the run passed {limits.max_train_seconds:g} s of wall time"
            " (GLASSLLM_MAX_TRAIN_SECONDS) and was stopped").decode()}
    except ShuttingDown:
        yield {"event": "error", "id": str(next(counter)), "data": _error(
            run_id, "shutdown", "the sandbox is shutting down; the run was stopped (start it"
            " again once the sandbox is back)").decode()}
    finally:
        runs.release()
        log.info("training run %s ended", run_id)


class AttentionResult(BaseModel):
    """``POST /api/v1/model/attention``: per layer and head, P and ∂loss/∂P (L, H, n, n)."""

    tokens: list[str] = Field(description="the prompt's n bytes as labels (\\xNN when not"
                                          " printable ASCII)")
    ids: list[int] = Field(description="the prompt's n byte ids")
    loss: float | None = Field(description="mean next-token cross-entropy of the prompt;"
                                           " null when not finite")
    shape: list[int] = Field(description="[L, H, n, n]")
    probs: list[list[list[list[float]]]] = Field(description="attention probabilities")
    grads: list[list[list[list[float]]]] = Field(description="∂loss/∂probs")


def _token_label(byte: int) -> str:
    """A byte as a label: printable ASCII as itself, anything else as \\xNN."""
    return chr(byte) if 32 <= byte < 127 else f"\\x{byte:02x}"


def _attention_model(req: AttentionRequest, limits: TrainSettings,
                     settings: Settings) -> tuple[Any, np.ndarray, tuple[int, int]]:
    """Every check of an attention request, before any forward work: the model, the
    prompt's ids and the planned cost (elements of the largest activation, multiply-adds
    of forward + backward ≈ 3 · parameters · tokens) that the admission lane is chosen by."""
    if req.weights is not None:
        try:
            model = decode_weights(req.weights, max_parameters=limits.max_parameters)
        except WeightsError as exc:
            status = 413 if "GLASSLLM_MAX_PARAMETERS" in str(exc) else 422
            raise ApiError(status, "invalid_weights", str(exc), input=exc.input) from None
    else:
        config = _config(req.model, req.seed or 0)
        _check_size(config, limits)
        from glassllm.modules import GlassLM
        model = GlassLM(config)
    ids = ByteTokenizer().encode(req.prompt)
    n_max = model.config.max_seq_len
    if not 2 <= len(ids) <= n_max:
        raise ApiError(422, "invalid_prompt", f"prompt: must be 2 to {n_max} bytes (the "
                       f"model's max_seq_len); got {len(ids)}", input="prompt")
    biggest = _check_work(1, len(ids), model.config, settings.max_result_elements, "prompt")
    config, n = model.config, len(ids)
    # held: the weights; returned: probabilities and their gradients, (L, H, n, n) each
    check_answer(count_parameters(config) + 2 * config.n_layers * config.n_heads * n * n,
                 settings, input="prompt", what="the attention maps and their gradients")
    return model, ids, (biggest, 3 * count_parameters(config) * n)


def _attention(model: Any, ids: np.ndarray) -> bytes:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        out = attention_maps(model, ids)
    if not (np.all(np.isfinite(out["probs"])) and np.all(np.isfinite(out["grads"]))):
        raise ApiError(422, "non_finite", "the model's attention is not finite for this "
                       "prompt (its weights overflow)", input="weights")
    return orjson.dumps({
        "tokens": [_token_label(int(b)) for b in ids], "ids": ids.tolist(),
        "loss": out["loss"] if math.isfinite(out["loss"]) else None,
        "shape": list(out["probs"].shape),
        "probs": out["probs"], "grads": out["grads"],
    }, option=orjson.OPT_SERIALIZE_NUMPY)


ATTENTION_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": AttentionRequest.model_json_schema(),
    "example": {"prompt": "The cat", "seed": 0}}}}}


@router.post("/model/attention", summary="Attention probabilities and their gradients",
             responses=ATTENTION_ERRORS, openapi_extra=ATTENTION_BODY,
             response_model=AttentionResult,
             operation_id="model_attention")
async def model_attention(request: Request) -> Response:
    """Per layer and head: P (L, H, n, n), ∂loss/∂P (L, H, n, n), and the n tokens.

    loss = mean next-token cross-entropy of the prompt itself (t < n−1), so the last
    row's gradients are 0. Shapes: probs, grads (L, H, n, n) nested lists; tokens (n,).
    """
    limits: TrainSettings = request.app.state.train_settings
    body, _ = await read_json(request, request.app.state.settings,
                              send='{"prompt": "The cat", "seed": 0}')
    req: AttentionRequest = _validate(AttentionRequest, body)
    model, ids, cost = await run_in_threadpool(
        _attention_model, req, limits, request.app.state.settings)
    out = await run_admitted(request, cost, _attention, model, ids)
    return Response(out, media_type="application/json")


def install(app: FastAPI) -> None:
    """Add the routes and their settings (GLASSLLM_MAX_TRAINING_RUNS …) to ``app``."""
    limits = TrainSettings()
    app.state.train_settings = limits
    app.state.training_runs = RunCounter(limits.max_training_runs)
    app.include_router(router)
