"""The course's parts: exercises an instructor writes, each student's own numbers, and a
check a hand derivation can pass (docs/exercises.md, docs/modes.md).

- `glassllm.course.exercise`: one TOML file → an `Exercise` (`load`, `load_dir`), every
  key checked, errors naming the file, the field and the rule (`ExerciseFileError`);
- `glassllm.course.cases`: `student_seed` and `build_case`: a student's numbers and the
  answers expected of them, rebuilt anywhere from the file, the salt and the student id;
- `glassllm.course.verdict`: `grade` — digits agreed per element, pass / fail, the
  pattern of a mistake (`glassllm.course.patterns`), `Verdict.public` per feedback level;
- `glassllm.course.catalogue`: the exercises a sandbox serves and what the open ones hide;
- `glassllm.course.attempts`: the `AttemptStore` hook of the class record (`NoRecord`).

Plain Python and NumPy on top of the sandbox's expressions: no web framework here.
"""

from glassllm.course.attempts import Attempt, AttemptStore, NoRecord
from glassllm.course.cases import DEFAULT_SALT, Case, build_case, student_seed
from glassllm.course.catalogue import Catalogue, Hidden
from glassllm.course.exercise import Exercise, ExerciseFileError, load, load_dir
from glassllm.course.verdict import Verdict, grade

__all__ = ["DEFAULT_SALT", "Attempt", "AttemptStore", "Case", "Catalogue", "Exercise",
           "ExerciseFileError", "Hidden", "NoRecord", "Verdict", "build_case", "grade",
           "load", "load_dir", "student_seed"]
