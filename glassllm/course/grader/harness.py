"""The child's side of `glassllm grade`: a script run alone by ``python -I -S``, never
imported by the grader (it imports only the standard library and NumPy, the one package
the child's path holds).

    python -I -S WORK/harness.py NUMPY_DIR LIMITS_JSON EVENTS_FD WORK

Run in the child's empty private directory WORK, which holds ``task.json`` (the function's
name, its parameters and returns, and the submission's code: one chunk for a ``.py``, one
per code cell for a notebook) and ``inputs.npz`` (each case's arguments; never an expected
answer: those are computed by the grader after this process has exited). It first lowers
its own limits (CPU seconds, address space, processes, core files, message queues, file
size, open files: hard and soft, so the student's code cannot raise them again) and
forbids itself new privileges (no set-user-id program can give it any), reads its task
and says ``ready``; only then runs the submission's code and calls the function on each
case, writing ``answers/<k>.npz`` and a line per event to the file descriptor EVENTS_FD:
``ready``, ``start k``, ``done k``, ``fail k <json message>``, ``load <json>``. Until
``ready`` no student code has run, so a child that never says it failed by the grader's
fault, not the submission's.

Whatever the student's code does, it can only change its own claims: the grader reads
these files as claimed arrays (``allow_pickle=False``) and compares them with answers
this process never saw.
"""

import contextlib
import json
import os
import resource
import sys
import traceback

EVENTS = 2                  # the grader's pipe (argv[3]), progress only; set by main()


def _limit(limits: dict) -> None:
    for name, value in limits.items():
        which = getattr(resource, "RLIMIT_" + name)
        resource.setrlimit(which, (value, value))


def _say(line: str) -> None:
    if len(line) > 65536:           # an exception's message may be huge: the start of it
        line = line[:65536]
    with contextlib.suppress(OSError):
        os.write(EVENTS, (line + "\n").encode("utf-8", "replace"))


def _student_frames(exc: BaseException, names: set) -> str:
    """The exception with only the frames of the student's own code: no path of this
    machine, no frame of this harness or of NumPy's internals."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in names]
    lines = traceback.format_list(frames)
    return "".join(lines) + "".join(traceback.format_exception_only(type(exc), exc))


def _described(exc: BaseException, names: set) -> str:
    if isinstance(exc, SystemExit):
        return f"your code called sys.exit({exc.code!r}): a function must return its arrays"
    if isinstance(exc, MemoryError):
        return "your code ran out of memory (MemoryError)\n" + _student_frames(exc, names)
    if isinstance(exc, KeyboardInterrupt):
        return "your code was interrupted"
    return _student_frames(exc, names)


def _no_new_privileges() -> None:
    import ctypes

    pr_set_no_new_privs = 38
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_no_new_privs, 1, 0, 0, 0)


def main() -> None:
    global EVENTS
    numpy_dir, limits, EVENTS = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    os.chdir(sys.argv[4])
    sys.path.append(numpy_dir)
    import numpy as np  # before the limits: its import maps its libraries

    _limit(limits)
    _no_new_privileges()
    with open("task.json", encoding="utf-8") as f:
        task = json.load(f)
    inputs = np.load("inputs.npz", allow_pickle=False)
    _say("ready")
    names = {chunk["name"] for chunk in task["code"]}
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    notes = []
    for chunk in task["code"]:
        try:
            code = compile(chunk["source"], chunk["name"], "exec")
            exec(code, namespace)
        except BaseException as exc:
            message = _described(exc, names)
            if not task["notebook"] or isinstance(exc, SystemExit):
                _say("load " + json.dumps(message))
                return
            notes.append(f"{chunk['name']} raised an error (its other cells still ran):\n"
                         + message)
    if notes:
        print("\n".join(notes), file=sys.stderr)
    fn = namespace.get(task["function"])
    if not callable(fn):
        _say("load " + json.dumps(f"the submission defines no function {task['function']}"
                                  f"({', '.join(task['params'])})"))
        return
    os.makedirs("answers", exist_ok=True)
    for k in range(task["first"], task["cases"]):
        args = [inputs[f"{k}/{p}"] for p in task["params"]]
        sys.stdout.write(f"\x1e{k}\n")
        sys.stderr.write(f"\x1e{k}\n")
        sys.stdout.flush()
        sys.stderr.flush()
        _say(f"start {k}")
        try:
            returned = fn(*[a.copy() for a in args])
            if len(task["returns"]) == 1 and not isinstance(returned, tuple | list):
                returned = (returned,)
            if not isinstance(returned, tuple | list) or len(returned) != len(task["returns"]):
                raise TypeError(f"{task['function']} must return {len(task['returns'])} arrays"
                                f" ({', '.join(task['returns'])}), in that order; it returned"
                                f" {type(returned).__name__}")
            arrays = {}
            for name, value in zip(task["returns"], returned, strict=True):
                try:
                    arrays[name] = np.asarray(value, dtype=np.float64)
                except (TypeError, ValueError) as exc:
                    raise TypeError(f"{name} is not an array of numbers: {exc}") from None
            np.savez(f"answers/{k}.npz", **arrays)
        except BaseException as exc:
            _say(f"fail {k} " + json.dumps(_described(exc, names)))
            continue
        _say(f"done {k}")
    sys.stdout.flush()
    sys.stderr.flush()


if __name__ == "__main__":
    main()
