"""``fastdp train --ray ADDRESS --workers K DATA``: the CLI's data-parallel route.

DP-SGD (``--solver auto`` or ``dpsgd``; multinomial when the file has more
than two classes and ``--model logistic``) or dual DP-SCD (``--solver dpscd``).

The driver counts the rows of the LIBSVM file (one streaming pass, no matrix),
or of a binary dataset (``DIR.fdp``, made by ``fastdp convert``) reads only
the header, and starts K Ray actors that load their own row ranges; the model,
the privacy report, the ledger charge and ``--out`` are those of ``fastdp
train``.  The training utility is not printed: computing it would read the
data here.
"""

import math

__all__ = ["train_on_ray"]


def train_on_ray(args, model_class, estimator_from_args, print_privacy, usage_error, finish):
    """Run ``fastdp train`` with ``--ray``; returns the exit status.

    The helpers of :mod:`fastdp.cli` (``estimator_from_args``, which builds
    the estimator and opens the ledger exactly as the in-memory route does,
    ``print_privacy``, ``usage_error``, ``finish``, which prints the ledger
    line, saves ``--out`` and returns the exit status) are passed in so that
    there is one definition of each.
    """
    from fastdp.distributed.data_parallel import (RayWorkers, binary_source, fit_distributed,
                                                  libsvm_source)
    from fastdp.io.binary import is_binary_dataset
    from fastdp.sampling_blocks import DEFAULT_SHARDS

    if args.data.startswith("dataset:"):
        raise usage_error("--ray trains on a LIBSVM file or binary dataset (DIR.fdp) that every "
                          "worker can read; dataset:NAME is loaded by this process (drop --ray).")
    if args.sampler not in (None, "block_poisson"):
        raise usage_error("--ray draws lots with block-keyed Poisson sampling "
                          "(--sampler block_poisson, the default with --ray).")
    if args.test:
        raise usage_error("--test is not available with --ray (it reads the data on the driver).")
    n_shards = args.shards       # None: the data's rule (default_shard_count), or one per worker
    if n_shards is None and args.workers > DEFAULT_SHARDS:     # for more workers than that
        n_shards = args.workers
    binary = is_binary_dataset(args.data) or args.data.endswith(".fdp")   # as fastdp.cli
    address = None if args.ray in ("", "local") else args.ray
    engine = RayWorkers(address=address, n_workers=args.workers,
                        placement=getattr(args, "placement", "node"))
    if binary:
        source = binary_source(args.data, n_shards=n_shards, block_size=args.block_size)
    else:   # rows counted by the workers (Ray tasks); shards read as byte ranges
        source = libsvm_source(args.data, n_shards=n_shards, block_size=args.block_size,
                               engine=engine)
    model, ledger = estimator_from_args(args, model_class, source.n_rows,
                                        sampler="block_poisson")
    fit_distributed(source, model, engine=engine)
    stats = model.distributed_stats_
    steps = max(stats["n_steps"], 1)
    print(f"fastdp train: {model_class.__name__} (solver {model.solver_}, data-parallel on Ray "
          f"{args.ray}) on {args.data}: {source.n_rows} rows in {source.n_shards} shards, "
          f"{args.workers} workers")
    print_privacy(model, target=None if math.isinf(args.epsilon) else args.epsilon,
                  accountant=args.accountant)
    print(f"communication    {(stats['bytes_to_workers'] + stats['bytes_from_workers']) / steps:.0f}"
          f" bytes per step, worker restarts {stats['restarts']}")
    print(f"time             fit {model.fit_time_:.3f} s ({1e3 * stats['seconds_workers'] / steps:.2f}"
          f" ms per step in workers and transport, {1e3 * stats['seconds_driver'] / steps:.2f} ms "
          "on the driver)")
    return finish(args, model, ledger)
