"""Every setting of the sandbox (SPEC H5), each set by an environment variable GLASSLLM_<NAME>:
one class, `Settings`; docs/settings.md lists them all (its table is read from this file).

Every limit is bounded: a value outside its range (``GLASSLLM_MAX_CONCURRENCY=0`` would
refuse every request with 503 while /readyz said ready) stops the sandbox at startup with
a `SettingsError` that names the variable, the value and the rule.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import urllib.parse
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from glassllm.course.cases import DEFAULT_SALT
from glassllm.sandbox.limits import Limits

ENV_PREFIX = "GLASSLLM_"
GiB = 1024 ** 3
DEFAULT = Limits()
# An answer's default bound per element of the result limit: an expression whose graph
# holds max_result_elements returns every node's value and gradient and its output again.
ANSWER_PER_RESULT = 3
# Runs waiting per run at once, by default: the default run (300 steps of the 131 392-weight
# model) costs ~5.6 s of one core (bench/train_queue.py), so 21 waiting runs are under two
# minutes of one core's work: the longest wait the sizing promises (docs/settings.md).
TRAINING_QUEUE_PER_RUN = 21


# settings whose value is never repeated in an error or a log line
SECRET = frozenset({"api_token", "course_secrets", "database_url", "course_salt"})


class SettingsError(ValueError):
    """One line per bad setting: ``GLASSLLM_<NAME>='value': the rule``."""


def _positive(le: int) -> Any:
    return Field(ge=1, le=le)


class StrictSettings(BaseSettings):
    """GLASSLLM_* settings whose bad value stops the sandbox with one named message."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(describe(exc)) from None


class Settings(StrictSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True)

    max_body_bytes: Annotated[int, _positive(GiB)] = 8 * 1024 * 1024
    """Request body size, enforced while reading, before parsing (413)."""
    max_json_depth: Annotated[int, Field(ge=2, le=1024)] = 32
    """Nesting of [ and { in a request body (422); a 4-D array sits at depth 6. At least 2
    ({"inputs": {...}}); orjson itself stops at 1024."""
    max_array_elements: Annotated[int, _positive(10**9)] = DEFAULT.max_array_elements
    """Elements of any one input array (413)."""
    max_result_elements: Annotated[int, _positive(10**10)] = DEFAULT.max_result_elements
    """Elements of the output and of every large intermediate, from shapes, before work (413)."""
    max_matmul_madds: Annotated[int, _positive(10**15)] = DEFAULT.max_matmul_madds
    """Multiply-adds of every matmul of a request, forward + backward (3x the forward), 413."""
    max_concurrency: Annotated[int, _positive(1024)] | None = None
    """Compute slots of one worker process: computations running at once; more wait in the
    queue. Default: the CPUs (glassllm_service/cpus.py, cgroup-quota aware) divided by `workers`."""
    workers: Annotated[int, _positive(1024)] = 1
    """Worker processes; ``glassllm-sandbox --workers`` sets it for the workers it starts."""
    max_queue: Annotated[int, Field(ge=0, le=100_000)] = 256
    """Requests of one worker waiting for a slot; one more is refused at once (503)."""
    queue_timeout_s: Annotated[float, Field(gt=0, le=600)] = 5.0
    """Longest wait for a slot, in seconds; then 503 with Retry-After."""
    large_cost: Annotated[int, _positive(10**15)] = 1_000_000
    """A request whose planned cost (elements + multiply-adds) exceeds this is large: large
    requests never hold every slot, and small ones are admitted first."""
    retry_after_seconds: Annotated[int, _positive(3600)] = 1
    """The Retry-After of a 503."""
    blas_threads: Annotated[int, _positive(256)] = 1
    """BLAS / OpenMP threads per worker process (threadpoolctl)."""
    log_format: Literal["plain", "json"] = "plain"
    """The access log: one line per request, plain text or JSON."""
    access_log: bool = True
    """One access-log line per request (method, path, op, status, duration, request id)."""
    metrics: bool = True
    """Prometheus metrics at /metrics (0: off, no /metrics route)."""
    cors_origins: str = ""
    """Comma-separated origins allowed to call the API from a browser, each
    ``scheme://host[:port]`` (http or https; a trailing /, capitals and a default port are
    normalised away; a path, query, fragment or user is refused); ``*``: any; empty: off."""
    api_token: str | None = None
    """When set, every POST /api/v1/... needs ``Authorization: Bearer <token>`` (401); a
    b64token: letters, digits, ``-._~+/``, then ``=`` padding (RFC 6750 §2.1)."""
    max_expression_length: Annotated[int, _positive(1_000_000)] = DEFAULT.max_length
    """Characters of a /api/v1/eval expression (422 above)."""
    max_check_elements: Annotated[int, Field(ge=0, le=1_000_000)] = DEFAULT.max_check_elements
    """Elements finite-differenced by /api/v1/eval's "check": true or its
    finite_differences mode (413 above; 0: no check). The other modes (taylor, adjoint,
    eps_sweep) make at most 2 × this many forward passes; every check's total work (2
    passes per finite-differenced element) is held to max_matmul_madds too."""
    max_batch: Annotated[int, _positive(10_000)] = 64
    """Cases of one POST /api/v1/batch (413 above); all of them together are also held to
    max_matmul_madds of planned work (elements plus multiply-adds)."""
    max_answer_elements: Annotated[int, _positive(10**10)] | None = None
    """Elements of all the arrays one request returns and holds together, planned before
    any work (413 above): values and gradients, an expression's nodes and opened
    composites, every case of a batch, a check's case and claims, attention maps, trained
    weights. Default: 3 × max_result_elements, what one expression at the graph limit
    returns (each node's value and gradient, and its output again)."""
    header_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0
    """Seconds for a request's complete headers to arrive, from the connection's opening
    or the request's first byte; then the connection closes (408 if part of a request
    came). The embedded server's own guard (glassllm_service/server.py), as nginx's
    client_header_timeout."""
    body_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    """Longest pause between two pieces of a request body being read; then 408 and the
    connection closes (nginx's client_body_timeout)."""
    send_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    """Longest time an answer waiting in a connection's write buffer may go without the
    client reading any of it; then the connection is cut and the answer freed (nginx's
    send_timeout)."""
    keepalive_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    """Seconds an idle connection is kept open between two requests (uvicorn's
    timeout_keep_alive)."""
    max_connections: Annotated[int, _positive(1_000_000)] = 512
    """Open connections of one worker process; one more is answered 503 at once and
    closed. The process's open-file limit is raised to fit it at startup (or startup stops,
    naming both)."""
    trusted_hosts: str = "*"
    """Comma-separated host names the sandbox answers to (``*.example.org``: its
    subdomains); another Host header is refused with 400 untrusted_host. ``*``: any."""
    static_dir: Path | None = None
    """Where the page lives; default: the copy shipped in the wheel, else the repo's static/."""

    # -- the Train view: /api/v1/train and /api/v1/model/attention (docs/training.md) --
    max_training_runs: Annotated[int, Field(ge=0, le=64)] | None = None
    """Training runs at once in one worker process, each a child process; more wait in the
    training queue (0: the sandbox trains nothing). Default: the CPUs divided by `workers`,
    as the compute slots."""
    max_training_queue: Annotated[int, Field(ge=0, le=10_000)] | None = None
    """Training runs of one worker waiting for their turn; one more is refused with 503
    and Retry-After (the page retries). Default: 21 × the runs at once, under 2 minutes of
    the default run's work (docs/settings.md, sizing training)."""
    max_train_steps: Annotated[int, Field(ge=1, le=1_000_000)] = 2000
    """Steps of one run (422 above)."""
    max_parameters: Annotated[int, Field(ge=1, le=100_000_000)] = 500_000
    """Weights of a model to train or to run attention on, from its size (413 above)."""
    max_corpus_bytes: Annotated[int, Field(ge=1, le=100_000_000)] = 200_000
    """UTF-8 bytes of a pasted corpus (413 above); the shipped corpus is always allowed."""
    max_train_seconds: Annotated[float, Field(gt=0, le=86_400)] = 300.0
    """Wall time of one run; past it the run stops with an ``error`` event naming it."""
    max_train_batch: Annotated[int, Field(ge=1, le=4096)] = 64
    """Windows per step (422 above)."""

    # -- the course: exercises, what they hide, graded sessions (docs/modes.md) --
    mode: Literal["practice", "course"] = "practice"
    """practice: nothing hidden, no record, every exercise open; course: an open
    exercise's hidden parts are not served, each student's numbers come from course_salt,
    a student id is required (docs/modes.md)."""
    graded_session: bool = False
    """Course mode with course_secrets only (otherwise the sandbox refuses to start): a
    student's token reaches the exercises (list, one, submit, hints), the sign-in, the
    health probes and the page; every route that computes or shows a rule answers 403
    off_in_graded_session to students; instructors keep everything. Exercise feedback
    defaults to pattern."""
    exercises_dir: Path | None = None
    """A directory of *.toml exercises served beside the shipped ones (docs/exercises.md);
    a malformed file or an id twice stops startup, naming the file, the field and the rule."""
    course_salt: Annotated[str, Field(min_length=1, max_length=1024)] = DEFAULT_SALT
    """The secret of each student's numbers (HMAC-SHA256 key): the same in every worker,
    replica, restart and in the offline grader (glassllm grade --salt-file)."""
    shipped_exercises: bool | None = None
    """The shipped example exercises: 1 served, 0 not; unset: served in practice mode, not
    in course mode (a course serves its own). The lessons are always served."""


    # -- the class record: tokens, attempts, the database (docs/record.md) --
    course_id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")] = "course"
    """The course's name, signed into every token: a token of another course is refused
    even when the two share a secret; the record keeps each course apart."""
    course_secrets: str | None = None
    """Course mode: ``kid=secret`` pairs (comma-separated; each secret at least 32
    characters) that sign and check per-student tokens. The first signs new tokens, all
    are accepted (rotation). Unset: no identities (``X-Student-ID``, the shared
    api_token). From a Secret, never in an image."""
    token_days: Annotated[float, Field(gt=0, le=3650)] = 180.0
    """How long a token ``glassllm-sandbox roster`` issues stays valid, in days."""
    revocation_refresh_s: Annotated[float, Field(gt=0, le=30)] = 10.0
    """Seconds between two reads of the revoked tokens by each worker (one indexed query):
    a revoked or forgotten student's token is refused by every worker within this long."""
    data_dir: Path | None = None
    """Where course mode's embedded SQLite record lives (``record.sqlite3``); default
    ``$XDG_DATA_HOME/glassllm`` (``~/.local/share/glassllm``). Unused with database_url."""
    database_url: str | None = None
    """The record's database when it is shared by replicas: a PostgreSQL URL
    (``postgresql://user:password@host:5432/db``; driver psycopg 3). From a Secret."""
    db_pool_size: Annotated[int, Field(ge=1, le=100)] = 4
    """Database connections of one worker process, at most (no overflow). Replicas ×
    workers × this must stay below PostgreSQL's max_connections: checked at startup."""
    replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    """Replicas sharing the database (Kubernetes' replica count), for the connection
    budget checked at startup."""
    record_retention_days: Annotated[int, Field(ge=1, le=3650)] = 400
    """Attempts older than this are deleted (``glassllm-sandbox prune``, run at each
    start): the record's stated retention."""

    @field_validator("course_secrets")
    @classmethod
    def _secrets(cls, value: str | None) -> str | None:
        if value is not None and value.strip():
            from glassllm_service.record.tokens import parse_secrets
            parse_secrets(value)                 # a ValueError names the rule
            return value
        return None

    @field_validator("database_url")
    @classmethod
    def _database(cls, value: str | None) -> str | None:
        if not value:
            return None
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme not in ("postgresql", "postgres", "postgresql+psycopg", "sqlite"):
            raise ValueError("a postgresql://user:password@host:port/database URL (or"
                             " sqlite:///path)")
        return value

    @model_validator(mode="after")
    def _no_secret_in_practice(self) -> Settings:
        if self.course_secrets and self.mode != "course":
            raise ValueError(f"{ENV_PREFIX}COURSE_SECRETS is for course mode only; practice"
                             f" mode has no secret and no record (set {ENV_PREFIX}MODE=course)")
        return self

    @property
    def record_dir(self) -> Path:
        """`data_dir`, or ``$XDG_DATA_HOME/glassllm``."""
        if self.data_dir is not None:
            return self.data_dir
        import os
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / "glassllm"

    wheelhouse: Path | None = None
    """A directory of wheels (glassllm's client dependencies for the image's platform and
    Python) served with glassllm's own wheel as a PEP 503 index at /simple/, so `pip
    install --index-url <sandbox>/simple/ "glassllm[client]"` needs no other index; unset:
    the environment's share/glassllm/wheelhouse when it exists (the course image's), else
    glassllm's wheel alone (docs/offline-install.md)."""

    @field_validator("trusted_hosts")
    @classmethod
    def _host_names(cls, value: str) -> str:
        from glassllm_service.security import host_patterns
        host_patterns(value)                  # a ValueError names the entry
        return value

    @field_validator("exercises_dir", "wheelhouse")
    @classmethod
    def _a_directory(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"{value} is not a directory")
        return value

    @model_validator(mode="after")
    def _graded_in_course_mode(self) -> Settings:
        if self.graded_session and self.mode != "course":
            raise ValueError(f"{ENV_PREFIX}GRADED_SESSION=1 is for course mode only; set"
                             f" {ENV_PREFIX}MODE=course (it is {self.mode!r})")
        if self.graded_session and not self.course_secrets:
            # the lock is per caller: without tokens a student and an instructor look alike
            raise ValueError(f"{ENV_PREFIX}GRADED_SESSION=1 needs {ENV_PREFIX}COURSE_SECRETS:"
                             " without per-student tokens nothing tells an instructor from a"
                             " student (make a secret: glassllm-sandbox secret)")
        return self

    @property
    def serves_shipped_exercises(self) -> bool:
        """`shipped_exercises`, or by default: in practice mode only."""
        if self.shipped_exercises is not None:
            return self.shipped_exercises
        return self.mode == "practice"

    @field_validator("static_dir")
    @classmethod
    def _has_the_page(cls, value: Path | None) -> Path | None:
        if value is not None and not (value / "index.html").is_file():
            raise ValueError(f"{value} holds no index.html")
        return value

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        return ", ".join(origin(o.strip()) for o in value.split(",") if o.strip())

    @field_validator("api_token")
    @classmethod
    def _b64token(cls, value: str | None) -> str | None:
        if value and not re.fullmatch(r"[A-Za-z0-9\-._~+/]+=*", value):
            raise ValueError("a token is letters, digits, - . _ ~ + / and trailing = only"
                             " (RFC 6750 §2.1), or no client could send it in Authorization")
        return value

    @property
    def compute_slots(self) -> int:
        """`max_concurrency`, or this worker's share of the CPUs (at least 1)."""
        if self.max_concurrency is not None:
            return self.max_concurrency
        from glassllm_service.cpus import available_cpus
        return max(1, available_cpus() // self.workers)

    @property
    def training_runs(self) -> int:
        """`max_training_runs`, or this worker's share of the CPUs (at least 1)."""
        if self.max_training_runs is not None:
            return self.max_training_runs
        from glassllm_service.cpus import available_cpus
        return max(1, available_cpus() // self.workers)

    @property
    def training_queue(self) -> int:
        """`max_training_queue`, or `TRAINING_QUEUE_PER_RUN` × `training_runs`."""
        if self.max_training_queue is not None:
            return self.max_training_queue
        return TRAINING_QUEUE_PER_RUN * self.training_runs

    @property
    def answer_limit(self) -> int:
        """`max_answer_elements`, or 3 × `max_result_elements`."""
        if self.max_answer_elements is not None:
            return self.max_answer_elements
        return ANSWER_PER_RESULT * self.max_result_elements

    @property
    def trusted_host_list(self) -> list[str]:
        from glassllm_service.security import host_patterns
        return host_patterns(self.trusted_hosts)

    @property
    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]

    @property
    def limits(self) -> Limits:
        """The library's `Limits` of one request, from these settings (one object per set
        of values: every request asks)."""
        return _limits(self.max_array_elements, self.max_result_elements,
                       self.max_matmul_madds, self.max_check_elements,
                       self.max_expression_length)


DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(text: str) -> str:
    """`text` as the serialisation of an origin (RFC 6454 §6.1): ``scheme://host[:port]``,
    scheme and host in lower case, an international host in its ASCII (IDNA) form, the
    default port left out — what a browser sends in ``Origin``, so a listed origin can
    match it. A trailing ``/`` is dropped; a path, query, fragment or user, another scheme
    than http or https, or a missing or malformed host or port is refused (ValueError
    naming the entry and the rule). ``*`` stays ``*`` (any origin)."""
    if text == "*":
        return text
    rule = "an origin is scheme://host[:port], http or https, nothing after (RFC 6454 §6.1)"
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}; {rule}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not text.lower().startswith(f"{scheme}://"):
        raise ValueError(f"{text!r}: the scheme must be http or https; {rule}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in text \
            or "#" in text:
        raise ValueError(f"{text!r} has a path, query or fragment; {rule}")
    if parts.username is not None or "@" in parts.netloc:
        raise ValueError(f"{text!r} names a user; {rule}")
    host = parts.hostname or ""
    if host.startswith("[") or ":" in host:                  # an IPv6 address
        try:
            host = f"[{ipaddress.IPv6Address(host.strip('[]')).compressed}]"
        except ValueError:
            raise ValueError(f"{text!r}: {host!r} is not an IPv6 address; {rule}") from None
    else:
        try:
            host = host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            raise ValueError(f"{text!r}: {host!r} is not a host name; {rule}") from None
        if not re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*",
                            host):
            raise ValueError(f"{text!r}: {host!r} is not a host name; {rule}")
    if port is not None and port == 0:
        raise ValueError(f"{text!r}: port 0 is not a port; {rule}")
    keep_port = port is not None and port != DEFAULT_PORTS[scheme]
    return f"{scheme}://{host}" + (f":{port}" if keep_port else "")


@functools.lru_cache(maxsize=16)
def _limits(max_array_elements: int, max_result_elements: int, max_matmul_madds: int,
            max_check_elements: int, max_expression_length: int) -> Limits:
    return Limits(max_array_elements=max_array_elements,
                  max_result_elements=max_result_elements, max_matmul_madds=max_matmul_madds,
                  max_check_elements=max_check_elements, max_length=max_expression_length,
                  max_graph_elements=max_result_elements)


def describe(exc: ValidationError) -> str:
    """pydantic's errors in the words of the environment: which variable, what value, why."""
    lines = []
    for err in exc.errors():
        if not err["loc"]:             # a rule between settings: its message names them
            lines.append(err["msg"].removeprefix("Value error, "))
            continue
        field = str(err["loc"][0])
        given = "(hidden)" if field in SECRET else repr(err.get("input"))   # never a secret
        lines.append(f"{ENV_PREFIX}{field.upper()}={given}: {err['msg']}")
    return "invalid settings: " + "; ".join(lines)
