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
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, text

from glassllm.course.attempts import Attempt, AttemptsExhausted, KeyReused, Recorded
from glassllm_service.record.database import now_text, writer


@dataclass(frozen=True)
class Student:
    student: str
    display_name: str | None
    generation: int


class DatabaseRecord:
    """Attempts and hints of one course in the database (module docstring)."""

    enforces = True

    def __init__(self, engine: Engine, course: str) -> None:
        self.engine, self.course = engine, course
        self._writes = writer(engine)
        self._pg = engine.dialect.name == "postgresql"
        # SQLite has one writer at a time per file; a worker's threads take turns here
        # rather than in SQLite's busy handler, whose sleeps (up to 100 ms each) would be
        # the tail of every contended submission. PostgreSQL locks rows: no turn here.
        self._turn = contextlib.nullcontext() if self._pg else threading.Lock()

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction (SQLite: this worker's turn, then BEGIN IMMEDIATE)."""
        with self._turn, self._writes.begin() as conn:
            yield conn

    # -- students: the roster, generations ------------------------------------------------

    def _lock_student(self, conn: Connection, student: str) -> int:
        """Lock the student's row (made first if missing), answer its generation."""
        lock = text("SELECT generation FROM students WHERE course = :c AND student = :s"
                    + (" FOR UPDATE" if self._pg else ""))
        key = {"c": self.course, "s": student}
        gen = conn.execute(lock, key).scalar()
        if gen is None:                      # a student the roster did not name
            conn.execute(text("INSERT INTO students (course, student, generation,"
                              " created_at) VALUES (:c, :s, 0, :t) ON CONFLICT DO NOTHING"),
                         {**key, "t": now_text()})
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
        """Add or rename roster students; their generations (tokens carry them)."""
        out = {}
        with self._write() as conn:
            for student, name in rows:
                self._lock_student(conn, student)
                conn.execute(text("UPDATE students SET display_name = :n WHERE course = :c"
                                  " AND student = :s"),
                             {"n": name, "c": self.course, "s": student})
                out[student] = self._lock_student(conn, student)
        return out

    def revoke(self, student: str) -> int:
        """Bump the student's generation: every token issued before is refused. The new
        generation (a new token carries it)."""
        with self._write() as conn:
            gen = self._lock_student(conn, student) + 1
            conn.execute(text("UPDATE students SET generation = :g WHERE course = :c AND"
                              " student = :s"), {"g": gen, "c": self.course, "s": student})
        return gen

    def students(self) -> list[Student]:
        with self.engine.connect() as conn:
            rows = conn.execute(text("SELECT student, display_name, generation FROM students"
                                     " WHERE course = :c ORDER BY student"),
                                {"c": self.course}).all()
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

    def record_attempt(self, attempt: Attempt, max_attempts: int | None) -> Recorded:
        key = {"c": self.course, "s": attempt.student, "e": attempt.exercise_id}
        with self._write() as conn:
            self._lock_student(conn, attempt.student)
            # the count and the key's earlier attempt in one round trip
            used, before_ex, before_no = conn.execute(text(
                "SELECT (SELECT COUNT(*) FROM attempts WHERE course = :c AND student = :s"
                " AND exercise_id = :e), a.exercise_id, a.attempt_no FROM (SELECT 1 AS one)"
                " AS one LEFT JOIN attempts a ON a.course = :c AND a.student = :s AND"
                " a.idempotency_key = :k"), {**key, "k": attempt.idempotency_key}).one()
            used = int(used)
            if before_ex is not None:
                if before_ex != attempt.exercise_id:
                    raise KeyReused(before_ex)
                return Recorded(int(before_no), repeated=True, used=used)
            if max_attempts is not None and used >= max_attempts:
                raise AttemptsExhausted(used, max_attempts)
            conn.execute(text(
                "INSERT INTO attempts (course, student, exercise_id, attempt_no, content_hash,"
                " verdict_digest, pattern, score, passed, hints_used, idempotency_key,"
                " created_at) VALUES (:c, :s, :e, :n, :h, :d, :p, :score, :passed, :hints,"
                " :k, :t)"),
                {**key, "n": used + 1, "h": attempt.content_hash, "d": attempt.verdict_digest,
                 "p": attempt.pattern, "score": float(attempt.score),
                 "passed": bool(attempt.passed), "hints": attempt.hints_used,
                 "k": attempt.idempotency_key, "t": now_text(attempt.created_at)})
        return Recorded(used + 1, repeated=False, used=used + 1)

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

    # -- reading and forgetting -------------------------------------------------------------

    def attempts(self, student: str | None = None) -> list[dict]:
        """Every attempt (of one student), oldest first, as the export gives them."""
        where, params = "course = :c", {"c": self.course}
        if student is not None:
            where, params = where + " AND student = :s", {**params, "s": student}
        with self.engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT student, exercise_id, attempt_no, content_hash, verdict_digest,"
                " pattern, score, passed, hints_used, created_at FROM attempts WHERE "
                + where + " ORDER BY student, exercise_id, attempt_no"), params).all()
            conn.rollback()
        return [{"student": r[0], "exercise": r[1], "attempt": int(r[2]),
                 "content_hash": r[3], "verdict_digest": r[4], "pattern": r[5],
                 "score": float(r[6]), "passed": bool(r[7]), "hints_used": int(r[8]),
                 "created_at": r[9]} for r in rows]

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
