"""`DatabaseRecord`: the `AttemptStore` of course mode, over the record's database.

Every write about one student runs in one transaction that first locks that student's
row (``SELECT ... FOR UPDATE`` in PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` locks the whole
file): an attempt's number, the ``max_attempts`` bound and the idempotency key are
decided by one writer at a time per student, whichever worker or replica took the
request. The commit happens before the answer is sent: an attempt a student was told
about is on disk, whatever happens to the worker after.

Every method blocks on the database: the service calls them from worker threads, never
on the event loop.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import orjson
from sqlalchemy import Connection, Engine, text

from glassllm.course.attempts import Attempt, AttemptsExhausted, KeyReused, Recorded, Revoked
from glassllm.course.versions import Definition, changed
from glassllm_service.record.database import MIGRATION_LOCK, now_text, writer

# The key of the lock a starting replica holds while it compares and keeps the cases.
CASES_LOCK = MIGRATION_LOCK + 1


class WriterTurn:
    """One SQLite writer at a time, woken as soon as the writer before it is done: the
    worker's threads queue on a lock, the workers (processes) on ``flock`` of a file
    beside the database (``record.sqlite3.turn``), which the kernel hands over at once.
    SQLite's own lock stays the rule; this only orders who asks for it, so a writer
    rarely meets SQLITE_BUSY and its sleeping busy handler. An in-memory database has no
    file and no other process: the lock alone."""

    def __init__(self, database: str | None) -> None:
        self._lock = threading.Lock()
        self._fd = None
        if database and database != ":memory:":
            self._fd = os.open(f"{database}.turn", os.O_RDWR | os.O_CREAT, 0o600)
            if os.fstat(self._fd).st_mode & 0o177:      # the record's files are 0600
                os.fchmod(self._fd, 0o600)

    def __enter__(self) -> None:
        self._lock.acquire()
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)     # blocks without the GIL
            except BaseException:
                self._lock.release()
                raise

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._lock.release()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass(frozen=True)
class Student:
    student: str
    display_name: str | None
    generation: int


# An attempt's context, read after the student's lock: the attempts and hints counted,
# the idempotency key's earlier attempt (NULLs when it is new).
COUNTS = text(
    "SELECT (SELECT COUNT(*) FROM attempts WHERE course = :c AND student = :s AND"
    " exercise_id = :e), (SELECT COUNT(*) FROM hints WHERE course = :c AND student = :s AND"
    " exercise_id = :e), a.exercise_id, a.attempt_no, a.verdict_digest FROM (SELECT 1 AS"
    " one) AS one LEFT JOIN attempts a ON a.course = :c AND a.student = :s AND"
    " a.idempotency_key = :k")
# The same with the student's generation first (NULL: no row yet), for SQLite.
GENERATION_AND_COUNTS = text(
    "SELECT st.generation, (SELECT COUNT(*) FROM attempts WHERE course = :c AND student = :s"
    " AND exercise_id = :e), (SELECT COUNT(*) FROM hints WHERE course = :c AND student = :s"
    " AND exercise_id = :e), a.exercise_id, a.attempt_no, a.verdict_digest FROM (SELECT 1"
    " AS one) AS one LEFT JOIN students st ON st.course = :c AND st.student = :s LEFT JOIN"
    " attempts a ON a.course = :c AND a.student = :s AND a.idempotency_key = :k")


INSERT_ATTEMPT = text(
    "INSERT INTO attempts (course, student, exercise_id, attempt_no, content_hash,"
    " verdict_digest, pattern, score, passed, hints_used, idempotency_key, created_at,"
    " version, answers) VALUES (:c, :s, :e, :n, :h, :d, :p, :score, :passed, :hints, :k,"
    " :t, :v, :a)")
# The same statements for psycopg itself (its pipeline mode), in its parameter style.
PG_LOCK = ("SELECT generation FROM students WHERE course = %(c)s AND student = %(s)s"
           " FOR UPDATE")
PG_COUNTS = re.sub(r":(\w+)", r"%(\1)s", COUNTS.text)
PG_INSERT_ATTEMPT = re.sub(r":(\w+)", r"%(\1)s", INSERT_ATTEMPT.text)


def _decide(course: str, attempt: Attempt, max_attempts: int | None,
            generation: int | None, gen: int, used: int, hints: int, before_ex: str | None,
            before_no: int | None, before_digest: str | None) -> Recorded | dict:
    """What to do with an attempt, from what the locked transaction read: the earlier
    attempt of its idempotency key (`Recorded`, repeated: the same submission again), or
    the new row's values; `Revoked`, `KeyReused` (the key's attempt was of another
    exercise, or gave another verdict: other answers) or `AttemptsExhausted` raised."""
    if generation is not None and generation != gen:
        raise Revoked(generation, int(gen))
    used = int(used)
    if before_ex is not None:
        if before_ex != attempt.exercise_id:
            raise KeyReused(before_ex)
        if before_digest != attempt.verdict_digest:
            raise KeyReused(None)
        return Recorded(int(before_no), repeated=True, used=used, digest=before_digest)
    if max_attempts is not None and used >= max_attempts:
        raise AttemptsExhausted(used, max_attempts)
    return {"c": course, "s": attempt.student, "e": attempt.exercise_id, "n": used + 1,
            "h": attempt.content_hash, "d": attempt.verdict_digest, "p": attempt.pattern,
            "score": float(attempt.score), "passed": bool(attempt.passed),
            "hints": int(hints) if attempt.hints_used is None else attempt.hints_used,
            "k": attempt.idempotency_key, "t": now_text(attempt.created_at),
            "v": attempt.version, "a": attempt.answers}


class DatabaseRecord:
    """Attempts and hints of one course in the database (module docstring)."""

    enforces = True

    def __init__(self, engine: Engine, course: str) -> None:
        self.engine, self.course = engine, course
        self.migrated_now: list[int] = []       # the migrations applied as it was opened
        self._writes = writer(engine)
        self._pg = engine.dialect.name == "postgresql"
        # SQLite has one writer at a time per file; writers take turns here rather than in
        # SQLite's busy handler, whose sleeps (1, 2, 5, 10 ... 100 ms, whatever the
        # holder's progress) would be the tail of every contended submission. PostgreSQL
        # locks rows: no turn here.
        self._turn = contextlib.nullcontext() if self._pg else \
            WriterTurn(engine.url.database)

    def ping(self) -> None:
        """One ``SELECT 1`` through the pool (raises when the database does not answer)."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            conn.rollback()

    def close(self) -> None:
        self.engine.dispose()
        if isinstance(self._turn, WriterTurn):
            self._turn.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction (SQLite: this worker's turn, then BEGIN IMMEDIATE)."""
        with self._turn, self._writes.begin() as conn:
            yield conn

    # -- students: the roster, generations ------------------------------------------------

    def _lock_student(self, conn: Connection, student: str, role: str = "student") -> int:
        """Lock the student's row (made first if missing, with `role`), answer its
        generation."""
        lock = text("SELECT generation FROM students WHERE course = :c AND student = :s"
                    + (" FOR UPDATE" if self._pg else ""))
        key = {"c": self.course, "s": student}
        gen = conn.execute(lock, key).scalar()
        if gen is None:                      # a student the roster did not name
            conn.execute(text("INSERT INTO students (course, student, generation,"
                              " created_at, role) VALUES (:c, :s, 0, :t, :r) ON CONFLICT DO"
                              " NOTHING"), {**key, "t": now_text(), "r": role})
            gen = conn.execute(lock, key).scalar_one()
        return int(gen)

    def generation(self, student: str) -> int:
        """The student's generation (0 for one never seen: tokens start at 0)."""
        with self.engine.connect() as conn:
            found = conn.execute(text("SELECT generation FROM students WHERE course = :c AND"
                                      " student = :s"),
                                 {"c": self.course, "s": student}).scalar()
            conn.rollback()
        return 0 if found is None else int(found)

    def enrol(self, rows: Iterable[tuple[str, str | None]]) -> dict[str, int]:
        """Add or rename roster students (a name of None keeps the stored one); their
        generations (tokens carry them)."""
        out = {}
        with self._write() as conn:
            for student, name in rows:
                self._lock_student(conn, student)
                conn.execute(text("UPDATE students SET display_name = COALESCE(:n,"
                                  " display_name) WHERE course = :c AND student = :s"),
                             {"n": name, "c": self.course, "s": student})
                out[student] = self._lock_student(conn, student)
        return out

    def student(self, student: str) -> Student | None:
        """One enrolled student (None: never enrolled nor seen)."""
        with self.engine.connect() as conn:
            row = conn.execute(text("SELECT student, display_name, generation FROM students"
                                    " WHERE course = :c AND student = :s AND role ="
                                    " 'student'"),
                               {"c": self.course, "s": student}).first()
            conn.rollback()
        return None if row is None else Student(row[0], row[1], int(row[2]))

    def revoke(self, student: str, role: str = "student") -> int:
        """Bump the student's generation: every token issued before is refused. The new
        generation (a new token carries it). An instructor never enrolled gets a row of
        role ``instructor``: it holds the generation, and stays out of the roster and the
        gradebook."""
        with self._write() as conn:
            gen = self._lock_student(conn, student, role) + 1
            conn.execute(text("UPDATE students SET generation = :g WHERE course = :c AND"
                              " student = :s"), {"g": gen, "c": self.course, "s": student})
        return gen

    def students(self) -> list[Student]:
        with self.engine.connect() as conn:
            rows = conn.execute(text("SELECT student, display_name, generation FROM students"
                                     " WHERE course = :c AND role = 'student' ORDER BY"
                                     " student"), {"c": self.course}).all()
            conn.rollback()
        return [Student(r[0], r[1], int(r[2])) for r in rows]

    # -- the AttemptStore protocol ----------------------------------------------------------

    def attempts_used(self, student: str, exercise_id: str) -> int:
        with self.engine.connect() as conn:
            n = conn.execute(text("SELECT COUNT(*) FROM attempts WHERE course = :c AND"
                                  " student = :s AND exercise_id = :e"),
                             {"c": self.course, "s": student, "e": exercise_id}).scalar_one()
            conn.rollback()
        return int(n)

    def record_attempt(self, attempt: Attempt, max_attempts: int | None,
                       generation: int | None = None) -> Recorded:
        """The attempt numbered and committed in one transaction, under the student's lock:
        the token's `generation` checked (`Revoked`), the hints counted (when the
        attempt's ``hints_used`` is None), the idempotency key looked up, ``max_attempts``
        enforced. Nothing is read before it: each round trip to the database is a wait
        for a core and for this worker's GIL, and on a loaded machine those waits, not
        the statements, are most of what the record costs a submission."""
        key = {"c": self.course, "s": attempt.student, "e": attempt.exercise_id,
               "k": attempt.idempotency_key}
        if self._pg:
            done = self._record_pipelined(attempt, max_attempts, generation, key)
            if done is not None:
                return done
        with self._write() as conn:
            if self._pg:
                # the row lock first, then the counts in a statement of their own: under
                # READ COMMITTED a statement sees the commits made before it started, so
                # counts read in the locking statement could miss the last holder's
                gen = self._lock_student(conn, attempt.student)
                context = conn.execute(COUNTS, key).one()
            else:
                # BEGIN IMMEDIATE holds the file's write lock: one statement reads all
                gen, *context = conn.execute(GENERATION_AND_COUNTS, key).one()
                if gen is None:
                    gen = self._lock_student(conn, attempt.student)
            decided = _decide(self.course, attempt, max_attempts, generation, gen, *context)
            if isinstance(decided, Recorded):
                return decided
            conn.execute(INSERT_ATTEMPT, decided)
        return Recorded(decided["n"], repeated=False, used=decided["n"])

    def _record_pipelined(self, attempt: Attempt, max_attempts: int | None,
                          generation: int | None, key: dict) -> Recorded | None:
        """PostgreSQL's `record_attempt` in two round trips instead of five, by psycopg's
        pipeline mode on a connection of the engine's pool: BEGIN, the lock and the
        counts sent together (the server still runs them in order, the counts in a
        statement of their own after the lock), then the INSERT and the COMMIT together.
        None when the student has no row yet (once per student): the caller's path makes
        it."""
        raw = self.engine.raw_connection()           # the pool's, pinged like any other
        try:
            pg = raw.driver_connection
            with pg.pipeline():
                lock = pg.execute(PG_LOCK, key)
                counts = pg.execute(PG_COUNTS, key)
                row, context = lock.fetchone(), counts.fetchone()     # one round trip
                if row is None:
                    pg.rollback()
                    return None
                try:
                    decided = _decide(self.course, attempt, max_attempts, generation, row[0],
                                      *context)
                except Exception:
                    pg.rollback()
                    raise
                if isinstance(decided, Recorded):
                    pg.rollback()
                    return decided
                pg.execute(PG_INSERT_ATTEMPT, decided)
                pg.commit()                           # sent with the INSERT at the exit
            return Recorded(decided["n"], repeated=False, used=decided["n"])
        except BaseException:
            raw.invalidate()       # whatever state the pipeline left: never back to the pool
            raise
        finally:
            raw.close()

    def hints_used(self, student: str, exercise_id: str) -> int:
        with self.engine.connect() as conn:
            n = conn.execute(text("SELECT COUNT(*) FROM hints WHERE course = :c AND"
                                  " student = :s AND exercise_id = :e"),
                             {"c": self.course, "s": student, "e": exercise_id}).scalar_one()
            conn.rollback()
        return int(n)

    def record_hint(self, student: str, exercise_id: str, number: int) -> None:
        with self._write() as conn:
            self._lock_student(conn, student)
            conn.execute(text("INSERT INTO hints (course, student, exercise_id, number,"
                              " created_at) VALUES (:c, :s, :e, :n, :t) ON CONFLICT DO NOTHING"),
                         {"c": self.course, "s": student, "e": exercise_id, "n": number,
                          "t": now_text()})

    # -- the cases served: each (id, version)'s definition, first seen ---------------------

    def case_versions(self, definitions: Iterable[Definition], *, keep: bool = True
                      ) -> tuple[list[str], list[Definition]]:
        """Each definition compared with the one the record keeps for its (kind, id,
        version): the problems (one line each: the file, the first field changed, "bump
        version") and the definitions not kept yet. With `keep` and no problem, the new
        ones are kept, in the same transaction (one starting replica at a time: SQLite's
        write lock, PostgreSQL's advisory lock), so that two replicas serving two
        different cases under one version cannot both start. Nothing is written when
        any is refused."""
        definitions = list(definitions)
        problems: list[str] = []
        new: list[Definition] = []
        with (self._write() if keep else self.engine.connect()) as conn:
            if keep and self._pg:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": CASES_LOCK})
            rows = conn.execute(text(
                "SELECT kind, exercise_id, version, fingerprint, fields, file, created_at"
                " FROM case_versions WHERE course = :c"), {"c": self.course}).all()
            kept = {(r[0], r[1], int(r[2])): r for r in rows}
            latest: dict[tuple[str, str], int] = {}
            for r in rows:
                latest[(r[0], r[1])] = max(latest.get((r[0], r[1]), 0), int(r[2]))
            for d in definitions:
                row = kept.get((d.kind, d.id, d.version))
                if row is None:
                    new.append(d)
                elif row[3] != d.fingerprint:
                    problems.append(self._refusal(d, orjson.loads(row[4]), row[5], row[6],
                                                  latest[(d.kind, d.id)] + 1))
            if keep and new and not problems:
                conn.execute(text(
                    "INSERT INTO case_versions (course, kind, exercise_id, version,"
                    " fingerprint, fields, file, created_at) VALUES (:c, :k, :e, :v, :f,"
                    " :fields, :file, :t)"),
                    [{"c": self.course, "k": d.kind, "e": d.id, "v": d.version,
                      "f": d.fingerprint, "fields": orjson.dumps(d.fields).decode(),
                      "file": d.file[-1000:], "t": now_text()} for d in new])
            if not keep:
                conn.rollback()
        return problems, new

    def _refusal(self, d: Definition, before: dict, file: str, when: str,
                 next_version: int) -> str:
        fields = changed(before, d.fields)
        more = f" (and {', '.join(fields[1:])})" if len(fields) > 1 else ""
        first = "" if file == d.file else f" from {file}"
        return (f"{d.file}: {fields[0]}: changed{more} since {d.kind} {d.id!r} version"
                f" {d.version} was first served to course {self.course!r}{first} at"
                f" {when}: every student's numbers or expected answers would change under"
                f" the attempts already counted. Undo the change, or bump version"
                f" (version = {next_version}) to give everyone new numbers on purpose")

    # -- reading and forgetting -------------------------------------------------------------

    def attempts(self, student: str | None = None, *, answers: bool = False) -> list[dict]:
        """Every attempt (of one student), oldest first, as the export gives them: with
        the exercise's ``version`` and whether it is ``regradable`` (its answers kept;
        attempts from before the answers were kept are not). `answers`: each row's
        ``answers`` too (key → array as the wire reads it; None when not kept)."""
        where, params = "course = :c", {"c": self.course}
        if student is not None:
            where, params = where + " AND student = :s", {**params, "s": student}
        kept = "answers" if answers else "answers IS NOT NULL"
        with self.engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT student, exercise_id, attempt_no, content_hash, verdict_digest,"
                " pattern, score, passed, hints_used, created_at, version, " + kept +
                " FROM attempts WHERE " + where + " ORDER BY student, exercise_id,"
                " attempt_no"), params).all()
            conn.rollback()
        out = []
        for r in rows:
            row = {"student": r[0], "exercise": r[1], "attempt": int(r[2]),
                   "content_hash": r[3], "verdict_digest": r[4], "pattern": r[5],
                   "score": float(r[6]), "passed": bool(r[7]), "hints_used": int(r[8]),
                   "created_at": r[9], "version": None if r[10] is None else int(r[10])}
            if answers:
                row["answers"] = None if r[11] is None else orjson.loads(r[11])
                row["regradable"] = r[11] is not None and r[10] is not None
            else:
                row["regradable"] = bool(r[11]) and r[10] is not None
            out.append(row)
        return out

    def forget(self, student: str) -> int:
        """Delete the student's attempts, hints and display name; the number of attempts
        deleted. Only the id stays, with its generation bumped: the tokens they held are
        refused (a deleted row would start again at generation 0, reviving them)."""
        p = {"c": self.course, "s": student}
        with self._write() as conn:
            gen = self._lock_student(conn, student) + 1
            n = conn.execute(text("DELETE FROM attempts WHERE course = :c AND student = :s"),
                             p).rowcount
            conn.execute(text("DELETE FROM hints WHERE course = :c AND student = :s"), p)
            conn.execute(text("UPDATE students SET display_name = NULL, generation = :g"
                              " WHERE course = :c AND student = :s"), {**p, "g": gen})
        return int(n)

    def prune(self, days: int, now: dt.datetime | None = None) -> int:
        """Delete attempts and hints older than `days` (the stated retention)."""
        cut = now_text((now or dt.datetime.now(dt.UTC)) - dt.timedelta(days=days))
        with self._write() as conn:
            n = conn.execute(text("DELETE FROM attempts WHERE created_at < :t"),
                             {"t": cut}).rowcount
            conn.execute(text("DELETE FROM hints WHERE created_at < :t"), {"t": cut})
        return int(n)
