"""glassllm.runtime: the allocator tuning that the sandbox, the CLI and the benchmarks use."""

import platform
import subprocess
import sys

import pytest

# In a fresh interpreter: allocate and free a 4 MiB NumPy buffer, then ask glibc how many
# free bytes its heap kept (mallinfo2().fordblks). Untuned, the buffer was its own mmap
# and went straight back to the OS; tuned, the heap keeps it for the next array.
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
    from glassllm.runtime import tune_malloc
    assert tune_malloc() is True
a = np.ones(1 << 19); del a
print(libc.mallinfo2().fordblks)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_tune_malloc_keeps_freed_arrays_in_the_heap_and_import_changes_nothing():
    def kept(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    assert kept("untuned") < 1 << 21  # importing glassllm does not touch the allocator
    assert kept("tuned") >= 1 << 22  # the freed 4 MiB stayed for reuse
