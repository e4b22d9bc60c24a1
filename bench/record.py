"""What the class record costs a check: the same submissions at 64 clients against a
sandbox without a record (practice mode) and with one (course mode, each student's own
token, every attempt committed before the answer), SQLite and PostgreSQL, side by side.

    .venv/bin/python bench/record.py [--seconds 60] [--rounds 3] [--workers 2] [--no-alone]

Each round runs the four sandboxes one after the other (``glassllm-sandbox --workers 2``,
loopback): no record, SQLite, PostgreSQL, and PostgreSQL with ``synchronous_commit`` off
(the WAL flush's share). 64 clients, each on its own keep-alive connection, submit a
(2, 3) cross-entropy gradient (the right answer, a fresh idempotency key each), each
waiting 0.5-1.5 s between an answer and its next check, as a class does (back-to-back
clients would measure the queue of a saturated 2-core machine, seconds long, not the
record).
Printed per sandbox, the rounds' checks pooled: p50 and p99 latency, the p99 the record
adds with its 90 % bootstrap interval (a p99 rests on 1 % of the samples: 15-second runs
moved it by 15 ms, so the interval says whether a difference is one), and the CPU one
check costs the sandbox's processes and the database server (from /proc). Then, unless
``--no-alone``, the record's own work by 64 threads of this process. The target: the
record adds at most 10 ms to a check's p99. PostgreSQL is Debian's (``make test``
installs it), a fresh cluster in a temporary directory with its durable defaults (fsync
on), as a course would run it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from postgres_server import running_postgres  # noqa: E402
from record_course import SALT, SECRETS, answers, course_dir, keyring  # noqa: E402
from sandbox_server import free_port, wait_healthy  # noqa: E402

CLIENTS = 64
THINK = (0.5, 1.5)         # seconds between a client's answer and its next check


@contextlib.contextmanager
def sandbox(env: dict, workers: int):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "glassllm_service.sandbox_cli", "--workers",
                             str(workers), "--port", str(port), "--log-level", "warning"],
                            env={**os.environ, "GLASSLLM_ACCESS_LOG": "0", **env},
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout=60)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=20)


async def load(url: str, root: Path, seconds: float, course: str | None) -> list[float]:
    """64 clients submitting for `seconds`, each waiting THINK seconds (at random, mean 1 s)
    between its answers, as a class checks; each submission's latency in ms."""
    students = [f"b{i:02d}" for i in range(CLIENTS)]
    bodies = {s: answers(root, s) for s in students}
    tokens = {s: keyring(course or "course").issue(s, days=1) for s in students}
    times: list[float] = []
    end = time.perf_counter() + seconds
    rng = random.Random(0)

    async def client(s: str) -> None:
        headers = ({"Authorization": f"Bearer {tokens[s]}"} if course
                   else {"X-Student-ID": s})
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as c:
            await asyncio.sleep(rng.uniform(*THINK))          # the clients not in step
            n = 0
            while time.perf_counter() < end:
                n += 1
                t = time.perf_counter()
                r = await c.post("/api/v1/exercises/ce-record/submit",
                                 json={"answers": bodies[s], "idempotency_key": f"{s}-{n}"})
                times.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200 and r.json()["passed"], r.text
                await asyncio.sleep(rng.uniform(*THINK))

    await asyncio.gather(*(client(s) for s in students))
    return times


def store_alone(url: str | None, root: Path, per_client: int) -> list[float]:
    """The record's own work of one submission — one transaction: the token's generation
    checked, the hints counted, the attempt numbered and committed — by 64 threads at
    once, as 64 clients' submissions reach the workers' thread pools; each one's ms."""
    from concurrent.futures import ThreadPoolExecutor

    from glassllm.course.attempts import Attempt
    from glassllm_service.record.database import engine_for, migrate, url_of
    from glassllm_service.record.store import DatabaseRecord

    engine = engine_for(url_of(url, root), pool_size=8)
    migrate(engine)
    record = DatabaseRecord(engine, f"alone{random.randrange(10**9)}")

    def client(i: int) -> list[float]:
        out = []
        for n in range(per_client):
            t = time.perf_counter()
            record.record_attempt(Attempt(f"s{i}", "ex", "h" * 64, "d" * 64, None, 1.0, True,
                                          None, dt.datetime.now(dt.UTC), f"k{n}"), None,
                                  generation=0)
            out.append((time.perf_counter() - t) * 1000)
        return out

    with ThreadPoolExecutor(CLIENTS) as pool:
        times = [t for part in pool.map(client, range(CLIENTS)) for t in part]
    engine.dispose()
    return times


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 1000) - 1]


def added_p99(base: list[float], other: list[float], resamples: int = 400
              ) -> tuple[float, float, float]:
    """p99(other) - p99(base), with its 90 % bootstrap interval: both sets resampled with
    replacement, the difference taken each time. A p99 rests on the 1 % of samples
    above it; the interval says how far another run of the same length may land."""
    rng = random.Random(1)
    diffs = sorted(p(rng.choices(other, k=len(other)), 0.99)
                   - p(rng.choices(base, k=len(base)), 0.99) for _ in range(resamples))
    return (p(other, 0.99) - p(base, 0.99), diffs[int(0.05 * resamples)],
            diffs[int(0.95 * resamples) - 1])


def _processes() -> dict[int, tuple[int, list[str], float]]:
    """pid -> (parent pid, command line, CPU seconds used), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()      # after the command's name
        out[int(entry.name)] = (int(fields[1]), [a.decode(errors="replace") for a in args],
                                (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_seconds(roots: list[int]) -> float:
    """CPU seconds used so far by the processes under `roots` (themselves included)."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, list(roots)
    while todo:
        pid = todo.pop()
        if pid in procs:
            total += procs[pid][2]
            todo.extend(children.get(pid, []))
    return total


def postmaster(url: str) -> list[int]:
    """The PostgreSQL server listening on `url`'s port (its backends are its children)."""
    port = url.rsplit(":", 1)[1].split("/", 1)[0]
    return [pid for pid, (_, args, _) in _processes().items()
            if args and args[0].endswith("postgres") and "-p" in args
            and args[args.index("-p") + 1:args.index("-p") + 2] == [port]]


ASYNC_COMMIT = "?options=-c%20synchronous_commit%3Doff"     # libpq's options, per session


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-alone", dest="alone", action="store_false",
                    help="skip the record's own work alone (64 threads in this process)")
    args = ap.parse_args()
    results: dict[str, list[tuple[float, float]]] = {}
    samples: dict[str, list[float]] = {}
    cpu: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, running_postgres(durable=True) as pg:

        def database_roots(env: dict) -> list[int]:
            return postmaster(pg) if "GLASSLLM_DATABASE_URL" in env else []

        root = Path(tmp)
        course_dir(root)
        # unlimited attempts here: the bench's own copy of the exercise
        ex = root / "exercises" / "ce-record.toml"
        ex.write_text(ex.read_text().replace("max_attempts = 3\n", ""))
        base = {"GLASSLLM_COURSE_SALT": SALT, "GLASSLLM_EXERCISES_DIR": str(root / "exercises")}
        runs = {"no record (practice)": (base, None)}
        for round_ in range(args.rounds):
            runs["SQLite"] = ({**base, "GLASSLLM_MODE": "course",
                               "GLASSLLM_COURSE_SECRETS": SECRETS,
                               "GLASSLLM_DATA_DIR": str(root / f"data{round_}")}, "course")
            runs["PostgreSQL"] = ({**base, "GLASSLLM_MODE": "course",
                                   "GLASSLLM_COURSE_SECRETS": SECRETS,
                                   "GLASSLLM_COURSE_ID": f"bench{round_}",
                                   "GLASSLLM_DATABASE_URL": pg}, f"bench{round_}")
            # the same database, each commit acknowledged before its WAL flush: tells the
            # flush's share of the tail from the rest (CPU, the pool)
            runs["PostgreSQL, synchronous_commit off"] = (
                {**base, "GLASSLLM_MODE": "course", "GLASSLLM_COURSE_SECRETS": SECRETS,
                 "GLASSLLM_COURSE_ID": f"async{round_}",
                 "GLASSLLM_DATABASE_URL": pg + ASYNC_COMMIT}, f"async{round_}")
            for name, (env, course) in runs.items():
                with sandbox(env, args.workers) as (url, pid):
                    asyncio.run(load(url, root, 3.0, course))                # warm-up
                    roots = {"sandbox": [pid], "database": database_roots(env)}
                    before = {k: cpu_seconds(v) for k, v in roots.items()}
                    times = asyncio.run(load(url, root, args.seconds, course))
                    used = {k: (cpu_seconds(v) - before[k]) * 1000 / len(times)
                            for k, v in roots.items()}
                results.setdefault(name, []).append((p(times, 0.5), p(times, 0.99)))
                samples.setdefault(name, []).extend(times)
                cpu.setdefault(name, []).append(used)
                print(f"round {round_ + 1}: {name}: {len(times)} checks, p50"
                      f" {results[name][-1][0]:.1f} ms, p99 {results[name][-1][1]:.1f} ms,"
                      f" CPU per check: sandbox {used['sandbox']:.2f} ms, database"
                      f" {used['database']:.2f} ms", flush=True)
        alone = {"SQLite": store_alone(None, root / "alone", 20),
                 "PostgreSQL": store_alone(pg, root, 20)} if args.alone else {}
    if alone:
        print(f"\nthe record alone, {CLIENTS} threads x 20 submissions (2 workers hold at"
              " most 2 x 8 of them at once):")
    for name, times in alone.items():
        print(f"  {name:12} p50 {p(times, 0.5):6.1f} ms  p99 {p(times, 0.99):6.1f} ms")
    base = samples["no record (practice)"]
    print(f"load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"\n{CLIENTS} clients (a check every {sum(THINK) / 2:.0f} s each), {args.workers}"
          f" workers, {args.seconds:.0f} s per run, {args.rounds} rounds pooled; p99 added"
          " with its 90 % bootstrap interval; CPU per check (ms, mean of the rounds) of the"
          " sandbox's processes and of the database server's")
    print(f"{'sandbox':36} {'p50 ms':>7} {'p99 ms':>7} {'p99 added':>22} {'CPU sandbox':>12}"
          f" {'CPU db':>7}")
    for name, times in samples.items():
        added, low, high = added_p99(base, times)
        sandbox_cpu = statistics.mean(c["sandbox"] for c in cpu[name])
        db_cpu = statistics.mean(c["database"] for c in cpu[name])
        interval = "" if times is base else f"{added:+.1f} [{low:+.1f}, {high:+.1f}]"
        print(f"{name:36} {p(times, 0.5):7.1f} {p(times, 0.99):7.1f} {interval:>22}"
              f" {sandbox_cpu:12.2f} {db_cpu:7.2f}")


if __name__ == "__main__":
    main()
