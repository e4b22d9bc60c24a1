-- The class record: who may sign in, every attempt, every hint revealed.
-- Portable SQL (SQLite 3.24+ and PostgreSQL 12+). Times are ISO 8601 UTC text of one
-- fixed width (2026-12-01T19:00:00.000000Z), so they sort and compare as text in both.

CREATE TABLE students (
    course VARCHAR(64) NOT NULL,
    student VARCHAR(128) NOT NULL,
    display_name VARCHAR(200),
    generation INTEGER NOT NULL DEFAULT 0,   -- revoking bumps it: older tokens are refused
    created_at VARCHAR(27) NOT NULL,
    PRIMARY KEY (course, student)
);

CREATE TABLE attempts (
    course VARCHAR(64) NOT NULL,
    student VARCHAR(128) NOT NULL,
    exercise_id VARCHAR(64) NOT NULL,
    attempt_no INTEGER NOT NULL,
    content_hash CHAR(64) NOT NULL,          -- the exercise file's SHA-256 when attempted
    verdict_digest CHAR(64) NOT NULL,        -- SHA-256 of the verdict given (no answers)
    pattern VARCHAR(64),
    score DOUBLE PRECISION NOT NULL,
    passed BOOLEAN NOT NULL,
    hints_used INTEGER NOT NULL,
    idempotency_key VARCHAR(128),
    created_at VARCHAR(27) NOT NULL,
    PRIMARY KEY (course, student, exercise_id, attempt_no),
    UNIQUE (course, student, idempotency_key)
);
CREATE INDEX attempts_by_time ON attempts (created_at);

CREATE TABLE hints (
    course VARCHAR(64) NOT NULL,
    student VARCHAR(128) NOT NULL,
    exercise_id VARCHAR(64) NOT NULL,
    number INTEGER NOT NULL,
    created_at VARCHAR(27) NOT NULL,
    PRIMARY KEY (course, student, exercise_id, number)
);
