"""What the record's tests share: a course directory, its settings, tokens, answers."""

from __future__ import annotations

import functools
from pathlib import Path

from glassllm.course import build_case
from glassllm.course.exercise import load_dir
from glassllm_service.record.tokens import Keyring

SECRET = "s" * 40
OTHER_SECRET = "o" * 40
SECRETS = f"k1={SECRET}"
SALT = "the record's salt"
EXERCISE = '''
id = "ce-record"
title = "Cross-entropy, recorded"
text = "The gradient of the mean cross-entropy."
points = 10
max_attempts = 3
hints = ["Softmax first.", "Subtract the one-hot."]
[case]
expression = "cross_entropy(logits, targets)"
[case.variables.logits]
shape = [2, 3]
distribution = "normal"
[case.variables.targets]
shape = [2]
distribution = "integers"
high = 3
[answer]
kind = "grads"
grads = ["logits"]
'''


def course_dir(root: Path) -> Path:
    folder = root / "exercises"
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "ce-record.toml"
    if not file.exists():      # written once: a sandbox reading it sees it whole
        file.write_text(EXERCISE, encoding="utf-8")
    return folder


def environment(root: Path, **more: str) -> dict[str, str]:
    """The GLASSLLM_* variables of a course sandbox keeping its record under `root`."""
    return {"GLASSLLM_MODE": "course", "GLASSLLM_COURSE_SALT": SALT,
            "GLASSLLM_COURSE_SECRETS": SECRETS, "GLASSLLM_COURSE_ID": "course",
            "GLASSLLM_EXERCISES_DIR": str(course_dir(root)),
            "GLASSLLM_DATA_DIR": str(root / "data"), **more}


def keyring(course: str = "course", secret: str = SECRET, kid: str = "k1") -> Keyring:
    return Keyring(course, {kid: secret})


@functools.lru_cache(maxsize=256)
def _case(root: Path, student: str):
    return build_case(load_dir(course_dir(root))[0], student, SALT)


def answers(root: Path, student: str, right: bool = True) -> dict:
    """The answers of `student` (right, or all wrong) as the wire takes them."""
    case = _case(root, student)
    return {a.key: (case.expected[a.key] * (1 if right else -1)).tolist()
            for a in case.answers}
