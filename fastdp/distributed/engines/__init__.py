"""Execution engines of private distributed dual averaging.

* :class:`SimulatedEngine` (default): every agent in this process.
* :class:`RayEngine`: one Ray actor per agent (``pip install fastdp[ray]``);
  imported lazily, Ray is never a hard dependency.

Both run the per-agent step of :mod:`fastdp.distributed.node` and give
bit-identical results for the same seed.
"""

from fastdp.distributed.engines.base import Engine, EngineResult, get_engine  # noqa: F401
from fastdp.distributed.engines.simulated import SimulatedEngine  # noqa: F401


def __getattr__(name):
    if name == "RayEngine":
        from fastdp.distributed.engines.ray_engine import RayEngine
        return RayEngine
    raise AttributeError(name)


__all__ = ["Engine", "EngineResult", "get_engine", "SimulatedEngine", "RayEngine"]
