"""The exercises a sandbox serves, and what their open ones hide at a given moment.

`Catalogue.load` reads the lessons, the shipped example exercises (unless turned off) and
a course's own directory, with no id twice. The **graded** exercises are the course's
own, less its lessons: what the gradebook's ``total`` counts (`Catalogue.graded`); the
lessons and the shipped examples are practice. `Catalogue.hidden_at(now)` answers, for a
moment, which ops have which part hidden and by which exercises (docs/modes.md): the
parts of every exercise open at `now` that hides something, over its ``hide_ops``. The
answer only changes at an ``opens`` or ``closes``, so it is kept per interval between two
of them.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from glassllm.course.exercise import LESSONS_DIR, SHIPPED, Exercise, load_all

__all__ = ["NOTHING_HIDDEN", "Catalogue", "Hidden"]


@dataclass(frozen=True)
class Hidden:
    """What is hidden at one moment: part → op → the ids of the exercises hiding it."""

    parts: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.parts.values())

    def ops(self, part: str) -> frozenset[str]:
        """The ops whose `part` is hidden."""
        return frozenset(self.parts.get(part, {}))

    def by(self, part: str, op: str) -> tuple[str, ...]:
        """The exercises hiding `part` of `op` (empty: not hidden)."""
        return self.parts.get(part, {}).get(op, ())

    def first(self, part: str, ops: Iterable[str]) -> tuple[str, str] | None:
        """(op, exercise id) of the first of `ops` whose `part` is hidden, else None."""
        for op in ops:
            who = self.by(part, op)
            if who:
                return op, who[0]
        return None

    @property
    def key(self) -> tuple:
        """A hashable form, for caches of what a hidden set changes (the op list)."""
        return tuple(sorted((p, tuple(sorted(ops.items()))) for p, ops in self.parts.items()))


NOTHING_HIDDEN = Hidden()


class Catalogue:
    """The exercises served, in order (lessons, shipped examples, the course's own)."""

    def __init__(self, exercises: Iterable[Exercise],
                 graded: Iterable[str] | None = None) -> None:
        """`graded`: the ids the gradebook counts (default: every exercise not a
        lesson)."""
        self.exercises: dict[str, Exercise] = {}
        for ex in exercises:
            if ex.id in self.exercises:
                raise ValueError(f"{ex.file}: id: {ex.id!r} is also the id of"
                                 f" {self.exercises[ex.id].file}")
            self.exercises[ex.id] = ex
        chosen = None if graded is None else set(graded)
        self._graded = frozenset(ex.id for ex in self.exercises.values() if not ex.lesson
                                 and (chosen is None or ex.id in chosen))
        moments = {t for ex in self.exercises.values() if ex.hide
                   for t in (ex.opens, ex.closes) if t is not None}
        self._moments = sorted(moments)
        self._hidden: dict[int, Hidden] = {}

    @classmethod
    def load(cls, directory: str | Path | None = None, shipped: bool = True) -> Catalogue:
        """The lessons, the shipped examples (`shipped`) and `directory`'s exercises;
        raises `ExerciseFileError` for a malformed file or an id twice."""
        folders = [LESSONS_DIR] + ([SHIPPED] if shipped else [])
        if directory is not None:
            folders.append(Path(directory))
        exercises = load_all(folders)
        own = [] if directory is None else [ex.id for ex in exercises
                                            if Path(ex.file).parent == Path(directory)]
        return cls(exercises, graded=own)

    def __iter__(self):
        return iter(self.exercises.values())

    def __len__(self) -> int:
        return len(self.exercises)

    def get(self, exercise_id: str) -> Exercise | None:
        return self.exercises.get(exercise_id)

    @property
    def lessons(self) -> list[Exercise]:
        return [ex for ex in self.exercises.values() if ex.lesson]

    @property
    def graded(self) -> list[Exercise]:
        """The exercises the gradebook counts, in order: a course's own directory's, less
        its lessons (the lessons and the shipped examples are practice)."""
        return [ex for ex in self.exercises.values() if ex.id in self._graded]

    def listed(self, now: dt.datetime, course: bool) -> list[Exercise]:
        """The exercises a student is shown at `now`: in course mode none before its
        ``opens`` (practice mode: every one)."""
        return [ex for ex in self.exercises.values()
                if not course or ex.opens is None or now >= ex.opens]

    def hidden_at(self, now: dt.datetime) -> Hidden:
        """What the exercises open at `now` hide (the same for a whole interval between
        two opens / closes, so it is worked out once per interval)."""
        slot = bisect.bisect_right(self._moments, now)
        found = self._hidden.get(slot)
        if found is None:
            parts: dict[str, dict[str, tuple[str, ...]]] = {}
            for ex in self.exercises.values():
                if not ex.hide or not ex.is_open(now):
                    continue
                for part in ex.hide:
                    for op in ex.hide_ops:
                        ops = parts.setdefault(part, {})
                        ops[op] = (*ops.get(op, ()), ex.id)
            found = self._hidden[slot] = Hidden(parts)
        return found
