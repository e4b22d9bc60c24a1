"""The record's database: one SQLAlchemy 2 engine per worker, migrations applied once.

- **SQLite** by default: ``record.sqlite3`` under ``GLASSLLM_DATA_DIR``, in WAL mode (the
  readers never wait for a writer), ``synchronous=NORMAL`` (in WAL mode a committed
  attempt survives any crash of the process — a killed worker loses nothing it
  acknowledged — and only a power loss of the machine may undo the last commits; FULL,
  an fsync per commit, measured 8 ms a submission at the median and 170 ms at p99 on a
  shared disk against 0.5 and 7–13 ms: a course that must survive power loss runs
  PostgreSQL), a busy timeout
  (workers take turns instead of failing with ``database is locked``), and every write
  transaction ``BEGIN IMMEDIATE``: it takes the write lock first, so two workers numbering
  the same student's attempt never both read the same count. Its folder is 0700 and its
  files (the database, ``-wal``, ``-shm``, ``.turn``) 0600 whatever the umask
  (`private_files`): the record holds every student's answers and scores.
- **PostgreSQL** when ``GLASSLLM_DATABASE_URL`` is set (psycopg 3), a pool of
  ``GLASSLLM_DB_POOL_SIZE`` connections per worker and no overflow, so that replicas ×
  workers × pool is a bound `connection_budget` checks against ``max_connections``.

Migrations are the numbered ``migrations/NNNN_name.sql`` files, applied in order, each in
its own transaction with its row in ``schema_migrations``. They run once: under
PostgreSQL's transaction-level advisory lock (a replica starting at the same moment waits,
then finds them applied), and under SQLite's write lock. ``glassllm-sandbox`` applies them
before it starts its workers; ``glassllm-sandbox migrate`` applies them alone (a
Kubernetes init container or Job). A worker only checks that none is missing.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import stat
from importlib import resources
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url

# Any number: the key of the lock every replica takes to migrate (pg_advisory_xact_lock).
MIGRATION_LOCK = 0x676C6173   # "glas"
BUSY_TIMEOUT_MS = 10_000
# Connections PostgreSQL keeps for itself and its superusers, and for a migrate command or
# an instructor's psql beside the sandboxes.
RESERVED_CONNECTIONS = 5
# Beside the SQLite file: its write-ahead log, its shared memory, the writers' turn.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal", ".turn")
log = logging.getLogger("glassllm.record")


class RecordError(RuntimeError):
    """The record's database cannot be used as configured (one line saying why)."""


def unavailable_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean the database is not answering now — down, restarting,
    unreachable, its pool exhausted for `pool_timeout`, SQLite's lock held past the busy
    timeout — as opposed to a wrong query (a bug). SQLAlchemy's, and psycopg's own (the
    pipelined write talks to psycopg directly)."""
    from sqlalchemy import exc
    kinds: list[type[BaseException]] = [exc.OperationalError, exc.InterfaceError,
                                        exc.DisconnectionError, exc.TimeoutError]
    try:
        import psycopg
    except ImportError:                      # SQLite only: psycopg is not needed
        pass
    else:
        kinds += [psycopg.OperationalError, psycopg.InterfaceError]
    return tuple(kinds)


def describe(exc: BaseException) -> str:
    """One line about a database error for the log: its class and the first line of its
    message, any ``scheme://user:password@`` in it hidden."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: " + re.sub(r"(\w+://)[^@\s/]+@", r"\1***@", first)


def url_of(database_url: str | None, data_dir: Path) -> str:
    """The SQLAlchemy URL: PostgreSQL through psycopg 3, or the SQLite file."""
    if not database_url:
        return f"sqlite:///{data_dir / 'record.sqlite3'}"
    scheme, rest = database_url.split("://", 1)
    if scheme in ("postgres", "postgresql"):
        return f"postgresql+psycopg://{rest}"
    return database_url


def _tighten(path: Path, mode: int, what: str) -> None:
    """`path` at `mode` (0700, 0600) or tighter: a looser one of this user's tightened, and
    said in the log; a looser one of another user's, or a shared folder (the sticky bit,
    as /tmp), refused with a line naming it."""
    st = path.stat()
    loose = st.st_mode & 0o777 & ~mode
    if not loose:
        return
    now = f"{st.st_mode & 0o7777:04o}"
    if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX:
        raise RecordError(f"{what} {path} is a shared folder (mode {now}, the sticky bit of"
                          " /tmp): the class record needs a folder of its own; set"
                          " GLASSLLM_DATA_DIR to one")
    if st.st_uid != os.geteuid():
        raise RecordError(f"{what} {path} is mode {now} and belongs to another user: the"
                          f" class record's files are readable by their owner only; chmod"
                          f" {mode:o} it as its owner, or set GLASSLLM_DATA_DIR to a folder"
                          " of this user's")
    os.chmod(path, (st.st_mode & 0o777) & mode)
    log.warning("record: %s %s was mode %s; tightened to %04o (the class record is"
                " readable by its owner only)", what, path, now, (st.st_mode & 0o777) & mode)


def private_files(database: Path) -> None:
    """The SQLite record's folder made 0700 and its file 0600 before SQLite opens it,
    whatever the umask: SQLite makes the ``-wal`` and ``-shm`` files with the database
    file's own mode, so they are 0600 too. Files and a folder left looser by an older
    version are tightened (`_tighten`; refused when they are another user's)."""
    folder = database.parent
    if not folder.exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir(mode=0o700)
            os.chmod(folder, 0o700)       # the umask may have taken bits the owner needs
        except FileExistsError:            # another worker made it first
            pass
    if not folder.is_dir():
        raise RecordError(f"the record's folder {folder} (GLASSLLM_DATA_DIR) is not a folder")
    _tighten(folder, 0o700, "the record's folder")
    try:
        fd = os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        os.fchmod(fd, 0o600)
        os.close(fd)
    for path in (database, *(Path(f"{database}{end}") for end in SQLITE_SIDE_FILES)):
        if path.exists():
            _tighten(path, 0o600, "the record's file")


def engine_for(url: str, pool_size: int = 4) -> Engine:
    """An engine with the pragmas or pool of the module docstring (SQLite: its files
    private, `private_files`)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            private_files(Path(parsed.database))
        engine = create_engine(url, pool_size=pool_size, max_overflow=0,
                               connect_args={"timeout": BUSY_TIMEOUT_MS / 1000,
                                             "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            dbapi_conn.isolation_level = None        # the driver opens no transaction itself
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn) -> None:
            # a writer takes the lock first (`writer`); a reader never waits for it (WAL)
            immediate = conn.get_execution_options().get("immediate", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    return create_engine(url, pool_size=pool_size, max_overflow=0, pool_pre_ping=True,
                         pool_timeout=30, connect_args={"connect_timeout": 10})


def writer(engine: Engine) -> Engine:
    """`engine` for write transactions: SQLite's begin with ``BEGIN IMMEDIATE`` (the write
    lock at once, so that no two writers read the same count); the same pool."""
    return engine.execution_options(immediate=True)


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, SQL) of every shipped migration, in order."""
    found = []
    for item in resources.files("glassllm_service.record").joinpath("migrations").iterdir():
        m = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", item.name)
        if m:
            found.append((int(m[1]), m[2], item.read_text(encoding="utf-8")))
    return sorted(found)


def _statements(sql: str) -> list[str]:
    """The statements of a migration file (no ; inside a statement, by the files' rule)."""
    lines = [line.split("--", 1)[0] for line in sql.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def now_text(moment: dt.datetime | None = None) -> str:
    """A time as the record stores it: ISO 8601 UTC, microseconds, fixed width."""
    moment = moment or dt.datetime.now(dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def migrate(engine: Engine) -> list[int]:
    """Apply the missing migrations, once whoever else migrates at the same time; the
    versions applied now."""
    applied_now = []
    with writer(engine).begin() as conn:   # SQLite: BEGIN IMMEDIATE holds the write lock
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
        conn.execute(text("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER"
                          " PRIMARY KEY, name VARCHAR(100) NOT NULL, applied_at VARCHAR(27)"
                          " NOT NULL)"))
        done = {row[0] for row in conn.execute(text("SELECT version FROM schema_migrations"))}
        for version, name, sql in migration_files():
            if version in done:
                continue
            for statement in _statements(sql):
                conn.exec_driver_sql(statement)
            conn.execute(text("INSERT INTO schema_migrations VALUES (:v, :n, :t)"),
                         {"v": version, "n": name, "t": now_text()})
            applied_now.append(version)
    return applied_now


def missing_migrations(engine: Engine) -> list[int]:
    """Versions shipped but not applied (a worker refuses to start on any)."""
    with engine.connect() as conn:
        try:
            done = {row[0] for row in conn.execute(text("SELECT version FROM"
                                                        " schema_migrations"))}
        except Exception:                    # no table yet: nothing applied
            done = set()
        conn.rollback()
    return [v for v, _, _ in migration_files() if v not in done]


def connection_budget(engine: Engine, replicas: int, workers: int, pool_size: int) -> str:
    """A line saying how replicas × workers × pool fits PostgreSQL's ``max_connections``;
    `RecordError` when it does not (SQLite: no server, nothing to check)."""
    need = replicas * workers * pool_size
    if engine.dialect.name != "postgresql":
        return f"record: SQLite at {engine.url.database}"
    with engine.connect() as conn:
        limit = int(conn.execute(text("SHOW max_connections")).scalar_one())
        reserved = int(conn.execute(text("SHOW superuser_reserved_connections")).scalar_one())
    room = limit - reserved - RESERVED_CONNECTIONS
    line = (f"GLASSLLM_REPLICAS={replicas} x GLASSLLM_WORKERS={workers} x"
            f" GLASSLLM_DB_POOL_SIZE={pool_size} = {need} connections; PostgreSQL's"
            f" max_connections={limit} leaves {room} (less {reserved} reserved for superusers"
            f" and {RESERVED_CONNECTIONS} for migrate and psql)")
    if need > room:
        raise RecordError(line + ": lower the pool, the workers or the replicas, or raise"
                          " max_connections")
    return "record: PostgreSQL; " + line
