"""glassllm.sandbox.runtime: the allocator tuning that the sandbox, the CLI and the benchmarks
use."""

import platform
import subprocess
import sys

import pytest

# In a fresh interpreter: allocate and free a 4 MiB NumPy buffer, then ask glibc how many
# more free bytes its heap kept than before (mallinfo2().fordblks). Untuned, the buffer
# was its own mmap and went straight back to the OS; tuned, the heap keeps it for the next
# array. (Relative to the count after the imports: compiling glassllm's modules, when no
# .pyc is cached, leaves ~2 MB of the heap free by itself.)
PROBE = """
import ctypes, sys
import numpy as np
import glassllm, glassllm.autograd
class MallInfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(n, ctypes.c_size_t) for n in names.split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "tuned":
    from glassllm.sandbox.runtime import tune_malloc
    assert tune_malloc() is True
before = libc.mallinfo2().fordblks
a = np.ones(1 << 19); del a
print(libc.mallinfo2().fordblks - before)
"""


def _run(script: str, mode: str) -> subprocess.CompletedProcess:
    """`script` in a fresh interpreter (its allocator untouched by this one), asserting it ran."""
    out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_tune_malloc_keeps_freed_arrays_in_the_heap_and_import_changes_nothing():
    def kept(mode: str) -> int:
        return int(_run(PROBE, mode).stdout)

    assert kept("untuned") < 1 << 21  # importing glassllm does not touch the allocator
    assert kept("tuned") >= 1 << 22  # the freed 4 MiB stayed for reuse


# Eight threads allocate at once; glibc's malloc_stats() prints one "Arena n:" block per
# arena on stderr. Untuned, threads get arenas of their own; tuned, they share the main one
# (a thread arena kept its freed memory resident after the idle trim).
ARENAS = """
import ctypes, sys, threading
import numpy as np
if sys.argv[1] == "tuned":
    from glassllm.sandbox.runtime import tune_malloc
    assert tune_malloc() is True
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    keep = [np.ones(1000) for _ in range(200)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL(None).malloc_stats()
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_tune_malloc_caps_the_arenas_and_trim_gives_memory_back():
    def arenas(mode: str) -> int:
        return _run(ARENAS, mode).stderr.count("Arena ")

    assert arenas("untuned") > 2          # glibc's default: up to 8 per core
    assert arenas("tuned") == 1


# Tuned, 100 freed 1 MiB arrays stay in the heap (RSS keeps them); trim hands them back.
TRIM = """
import numpy as np
from glassllm.sandbox.runtime import trim_free_memory, tune_malloc
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
assert tune_malloc() is True
keep = [np.ones(1 << 17) for _ in range(100)]
del keep[:99]                         # the last one pins the heap's top: no plain trim
before = rss_mb()
print(trim_free_memory(), before - rss_mb())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_trim_free_memory_gives_freed_heap_pages_back():
    out = subprocess.run([sys.executable, "-c", TRIM], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    released, dropped_mb = out.stdout.split()
    assert released == "True" and float(dropped_mb) > 80, out.stdout
