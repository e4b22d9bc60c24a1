-- A student's numbers come from an exercise's id and version, no longer from its file's
-- bytes. `case_versions` remembers each case as it was first served, field by field, so
-- that a case changed under the same version is refused at startup (the students'
-- numbers would change under attempts already counted). `fields` is JSON: field ->
-- SHA-256 of its canonical form (glassllm/course/versions.py).
CREATE TABLE case_versions (
    course VARCHAR(64) NOT NULL,
    kind VARCHAR(16) NOT NULL,               -- exercise or mystery
    exercise_id VARCHAR(64) NOT NULL,
    version INTEGER NOT NULL,
    fingerprint CHAR(64) NOT NULL,
    fields TEXT NOT NULL,
    file VARCHAR(1000) NOT NULL,             -- the file that first served it
    created_at VARCHAR(27) NOT NULL,
    PRIMARY KEY (course, kind, exercise_id, version)
);

-- Each attempt keeps the exercise version it was graded at and the answers it gave (JSON:
-- answer key -> array, as the wire reads it), so a regrade can run them again. Attempts
-- made before this migration have neither (NULL): they cannot be regraded.
ALTER TABLE attempts ADD COLUMN version INTEGER;
ALTER TABLE attempts ADD COLUMN answers TEXT
