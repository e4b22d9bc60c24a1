"""The class record (course mode, docs/record.md): per-student signed tokens, the roster,
every attempt and hint in a database (SQLite by default, PostgreSQL for replicas), the
gradebook export and the commands that keep it."""
