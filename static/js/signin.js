// Signing in to a course sandbox (docs/record.md#the-page). The student's token is traded
// once, at POST /api/v1/session, for an HttpOnly, SameSite=Strict cookie the browser sends
// with every later request of this sandbox — a permalink opened in a new tab is signed in
// already. The page never keeps the token: not in localStorage, not in sessionStorage,
// not in a URL. An access problem (no token, a wrong, expired or revoked one, a route for
// instructors) is shown here, beside the sign-in, never under the student's formula.

import { sessionCall, setSignIn } from "./api.js";
import { el } from "./dom.js";

const bar = () => document.getElementById("access");
let available = null;          // null: not known yet; false: this sandbox has no sign-in
let signedIn = null;
let signedInHook = null;       // told after a sign-in (room.js: the page is built again)

/** `hook()` is called after each successful sign-in. */
export function onSignIn(hook) { signedInHook = hook; }

/** True when an answer is an access problem: shown at the sign-in, not at a field. */
export function isAccessProblem(status, data) {
  return status === 401 || data?.error?.access === true;
}

/** Whether this sandbox signs students in (course mode with course secrets). */
export function signInAvailable() { return available === true; }
export function whoIsSignedIn() { return signedIn; }

/** Ask the sandbox who is signed in, and draw the bar (hidden without sign-in). */
export async function initAccess() {
  let res;
  try { res = await sessionCall("GET"); } catch { return; }
  const data = res.ok ? await res.json() : {};
  available = data.sign_in === true;
  signedIn = data.signed_in ? data : null;
  draw(data.problem ? `${accessWords(data.problem)} ${data.problem.message}` : null);
}


function draw(problem = null) {
  const box = bar();
  if (!box) return;
  box.hidden = !available;
  const who = signedIn
    ? el("span", { id: "access-who", text: `Signed in as ${signedIn.student}${signedIn.role === "instructor" ? " (instructor)" : ""}` })
    : el("span", { id: "access-who", text: "Not signed in" });
  const button = signedIn
    ? el("button", { type: "button", id: "sign-out", text: "Sign out" })
    : el("button", { type: "button", id: "sign-in", class: "primary", text: "Sign in" });
  button.addEventListener("click", () => (signedIn ? signOut() : signIn()));
  box.replaceChildren(who, " ", button, el("p", { id: "access-status", class: problem ? "msg error" : "msg", role: "status", "aria-live": "polite", text: problem ?? "" }));
}

/** Show an access problem (an error body's message) beside the sign-in. */
export function showAccessProblem(error, status) {
  if (available === null) available = true;
  if (status === 401) signedIn = null;
  draw(`${accessWords(error)} ${error?.message ?? ""}`.trim());
}

function accessWords(error) {
  return { token_expired: "Sign in again:", token_revoked: "Sign in again:",
    invalid_token: "This token is not valid here:", instructor_only: "For instructors only:",
    not_your_record: "Not yours:", unauthorized: "Sign in first:",
    record_unavailable: "Try again in a few seconds:" }[error?.code] ?? "Access refused:";
}

async function signOut() {
  await sessionCall("DELETE");
  signedIn = null;
  draw();
}

/** The sign-in dialog: resolves true once signed in, false when cancelled. A refusal is
 *  shown inside the dialog, beside the token box, and the dialog stays open. */
export function signIn() {
  return new Promise((resolve) => {
    const input = el("input", { type: "password", id: "signin-token", autocomplete: "off", spellcheck: "false" });
    const label = el("label", { for: "signin-token", text: "Your course token (from your instructor):" });
    const problem = el("p", { id: "signin-problem", class: "msg", role: "alert" });
    const ok = el("button", { type: "submit", class: "primary", text: "Sign in" });
    const cancel = el("button", { type: "button", text: "Cancel" });
    const form = el("form", { method: "dialog" }, label, input, problem, el("p", {}, ok, " ", cancel));
    const dialog = el("dialog", { id: "signin-dialog", "aria-labelledby": "signin-title" },
      el("h2", { id: "signin-title", text: "Sign in to the course" }), form);
    const done = (value) => { dialog.close(); dialog.remove(); resolve(value); };
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const token = input.value.trim();
      if (!token) { problem.textContent = "Paste your token first."; problem.className = "msg error"; return; }
      const res = await sessionCall("POST", { token });
      const data = await res.json().catch(() => ({}));
      if (!res.ok) {
        problem.textContent = `${accessWords(data.error)} ${data.error?.message ?? `HTTP ${res.status}`}`;
        problem.className = "msg error";
        input.setAttribute("aria-invalid", "true");
        return;
      }
      input.value = "";
      available = true;
      signedIn = data;
      draw();
      done(true);
      signedInHook?.();
    });
    cancel.addEventListener("click", () => done(false));
    dialog.addEventListener("cancel", (e) => { e.preventDefault(); done(false); });
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
  });
}

setSignIn({ available: signInAvailable, signIn });
