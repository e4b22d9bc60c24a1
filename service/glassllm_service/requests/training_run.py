"""One training run, ``POST /api/v1/train``: its envelope, its checks, its event stream.

Stateless, so any worker or replica can answer any request: the answer is the run itself,
a Server-Sent-Events stream (sse-starlette): ``start`` (with the run id), ``step`` per
step, ``stats`` every ``every`` steps, and ``done`` with the final weights, or ``error``.
Closing the stream cancels the run: there is nothing to DELETE, no run is kept after its
stream ends. The run is a child process (`glassllm_service.training_runner`) that waits for
its turn in this worker's `glassllm_service.training_queue.TrainingQueue`, not a compute
slot: while it waits, its stream says so (``queued``, then ``position`` events, before
``start``), and a client that goes away leaves the line.

The run id (``secrets.token_urlsafe(16)``: 128 random bits) names the run in its events
and the server's log; nothing can be reached by it, so guessing it gains nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import secrets
import time
from typing import Annotated, Any, Literal

import anyio
import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from glassllm.course import Hidden
from glassllm.layers import GlassConfig
from glassllm.modules import GlassLM
from glassllm.sandbox.registry.closure import runs, traced
from glassllm.training import (
    attention_maps,
    corpus_text,
    count_parameters,
    default_corpus,
    train_events,
)
from glassllm_service.body import check_answer
from glassllm_service.course_state import CourseState, Uses
from glassllm_service.envelope import model
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings
from glassllm_service.trained_weights import key_of
from glassllm_service.training_queue import Replaced, Ticket, TrainingQueue, planned_seconds
from glassllm_service.training_runner import ShuttingDown, WallTimeExceeded, events

log = logging.getLogger("glassllm.service.train")
SEND = '{"steps": 300} (or {} for the defaults)'          # what an empty body is told


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


def config_of(size: ModelSize, seed: int) -> GlassConfig:
    """The `GlassConfig` of a requested size; a head count that does not divide is 422."""
    try:
        return GlassConfig(seed=seed, **size.model_dump())
    except ValueError as exc:
        where = f"model.{getattr(exc, 'input', 'n_heads')}"
        raise ApiError(422, "invalid_model", f"{where}: {exc}", input=where) from None


def check_size(config: GlassConfig, settings: Settings) -> None:
    n = count_parameters(config)
    if n > settings.max_parameters:
        raise ApiError(413, "too_many_parameters", f"the model has {n} parameters; at most "
                       f"{settings.max_parameters} (GLASSLLM_MAX_PARAMETERS)", input="model")


def check_work(batch: int, n: int, config: GlassConfig, max_elements: int, field: str) -> int:
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


BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": TrainRequest.model_json_schema(),
    "example": {"steps": 300, "lr": 0.003, "batch": 8, "seed": 0, "every": 25}}}}}


def _corpus(given: str | None, settings: Settings) -> str:
    if given is None:
        return default_corpus()
    size = len(given.encode("utf-8", errors="surrogatepass"))
    if size > settings.max_corpus_bytes:
        raise ApiError(413, "corpus_too_large", f"the corpus has {size} bytes; at most "
                       f"{settings.max_corpus_bytes} (GLASSLLM_MAX_CORPUS_BYTES)",
                       input="corpus")
    try:  # what `glassllm train` trains on for the same file (a leading BOM dropped)
        return corpus_text(given)
    except ValueError as exc:
        raise ApiError(422, "invalid_corpus", f"corpus {exc}", input="corpus") from None


TINY = GlassConfig(d_model=4, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=4,
                  max_seq_len=4)


@functools.cache
def model_runs(what: str) -> dict[str, str]:
    """Every registry op a model's ``train`` run or its ``attention`` maps run → the op that
    brings it in: traced once, on the smallest model, from the very functions the routes
    call (`glassllm.sandbox.registry.closure.traced`): a run's steps through the fused
    layers (each named after the op whose lines it stands for), its stats and samples;
    the maps through the composed lines."""
    if what == "train":
        def call() -> Any:
            return list(train_events(TINY, "abcdefgh" * 2, steps=2, batch=1, every=1))
    else:
        model = GlassLM(TINY)

        def call() -> Any:
            return attention_maps(model, np.array([1, 2, 3], dtype=np.int64))
    _, ops = traced(call)
    return runs(sorted(ops))


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """A run past every check: the child's arguments, the model's parameter count and
    the run's planned seconds (`glassllm_service.training_queue.planned_seconds`)."""

    kwargs: dict[str, Any]
    parameters: int
    planned: float

    def uses(self) -> Uses:
        """What it runs, for the open exercises' hiding: the model's ops, on numbers the
        student did not choose. A run starts from weights the sandbox initialises from a
        seed and trains them on byte windows; its corpus picks which embedding rows are
        read, never a number an op computes on. It answers losses, gradient norms, dead
        counts, samples and the trained weights of that model: a hidden op's numbers at
        points no student chose (docs/modes.md)."""
        return Uses(model_runs("train"), chosen=False)

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        err = course.refusal(self.uses(), hidden)
        if err is not None:
            raise err


def prepare(body: Any, settings: Settings) -> TrainingRun:
    """Every check of a run, before it starts (422, 413): the run to start."""
    req = model(TrainRequest, body)
    if req.steps > settings.max_train_steps:
        raise ApiError(422, "too_many_steps", f"steps {req.steps} is more than "
                       f"{settings.max_train_steps} (GLASSLLM_MAX_TRAIN_STEPS)", input="steps")
    if req.batch > settings.max_train_batch:
        raise ApiError(422, "batch_too_large", f"batch {req.batch} is more than "
                       f"{settings.max_train_batch} (GLASSLLM_MAX_TRAIN_BATCH)", input="batch")
    config = config_of(req.model, req.seed)
    check_size(config, settings)
    check_work(req.batch, config.max_seq_len, config, settings.max_result_elements, "batch")
    check_answer(count_parameters(config), settings, input="model",
                 what="the done event's weights")
    corpus = _corpus(req.corpus, settings)
    if len(corpus.encode("utf-8")) < config.max_seq_len + 1:
        raise ApiError(422, "corpus_too_short", f"corpus: training windows need at least "
                       f"model.max_seq_len + 1 = {config.max_seq_len + 1} bytes",
                       input="corpus")
    kwargs = {"config": dataclasses.asdict(config), "corpus": corpus, "steps": req.steps,
              "lr": req.lr, "batch": req.batch, "seed": req.seed, "optimizer": req.optimizer,
              "every": req.every}
    if settings.mode == "course":   # the done event's weights, signed as the sandbox's own
        kwargs["signing_key"] = key_of(settings.course_salt).hex()
    parameters = count_parameters(config)
    return TrainingRun(kwargs, parameters, planned_seconds(
        kwargs["config"], req.steps, req.batch, req.every, parameters))


class QueuedStream(EventSourceResponse):
    """The run's event stream; however the response ends (even before its generator
    started: a client gone at once), its ticket leaves the queue."""

    def __init__(self, queue: TrainingQueue, ticket: Ticket, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.queue, self.ticket = queue, ticket

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.queue.leave(self.ticket)


def start(run: TrainingRun, settings: Settings, queue: TrainingQueue,
          owner: str) -> EventSourceResponse:
    """Put a prepared run in line (503 when the line is full) and answer with its stream.

    Events: while it waits, ``queued`` then ``position`` {position, waiting, wait_s,
    run_s, runs_at_once}; then ``start`` {run_id, steps, parameters, corpus_bytes,
    config}, ``step`` {step, loss, grad_norm}, ``stats`` {step, lr, grad_norms, dead, sample},
    ``done`` {step, loss, seconds, weights}, ``error`` {code, message}. Every event
    carries ``run_id`` and ``time`` (Unix seconds when it was made)."""
    ticket = queue.enter(owner, run.kwargs["steps"], run.planned)
    run_id = secrets.token_urlsafe(16)  # 128 random bits
    log.info("training run %s: %d steps, %d parameters", run_id, run.kwargs["steps"],
             run.parameters)
    # sse-starlette sets `shutdown` when the server is told to stop (SIGTERM); the stream
    # then sends its `error` (code shutdown) and ends within the grace period, before
    # uvicorn's own graceful shutdown (10 s, glassllm_service/sandbox_cli.py) cancels what
    # is left
    shutdown = anyio.Event()
    stream = _stream(run_id, run.kwargs, settings.max_train_seconds, queue, ticket, shutdown)
    return QueuedStream(queue, ticket, stream, ping=15,
                        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
                        shutdown_event=shutdown, shutdown_grace_period=5)


def _error(run_id: str, code: str, message: str) -> bytes:
    return orjson.dumps({"run_id": run_id, "event": "error", "code": code, "message": message,
                         "time": time.time()})


SHUTDOWN = ("the sandbox is shutting down; the run was stopped (start it again once the"
            " sandbox is back)")
REPLACED = ("you started another run, so this one stopped: each student trains one run at a"
            " time")


class _Stop:
    """The ``stop`` of a running run: the server shuts down, or the run was replaced."""

    def __init__(self, queue: TrainingQueue, ticket: Ticket, shutdown: Any) -> None:
        self.queue, self.ticket, self.shutdown = queue, ticket, shutdown

    async def wait(self) -> None:
        await self.queue.stopped(self.ticket, self.shutdown)


async def _stream(run_id: str, kwargs: dict[str, Any], max_seconds: float,
                  queue: TrainingQueue, ticket: Ticket, shutdown: anyio.Event | None = None):
    """The SSE events of one run: its place in line while it waits, then the run's own,
    ending with ``done`` or ``error`` (a child that died, the wall-time limit, the server
    shutting down, the run replaced); cancelled (the client gone) → it leaves the line, or
    its child is killed. The wall-time limit counts from the run's turn, not its wait."""
    prefix = b'{"run_id":"' + run_id.encode() + b'",'
    counter = itertools.count()

    def sse(name: str, data: bytes) -> dict[str, str]:
        return {"event": name, "id": str(next(counter)), "data": data.decode()}

    try:
        async for place in queue.wait_turn(ticket, shutdown):
            yield sse(place["event"], prefix + orjson.dumps(place)[1:])
        if not ticket.granted.done():                    # the server is shutting down
            raise ShuttingDown
        async for message in events(kwargs, max_seconds, _Stop(queue, ticket, shutdown)):
            name = message[10:message.index(b'"', 10)].decode()  # {"event":"<name>",...
            if name == "step":
                ticket.step_seen()
            yield sse(name, prefix + message[1:])
    except WallTimeExceeded:
        yield sse("error", _error(run_id, "time_limit", f"the run passed {max_seconds:g} s"
                                  " of wall time (GLASSLLM_MAX_TRAIN_SECONDS) and was stopped"))
    except (Replaced, ShuttingDown):
        replaced = ticket.replaced.done()
        yield sse("error", _error(run_id, "replaced" if replaced else "shutdown",
                                  REPLACED if replaced else SHUTDOWN))
    finally:
        queue.leave(ticket)
        log.info("training run %s ended", run_id)
