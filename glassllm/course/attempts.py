"""Where attempts and hints are recorded: the `AttemptStore` protocol, and `NoRecord`.

The sandbox is stateless and a class runs on several workers and replicas, so a count of
attempts kept in one worker's memory would be wrong (each worker would count its own) —
it belongs in a database every replica shares. This module is the hook a record plugs
into; it holds no record itself:

- `NoRecord`, the store of practice mode (and of course mode until a database is
  attached): it stores nothing, counts nothing, and says so (``enforces`` is false), so
  ``max_attempts`` is not enforced and hints are revealed by number;
- a database-backed store implements the same protocol: ``record_attempt`` numbers the
  attempt and refuses one past ``max_attempts`` atomically (two workers must not both
  take the last attempt), and an ``idempotency_key`` seen before for that student returns
  the attempt it recorded then (a retried submission is never counted twice). In the same
  transaction it counts the hints used (an attempt's ``hints_used`` of None) and checks
  the student's token generation (`Revoked`): one round of the database per submission.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Attempt", "AttemptStore", "AttemptsExhausted", "KeyReused", "NoRecord",
           "Recorded", "Revoked"]


@dataclass(frozen=True)
class Attempt:
    """One graded submission, as the record keeps it: the exercise's version and the
    answers given (so that a regrade can run them again), never the expected numbers."""

    student: str
    exercise_id: str
    content_hash: str
    verdict_digest: str          # sha256 of the public verdict's JSON: what was answered
    pattern: str | None          # the first wrong answer's pattern name
    score: float                 # points earned
    passed: bool
    hints_used: int | None       # None: the store counts them as it records the attempt
    created_at: dt.datetime
    idempotency_key: str | None = None
    version: int | None = None   # the exercise's version: with the id, the student's numbers
    answers: str | None = None    # the answers given, JSON: key -> array, as the wire reads it


@dataclass(frozen=True)
class Recorded:
    """What the store did with an attempt: its number (None: not recorded), whether it
    repeats an earlier one (the same idempotency key), and how many the student has used."""

    number: int | None
    repeated: bool = False
    used: int | None = None
    digest: str | None = None    # repeated: the verdict digest the key's attempt recorded


class AttemptsExhausted(Exception):
    """The student has used every attempt the exercise allows."""

    def __init__(self, used: int, allowed: int) -> None:
        super().__init__(f"{used} of {allowed} attempts used")
        self.used, self.allowed = used, allowed


class Revoked(Exception):
    """The student's token carries a generation the record has moved past (revoked)."""

    def __init__(self, presented: int, current: int) -> None:
        super().__init__(f"token generation {presented}, the record's is {current}")
        self.presented, self.current = presented, current


class KeyReused(Exception):
    """An idempotency key the student already used for another exercise, or for this
    exercise with other answers (``exercise_id`` None)."""

    def __init__(self, exercise_id: str | None) -> None:
        super().__init__(f"this idempotency key was used for exercise {exercise_id!r}"
                         if exercise_id is not None else
                         "this idempotency key was used for a submission with other answers")
        self.exercise_id = exercise_id


@runtime_checkable
class AttemptStore(Protocol):
    """The record's side of exercises (see the module docstring)."""

    @property
    def enforces(self) -> bool:
        """True when attempts are recorded, so that ``max_attempts`` can be enforced."""

    def attempts_used(self, student: str, exercise_id: str) -> int:
        """Attempts recorded for this student and exercise."""

    def record_attempt(self, attempt: Attempt, max_attempts: int | None,
                       generation: int | None = None) -> Recorded:
        """Record one attempt, atomically refusing one past `max_attempts`
        (`AttemptsExhausted`) and, when `generation` (the token's) is given and the
        student's is another, refusing it (`Revoked`); the same (student, idempotency
        key) returns the earlier attempt with ``repeated`` true when its verdict digest
        is the same (a retry of the same submission), and raises `KeyReused` when it is
        not (a key reused for other answers must not get them graded for free)."""

    def hints_used(self, student: str, exercise_id: str) -> int:
        """Hints revealed to this student for this exercise."""

    def record_hint(self, student: str, exercise_id: str, number: int) -> None:
        """Hint `number` (1-based) was revealed; recording it again changes nothing."""


class NoRecord:
    """Records nothing: practice mode, and course mode before a database is attached.

    Example:
        >>> store = NoRecord()
        >>> store.enforces, store.attempts_used("ada", "rmsnorm-backward")
        (False, 0)
    """

    enforces = False

    def attempts_used(self, student: str, exercise_id: str) -> int:
        return 0

    def record_attempt(self, attempt: Attempt, max_attempts: int | None,
                       generation: int | None = None) -> Recorded:
        return Recorded(None)

    def hints_used(self, student: str, exercise_id: str) -> int:
        return 0

    def record_hint(self, student: str, exercise_id: str, number: int) -> None:
        return None
