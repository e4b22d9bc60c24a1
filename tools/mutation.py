"""`make mutation`: mutation testing of the core and the service's limits with mutmut 3.
Not part of `make test` or CI: it takes up to ~30 minutes on 2 cores.

What it does:

1. ``mutmut run`` on one seed mutant: mutmut copies the sources into mutants/, writes every
   mutant of the files listed in ``[tool.mutmut] only_mutate`` (pyproject.toml), and runs the
   fast test files (``pytest_add_cli_args_test_selection``) once to record which tests reach
   which function and how long each takes. Each mutant is later run against only the tests
   that reach its function.
2. Sampling: the full set (~3 700 mutants) does not fit in 30 minutes on 2 cores, so the
   mutants of each file are shuffled with ``random.Random(SEED)`` and taken round-robin
   across the files until the estimated cost (the recorded duration of the tests each mutant
   needs) reaches the budget (``--budget`` seconds of test time, default 2 x 25 min); every
   file gets its share. ``--all`` runs every mutant instead. Same seed, same sources: same
   sample.
3. ``mutmut run <the sample>``, then the report: the score is killed / (checked − equivalent)
   per file and in total; every survivor is printed with its diff, unless
   tools/mutation_equivalent.toml records it as equivalent with a reason (why no input can
   tell it apart from the original). Entries there that no longer name a surviving mutant
   are reported as stale (mutant names change when their function's source changes).

Usage: ``.venv/bin/python tools/mutation.py [--budget SECONDS] [--seed N] [--all] [--fresh]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import shutil
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
EQUIVALENT = ROOT / "tools" / "mutation_equivalent.toml"
MUTMUT = [str(Path(sys.executable).with_name("mutmut"))]
SEED_MUTANT = "glassllm.optim.x_clip_grad_norm__mutmut_1"
SERVICE_LINK = ROOT / "glassllm_service"     # ignored by git; exists only during a run
KILLED = {1, 3, 36, -24, 24, 152, 255, 37}   # mutmut: killed, timeout, caught by type check
SURVIVED = {0}
NO_TESTS = {5, 33}


def mutmut(*args: str) -> int:
    print("+ mutmut", " ".join(args[:3]) + (f" … ({len(args)} mutants)" if len(args) > 3 else ""),
          flush=True)
    return subprocess.call([*MUTMUT, *args], cwd=ROOT)


@contextlib.contextmanager
def service_at_the_root():
    """mutmut names a mutant's module from its file's path below the repository, so the
    service's files must sit at glassllm_service/ (not service/glassllm_service/) for a
    mutant's name to be the module the tests import: a symlink for the run."""
    made = not SERVICE_LINK.exists()
    if made:
        SERVICE_LINK.symlink_to(Path("service") / "glassllm_service", target_is_directory=True)
    try:
        yield
    finally:
        if made:
            SERVICE_LINK.unlink()


def metas() -> dict[str, dict]:
    """Source file (glassllm/optim.py) -> mutmut's record of its mutants."""
    out = {}
    for meta in sorted(MUTANTS.rglob("*.py.meta")):
        out[str(meta.relative_to(MUTANTS))[: -len(".meta")]] = json.loads(meta.read_text())
    return out


def function_of(mutant: str) -> str:
    return re.sub(r"__mutmut_\d+$", "", mutant)


def sample(seed: int, budget: float) -> list[str]:
    stats = json.loads((MUTANTS / "mutmut-stats.json").read_text())
    tests_of = stats["tests_by_mangled_function_name"]
    duration = stats["duration_by_test"]

    def cost(mutant: str) -> float:
        return sum(duration.get(t, 0.0) for t in tests_of.get(function_of(mutant), ()))

    rng = random.Random(seed)
    queues = []
    for _path, meta in sorted(metas().items()):
        names = sorted(meta["exit_code_by_key"])
        rng.shuffle(names)
        queues.append(names)
    chosen, spent = [], 0.0
    while any(queues) and spent < budget:
        for queue in queues:
            if queue:
                name = queue.pop()
                chosen.append(name)
                spent += cost(name) + 0.05        # + fork and collection overhead
    print(f"sample: {len(chosen)} mutants (seed {seed}), ~{spent:.0f} s of test time")
    return chosen


def report(chosen: set[str] | None) -> int:
    equivalent = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    equivalent = equivalent.get("mutant", {})
    for name, entry in equivalent.items():
        if not str(entry.get("reason", "")).strip():
            print(f"error: {EQUIVALENT.name}: {name} has no reason")
            return 2
    per_file: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    survivors, used = [], set()
    for path, meta in sorted(metas().items()):
        for name, code in meta["exit_code_by_key"].items():
            if code is None or (chosen is not None and name not in chosen):
                continue
            row = per_file[path]
            row["checked"] += 1
            if code in KILLED:
                row["killed"] += 1
            elif name in equivalent:
                row["equivalent"] += 1
                used.add(name)
            else:
                row["survived" if code in SURVIVED else "no tests" if code in NO_TESTS
                    else "other"] += 1
                survivors.append((path, name, code))
    total: dict[str, int] = defaultdict(int)
    print(f"\n{'file':26} {'checked':>8} {'killed':>7} {'equiv.':>7} {'survived':>9} {'score':>7}")
    for path, row in sorted(per_file.items()):
        for k, v in row.items():
            total[k] += v
        print(line(path, row))
    print(line("total", total))
    for _path, name, code in survivors:
        print(f"\n--- survivor ({'no tests' if code in NO_TESTS else 'survived'}): {name}")
        subprocess.call([*MUTMUT, "show", name], cwd=ROOT)
    stale = sorted(set(equivalent) - used)
    if stale and chosen is None:
        print(f"\nstale entries in {EQUIVALENT.name} (no such surviving mutant): {stale}")
    return 0


def line(label: str, row: dict[str, int]) -> str:
    live = row["checked"] - row["equivalent"]
    score = 100.0 * row["killed"] / live if live else 100.0
    survived = row["checked"] - row["killed"] - row["equivalent"]
    return (f"{label:26} {row['checked']:>8} {row['killed']:>7} {row['equivalent']:>7}"
            f" {survived:>9} {score:>6.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=2 * 25 * 60,
                        help="seconds of recorded test time to spend (default 3000: 2 cores"
                             " x 25 min)")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--all", action="store_true", help="every mutant, no sampling")
    parser.add_argument("--fresh", action="store_true", help="delete mutants/ first")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--again", action="store_true",
                        help="rerun the last sample's mutants that were not killed (after"
                             " adding tests or equivalents), then report on that sample")
    args = parser.parse_args()
    if args.report_only:
        return report(None)
    with service_at_the_root():
        return run(args)


def run(args: argparse.Namespace) -> int:
    if args.fresh:
        shutil.rmtree(MUTANTS, ignore_errors=True)
    if not (MUTANTS / "mutmut-stats.json").exists():
        mutmut("run", "--max-children", "2", SEED_MUTANT)   # generate + collect stats
    last = MUTANTS / "mutation-sample.txt"
    if args.again and last.exists():
        chosen = last.read_text().split()
        codes = {n: c for meta in metas().values() for n, c in meta["exit_code_by_key"].items()}
        mutmut("run", "--max-children", "2", *[n for n in chosen if codes.get(n) not in KILLED])
        return report(set(chosen))
    if args.all:
        chosen = sorted(n for meta in metas().values() for n in meta["exit_code_by_key"])
    else:
        chosen = sample(args.seed, args.budget)
    last.write_text("\n".join(chosen) + "\n")
    mutmut("run", "--max-children", "2", *chosen)
    return report(set(chosen))


if __name__ == "__main__":
    sys.exit(main())
