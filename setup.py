"""Build script: declares and cythonizes the compiled kernels only.

All package metadata lives in ``pyproject.toml``.  Every ``.pyx`` file under
``fastdp/_kernels/`` becomes one extension module, compiled as C++ (the CSR
view of ``fastdp/_kernels/_csr.pxd`` is a template over the value and index
types; nothing else of C++ is used).  OpenMP flags are added when
the compiler accepts them; the build still succeeds without OpenMP (the kernels
then run on one thread, with identical results).
"""
import glob
import os
import sys
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


_OPENMP_PROBE = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
_PLAIN_PROBE = "int main(void){return 0;}\n"


def _compiler_accepts(compiler, flag, source=_OPENMP_PROBE):
    """Return True when ``compiler`` compiles and links ``source`` with ``flag``."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as fh:
            fh.write(source)
        try:
            objs = compiler.compile([src], output_dir=tmp, extra_postargs=[flag])
            compiler.link_executable(objs, os.path.join(tmp, "probe"), extra_postargs=[flag])
        except Exception:
            return False
    return True


class BuildExtWithOptionalOpenMP(build_ext):
    """``build_ext`` that enables OpenMP when available and says which it chose."""

    def build_extensions(self):
        flag = None if sys.platform == "win32" else "-fopenmp"
        use_openmp = (
            os.environ.get("FASTDP_NO_OPENMP", "") == ""
            and flag is not None
            and _compiler_accepts(self.compiler, flag)
        )
        print(f"fastdp: building kernels {'with' if use_openmp else 'without'} OpenMP")
        # C++ lets the compiler assume every loop terminates and then delete loops
        # with no visible effect -- the kernels' prefetch loops (g++ -O2 and up;
        # measured: 2x slower epochs).  C keeps them; so does this flag.
        keep_loops = [f for f in ["-fno-finite-loops"]
                      if _compiler_accepts(self.compiler, f, _PLAIN_PROBE)]
        for ext in self.extensions:
            ext.extra_compile_args = ["-O3"] + keep_loops + ([flag] if use_openmp else [])
            ext.extra_link_args = [flag] if use_openmp else []
        super().build_extensions()


def _numpy_random_library_dir():
    """Directory of numpy's static ``npyrandom`` library (numpy's documented C-API for
    drawing from a user's ``BitGenerator`` inside compiled code)."""
    return os.path.join(os.path.dirname(np.get_include()), "..", "random", "lib")


def _extensions():
    debug = os.environ.get("FASTDP_DEBUG_KERNELS", "") != ""
    npyrandom_dir = os.path.normpath(_numpy_random_library_dir())
    exts = []
    for path in sorted(glob.glob(os.path.join("fastdp", "_kernels", "*.pyx"))):
        name = path[:-4].replace(os.sep, ".")
        exts.append(
            Extension(
                name,
                [path],
                include_dirs=[np.get_include()],
                library_dirs=[npyrandom_dir],
                libraries=["npyrandom"],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
                language="c++",
            )
        )
    directives = {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": False,
        "cdivision": not debug,
        "initializedcheck": debug,
    }
    return cythonize(exts, compiler_directives=directives, nthreads=2 if os.name != "nt" else 0)


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExtWithOptionalOpenMP})
