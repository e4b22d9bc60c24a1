"""The record of one sandbox, from its settings: the keyring, the database, migrated."""

from __future__ import annotations

from glassllm_service.record.database import engine_for, migrate, url_of
from glassllm_service.record.store import DatabaseRecord
from glassllm_service.record.tokens import Keyring, parse_secrets
from glassllm_service.settings import Settings


def keyring_of(settings: Settings) -> Keyring | None:
    """The course's keyring; None without course secrets (no identities)."""
    if settings.mode != "course" or not settings.course_secrets:
        return None
    return Keyring(settings.course_id, parse_secrets(settings.course_secrets))


def open_record(settings: Settings, *, apply_migrations: bool = True) -> DatabaseRecord:
    """The course's record in its database, the schema brought up to date (once, however
    many workers and replicas start at the same time: `migrate` takes a lock)."""
    engine = engine_for(url_of(settings.database_url, settings.record_dir),
                        settings.db_pool_size)
    if apply_migrations:
        migrate(engine)
    return DatabaseRecord(engine, settings.course_id)


RETRY_AFTER_S = 5


def install_errors(app) -> None:
    """A stale token generation found as a submission is recorded (`Revoked`) is the 401
    ``token_revoked`` of every other route. The database not answering (down,
    restarting, its pool exhausted) is a 503 with ``Retry-After`` and code
    ``record_unavailable``, and one warning line in the log — not the 500 "this is a
    bug" and a traceback per request. Nothing was recorded: a retry
    with the same idempotency key is counted once."""
    import logging

    from glassllm.course.attempts import Revoked
    from glassllm_service.http_errors import ApiError, error_response
    from glassllm_service.record.access import revoked
    from glassllm_service.record.database import describe, unavailable_errors

    log = logging.getLogger("glassllm.service")

    async def unavailable(request, exc) -> object:
        log.warning("record database unavailable on %s %s: %s", request.method,
                    request.url.path, describe(exc))
        return error_response(ApiError(
            503, "record_unavailable", "the class record's database is not answering; nothing"
            f" was recorded: try again in {RETRY_AFTER_S} s (the same idempotency_key counts"
            " once)", headers={"Retry-After": str(RETRY_AFTER_S)}))

    async def revoked_token(request, exc) -> object:
        return error_response(revoked())

    for kind in unavailable_errors():
        app.add_exception_handler(kind, unavailable)
    # a submission's record found the token's generation stale, under the student's lock
    app.add_exception_handler(Revoked, revoked_token)


async def record_status(record: DatabaseRecord, timeout: float = 2.0) -> str:
    """``ok``, or why not: what ``/readyz`` says of the record's database (one ``SELECT 1``
    through the pool, waited for at most `timeout` seconds)."""
    import asyncio

    from starlette.concurrency import run_in_threadpool
    try:
        await asyncio.wait_for(run_in_threadpool(record.ping), timeout)
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except Exception:                 # down, unreachable: the kind is in the 503s' log lines
        return "unavailable"
    return "ok"


def prepare_record(settings: Settings, workers: int = 1) -> None:
    """At ``glassllm-sandbox``'s start, before the workers: the migrations applied, the
    retention enforced, the connection budget checked (one line either way); a problem
    stops the start with one line."""
    import sys

    from glassllm_service.record.database import RecordError, connection_budget
    try:
        record = open_record(settings)
        print(connection_budget(record.engine, settings.replicas, workers,
                                settings.db_pool_size), file=sys.stderr)
        record.prune(settings.record_retention_days)
        record.close()
    except RecordError as exc:
        raise SystemExit(f"glassllm-sandbox: {exc}") from None
    except Exception as exc:            # unreachable, refused, a wrong URL: named, no trace
        raise SystemExit(f"glassllm-sandbox: the record's database ({type(exc).__name__}):"
                         f" {exc}") from None
