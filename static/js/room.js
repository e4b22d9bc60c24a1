// A graded session (docs/modes.md#graded-sessions): for a student the sandbox is a locked
// room. It answers the exercises, the sign-in and the page's own files; every route that
// computes or shows a rule answers 403. So the page asks for none of them — no op list,
// examples, lessons or mysteries — and shows the exercise view alone: the playground, the
// lessons and the Train view are out of sight. An instructor gets the whole page.

import { $ } from "./state.js";

let locked = false;

/** Whether the page is locked for this visitor: a graded session, and not an instructor
 *  signed in. `list`: GET /api/v1/exercises; `who`: GET /api/v1/session's identity. */
export function lockedFor(list, who) {
  return list?.graded_session === true && who?.role !== "instructor";
}

/** Lock the page: the exercise view alone. */
export function lockRoom() {
  locked = true;
  document.body.classList.add("graded-session");
  $("#exercise-back").textContent = "← All exercises of this session";
}

export function isLocked() { return locked; }
