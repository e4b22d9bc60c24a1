"""Reading one table of an exercise file: every key known, every value of its kind.

A `Table` wraps a dict that `tomllib` read, with its dotted place in the file
(``case.variables.x``). Each ``take_*`` reads one key and refuses a wrong value with an
`ExerciseFileError` naming the file, the dotted field and the rule; `Table.done` refuses
every key no one took (a typo must not pass silently: ``feedbak = "pattern"`` is an error,
not the default feedback).
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["ExerciseFileError", "Table"]

MISSING: Any = object()


class ExerciseFileError(ValueError):
    """A malformed exercise file: ``"<file>: <field>: <rule>"``.

    `file` is the file's path as given, `field` the dotted path of the key
    (``case.variables.x.shape``; ``-`` for the file as a whole), `rule` what it must be.
    """

    def __init__(self, file: str, field: str, rule: str) -> None:
        super().__init__(f"{file}: {field}: {rule}")
        self.file, self.field, self.rule = file, field, rule


def _kind(value: Any) -> str:
    """A TOML value's kind in the file's words."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return "a date or time"
    return type(value).__name__


class Table:
    """One table of the file: its values, where it is, and which keys were read."""

    def __init__(self, file: str, where: str, values: Any) -> None:
        self.file, self.where = file, where
        if not isinstance(values, dict):
            raise self.error(None, f"must be a table, not {_kind(values)}")
        self.values = values
        self.taken: set[str] = set()

    def field(self, key: str | None) -> str:
        if key is None:
            return self.where or "-"
        return f"{self.where}.{key}" if self.where else key

    def error(self, key: str | None, rule: str) -> ExerciseFileError:
        return ExerciseFileError(self.file, self.field(key), rule)

    def has(self, key: str) -> bool:
        return key in self.values

    def raw(self, key: str, default: Any = MISSING) -> Any:
        """The value as read, or `default`; a missing key without a default is an error."""
        self.taken.add(key)
        if key in self.values:
            return self.values[key]
        if default is MISSING:
            raise self.error(key, "is required")
        return default

    def take_str(self, key: str, default: Any = MISSING, *, max_len: int = 200,
                 pattern: str | None = None, rule: str = "", one_line: bool = False) -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, not {_kind(value)}")
        if not value.strip():
            raise self.error(key, "must not be empty")
        if len(value) > max_len:
            raise self.error(key, f"has {len(value)} characters; at most {max_len}")
        if one_line and ("\n" in value or "\r" in value):
            raise self.error(key, "must be one line")
        if pattern is not None and not re.fullmatch(pattern, value):
            raise self.error(key, rule or f"must match {pattern}")
        return value

    def take_int(self, key: str, default: Any = MISSING, *, low: int, high: int) -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, not {_kind(value)}")
        if not low <= value <= high:
            raise self.error(key, f"must be from {low} to {high}, not {value}")
        return value

    def take_number(self, key: str, default: Any = MISSING, *, low: float = -math.inf,
                    high: float = math.inf, above: float | None = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"must be a number, not {_kind(value)}")
        if not math.isfinite(value):
            raise self.error(key, "must be a finite number")
        if above is not None and not value > above:
            raise self.error(key, f"must be greater than {above:g}, not {value:g}")
        if not low <= value <= high:
            raise self.error(key, f"must be from {low:g} to {high:g}, not {value:g}")
        return float(value)

    def take_bool(self, key: str, default: Any = MISSING) -> Any:
        value = self.raw(key, default)
        if value is not default and not isinstance(value, bool):
            raise self.error(key, f"must be true or false, not {_kind(value)}")
        return value

    def take_choice(self, key: str, choices: Iterable[str], default: Any = MISSING) -> Any:
        choices = list(choices)
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if value not in choices:
            shown = repr(value) if isinstance(value, str) else _kind(value)
            raise self.error(key, f"must be one of {', '.join(map(repr, choices))}, not {shown}")
        return value

    def take_datetime(self, key: str) -> dt.datetime | None:
        """A TOML offset date-time (``2027-01-10T09:00:00Z``), as UTC; absent: None."""
        value = self.raw(key, None)
        if value is None:
            return None
        if not isinstance(value, dt.datetime):
            raise self.error(key, "must be a TOML date-time with its offset, e.g."
                             f" 2027-01-10T09:00:00Z, not {_kind(value)}")
        if value.tzinfo is None:
            raise self.error(key, "needs its UTC offset (2027-01-10T09:00:00Z or"
                             " 2027-01-10T10:00:00+01:00): a local time means different"
                             " moments on different machines")
        return value.astimezone(dt.UTC)

    def take_strings(self, key: str, default: Any = MISSING, *, max_items: int,
                     max_len: int = 200, pattern: str | None = None, rule: str = "",
                     choices: Iterable[str] | None = None, unique: bool = True) -> Any:
        value = self.raw(key, default)
        if value is default and default is not MISSING:
            return value
        if not isinstance(value, list):
            raise self.error(key, f"must be an array of strings, not {_kind(value)}")
        if len(value) > max_items:
            raise self.error(key, f"has {len(value)} items; at most {max_items}")
        allowed = None if choices is None else list(choices)
        for k, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.error(f"{key}[{k}]", "must be a non-empty string")
            if len(item) > max_len:
                raise self.error(f"{key}[{k}]", f"has {len(item)} characters; at most {max_len}")
            if pattern is not None and not re.fullmatch(pattern, item):
                raise self.error(f"{key}[{k}]", rule or f"must match {pattern}")
            if allowed is not None and item not in allowed:
                raise self.error(f"{key}[{k}]", f"{item!r} is not one of"
                                 f" {', '.join(map(repr, allowed))}")
        if unique and len(set(value)) != len(value):
            twice = sorted({v for v in value if value.count(v) > 1})
            raise self.error(key, f"names {', '.join(map(repr, twice))} more than once")
        return tuple(value)

    def table(self, key: str, default: Any = MISSING) -> Table | None:
        value = self.raw(key, default)
        if value is None and default is None:
            return None
        return Table(self.file, self.field(key), value)

    def tables(self, key: str, *, max_items: int) -> list[Table]:
        """An array of tables (``[[answer.function.cases]]``); absent: none."""
        value = self.raw(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(key, "must be an array of tables ([[...]])")
        if len(value) > max_items:
            raise self.error(key, f"has {len(value)} tables; at most {max_items}")
        return [Table(self.file, f"{self.field(key)}[{k}]", v) for k, v in enumerate(value)]

    def allow(self, *keys: str) -> None:
        """Refuse, first of all, a key that is none of `keys`: a typo explains what then
        looks missing (``titel`` for ``title``)."""
        for key in self.values:
            if key not in keys:
                self._unknown(key, keys)

    def done(self) -> None:
        """Refuse the keys no one read: every key of an exercise file means something."""
        for key in self.values:
            if key not in self.taken:
                self._unknown(key, self.taken)

    def _unknown(self, key: str, known: Iterable[str]) -> None:
        close = difflib.get_close_matches(str(key), list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else " (a typo?)"
        raise self.error(str(key), f"unknown key{hint}; the keys here are: "
                         + (", ".join(sorted(known)) or "none"))
