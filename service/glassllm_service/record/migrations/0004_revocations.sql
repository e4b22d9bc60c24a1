-- Each worker reads the tokens revoked, every GLASSLLM_REVOCATION_REFRESH_S: the students
-- (and instructors) whose generation moved from 0, revoked or forgotten. A partial index
-- holds exactly those rows, so the read touches them alone, however large the roster.
-- Independent of 0003 (the attempts' answers): either may be applied first.
CREATE INDEX students_revoked ON students (course, student, generation) WHERE generation > 0
