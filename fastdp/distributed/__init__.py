"""Distributed differentially private ERM over a gossip graph (seed 004).

Private distributed dual averaging with agent subsampling: agents hold private
shards, exchange noisy dual variables with random neighbours, and output the
weighted average of their iterates. Entry point:
:func:`private_dual_averaging`. Building blocks: graphs
(:mod:`~fastdp.distributed.graphs`), gossip samplers and the mixing parameter
(:mod:`~fastdp.distributed.gossip`), regularizers and prox steps
(:mod:`~fastdp.distributed.regularizers`), schedules
(:mod:`~fastdp.distributed.schedules`), the per-agent step shared by every
engine (:mod:`~fastdp.distributed.node`), privacy accounting
(:mod:`~fastdp.distributed.privacy`), the y^(t) diagnostic
(:mod:`~fastdp.distributed.diagnostics`), the theory's bounds
(:mod:`~fastdp.distributed.bounds`) and the engines
(:class:`SimulatedEngine`, default; :class:`RayEngine`, optional, ``fastdp[ray]``).
"""

from fastdp.distributed.dual_averaging import (  # noqa: F401
    DistributedResult,
    objective,
    partition_rows,
    private_dual_averaging,
    rounds_for_epochs,
)
from fastdp.distributed.diagnostics import VirtualSequence, VirtualSequenceRecord  # noqa: F401
from fastdp.distributed.engines import Engine, EngineResult, SimulatedEngine  # noqa: F401
from fastdp.distributed.gossip import (  # noqa: F401
    AllActive,
    EdgeMatching,
    GossipSampler,
    GossipSchedule,
    InducedSubgraph,
    UniformEdges,
    get_gossip,
    mixing_parameter,
    monte_carlo_mixing_parameter,
    round_matrix,
)
from fastdp.distributed.graphs import (  # noqa: F401
    Graph,
    complete_graph,
    erdos_renyi_graph,
    graph_from_adjacency,
    grid_graph,
    metropolis_weights,
    ring_graph,
)
from fastdp.distributed.privacy import (  # noqa: F401
    PrivacyReport,
    dda_event,
    epsilon_kov,
    epsilon_paper,
    epsilon_paper_claim,
    sigma_kov,
    sigma_paper,
)
from fastdp.distributed.regularizers import (  # noqa: F401
    BoxConstraint,
    ElasticNetPenalty,
    L1Penalty,
    L2BallConstraint,
    L2Penalty,
    Regularizer,
)
from fastdp.distributed.schedules import (  # noqa: F401
    DualAveragingSchedule,
    convex_schedule,
    strongly_convex_schedule,
)


def __getattr__(name):
    if name == "RayEngine":
        from fastdp.distributed.engines.ray_engine import RayEngine
        return RayEngine
    raise AttributeError(name)


__all__ = [
    "private_dual_averaging", "DistributedResult", "partition_rows", "rounds_for_epochs",
    "objective", "Engine", "EngineResult", "SimulatedEngine", "RayEngine",
    "GossipSampler", "GossipSchedule", "EdgeMatching", "UniformEdges", "InducedSubgraph",
    "AllActive", "get_gossip", "mixing_parameter", "monte_carlo_mixing_parameter", "round_matrix",
    "Graph", "complete_graph", "ring_graph", "grid_graph", "erdos_renyi_graph",
    "graph_from_adjacency", "metropolis_weights", "PrivacyReport", "dda_event", "epsilon_kov",
    "epsilon_paper", "epsilon_paper_claim", "sigma_kov", "sigma_paper", "Regularizer",
    "L2Penalty", "L1Penalty", "ElasticNetPenalty", "BoxConstraint", "L2BallConstraint",
    "DualAveragingSchedule", "strongly_convex_schedule", "convex_schedule",
    "VirtualSequence", "VirtualSequenceRecord",
]
