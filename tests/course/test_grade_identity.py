"""Salt and identity are never silent in `glassllm grade` (docs/grading.md#the-courses-salt,
#who-the-student-is): a platform's format refuses the practice salt without --practice,
the salt comes from a file (never the command line), and a platform's user maps to the
roster's id by one rule (trimmed, NFC, case-folded), or the results say why not."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from glassllm.apps.cli import main
from glassllm.course import build_case, load
from glassllm.course.cases import DEFAULT_SALT
from glassllm.course.exercise import SHIPPED
from glassllm.course.grader import identity
from glassllm.course.grader.salt import SaltError, course_salt, read_salt_file

CE = SHIPPED / "softmax-ce-logits.toml"        # a value exercise: claimed arrays, 5 points
SALT = "s3cret-course-salt"


def _answers(student, salt=SALT):
    logits = build_case(load(CE), student, salt).expected["logits"]
    return json.dumps({"answers": {"logits": np.asarray(logits).tolist()}})


def _gradescope(tmp_path, users, answers, roster="student_id,display_name,email\n"
                "Ada.Lovelace,Ada,ada@example.edu\nbob,Bob,\n", salt=SALT):
    src, sub = tmp_path / "autograder/source", tmp_path / "autograder/submission"
    src.mkdir(parents=True)
    sub.mkdir(parents=True)
    (src / "softmax-ce-logits.toml").write_text(CE.read_text())
    if salt is not None:
        (src / "salt").write_text(salt + "\n")
    if roster is not None:
        (src / "roster.csv").write_text(roster)
    (sub / "answers.json").write_text(answers)
    (tmp_path / "autograder/submission_metadata.json").write_text(json.dumps(
        {"id": 1, "users": users, "assignment": {"id": 7}}))
    return tmp_path / "autograder/results/results.json"


def _grade(tmp_path, *extra):
    return main(["grade", "--platform", "gradescope", "--root", str(tmp_path), *extra])


def test_fold_trims_normalises_and_case_folds():
    assert identity.fold("  Ada@Example.EDU\t") == "ada@example.edu"
    assert identity.fold("Jos\u00e9") == identity.fold("JOSE\u0301")       # NFC, fold
    assert identity.fold("Stra\u00dfe") == identity.fold("STRASSE")
    assert identity.fold("ada") != identity.fold("ada2")


@pytest.mark.parametrize("rows, named", [
    ("student_id\nAda\nbob\n ada \n", ["line 2", "'Ada'", "line 4", "' ada '"]),
    ("student_id\nJos\u00e9\nJOSE\u0301\n", ["line 2", "line 3"]),
    # each row as it was written: an email row's own email, never the id it maps to
    ("student_id,email\nada,a@x.edu\nbob,A@X.edu\n",
     ["line 2 (email 'a@x.edu')", "line 3 (email 'A@X.edu')"]),
    ("student_id,email\nada,bob@x.edu\nBob@X.edu,\n",
     ["line 2 (email 'bob@x.edu')", "line 3 (id 'Bob@X.edu')"]),
    ("student,display_name,total\nada,Ada,3\nADA,Ada again,1\n", ["line 2", "line 3"]),
])
def test_a_roster_holding_two_ids_that_fold_alike_is_refused_naming_both(tmp_path, rows,
                                                                         named):
    path = tmp_path / "roster.csv"
    path.write_text(rows)
    with pytest.raises(identity.IdentityError) as exc:
        identity.load_roster(path)
    assert all(n in str(exc.value) for n in named), str(exc.value)
    assert "folded" in str(exc.value)


def test_the_gradebook_json_is_a_roster_too_and_its_duplicates_refused(tmp_path):
    path = tmp_path / "gradebook.json"
    path.write_text(json.dumps({"course": "c", "students": [{"student": "ada"},
                                                             {"student": "bob"}]}))
    assert sorted(identity.load_roster(path).ids) == ["ada", "bob"]
    path.write_text(json.dumps({"students": [{"student": "ada"}, {"student": "ADA"}]}))
    with pytest.raises(identity.IdentityError, match=r"students\[0\].*students\[1\]"):
        identity.load_roster(path)


def test_a_roster_without_an_id_column_or_with_an_empty_id_is_named(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("name,email\nAda,a@x\n")
    with pytest.raises(identity.IdentityError, match="no student_id"):
        identity.load_roster(path)
    path.write_text("\ufeffstudent_id,display_name\nada,Ada\n\n ,Nobody\n")
    with pytest.raises(identity.IdentityError, match="line 4: the student id is empty"):
        identity.load_roster(path)


@pytest.mark.parametrize("user", [
    {"email": "ADA@example.edu ", "id": 11, "name": "Ada"},            # the email column
    {"email": "someone@else.org", "sid": "ada.lovelace", "id": 11},    # sid, folded
    {"email": "ada.LOVELACE", "id": 11},                               # email as the id
])
def test_a_gradescope_user_maps_to_the_rosters_spelling_and_gets_their_numbers(tmp_path,
                                                                               user):
    """The numbers are those of the roster's spelling, "Ada.Lovelace" (the sandbox's),
    whatever case Gradescope's metadata has: the right answers score full marks."""
    out = _gradescope(tmp_path, [user], _answers("Ada.Lovelace"))
    assert _grade(tmp_path) == 0
    results = json.loads(out.read_text())
    assert (results["score"], results["max_score"]) == (5.0, 5.0)
    assert results["extra_data"]["student"] == "Ada.Lovelace"
    # the same answers for the folded spelling are another student's: they score 0
    out = _gradescope(tmp_path / "x", [user], _answers("ada.lovelace"))
    assert _grade(tmp_path / "x") == 0
    assert json.loads(out.read_text())["score"] == 0


def test_an_id_not_on_the_roster_is_a_named_error_not_a_zero(tmp_path, capsys):
    out = _gradescope(tmp_path, [{"email": "eve@example.edu", "sid": "E1"}], _answers("eve"))
    assert _grade(tmp_path) == 2
    results = json.loads(out.read_text())
    (test,) = results["tests"]
    assert results["max_score"] == 0 and "not graded" in test["output"]
    assert "'eve@example.edu' is not on the course's roster" in test["output"]
    err = capsys.readouterr().err
    assert "sid 'E1', email 'eve@example.edu' is not on the course's roster (roster.csv," \
        " 2 students)" in err
    assert str(tmp_path) not in out.read_text()


def test_a_sid_and_an_email_naming_two_students_is_refused_naming_both_rows(tmp_path,
                                                                           capsys):
    _gradescope(tmp_path, [{"sid": "bob", "email": "ada@example.edu"}], _answers("bob"))
    assert _grade(tmp_path) == 2
    err = capsys.readouterr().err
    assert "sid 'bob' is 'bob' (roster.csv line 3) but email 'ada@example.edu' is" \
        " 'Ada.Lovelace' (line 2)" in err


def test_a_group_submission_is_refused_each_student_has_their_own_numbers(tmp_path, capsys):
    _gradescope(tmp_path, [{"email": "ada@example.edu"}, {"email": "bob"}], _answers("bob"))
    assert _grade(tmp_path) == 2
    assert "a group submission of 2 users (Ada.Lovelace, bob)" in capsys.readouterr().err


def test_a_platform_without_a_roster_refuses_unless_practice(tmp_path, capsys):
    out = _gradescope(tmp_path, [{"email": "ada@example.edu"}], _answers("Ada.Lovelace"),
                      roster=None)
    assert _grade(tmp_path) == 2
    assert "cannot be checked against the course's roster: none given (--roster FILE" \
        in capsys.readouterr().err
    roster = tmp_path / "elsewhere.csv"
    roster.write_text("student_id,email\nAda.Lovelace,ada@example.edu\n")
    assert _grade(tmp_path, "--roster", str(roster)) == 0
    assert json.loads(out.read_text())["score"] == 5.0


def test_a_platform_format_refuses_the_practice_salt_unless_practice(tmp_path, capsys,
                                                                     monkeypatch):
    """The practice salt under a platform's format is one line naming the flag and the
    settings (a right answer would score 0 silently); --practice grades it on purpose."""
    for name in ("GLASSLLM_COURSE_SALT", "GLASSLLM_COURSE_SALT_FILE"):
        monkeypatch.delenv(name, raising=False)
    out = _gradescope(tmp_path, [{"email": "ada@example.edu"}],
                      _answers("ada@example.edu", DEFAULT_SALT), salt=None, roster=None)
    assert _grade(tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--format gradescope with the practice salt" in err[0]
    assert all(w in err[0] for w in ("--salt-file FILE", "GLASSLLM_COURSE_SALT_FILE",
                                     "GLASSLLM_COURSE_SALT", "--practice"))
    assert "no course salt" in json.loads(out.read_text())["tests"][0]["output"]
    assert _grade(tmp_path, "--practice") == 0
    assert json.loads(out.read_text())["score"] == 5.0
    # a salt file holding the practice salt is the practice salt all the same
    (tmp_path / "autograder/source/salt").write_text(DEFAULT_SALT + "\n")
    assert _grade(tmp_path) == 2
    assert "the practice salt (the value of the platform's salt file" in capsys.readouterr().err
    # the text format grades with it, saying so on stderr
    sub = tmp_path / "autograder/submission/answers.json"
    assert main(["grade", str(CE), str(sub), "--student", "ada@example.edu"]) == 0
    assert "warning: grading with the practice salt" in capsys.readouterr().err


def test_the_salt_comes_from_a_file_and_never_from_the_command_line(tmp_path, capsys,
                                                                    monkeypatch):
    for name in ("GLASSLLM_COURSE_SALT", "GLASSLLM_COURSE_SALT_FILE"):
        monkeypatch.delenv(name, raising=False)
    out = _gradescope(tmp_path, [{"email": "ada@example.edu"}], _answers("Ada.Lovelace"),
                      salt=None)
    with pytest.raises(SystemExit) as exc:
        _grade(tmp_path, "--salt", SALT)
    assert exc.value.code == 2 and "--salt-file FILE" in capsys.readouterr().err
    secret = tmp_path / "course-salt"
    secret.write_text("\ufeff" + SALT + "\r\n")          # as an editor may save it
    os.chmod(secret, 0o644)
    assert _grade(tmp_path, "--salt-file", str(secret)) == 0
    assert json.loads(out.read_text())["score"] == 5.0
    err = capsys.readouterr().err
    assert "readable by other users (mode 0644): make it 0600" in err
    assert f"salt: --salt-file {secret}" in err and SALT not in err
    # the environment's file, then its value, serve as well
    monkeypatch.setenv("GLASSLLM_COURSE_SALT_FILE", str(secret))
    assert _grade(tmp_path) == 0 and json.loads(out.read_text())["score"] == 5.0
    monkeypatch.delenv("GLASSLLM_COURSE_SALT_FILE")
    monkeypatch.setenv("GLASSLLM_COURSE_SALT", SALT)
    assert _grade(tmp_path) == 0 and json.loads(out.read_text())["score"] == 5.0
    assert _grade(tmp_path, "--practice") == 2
    assert "--practice with a course salt (from GLASSLLM_COURSE_SALT)" in \
        capsys.readouterr().err


def test_the_platforms_own_salt_file_is_made_0600(tmp_path, monkeypatch):
    for name in ("GLASSLLM_COURSE_SALT", "GLASSLLM_COURSE_SALT_FILE"):
        monkeypatch.delenv(name, raising=False)
    _gradescope(tmp_path, [{"email": "ada@example.edu"}], _answers("Ada.Lovelace"))
    salt, roster = (tmp_path / "autograder/source" / n for n in ("salt", "roster.csv"))
    os.chmod(salt, 0o644)
    assert _grade(tmp_path) == 0
    assert oct(salt.stat().st_mode & 0o777) == "0o600"
    assert oct(roster.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("content, rule", [("", "empty"), ("  \n", "empty"),
                                           ("x" * 5000, "larger than 4096"),
                                           (b"\xff\xfe", "not UTF-8")])
def test_a_bad_salt_file_is_named(tmp_path, content, rule):
    path = tmp_path / "salt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(SaltError, match=rule):
        read_salt_file(path)
    with pytest.raises(SaltError, match="cannot be read"):
        course_salt("json", str(tmp_path / "missing"), env={})


def test_prairielearn_maps_params_student_and_falls_back_to_the_variant(tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.delenv("GLASSLLM_COURSE_SALT", raising=False)
    grade = tmp_path / "grade"
    for sub in ("tests", "student", "data", "serverFilesCourse/glassllm"):
        (grade / sub).mkdir(parents=True)
    (grade / "tests/softmax-ce-logits.toml").write_text(CE.read_text())
    (grade / "serverFilesCourse/glassllm/salt").write_text(SALT)
    (grade / "serverFilesCourse/glassllm/roster.csv").write_text("student_id\nAda\n")
    data = grade / "data/data.json"
    out = grade / "results/results.json"

    def run(params, answers_for):
        data.write_text(json.dumps({"params": params, "variant_seed": 31}))
        (grade / "student/answers.json").write_text(_answers(answers_for))
        return main(["grade", "--platform", "prairielearn", "--root", str(tmp_path)])

    assert run({"student": " ADA "}, "Ada") == 0
    assert json.loads(out.read_text())["score"] == 1.0
    assert run({}, "variant-31") == 0                      # no user: the variant's numbers
    assert json.loads(out.read_text())["score"] == 1.0
    assert run({"student": "zoe"}, "zoe") == 2
    assert "params.student 'zoe' is not on the course's roster" in capsys.readouterr().err
    data.write_text(json.dumps({"params": {}}))
    assert main(["grade", "--platform", "prairielearn", "--root", str(tmp_path)]) == 2
    assert "neither params.student nor variant_seed" in capsys.readouterr().err
