"""What the revocation set costs (service/glassllm_service/record/revocations.py): a course
of 300 students, SQLite and PostgreSQL side by side.

    .venv/bin/python bench/revocations.py [--students 300] [--reads 400] [--requests 20000]

Printed, for each database:

- **the refresh query** (`read_revoked`, the one indexed query a worker makes per
  GLASSLLM_REVOCATION_REFRESH_S): its p50 and p99 in ms over `--reads` reads, the two
  databases' reads interleaved one by one, with 30 revoked students (a term's worth) and
  with all 300 revoked (the set's largest), and each plan (the partial index
  ``students_revoked``, or a scan where PostgreSQL finds the table too small to bother);
- **the per-request overhead**: `CourseAccess` in front of an app that answers at once,
  called in-process with a student's token, with the revocation set against without it
  (the same middleware, ``revocations=None``), interleaved in blocks; the median per
  request and its 90 % bootstrap interval. The refresh itself is amortised over the
  interval: at R requests per second and interval T, one query per T·R requests;
- **a read per request instead** (the design not taken): the same middleware with an
  interval so short that every request reads, for scale.

PostgreSQL is Debian's (``make test`` installs it), a fresh durable cluster in a
temporary directory on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from postgres_server import running_postgres  # noqa: E402
from record_course import keyring  # noqa: E402
from sqlalchemy import text  # noqa: E402

from glassllm_service.record.access import CourseAccess, Gate  # noqa: E402
from glassllm_service.record.revocations import REVOKED, Revocations, read_revoked  # noqa: E402
from glassllm_service.record.setup import open_record  # noqa: E402
from glassllm_service.settings import Settings  # noqa: E402

COURSE = "course"


def record_of(url: str | None, folder: Path):
    settings = Settings(mode="course", course_salt="bench", data_dir=folder,
                        database_url=url, course_id=COURSE)
    return open_record(settings)


def plan(record) -> str:
    with record.engine.connect() as conn:
        if record.engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN SELECT student, generation FROM"
                                        " students WHERE course = 'course' AND generation"
                                        " > 0").all()
            return "; ".join(str(r[-1]) for r in rows)
        rows = conn.execute(text("EXPLAIN " + REVOKED.text), {"c": COURSE}).all()
        return rows[0][0].strip()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bootstrap_median(values: list[float], rounds: int = 1000) -> tuple[float, float]:
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(values, k=len(values)))
                  for _ in range(rounds))
    return meds[int(0.05 * rounds)], meds[int(0.95 * rounds)]


def refresh_costs(records: dict, reads: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in records}
    for _ in range(reads):
        for name, record in records.items():                 # interleaved, one by one
            t0 = time.perf_counter()
            read_revoked(record.engine, COURSE)
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


async def _noop(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def middleware(record, interval: float | None) -> CourseAccess:
    gate = Gate(keyring())
    revocations = None if interval is None else Revocations(record.engine, COURSE, interval)
    return CourseAccess(_noop, gate, revocations=revocations)


async def per_request(apps: dict[str, CourseAccess], requests: int, block: int = 500
                      ) -> dict[str, list[float]]:
    """µs per request of each app, in interleaved blocks of `block` calls."""
    token = keyring().issue("s299", days=1).encode()
    scope = {"type": "http", "method": "POST", "path": "/api/v1/eval",
             "headers": [(b"authorization", b"Bearer " + token)]}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        return None

    out: dict[str, list[float]] = {name: [] for name in apps}
    for app in apps.values():                                          # warm up
        for _ in range(block):
            await app(dict(scope), receive, send)
    for _ in range(requests // block):
        for name, app in apps.items():
            t0 = time.perf_counter()
            for _ in range(block):
                await app(dict(scope), receive, send)
            out[name].append((time.perf_counter() - t0) / block * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--reads", type=int, default=400)
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, running_postgres(durable=True) as pg:
        records = {"SQLite": record_of(None, Path(tmp)), "PostgreSQL": record_of(pg, Path(tmp))}
        print(f"revocation set, {args.students} students; reads interleaved SQLite /"
              f" PostgreSQL, {args.reads} each")
        print(f"{'':34}{'SQLite':>14}{'PostgreSQL':>14}")
        revoked_so_far = 0
        for revoked in (30, args.students):
            for record in records.values():
                ids = [f"s{i:03d}" for i in range(args.students)]
                record.enrol([(s, None) for s in ids])
                for s in ids[revoked_so_far:revoked]:
                    record.revoke(s)
            revoked_so_far = revoked
            times = refresh_costs(records, args.reads)
            for q, label in ((0.5, "p50"), (0.99, "p99")):
                row = "".join(f"{pct(times[n], q):>11.3f} ms" for n in records)
                print(f"refresh query, {revoked:3d} revoked, {label}  {row}")
        for name, record in records.items():
            print(f"plan, {name}: {plan(record)}")
        print(f"\nper request (CourseAccess, in-process, blocks of 500, {args.requests} each,"
              " interleaved): median µs [90 % interval]")
        for name, record in records.items():
            apps = {"no set": middleware(record, None), "set": middleware(record, 10.0),
                    "read each request": middleware(record, 1e-9)}
            # the last one reads on every call: fewer calls, the same blocks
            costs = asyncio.run(per_request(apps, args.requests))
            line = []
            for label in apps:
                lo, hi = bootstrap_median(costs[label])
                line.append(f"{label} {statistics.median(costs[label]):.1f} [{lo:.1f}, {hi:.1f}]")
            added = statistics.median(costs["set"]) - statistics.median(costs["no set"])
            print(f"{name:>10}: " + "; ".join(line) + f"; the set adds {added:+.1f} µs")
        refresh = {n: statistics.median(refresh_costs({n: r}, 50)[n]) for n, r in
                   records.items()}
        rate, interval = 100, 10.0          # requests per second of one worker; the default
        print(f"\nthe refresh amortised at {rate} requests/s per worker and the default"
              f" {interval:g} s: " + ", ".join(
                  f"{n} {ms * 1000 / (rate * interval):.3f} µs per request"
                  for n, ms in refresh.items()))
        for record in records.values():
            record.close()


if __name__ == "__main__":
    main()
