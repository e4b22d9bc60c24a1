"""Who a submission is: a platform's identity mapped to the course roster's id by one
documented rule (docs/grading.md#who-the-student-is).

Every id and email is compared **folded**: trimmed, NFC-normalised and case-folded
(Unicode's default caseless match, NFC again after the fold), so ``" Ada@X.edu"`` and
``"ada@x.edu"`` are one person. The id the grader then uses is the roster's own spelling,
the one the sandbox enrolled, so the numbers are the ones the student saw.

- a roster (`load_roster`) is the CSV ``glassllm-sandbox roster`` enrols (header
  ``student_id``; optional ``email``), the record's gradebook export (``student``), or its
  ``gradebook.json``; one that holds two ids (or emails) that fold alike is refused, naming
  both rows, as is an email that folds like another row's id;
- `resolve` looks each of a platform's candidates (in order) up among the roster's folded
  ids, then its folded emails: none found is an `IdentityError` naming what was tried,
  two different students found is one naming both rows;
- `gradescope` reads ``submission_metadata.json``'s ``users`` (``sid``, then ``email``);
  `prairielearn` reads ``data.json``'s ``params.student``, else its ``variant_seed``
  (``variant-<seed>``: PrairieLearn gives the grader no user, the variant is per student).
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glassllm.course.student_ids import fold

__all__ = ["IdentityError", "Roster", "fold", "gradescope", "load_roster", "prairielearn",
           "resolve"]

MAX_ROSTER_BYTES = 16 * 2**20      # a 100 000-student roster is ~5 MB
MAX_ID_CHARS = 320                 # the longest email address (RFC 3696's 64 + 1 + 255)


class IdentityError(ValueError):
    """A submission whose student cannot be named for sure (not on the roster, two
    students at once, no identity at all), or a roster that is ambiguous."""




@dataclass
class Roster:
    """The course's students: each folded id and email → (the id as the roster writes
    it, the row it came from, for error messages)."""

    name: str
    ids: dict[str, tuple[str, str]] = field(default_factory=dict)
    emails: dict[str, tuple[str, str]] = field(default_factory=dict)
    spelled: dict[str, str] = field(default_factory=dict)      # folded email -> as written

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, student: str, email: str | None, row: str) -> None:
        key = fold(student)
        if not key:
            raise IdentityError(f"{self.name} {row}: the student id is empty")
        if len(key) > MAX_ID_CHARS:
            raise IdentityError(f"{self.name} {row}: the student id is longer than"
                                f" {MAX_ID_CHARS} characters")
        for table, what in ((self.ids, "id"), (self.emails, "email")):
            if key in table:
                raise IdentityError(_alike(self.name, self._as_written(table, key, what),
                                           (student, row), what, "id"))
        self.ids[key] = (unicodedata.normalize("NFC", student.strip()), row)
        if email and email.strip():
            mail = fold(email)
            for table, what in ((self.ids, "id"), (self.emails, "email")):
                if mail in table and table[mail][0] != self.ids[key][0]:
                    raise IdentityError(_alike(self.name, self._as_written(table, mail, what),
                                               (email.strip(), row), what, "email"))
            self.emails[mail] = (self.ids[key][0], row)
            self.spelled[mail] = email.strip()

    def _as_written(self, table: dict, key: str, what: str) -> tuple[str, str]:
        """(the id or email as its row wrote it, the row): an email row's own spelling,
        never the id it maps to."""
        found, row = table[key]
        return (self.spelled.get(key, found), row) if what == "email" else (found, row)

    def find(self, value: str) -> tuple[str, str] | None:
        """(the roster's id, its row) of `value` folded, among ids then emails."""
        key = fold(value)
        return self.ids.get(key) or self.emails.get(key)


def _alike(name: str, first: tuple[str, str], second: tuple[str, str], first_what: str,
           second_what: str) -> str:
    return (f"{name}: {first[1]} ({first_what} {first[0]!r}) and {second[1]}"
            f" ({second_what} {second[0]!r}) are the same once trimmed, NFC-normalised and"
            " case-folded: one student would get another's numbers; keep one spelling")


def load_roster(path: str | Path) -> Roster:
    """The roster at `path`: a CSV with a header holding ``student_id`` (the file
    ``glassllm-sandbox roster`` enrols) or ``student`` (the gradebook's CSV), and an
    optional ``email``; or the gradebook's JSON (``{"students": [{"student": ...}]}``).
    UTF-8, a BOM allowed. Raises `IdentityError` naming the file, the row and the rule
    (unreadable, too large, no id column, an empty id, two ids or emails alike)."""
    path = Path(path)
    roster = Roster(path.name)
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_ROSTER_BYTES + 1)
    except OSError as exc:
        raise IdentityError(f"roster {path}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_ROSTER_BYTES:
        raise IdentityError(f"roster {path.name}: larger than {MAX_ROSTER_BYTES} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IdentityError(f"roster {path.name}: not UTF-8 (byte {exc.start})") from None
    if path.suffix.lower() == ".json":
        return _json_roster(roster, text)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or []]
    column = next((c for c in ("student_id", "student") if c in header), None)
    if column is None:
        raise IdentityError(f"roster {path.name}: its header names no student_id (the"
                            " roster's CSV) nor student (the gradebook's) column, got"
                            f" {header[:6]}")
    reader.fieldnames = header
    for record in reader:
        if not any((v or "").strip() for v in record.values() if isinstance(v, str)):
            continue                                  # a blank line
        roster.add(record.get(column) or "", record.get("email"), f"line {reader.line_num}")
    return roster


def _json_roster(roster: Roster, text: str) -> Roster:
    try:
        students = json.loads(text)["students"]
        assert isinstance(students, list)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise IdentityError(f"roster {roster.name}: not the gradebook's JSON"
                            ' ({"students": [{"student": ID}, ...]})') from None
    for i, entry in enumerate(students):
        student = entry.get("student") if isinstance(entry, dict) else None
        if not isinstance(student, str):
            raise IdentityError(f"roster {roster.name} students[{i}]: no student id")
        email = entry.get("email")
        roster.add(student, email if isinstance(email, str) else None, f"students[{i}]")
    return roster


def resolve(candidates: list[tuple[str, str]], roster: Roster | None, where: str,
            required: bool = False) -> str:
    """The student that `candidates` (``(label, value)`` pairs, in order, e.g. a
    Gradescope user's ``sid`` then ``email``) name.

    With a `roster`: the roster's spelling of the one student they fold to (ids first,
    then emails); `IdentityError` when none is on it, naming what was tried, or when two
    name different students, naming both rows. Without one: the first non-empty value,
    folded, unless `required` (an `IdentityError`: the id cannot be checked). Raises
    `IdentityError` when every candidate is empty."""
    tried = [(label, value.strip()) for label, value in candidates if value and value.strip()]
    if not tried:
        raise IdentityError(f"{where}: no student id nor email to grade for")
    if roster is None:
        if required:
            raise IdentityError(f"{where}: {tried[0][0]} {tried[0][1]!r} cannot be checked"
                                " against the course's roster: none given (--roster FILE or"
                                " the platform's roster file; --practice grades without)")
        return fold(tried[0][1])
    found: dict[str, tuple[str, str, str]] = {}
    for label, value in tried:
        hit = roster.find(value)
        if hit is not None:
            found.setdefault(hit[0], (label, value, hit[1]))
    if not found:
        names = ", ".join(f"{label} {value!r}" for label, value in tried)
        raise IdentityError(f"{where}: {names} is not on the course's roster ({roster.name},"
                            f" {len(roster)} student{'s' if len(roster) != 1 else ''}); add the"
                            " student or fix the id")
    if len(found) > 1:
        (a, (la, va, ra)), (b, (lb, vb, rb)) = list(found.items())[:2]
        raise IdentityError(f"{where}: {la} {va!r} is {a!r} ({roster.name} {ra}) but {lb}"
                            f" {vb!r} is {b!r} ({rb}): two students; fix one of the rows")
    return next(iter(found))


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    return str(value) if isinstance(value, str | int) else ""


def gradescope(metadata: Any, roster: Roster | None,
               where: str = "submission_metadata.json", required: bool = False) -> str:
    """The student of Gradescope's ``/autograder/submission_metadata.json`` (parsed):
    its one user's ``sid`` (the Student ID of Gradescope's roster, when set), then
    ``email``, resolved against `roster`. A group submission (two users or more) is an
    `IdentityError` unless all name one student: each student has their own numbers."""
    users = metadata.get("users") if isinstance(metadata, dict) else None
    if not isinstance(users, list) or not users or not all(isinstance(u, dict)
                                                           for u in users):
        raise IdentityError(f"{where}: no users listed, so no student to grade for")
    found = {resolve([("sid", _text(u.get("sid"))), ("email", _text(u.get("email")))],
                     roster, where, required) for u in users}
    if len(found) > 1:
        raise IdentityError(f"{where}: a group submission of {len(users)} users"
                            f" ({', '.join(sorted(found))}): each student has their own"
                            " numbers; turn group submission off for this assignment")
    return found.pop()


def prairielearn(data: Any, roster: Roster | None, where: str = "data.json",
                 required: bool = False) -> str:
    """The student of PrairieLearn's ``/grade/data/data.json`` (parsed): the
    question's ``params.student`` (set by its ``server.py``), resolved against `roster`;
    else ``variant-<variant_seed>`` (PrairieLearn gives the grader no user: its variants
    are per student), never looked up. `IdentityError` when neither is there."""
    params = data.get("params") if isinstance(data, dict) else None
    student = params.get("student") if isinstance(params, dict) else None
    if isinstance(student, str) and student.strip():
        return resolve([("params.student", student)], roster, where, required)
    seed = data.get("variant_seed") if isinstance(data, dict) else None
    if isinstance(seed, int) and not isinstance(seed, bool):
        return f"variant-{seed}"
    raise IdentityError(f"{where}: neither params.student nor variant_seed, so no student"
                        " to grade for")
