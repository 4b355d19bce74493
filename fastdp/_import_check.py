"""A clear error when ``import fastdp`` found a directory that is not the package.

From the directory above a clone of the repository named ``fastdp``, Python
takes the clone (a directory ``fastdp`` without ``__init__.py``) as a
namespace package ahead of an editable install, whose finder is asked only
after the directories of ``sys.path``.  The submodules still load from the
installed package, but the package's own names (``__version__``, the
exceptions, ...) are missing, and some call far away fails with ``cannot
import name``.  :func:`check_package` turns that into one clear ImportError
at the first import of a fastdp module.
"""

import os
import sys


def check_package(name="fastdp"):
    """Raise ImportError when ``sys.modules[name]`` is a namespace package.

    Parameters
    ----------
    name : str, default="fastdp"
        The top-level package.
    """
    package = sys.modules.get(name)
    if package is None or getattr(package, "__file__", None) is not None:
        return
    found = ", ".join(list(getattr(package, "__path__", []))) or "a namespace package"
    real = os.path.dirname(os.path.abspath(__file__))
    raise ImportError(
        f"`import {name}` found {found}, a directory named {name} without __init__.py (a clone "
        f"of the repository in the current directory?), not the {name} package (installed at "
        f"{real}). Python takes such a directory as a namespace package ahead of an editable "
        "install. Run Python from another directory, or from inside the clone.")


check_package()
