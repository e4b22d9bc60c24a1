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
