"""Data-parallel DP-SGD (multinomial included), dual DP-SCD and the Gaussian line-search
family over row shards (issue 21).

On Ray or in-process; reached through :func:`fit_distributed` (file sources),
the estimators' ``engine=`` parameter (in-memory data) or ``fastdp train --ray``.

Workers load their own shards (whole blocks of rows), draw the lots with the
block-keyed Poisson sampler (:mod:`fastdp.sampling_blocks`) and return sparse
clipped partial sums (DP-SCD: their part of Delta v, see :mod:`.dual`; the
line-search solvers: gradient and clipped loss sums, see :mod:`.line_search`);
the driver adds one noise draw per release.  The
privacy event, epsilon and (for one shard) the bits are those of the
single-machine ``dpsgd`` with ``sampler="block_poisson"``.  See
``docs/distributed.md``.
"""

from fastdp.distributed.data_parallel.api import fit_distributed
from fastdp.distributed.data_parallel.executors import LocalWorkers, RayWorkers
from fastdp.distributed.data_parallel.shards import (
    ArrayRows,
    BinaryRows,
    LibsvmRows,
    ShardValidationError,
    Source,
    array_source,
    binary_source,
    libsvm_source,
)

__all__ = ["fit_distributed", "LocalWorkers", "RayWorkers", "Source", "ArrayRows", "BinaryRows",
           "LibsvmRows", "ShardValidationError", "array_source", "binary_source", "libsvm_source"]
