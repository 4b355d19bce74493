"""Run a snippet of Python in a child process with memory and time limits.

For tests of hostile inputs where a crash, a hang or an exhausted memory is
possible: the child gets an address-space limit (``RLIMIT_AS``) and a CPU-time
limit, and the parent a wall-clock timeout, so a regression fails the test
instead of taking the machine down.
"""

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]

_PREAMBLE = """
import resource
resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
"""


def run_limited(code, *, memory_gib=3.0, cpu_seconds=60, timeout=120, args=()):
    """Run ``code`` (dedented) under the limits; return the ``CompletedProcess``.

    Parameters
    ----------
    code : str
        Python source run with ``python -c`` from the repository root.
    memory_gib : float
        Address-space limit of the child, in GiB.
    cpu_seconds : int
        CPU-time limit of the child.
    timeout : float
        Wall-clock seconds before the parent kills the child (a hang).
    args : sequence of str
        Extra arguments (``sys.argv[1:]`` of the child).
    """
    memory = int(memory_gib * 2**30)
    source = _PREAMBLE.format(memory=memory, cpu=int(cpu_seconds)) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", source, *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
