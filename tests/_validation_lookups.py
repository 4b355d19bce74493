"""Patch a private helper of ``fastdp._validation`` where it is looked up.

``fastdp._validation`` is a package: a helper is defined in one module and
imported by name into the modules that call it, so a test that replaces it must
replace it in each of those modules (patching the package's re-export alone
changes nothing).  The table says where each patched helper is looked up; it is
checked against the modules themselves, so a move that adds a caller fails here
instead of silently leaving a patch without effect.
"""

import ast
import pkgutil
from importlib import import_module
from pathlib import Path

import fastdp._validation as _validation

LOOKED_UP_IN = {   # helper -> modules of fastdp._validation that look it up
    "_BLOCK_ENTRIES": ("blocks",),
    "_csr_is_canonical": ("csr", "features", "row_norms"),
    "_reject_non_finite_csr": ("features",),
    "_check_csr_arrays": ("csr", "sparse_structure"),
    "_csr_sq_norms": ("row_norms",),
}


def _module(name):
    # imported now, not when this file was: a test may have re-imported fastdp
    return import_module(f"fastdp._validation.{name}")


def _looks_up(module, name):
    """Whether the code of ``module`` reads the global ``name``."""
    tree = ast.parse(Path(module.__file__).read_text())
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
               for node in ast.walk(tree))


def _holders(name):
    """Modules of the package (not its ``__init__``) that look ``name`` up."""
    original = getattr(import_module("fastdp._validation"), name)
    modules = [_module(info.name) for info in pkgutil.iter_modules(_validation.__path__)]
    return {m.__name__.rsplit(".", 1)[1] for m in modules
            if m.__dict__.get(name, None) is original and _looks_up(m, name)}


def patch_validation(monkeypatch, name, value):
    """Replace helper ``name`` by ``value`` in every module that looks it up."""
    assert _holders(name) == set(LOOKED_UP_IN[name]), (name, _holders(name))
    for module in LOOKED_UP_IN[name]:
        monkeypatch.setattr(_module(module), name, value)
