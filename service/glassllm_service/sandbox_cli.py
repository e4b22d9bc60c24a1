"""``glassllm-sandbox --host --port --workers``: serve the sandbox with uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import tempfile

# uvicorn's own names (uvicorn.config.LOG_LEVELS), written here so a bad one is a usage
# error before uvicorn is imported, not a KeyError traceback from inside it.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# The service extra's top-level modules (pyproject.toml), checked before uvicorn starts.
SERVICE_MODULES = ("fastapi", "fastapi_offline", "orjson", "pydantic", "pydantic_settings",
                   "httptools")  # uvicorn[standard]: the guarded protocol (server.py)


def _int_in(low: int, high: int | None, rule: str):
    """An argparse ``type=``: an integer in [low, high]; anything else exits 2 naming it,
    in the words of the ``glassllm`` command's integers ("must be <rule>, got ...")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
        return value

    return parse


def _workers(text: str) -> int:
    """``--workers``: a positive integer, or ``auto``: one per available CPU (cpus.py)."""
    if text == "auto":
        from glassllm_service.cpus import available_cpus
        return available_cpus()
    try:
        return _int_in(1, None, "a positive integer or 'auto'")(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got"
                                         f" {text!r}") from None


@contextlib.contextmanager
def worker_environment(workers: int, metrics: bool = True):
    """The environment the worker processes start with, restored afterwards.

    ``GLASSLLM_WORKERS`` lets each worker take its share of the CPUs as compute slots;
    with several workers, ``PROMETHEUS_MULTIPROC_DIR`` (a fresh directory, removed at
    exit) lets /metrics sum every worker's counters (glassllm_service/metrics.py); not with
    ``metrics`` off. A directory the caller gave is `main`'s to check first.
    """
    saved = {k: os.environ.get(k) for k in ("GLASSLLM_WORKERS", "PROMETHEUS_MULTIPROC_DIR")}
    made = None
    os.environ["GLASSLLM_WORKERS"] = str(workers)
    if metrics and workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        made = _metrics_dir()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if made:
            shutil.rmtree(made, ignore_errors=True)


def _metrics_dir() -> str:
    """A fresh directory for the workers' metrics; with no writable temporary directory
    (a read-only root without a /tmp), one line saying so instead of a traceback."""
    try:
        return tempfile.mkdtemp(prefix="glassllm-metrics-")
    except OSError as exc:
        raise SystemExit(f"glassllm-sandbox: several workers need a writable temporary"
                         f" directory for their metrics, and there is none ({exc}); set"
                         " TMPDIR or PROMETHEUS_MULTIPROC_DIR to a writable directory, or"
                         " GLASSLLM_METRICS=0") from None


def main(argv: list[str] | None = None) -> None:
    import sys
    given = sys.argv[1:] if argv is None else argv
    from glassllm_service.record.commands import COMMANDS
    if given and given[0] == "hidden":           # what the open exercises hide, and why
        from glassllm_service.hiding_report import main as hidden_main
        raise SystemExit(hidden_main(given[1:]))
    if given and given[0] in COMMANDS:           # the class record's commands
        from glassllm_service.record.commands import main as record_main
        return record_main(given)
    parser = argparse.ArgumentParser(prog="glassllm-sandbox", description=__doc__,
                                     epilog="the class record: glassllm-sandbox {"
                                     + ",".join(COMMANDS) + "} --help (docs/record.md);"
                                     " what the open exercises hide: glassllm-sandbox"
                                     " hidden --help (docs/modes.md)")
    parser.add_argument("--host", default="127.0.0.1")
    # a port past 65535 is not an error to the OS: it binds port % 65536 (70000 → 4464)
    parser.add_argument("--port", type=_int_in(1, 65535, "a TCP port from 1 to 65535"),
                        default=8000, help="1 to 65535 (default 8000)")
    parser.add_argument("--workers", type=_workers, default=1,
                        help="worker processes, ≥ 1, or 'auto': one per CPU this container"
                             " may use, its cgroup quota included (default 1)")
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                        help="uvicorn's log level (default info)")
    args = parser.parse_args(given)
    try:
        import uvicorn

        # Fail here, with the friendly sentence, but without importing the app: with
        # --workers N each worker imports it, and the supervisor importing it too would
        # add a second or so to a container's cold start.
        for module in SERVICE_MODULES:
            if importlib.util.find_spec(module) is None:
                raise ImportError(f"No module named {module!r}")
    except ImportError as exc:
        raise SystemExit(f"glassllm-sandbox needs the service extra: pip install"
                         f" 'glassllm[service]' ({exc})") from None
    from glassllm_service.settings import Settings, SettingsError
    from glassllm_service.supervisor import MetricsDirError, prepare_metrics_dir, supervised
    try:
        settings = Settings()   # a bad GLASSLLM_* variable stops here, named, not in a worker
    except SettingsError as exc:
        raise SystemExit(f"glassllm-sandbox: {exc}") from None
    from glassllm.course import ExerciseFileError
    from glassllm_service.course_state import load_catalogue
    try:                        # a malformed exercise file stops here, named, not in a worker
        load_catalogue(settings)
    except ExerciseFileError as exc:
        raise SystemExit(f"glassllm-sandbox: {exc}") from None
    if settings.mode == "course":   # the record migrated once, before any worker starts
        from glassllm_service.record.setup import prepare_record
        prepare_record(settings, args.workers)
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if settings.metrics and given:             # empty: unset, as worker_environment reads it
        try:                    # here, before a worker starts and dies on it (supervisor.py)
            prepare_metrics_dir(given)
        except MetricsDirError as exc:
            raise SystemExit(f"glassllm-sandbox: {exc}") from None
    open_files_for(settings.max_connections)
    from glassllm_service.server import PROTOCOL
    # access_log=False: glassllm_service/observability.py writes one line per request instead
    # (with the op and the request id); GLASSLLM_ACCESS_LOG=0 turns it off. Several
    # workers: supervised() marks each ended worker's live gauges dead (supervisor.py).
    # The http protocol is uvicorn's httptools one with the guard of glassllm_service/server.py:
    # header, body and send timeouts, a bound on open connections.
    with worker_environment(args.workers, settings.metrics), supervised():
        uvicorn.run("glassllm_service.app:create_app", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level=args.log_level, access_log=False,
                    timeout_graceful_shutdown=10, http=PROTOCOL,
                    timeout_keep_alive=settings.keepalive_timeout_s)


# Files a worker keeps open besides its connections: the listening socket, logs, the
# page's files being sent, the pipes of its training runs (3 each), the wheel.
SPARE_FILES = 64


def open_files_for(max_connections: int) -> None:
    """Raise this process's soft open-file limit (which its workers inherit) to fit
    `max_connections` plus `SPARE_FILES`, up to the hard limit; past the hard limit, stop
    with one line naming both."""
    import resource
    need = max_connections + SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SystemExit(f"glassllm-sandbox: GLASSLLM_MAX_CONNECTIONS={max_connections} needs"
                         f" {need} open files per worker, but this process may open at most"
                         f" {hard} (ulimit -Hn); lower GLASSLLM_MAX_CONNECTIONS or raise the"
                         " limit")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


if __name__ == "__main__":
    main()
