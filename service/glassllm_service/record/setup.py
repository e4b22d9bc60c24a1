"""The record of one sandbox, from its settings: the keyring, the database, migrated, the
cases it serves held to the versions the record remembers."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from glassllm.course.versions import Definition, definition
from glassllm_service.record.database import RecordError, engine_for, migrate, url_of
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
    applied = migrate(engine) if apply_migrations else []
    record = DatabaseRecord(engine, settings.course_id)
    record.migrated_now = applied
    return record


# The migration after which a student's numbers come from an exercise's id and version.
VERSIONED_SEEDS = 3


def reroll_note(record: DatabaseRecord) -> str | None:
    """What `open_record` must say when it applied, to a record that existed before, the
    migration that changed the seed formula: every running course's numbers are drawn
    anew, once (None otherwise: a new record has no course running)."""
    if VERSIONED_SEEDS not in record.migrated_now or 1 in record.migrated_now:
        return None
    before = len(record.attempts())
    return (f"record: the numbers of every student are drawn anew, once: from this version"
            f" on they come from each exercise's id and version, not its file's bytes"
            f" (docs/changelog.md). Course {record.course!r}: the {before}"
            f" attempt{'s' * (before != 1)} made before keep their scores and still count"
            " toward max_attempts, but were made on the old numbers (and cannot be"
            " regraded: their answers were not kept); tell the students to reload their"
            " exercises")


class CaseChanged(RecordError):
    """A served exercise's case is not the one the record remembers for its version."""


@functools.cache
def _mysteries() -> tuple:
    from glassllm.course.zoo import mystery
    return tuple(mystery.load_dir())


def served_definitions(exercises: Iterable) -> list[Definition]:
    """The definitions of the cases a course sandbox serves: its exercises (the lessons,
    the shipped examples when served, the course's own) and the shipped mysteries."""
    return [definition(item) for item in (*exercises, *_mysteries())]


def keep_cases(record: DatabaseRecord, exercises: Iterable, *, keep: bool = True
               ) -> list[Definition]:
    """Every served case compared with the record's memory of its (id, version), the new
    ones kept (`DatabaseRecord.case_versions`); `CaseChanged`, one line per changed file
    naming the field and "bump version", when any differs. The definitions new to the
    record."""
    problems, new = record.case_versions(served_definitions(exercises), keep=keep)
    if problems:
        raise CaseChanged("\n".join(problems))
    return new


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
    retention enforced, the connection budget checked (one line either way), every served
    case held to its version (`keep_cases`); a problem stops the start with one line (a
    line per changed file)."""
    import sys

    from glassllm_service.course_state import load_catalogue
    from glassllm_service.record.database import connection_budget
    try:
        record = open_record(settings)
        print(connection_budget(record.engine, settings.replicas, workers,
                                settings.db_pool_size), file=sys.stderr)
        note = reroll_note(record)
        if note:
            print(note, file=sys.stderr)
        keep_cases(record, load_catalogue(settings))
        record.prune(settings.record_retention_days)
        record.close()
    except RecordError as exc:
        raise SystemExit(f"glassllm-sandbox: {exc}") from None
    except Exception as exc:            # unreachable, refused, a wrong URL: named, no trace
        raise SystemExit(f"glassllm-sandbox: the record's database ({type(exc).__name__}):"
                         f" {exc}") from None
