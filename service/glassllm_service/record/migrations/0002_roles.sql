-- An instructor's tokens are revoked like a student's, by their generation, so an
-- instructor may need a row of `students`; `role` keeps that row out of the roster and
-- the gradebook.
ALTER TABLE students ADD COLUMN role VARCHAR(16) NOT NULL DEFAULT 'student'
