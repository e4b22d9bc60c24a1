"""The record's commands (``glassllm-sandbox COMMAND``), run by the instructor where the
course's settings are (the same GLASSLLM_* variables as the sandbox: the database URL, the
course secrets):

- ``roster students.csv``: enrol the roster (CSV with a header: ``student_id`` or
  ``student``, and ``display_name`` or ``name``) and print one token per student as CSV
  (``student_id,display_name,token,expires``) to hand out;
- ``token ID [--instructor]``: one token (an instructor's for the gradebook);
- ``revoke ID [--instructor]``: refuse every token the student (or instructor) holds,
  print a new one;
- ``forget ID``: delete the student's attempts and hints, and their name;
- ``export [--json]``: the gradebook to standard output;
- ``migrate``: apply the database's migrations and stop (a Kubernetes Job, a deploy step);
- ``check``: the exercises the sandbox would serve, each case held to the one the record
  remembers for its version, as at startup, but nothing written (exit 1 on a change);
- ``prune``: delete what is older than GLASSLLM_RECORD_RETENTION_DAYS;
- ``secret``: print a new ``kid=secret`` pair for GLASSLLM_COURSE_SECRETS.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import secrets
import sys

from glassllm.course.student_ids import fold

COMMANDS = ("roster", "token", "revoke", "forget", "export", "migrate", "check", "prune",
            "secret")


def _fail(message: str) -> SystemExit:
    return SystemExit(f"glassllm-sandbox: {message}")


def _settings():
    from glassllm_service.settings import Settings, SettingsError
    try:
        return Settings()
    except SettingsError as exc:
        raise _fail(str(exc)) from None


def _course(settings):
    if settings.mode != "course":
        raise _fail("the record is course mode's: set GLASSLLM_MODE=course (docs/record.md)")


def _keyring(settings):
    from glassllm_service.record.setup import keyring_of
    keyring = keyring_of(settings)
    if keyring is None:
        raise _fail("tokens need GLASSLLM_COURSE_SECRETS (kid=secret; make one with"
                    " glassllm-sandbox secret)")
    return keyring


def read_roster(path: str) -> list[tuple[str, str | None]]:
    """(student id, display name) of every row; SystemExit naming the row and the rule."""
    from glassllm_service.record.tokens import SUB
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
            fields = [h.strip().lower() for h in (rows[0].keys() if rows else [])]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise _fail(f"{path}: {exc}") from None
    id_col = next((h for h in ("student_id", "student", "id") if h in fields), None)
    name_col = next((h for h in ("display_name", "name") if h in fields), None)
    if id_col is None:
        raise _fail(f"{path}: the header must name a student_id column (and display_name)")
    out, seen = [], {}
    for line, row in enumerate(rows, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        sid, name = row.get(id_col, ""), row.get(name_col or "", "") or None
        if not SUB.fullmatch(sid):
            raise _fail(f"{path}:{line}: student id {sid[:40]!r}: {ID_RULE}")
        if sid in {s for s, _ in seen.values()}:
            raise _fail(f"{path}:{line}: student id {sid!r} is listed twice")
        if fold(sid) in seen:
            first, at = seen[fold(sid)]
            raise _fail(f"{path}: line {at} ({first!r}) and line {line} ({sid!r}) {ALIKE}")
        if name is not None and (problem := name_problem(name)):
            raise _fail(f"{path}:{line}: the display name {problem}")
        seen[fold(sid)] = (sid, line)
        out.append((sid, name))
    return out


ID_RULE = "1 to 128 letters, digits and . _ @ + -, starting with a letter or digit"
ALIKE = ("are the same once trimmed, NFC-normalised and case-folded: the offline grader"
         " could not tell the two students apart (docs/grading.md); keep one spelling")


def _checked_id(student: str) -> str:
    """`student` if it can be a student id, else a stop naming the rule (before anything
    is written: a bad id must not be enrolled)."""
    from glassllm_service.record.tokens import SUB
    if not SUB.fullmatch(student):
        raise _fail(f"student id {student[:40]!r}: {ID_RULE}")
    return student


def _no_alike(record, rows: list[tuple[str, str | None]]) -> None:
    """A stop when a row's id folds like an enrolled student's other spelling."""
    enrolled = {fold(s.student): s.student for s in record.students()}
    for sid, _ in rows:
        other = enrolled.get(fold(sid))
        if other is not None and other != sid:
            raise _fail(f"student id {sid!r} and the enrolled {other!r} {ALIKE}")


def name_problem(name: str) -> str | None:
    """Why a display name is refused (None: it is fine): longer than 200 characters, or a
    control or format character (an escape sequence, a right-to-left override), which
    would act on the terminal or the spreadsheet that shows it."""
    import unicodedata
    if len(name) > 200:
        return "is longer than 200 characters"
    bad = next((c for c in name if unicodedata.category(c) in ("Cc", "Cf")), None)
    if bad is not None:
        return f"holds the control character U+{ord(bad):04X}; names are text to show"
    return None


def _expiry(exp: int) -> str:
    return dt.datetime.fromtimestamp(exp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _print_tokens(keyring, settings, rows, gens, role="student") -> None:
    """The hand-out CSV; a name a spreadsheet would run as a formula gets the gradebook's
    leading ``'``."""
    from glassllm_service.record.export import FORMULA
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["student_id", "display_name", "role", "token", "expires"])
    for sid, name in rows:
        token = keyring.issue(sid, role, days=settings.token_days, gen=gens[sid])
        name = name or ""
        w.writerow([sid, "'" + name if name.startswith(FORMULA) else name, role, token,
                    _expiry(keyring.verify(token).exp)])


def _enrolled(record, student: str):
    """The enrolled student, or a stop naming the id (a typo must not enrol anyone)."""
    found = record.student(student)
    if found is None:
        raise _fail(f"no student {student!r} in course {record.course!r}: check the id"
                    " (glassllm-sandbox export lists them); `token ID` enrols a new one")
    return found


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="glassllm-sandbox", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("roster", help="tokens for a roster CSV").add_argument("csv")
    tok = sub.add_parser("token", help="one token")
    tok.add_argument("student")
    tok.add_argument("--name", default=None)
    tok.add_argument("--instructor", action="store_true")
    rev = sub.add_parser("revoke", help="refuse a student's (or an instructor's) tokens")
    rev.add_argument("student")
    rev.add_argument("--instructor", action="store_true")
    sub.add_parser("forget", help="delete a student's attempts").add_argument("student")
    sub.add_parser("export", help="the gradebook (CSV)").add_argument("--json",
                                                                      action="store_true")
    sub.add_parser("migrate", help="apply the database's migrations")
    sub.add_parser("check", help="the served exercises' cases against the record's"
                   " versions (nothing written)")
    sub.add_parser("prune", help="delete attempts past the retention")
    sub.add_parser("secret", help="a new kid=secret pair")
    args = parser.parse_args(argv)
    if args.command == "secret":
        kid = dt.datetime.now(dt.UTC).strftime("k%Y%m%d")
        print(f"{kid}={secrets.token_urlsafe(32)}")
        return
    settings = _settings()
    _course(settings)
    from glassllm_service.record.setup import open_record, reroll_note
    try:
        record = open_record(settings)
    except Exception as exc:          # the database unreachable, a URL wrong: one line
        raise _fail(f"the record's database: {type(exc).__name__}: {exc}") from None
    if args.command == "migrate":
        applied = ", ".join(f"{v:04d}" for v in record.migrated_now) or "none missing"
        print(f"record: migrated ({'PostgreSQL' if settings.database_url else 'SQLite'});"
              f" applied now: {applied}")
        note = reroll_note(record)
        if note:
            print(note)
    elif args.command == "check":
        _check_cases(record, settings)
    elif args.command == "prune":
        n = record.prune(settings.record_retention_days)
        print(f"record: {n} attempts older than {settings.record_retention_days} days deleted")
    elif args.command == "forget":
        _enrolled(record, args.student)
        n = record.forget(args.student)
        print(f"record: {args.student}: {n} attempts, their hints and name deleted; their"
              " tokens are refused from now on")
    elif args.command == "export":
        _export(record, settings, args.json)
    elif args.command == "roster":
        keyring, rows = _keyring(settings), read_roster(args.csv)
        _no_alike(record, rows)
        _print_tokens(keyring, settings, rows, record.enrol(rows))
    elif args.command == "token":
        keyring = _keyring(settings)
        _checked_id(args.student)
        if args.name is not None and (problem := name_problem(args.name)):
            raise _fail(f"--name: the display name {problem}")
        if args.instructor:
            # an instructor signs in but is no student: not in the roster nor the gradebook
            gens, name = {args.student: record.generation(args.student)}, args.name
        else:
            before = record.student(args.student)
            _no_alike(record, [(args.student, args.name)])
            if before is None:
                print(f"# {args.student}: not enrolled before; enrolled now", file=sys.stderr)
            gens = record.enrol([(args.student, args.name)])
            name = args.name or (before and before.display_name)
        _print_tokens(keyring, settings, [(args.student, name)], gens,
                      "instructor" if args.instructor else "student")
    elif args.command == "revoke":
        keyring = _keyring(settings)
        if args.instructor:       # never enrolled: the generation's row, out of the roster
            name, gen = None, record.revoke(args.student, role="instructor")
        else:
            name = _enrolled(record, args.student).display_name
            gen = record.revoke(args.student)
        print(f"# {args.student}: every earlier token refused; the new one:", file=sys.stderr)
        _print_tokens(keyring, settings, [(args.student, name)], {args.student: gen},
                      "instructor" if args.instructor else "student")


def _check_cases(record, settings) -> None:
    """Each served case against the record's memory of its version, one line each; a
    change under the same version stops with its lines (as the sandbox's start would)."""
    from glassllm.course import ExerciseFileError
    from glassllm_service.course_state import load_catalogue
    from glassllm_service.record.setup import CaseChanged, keep_cases, served_definitions
    try:
        catalogue = load_catalogue(settings)
        new = {(d.kind, d.id, d.version) for d in keep_cases(record, catalogue, keep=False)}
    except (ExerciseFileError, CaseChanged) as exc:
        raise _fail(str(exc).replace("\n", "\nglassllm-sandbox: ")) from None
    for d in served_definitions(catalogue):
        said = "new: kept at the sandbox's next start" if (d.kind, d.id, d.version) in new \
            else "as the record remembers it"
        print(f"ok: {d.file}: {d.kind} {d.id} version {d.version}: {said}")


def _export(record, settings, as_json: bool) -> None:
    import orjson

    from glassllm_service.course_state import load_catalogue
    from glassllm_service.record import export
    catalogue = load_catalogue(settings)
    book = export.table(record.students(), record.attempts(),
                        [(ex.id, ex.points) for ex in catalogue.graded],
                        [ex.id for ex in catalogue])
    if as_json:
        sys.stdout.write(orjson.dumps({"course": record.course, **book}).decode() + "\n")
    else:
        sys.stdout.write(export.to_csv(book))
