"""Prometheus metrics at ``/metrics`` with the standard client library.

Labels come from bounded sets only: route templates (``/api/v1/ops/{name}``, one per
registry op), registry op names, status codes, lanes and refusal reasons — never a raw
path or an id. With several worker processes, ``glassllm-sandbox`` points
``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before the workers start, and
``/metrics`` sums every worker's files (the client library's multiprocess mode).
``GLASSLLM_METRICS=0``: no route, nothing recorded.

| metric | type | labels |
|---|---|---|
| glassllm_requests_total | counter | route, op, status |
| glassllm_request_duration_seconds | histogram | route, op |
| glassllm_queue_depth | gauge (sum over workers) | lane |
| glassllm_slots_busy | gauge (sum over workers) | lane |
| glassllm_slots | gauge (sum over workers) | — |
| glassllm_slot_wait_seconds | histogram | lane |
| glassllm_refusals_total | counter | reason (below) |
| glassllm_training_runs | gauge (sum over workers) | state (running, waiting) |
| glassllm_training_slots | gauge (sum over workers) | — |

Refusal reasons: ``queue_full``, ``queue_timeout``, ``client_gone`` (compute slots),
``training_queue_full`` (a run refused), ``training_replaced`` (a run its owner replaced).
"""

from __future__ import annotations

import os
from typing import Any

_m: dict[str, Any] = {}          # the metric objects, made once per process by enable()
_children: dict[tuple[str, ...], Any] = {}  # (metric, *labels) -> its labelled child
BUCKETS = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10)


def enable() -> None:
    """Create the metrics (once per process; create_app may run more than once in tests)."""
    if _m:
        return
    from prometheus_client import Counter, Gauge, Histogram
    _m["requests"] = Counter("glassllm_requests", "HTTP requests answered",
                             ["route", "op", "status"])
    _m["duration"] = Histogram("glassllm_request_duration_seconds", "Time to answer a request",
                               ["route", "op"], buckets=BUCKETS)
    _m["queue"] = Gauge("glassllm_queue_depth", "Requests waiting for a compute slot",
                        ["lane"], multiprocess_mode="livesum")
    _m["busy"] = Gauge("glassllm_slots_busy", "Compute slots in use", ["lane"],
                       multiprocess_mode="livesum")
    _m["slots"] = Gauge("glassllm_slots", "Compute slots", multiprocess_mode="livesum")
    _m["wait"] = Histogram("glassllm_slot_wait_seconds", "Time waited for a compute slot",
                           ["lane"], buckets=BUCKETS)
    _m["refusals"] = Counter("glassllm_refusals", "Requests refused or dropped while queued",
                             ["reason"])
    _m["training"] = Gauge("glassllm_training_runs", "Training runs running or waiting",
                           ["state"], multiprocess_mode="livesum")
    _m["training_slots"] = Gauge("glassllm_training_slots", "Training runs at once",
                                 multiprocess_mode="livesum")
    for lane in ("small", "large"):                 # every series present from the start
        _m["queue"].labels(lane)
        _m["busy"].labels(lane)
    for state in ("running", "waiting"):
        _m["training"].labels(state)
    for reason in ("queue_full", "queue_timeout", "client_gone", "training_queue_full",
                   "training_replaced"):
        _m["refusals"].labels(reason)


def _child(*key: str) -> Any:
    """``_m[key[0]].labels(*key[1:])``, kept: the label sets are bounded (see above), and a
    dict lookup is a fraction of the client library's locked `labels()` on every request."""
    child = _children.get(key)
    if child is None:
        child = _children[key] = _m[key[0]].labels(*key[1:])
    return child


def record_request(route: str, op: str, status: int, seconds: float) -> None:
    if _m:
        _child("requests", route, op, str(status)).inc()
        _child("duration", route, op).observe(seconds)


def queue_depth(lane: str, delta: int) -> None:
    if _m:
        _child("queue", lane).inc(delta)


def slot_taken(lane: str) -> None:
    if _m:
        _child("busy", lane).inc()


def slot_released(lane: str) -> None:
    if _m:
        _child("busy", lane).dec()


def slots_capacity(n: int) -> None:
    if _m:
        _m["slots"].set(n)


def slot_waited(lane: str, seconds: float) -> None:
    if _m:
        _child("wait", lane).observe(seconds)


def training_runs(state: str, delta: int) -> None:
    if _m:
        _child("training", state).inc(delta)


def training_capacity(n: int) -> None:
    if _m:
        _m["training_slots"].set(n)


def refused(reason: str) -> None:
    if _m:
        _m["refusals"].labels(reason).inc()


def exposition() -> tuple[bytes, str]:
    """The text format of every metric, summed over workers in multiprocess mode."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST
