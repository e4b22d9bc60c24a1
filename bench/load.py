"""A class at once: the real sandbox, default settings, played by Locust.

Starts ``glassllm-sandbox`` (default settings: slots = CPUs, queue 256, 5 s wait) on a
free port and drives it headless with Locust (a well-kept load tool, gevent users; the
generator is not a home-made loop). Users mix small op requests (softmax (4, 8), add,
cross_entropy), expressions (/api/v1/eval), page-asset GETs and an occasional
(256, 256) @ (256, 256) matmul.

Phases (each prints offered and served req/s, p50 / p99 per kind, answers by status, the
generator's and the server's CPU use):
  class     64 users, each waits ~0.5 s between requests (a person pressing Run)
  stress    64 users, no wait; then /healthz alone under the same 64 users (the floor)
  overload  512 users, no wait: only 503 + Retry-After may be refused
  recovery  after the load stops: seconds until a small op and /healthz answer 200 again
Then: the server's RSS after warm-up and at the end, and a sample of answers sent again
one at a time, compared byte for byte.

    .venv/bin/python bench/load.py                  # 60 s phases (about 4 minutes)
    .venv/bin/python bench/load.py --seconds 10     # a quick check

The generator shares the machine's cores with the server: read its CPU beside the figures.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()      # before anything imports ssl / socket (Locust expects it first)

import argparse  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402
import orjson  # noqa: E402
from locust import FastHttpUser, between, constant, events, task  # noqa: E402
from locust.env import Environment  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
JSON = {"Content-Type": "application/json"}
rng = np.random.default_rng(0)


def _small_bodies() -> list[tuple[str, bytes]]:
    out = []
    for _ in range(8):
        x = rng.normal(size=(4, 8)).round(6)
        out += [("/api/v1/ops/softmax", orjson.dumps({"inputs": {"a": x.tolist()}})),
                ("/api/v1/ops/add", orjson.dumps({"inputs": {"a": x.tolist(),
                                                             "b": x[0].tolist()}})),
                ("/api/v1/ops/cross_entropy", orjson.dumps(
                    {"inputs": {"logits": x.tolist(), "targets": [1, 0, 7, 3]}}))]
    return out


SMALL = _small_bodies()
EXPRESSIONS = [("/api/v1/eval", orjson.dumps(
    {"expression": "softmax(x @ w).sum()",
     "variables": {"x": rng.normal(size=(4, 8)).round(6).tolist(),
                   "w": rng.normal(size=(8, 8)).round(6).tolist()}})) for _ in range(4)]
MATMUL = [("/api/v1/ops/matmul", orjson.dumps(
    {"inputs": {"a": rng.normal(size=(256, 256)).round(6).tolist(),
                "b": rng.normal(size=(256, 256)).round(6).tolist()}}))]
ASSETS = ["/", "/static/js/main.js", "/static/playground.css", "/api/v1/ops"]

STATUS: Counter = Counter()         # (kind, status) of the current phase; 0: no answer
SAMPLES: list[tuple[str, bytes, bytes]] = []
MAX_SAMPLES = 60


@events.request.add_listener
def _count(request_type, name, response_time, response_length, response=None,
           exception=None, **kw):
    status = getattr(response, "status_code", 0) or 0
    STATUS[(name, status)] += 1
    if status == 503 and not response.headers.get("Retry-After"):
        STATUS[(name, "503 without Retry-After")] += 1


class Student(FastHttpUser):
    """One student (or one grader loop): mostly small ops, some expressions and page loads,
    now and then a (256, 256) matmul."""

    abstract = True
    network_timeout = 60.0
    connection_timeout = 60.0

    def _post(self, kind: str, choices: list[tuple[str, bytes]]) -> None:
        path, body = random.choice(choices)
        with self.client.post(path, data=body, headers=JSON, name=kind,
                              catch_response=True) as r:
            if r.status_code == 200 and len(SAMPLES) < MAX_SAMPLES and random.random() < 0.05:
                SAMPLES.append((path, body, r.content))
            r.success() if r.status_code < 500 or r.status_code == 503 else r.failure(
                f"HTTP {r.status_code}")

    @task(10)
    def small_op(self):
        self._post("small op", SMALL)

    @task(4)
    def expression(self):
        self._post("expression", EXPRESSIONS)

    @task(3)
    def page_asset(self):
        self.client.get(random.choice(ASSETS), name="page asset")

    @task(1)
    def matmul(self):
        self._post("matmul 256", MATMUL)


class ClassStudent(Student):
    wait_time = between(0.25, 0.75)          # ~0.5 s, as a person does


class StressStudent(Student):
    wait_time = constant(0)


class HealthProbe(FastHttpUser):
    wait_time = constant(0)

    @task
    def healthz(self):
        self.client.get("/healthz", name="/healthz")


# -- the server ------------------------------------------------------------------------

def start_server(log: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLASSLLM_")}
    proc = subprocess.Popen([sys.executable, "-m", "glassllm_service.sandbox_cli",
                             "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=log.open("wb"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if probe(url, "/healthz") == 200:
            return proc, url
        time.sleep(0.1)
    raise SystemExit(f"the sandbox did not start; see {log}")


def probe(url: str, path: str, body: bytes | None = None) -> int:
    import urllib.error
    import urllib.request
    req = urllib.request.Request(url + path, data=body, headers=JSON if body else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


SETTLE_S = 4.0


def settled_rss_mb(pid: int) -> tuple[float, float]:
    """The RSS at once, and after SETTLE_S s with no requests: the sandbox hands a burst's
    freed memory back once its computations are idle for 2 s (glassllm_service/memory.py), so the
    settled figure is the working set and what stays of a leak."""
    now = rss_mb(pid)
    gevent.sleep(SETTLE_S)
    return now, rss_mb(pid)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- a phase -----------------------------------------------------------------------------

def phase(title: str, url: str, user: type, users: int, seconds: float, server_pid: int,
          spawn_rate: float = 64.0) -> dict:
    STATUS.clear()
    env = Environment(user_classes=[user], host=url, events=events)
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=spawn_rate)
    gevent.sleep(users / spawn_rate)                # ramp up, then measure
    env.stats.reset_all()
    STATUS.clear()
    t0, c0, s0 = time.perf_counter(), own_cpu(), cpu_seconds(server_pid)
    gevent.sleep(seconds)
    wall = time.perf_counter() - t0
    gen_cpu, srv_cpu = own_cpu() - c0, cpu_seconds(server_pid) - s0
    counts = Counter(STATUS)
    runner.quit()
    total = env.stats.total
    served = sum(n for (_, s), n in counts.items() if isinstance(s, int) and 200 <= s < 300)
    print(f"\n== {title}: {users} users, {wall:.0f} s ==")
    print(f"offered {total.num_requests / wall:8.1f} req/s   served (2xx) {served / wall:8.1f}"
          f" req/s   generator CPU {100 * gen_cpu / wall:4.0f}% of a core   server CPU"
          f" {100 * srv_cpu / wall:4.0f}%")
    for name, entry in sorted(env.stats.entries.items()):
        if entry.num_requests:
            print(f"  {name[0]:<12} n={entry.num_requests:6d}  p50"
                  f" {entry.get_response_time_percentile(0.5):6.0f} ms  p99"
                  f" {entry.get_response_time_percentile(0.99):6.0f} ms")
    by_status = Counter()
    for (_, s), n in counts.items():
        by_status[s] += n
    print("  answers by status:", dict(sorted(by_status.items(), key=lambda kv: str(kv[0]))))
    return {"served": served / wall, "status": by_status}


def recovery(url: str) -> float:
    """Seconds from the end of the load until a small op and /healthz answer 200."""
    path, body = SMALL[0]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 30:
        if probe(url, "/healthz") == 200 and probe(url, path, body) == 200:
            return time.perf_counter() - t0
        time.sleep(0.05)
    return float("inf")


def compare_samples(url: str) -> tuple[int, int]:
    import urllib.request
    same = 0
    for path, body, answer in SAMPLES:
        req = urllib.request.Request(url + path, data=body, headers=JSON)
        with urllib.request.urlopen(req, timeout=60) as r:
            same += r.read() == answer
    return same, len(SAMPLES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="class and stress phases")
    ap.add_argument("--users", type=int, default=64)
    ap.add_argument("--overload-users", type=int, default=512)
    ap.add_argument("--overload-seconds", type=float, default=None,
                    help="default: a third of --seconds")
    args = ap.parse_args()
    overload_s = args.overload_seconds or max(5.0, args.seconds / 3)
    log = Path(tempfile.mkdtemp(prefix="glassllm-load-")) / "server.log"
    proc, url = start_server(log)
    print(f"sandbox {url} (default settings), pid {proc.pid}; {os.cpu_count()} CPUs on this"
          f" machine, shared by the server and this generator")
    try:
        # the warm-up plays the stress mix: the server reaches its working set (every code
        # path, the allocator's arenas) before the RSS baseline is taken
        phase("warm-up (stress mix)", url, StressStudent, args.users,
              min(10.0, args.seconds / 3), proc.pid)
        rss_warm_now, rss_warm = settled_rss_mb(proc.pid)
        results = {"class": phase("class", url, ClassStudent, args.users, args.seconds,
                                  proc.pid),
                   "stress": phase("stress", url, StressStudent, args.users, args.seconds,
                                   proc.pid)}
        health = phase("/healthz alone, stress", url, HealthProbe, args.users,
                       args.seconds / 3, proc.pid)
        print(f"\nstress served {results['stress']['served']:.0f} req/s vs /healthz"
              f" {health['served']:.0f} req/s under the same {args.users} users")
        rss_stress_now, rss_stress = settled_rss_mb(proc.pid)
        over = phase("overload", url, StressStudent, args.overload_users, overload_s,
                     proc.pid, spawn_rate=100.0)
        back = recovery(url)
        bad = {s: n for s, n in over["status"].items() if s not in (200, 503)}
        print(f"\noverload answers other than 200 / 503: {bad or 'none'}; recovery to full"
              f" service: {back:.2f} s after the load stopped")
        rss_end_now, rss_end = settled_rss_mb(proc.pid)
        same, n = compare_samples(url)
        print(f"server RSS, each {SETTLE_S:g} s after the load stopped: {rss_warm:.0f} MB after"
              f" warm-up, {rss_stress:.0f} MB after class + stress"
              f" ({100 * (rss_stress - rss_warm) / rss_warm:+.1f} %), {rss_end:.0f} MB after"
              f" overload ({100 * (rss_end - rss_warm) / rss_warm:+.1f} %)")
        print(f"server RSS the moment each load stopped: {rss_warm_now:.0f}, {rss_stress_now:.0f},"
              f" {rss_end_now:.0f} MB; peak {rss_mb(proc.pid, 'VmHWM'):.0f} MB")
        print(f"sampled answers identical to their serial answer: {same} / {n}")
        for name in ("class", "stress"):
            st = results[name]["status"]
            fives = sum(v for s, v in st.items() if isinstance(s, int) and s >= 500 and s != 503)
            print(f"{name}: refusals (503) {st.get(503, 0)}, answers >= 500 other than 503"
                  f" {fives}, no answer {st.get(0, 0)}")
    finally:
        proc.terminate()
        proc.wait(timeout=15)


if __name__ == "__main__":
    main()
