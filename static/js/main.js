// The playground, in the order a student meets it: who is signed in (signin.js) and the
// exercises (exercise.js), then the ops and the examples (catalogue.js), the lessons and
// the mysteries; restore the case from the link or show softmax (share.js, case.js), then
// every control is wired to its job: run (run.js), step backwards (stepper.js), share
// (share.js). In a graded session a student's page is the exercise view alone and asks
// the sandbox for nothing else (room.js). The page's state is declared in state.js; every
// HTTP call is in api.js.

import { addVariable, caseChanged, opAsExpression, setMode, showOp } from "./case.js";
import { load } from "./catalogue.js";
import { wireCheckPanel } from "./checkpanel.js"; // "check my gradient"
import { closeExercise, exerciseList, linkedExercise, loadExerciseList, openExercise, showExerciseIndex } from "./exercise.js";
import { loadMysteries, wireMystery } from "./mystery.js";
import { run } from "./run.js";
import { initAccess, onSignIn, whoIsSignedIn } from "./signin.js";
import { isLocked, lockRoom, lockedFor } from "./room.js";
import { copyCurl, copyLink, copyPython, copyTorch, restoreFromLink } from "./share.js";
import { closeGuide, revealResult, wireGuide } from "./guide.js";
import { showStep } from "./stepper.js";
import { lessonFromLink, loadLessons, onesSeed, randomSeed, startLesson, suggestVariables } from "./teach.js";
import { $, setStatus, state } from "./state.js";
import "./train.js"; // the Train view wires itself
import "./attention.js"; // and so does its attention panel

/** Run the case on screen, then bring the result into view when it is off screen. */
async function runAndReveal() {
  await run();
  revealResult();
}

function wire() {
  $("#run").addEventListener("click", runAndReveal);
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); runAndReveal(); }
  });
  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener("change", () => {
      if (radio.value === "expr" && !$("#expr-text").value.trim()) opAsExpression();
      if (radio.value === "op") closeGuide();
      setMode(radio.value);
      state.example = null;
    });
  }
  $("#add-var").addEventListener("click", () => {
    const taken = new Set(state.vars.map((v) => v.nameInput.value.trim()));
    let k = 1;
    while (taken.has(`x${k}`)) k += 1;
    addVariable(`x${k}`, { value: [0.0] }, true).nameInput.focus();     // a tensor: it gets a gradient
  });
  $("#expr-text").addEventListener("input", () => { caseChanged(); suggestVariables(); });
  $("#seed-random").addEventListener("click", randomSeed);
  $("#seed-ones").addEventListener("click", onesSeed);
  $("#grad-output").addEventListener("input", caseChanged);
  $("#step-next").addEventListener("click", () => showStep(state.step + 1));
  $("#step-back").addEventListener("click", () => showStep(state.step - 1));
  $("#step-reset").addEventListener("click", () => showStep(-1));
  $("#zoom-in").addEventListener("click", () => state.graph?.zoom(state.graph.scale * 1.25));
  $("#zoom-out").addEventListener("click", () => state.graph?.zoom(state.graph.scale / 1.25));
  $("#zoom-reset").addEventListener("click", () => state.graph?.full());
  $("#zoom-fit").addEventListener("click", () => state.graph?.fit());
  $("#graph-scroll").addEventListener("graphzoom", (e) => {
    const { scale, mode, level } = e.detail;
    $("#zoom-state").textContent = `${Math.round(scale * 100)}%` + (mode === "fit" ? ", fitted" : "") +
      (level === "grad" ? ": each box shows its grad" : level === "op" ? ": each box shows its op (click one for its numbers)" : "") +
      (scale * 12 < 11 ? "; labels hidden below 11 px, zoom in to read them" : "");
  });
  $("#copy-link").addEventListener("click", copyLink);
  $("#copy-python").addEventListener("click", copyPython);
  $("#copy-torch").addEventListener("click", copyTorch);
  $("#copy-curl").addEventListener("click", copyCurl);
  window.addEventListener("hashchange", () => {
    const exercise = linkedExercise();                   // #exercise=<id>: the exercise view
    if (exercise) { openExercise(exercise); return; }
    if (isLocked()) { showExerciseIndex(); return; }     // a graded session: nothing else
    closeExercise();
    const lesson = lessonFromLink();
    if (lesson) startLesson(lesson);
    else if (restoreFromLink()) { closeGuide(); run(); }
  });
  $("#exercise-back").addEventListener("click", (e) => {
    e.preventDefault();
    history.pushState(null, "", location.pathname);
    if (isLocked()) showExerciseIndex();
    else closeExercise();
  });
  wireCheckPanel();                                           // check my gradient
  wireGuide();
  wireMystery();                                              // find a wrong backward rule
}

async function main() {
  // The page places the view itself once its parts have loaded (a lesson's guide and
  // result, an exercise): the browser's own restore on a reload ran before they had,
  // and landed somewhere in the middle of the case.
  if ("scrollRestoration" in history) history.scrollRestoration = "manual";
  wire();
  try {
    await initAccess();            // first: signed in already? (before an exercise opens)
    await loadExerciseList();      // the list says whether a graded session is on
    if (lockedFor(exerciseList(), whoIsSignedIn())) {
      // a student in a graded session: the exercises only; the rest would answer 403
      lockRoom();
      onSignIn(() => location.reload());    // an instructor signing in gets the whole page
      const linked = linkedExercise();
      if (linked) await openExercise(linked);
      else showExerciseIndex();
      document.body.dataset.ready = "true";
      return;
    }
    await load();
    await loadLessons();
    await loadMysteries();
  } catch (err) {
    setStatus(`Could not load the op list from the sandbox: ${err.message}`);
    return;
  }
  const exercise = linkedExercise();
  const lesson = lessonFromLink();
  if (exercise) {
    showOp("softmax");
    await openExercise(exercise);
  } else if (lesson) {
    await startLesson(lesson);
  } else if (restoreFromLink()) {
    await run();
  } else {
    showOp("softmax");
  }
  document.body.dataset.ready = "true";
}

main();
