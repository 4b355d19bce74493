"""Entry points: :func:`fit_distributed` (estimator on shards) and the single-machine keyed path.

:func:`fit_distributed` trains a DP estimator (``DPLogisticRegression``,
``DPLinearSVC``, ``DPRidge``) with DP-SGD on data it never holds: the workers
load their shards, the driver combines public facts about them (row count,
width, labels), plans the run exactly as ``estimator.fit`` would (same noise,
same event, same ``epsilon_``, same ledger charge), and runs the steps.  The
fitted estimator is an ordinary one (``predict``, ``save_model``).

Privacy: as ``estimator.fit`` with ``sampler="block_poisson"``: T steps of
Poisson-subsampled ``GaussianEvent(sigma)`` (add/remove adjacency); the
per-step sum is noised once on the driver.  A shard that fails its checks
stops the run before the ledger reservation and before any noise is drawn.
"""

import dataclasses
import math
import time

import numpy as np

from fastdp.distributed.data_parallel.driver import run_dpsgd
from fastdp.distributed.data_parallel.dual import DualStep, run_dpscd
from fastdp.distributed.data_parallel.executors import LocalWorkers
from fastdp.distributed.data_parallel.shards import ShardValidationError, array_source
from fastdp.distributed.data_parallel.worker import WorkerSetup
from fastdp.exceptions import ValidationError
from fastdp.sampling_blocks import BlockPoissonSampler, sampling_key

__all__ = ["fit_distributed", "keyed_dpsgd"]


def keyed_dpsgd(X, y, *, sampler, sampling_rng, noise_rng, loss, lam, epochs, sigma, clip, eta,
                reg, rho, kappa, num_threads, algorithm, record_history, callback):
    """DP-SGD on one machine with block-keyed lots (``fastdp.solvers.sgd`` delegates here).

    Runs the data-parallel step loop with one in-process worker holding all of
    ``X`` as one shard, so the result is bit-identical to a one-shard run on
    any number of machines.  Arguments as resolved by ``fastdp.solvers.sgd``.
    """
    from fastdp.losses import primal_objective
    from fastdp.solvers._common import sampled_gaussian_event
    from fastdp.solvers._result import SolverResult

    n, m = X.shape
    private = sigma > 0.0
    noise_std = sigma * clip if private else 0.0
    source = array_source(X, y, n_shards=1, block_size=sampler.block_size)
    epoch_ends = sampler.epoch_boundaries(n, epochs)
    setup = WorkerSetup(n_rows=n, n_features=m, shift=0, classes=None, row_map=None,
                        max_row_norm=None, loss_code=loss.code,
                        clip=float(clip) if clip is not None else math.inf, sampler=sampler,
                        sampling_key=sampling_key(sampling_rng), n_steps=int(epoch_ends[-1]),
                        num_threads=num_threads)
    history = [] if record_history else None

    def on_epoch(epoch, done, theta):
        if record_history:
            history.append({"epoch": epoch, "n_iter": done,
                            "primal_objective": primal_objective(theta, X, y, loss, lam)})
        if callback is not None:
            callback({"epoch": epoch, "n_iter": done, "coef": theta})

    executor = LocalWorkers(1)
    executor.open(source)
    executor.prepare(setup)
    theta, stats = run_dpsgd(executor, n_features=m, epoch_ends=epoch_ends, rho=rho, kappa=kappa,
                             noise_std=noise_std, noise_key=sampling_key(noise_rng),
                             callback=on_epoch, algorithm=algorithm)
    done = int(epoch_ends[-1])
    return SolverResult(
        coef=theta, alpha=None, v=None, n_iter=done, epochs=epochs, algorithm=algorithm,
        loss=loss.name, lam=lam, noise_multiplier=sigma, sensitivity=clip if private else 0.0,
        noise_std=noise_std, clip=clip, batch_size=float(sampler.expected_batch_size(n)),
        sample_rate=float(sampler.sample_rate(n)), sampler=sampler.name,
        adjacency=sampler.adjacency, event=sampled_gaussian_event(sampler, n, done, sigma),
        lazy_noise=True, diagnostics={"n_noise_draws": int(stats.n_noise_draws)},
        num_threads=num_threads, history=history,
        extra={"learning_rate": eta, "reg": reg, "rho": rho, "kappa": kappa,
               "dtype": np.dtype(X.dtype).name})


def _combine(source, summaries, estimator):
    """Public facts of the whole data set from the shard summaries."""
    n = sum(s["n_rows"] for s in summaries)
    if n != source.n_rows:
        raise ShardValidationError(f"the shards of {source.name} hold {n} rows; expected "
                                   f"{source.n_rows}.")
    any_entries = any(s["max_col"] >= 0 for s in summaries)
    if source.zero_based == "auto":
        shift = int(any_entries and not any(s["has_col0"] for s in summaries))
    elif source.zero_based is True:
        shift = 0
    else:
        shift = 1
        bad = [i for i, s in enumerate(summaries) if s["has_col0"]]
        if bad:
            raise ShardValidationError(f"shard {bad[0]} of {source.name} has column index 0 but "
                                       "zero_based=False.")
    widest = max(s["max_col"] for s in summaries) + 1 - shift
    d = widest if source.n_features is None else int(source.n_features)
    if d < max(widest, 1):
        raise ValidationError(f"n_features = {source.n_features} is smaller than the data's "
                              f"{widest} columns.")
    labels = np.unique(np.concatenate([s["labels"] for s in summaries]))
    if estimator._task == "regression":
        classes = None
    elif labels.shape[0] == 2:
        classes = labels
    else:
        raise ValidationError(f"fit_distributed trains binary classifiers and regressors; "
                              f"{source.name} has {labels.shape[0]} classes.")
    return n, d, shift, classes


def _dual_step(name, loss, lam_n, sampler, n, clip, options):
    """The :class:`~.dual.DualStep` of a ``solver="dpscd"`` fit (None for DP-SGD)."""
    if name != "dpscd":
        return None
    released = options.get("released", "v")
    if released != "v":
        raise ValidationError("fit_distributed runs dual DP-SCD with released='v' only (alpha "
                              f"stays on the workers); got released={released!r}.")
    return DualStep(loss_code=loss.code, lam_n=float(lam_n),
                    sigma_prime=float(sampler.expected_batch_size(n)), clip=float(clip),
                    box_eps=loss.check_box_eps(options.get("box_eps", 1e-4)))


def fit_distributed(source, estimator, *, engine=None):
    """Fit a DP linear estimator with data-parallel DP-SGD or DP-SCD on shards the driver never holds.

    Parameters
    ----------
    source : fastdp.distributed.data_parallel.shards.Source
        The data (e.g. :func:`~fastdp.distributed.data_parallel.libsvm_source`).
    estimator : DPLogisticRegression, DPLinearSVC or DPRidge
        Its parameters (epsilon, delta, batch_size, epochs, clip, alpha,
        normalize, fit_intercept, ledger, random_state, ...) are used as in
        ``fit``; ``solver`` must be ``"auto"``, ``"dpsgd"`` or ``"dpscd"``
        (dual DP-SCD, ``released="v"``: alpha stays on the workers), ``sampler``
        None or ``"block_poisson"``.
    engine : LocalWorkers or RayWorkers, optional
        Default ``LocalWorkers(1)``.

    Returns
    -------
    estimator
        Fitted: ``coef_``, ``intercept_``, ``epsilon_``, ``privacy_event_``,
        ... as after ``fit``, plus ``distributed_stats_`` (bytes and seconds
        per step, restarts; non-private diagnostics).

    Raises
    ------
    ShardValidationError
        A shard failed its checks (the message names it); nothing was
        reserved or released.
    """
    from fastdp.privacy import get_accountant
    from fastdp.solvers._common import split_random_state
    from fastdp._validation import check_random_state
    from fastdp.solvers.sgd import decay_and_step

    started = time.perf_counter()
    if not hasattr(estimator, "_plan_private_fit") and not hasattr(estimator, "get_params"):
        raise ValidationError("fit_distributed needs an estimator, e.g. DPLogisticRegression().")
    est = estimator
    engine = LocalWorkers(1) if engine is None else engine
    row_map = est._check_public_params()
    private = est._private()
    if est.solver not in (("auto", "dpsgd", "dpscd") if private else ("sgd",)):
        raise ValidationError(f"fit_distributed runs DP-SGD or dual DP-SCD; got "
                              f"solver={est.solver!r}.")
    if est.sampler not in (None, "block_poisson") and not isinstance(est.sampler,
                                                                   BlockPoissonSampler):
        raise ValidationError("fit_distributed draws lots with the block-keyed Poisson sampler; "
                              f"got sampler={est.sampler!r}.")
    try:
        summaries = engine.open(source)
        n, d, shift, classes = _combine(source, summaries, est)
        delta = est._check_params(n)
        name, solver, _ = est._resolve_solver(private, False)
        config, rule = est._solver_config(name, solver, n, d + int(row_map.fit_intercept), private)
        sampler = (est.sampler if isinstance(est.sampler, BlockPoissonSampler) else
                   BlockPoissonSampler(batch_size=config["batch_size"],
                                       block_size=source.block_size))
        if sampler.block_size != source.block_size:
            raise ValidationError(f"the sampler's block_size {sampler.block_size} differs from "
                                  f"the source's {source.block_size}.")
        config["sampler"] = sampler
        config["n_features"] = d + int(row_map.fit_intercept)
        config["loss"] = est._loss
        if isinstance(est.clip, str):
            config["clip"] = (rule["clip"] if rule is not None else
                              float(solver.default_clip(n, config, est._loss)))
        accountant = get_accountant(est.accountant)
        noise, _, planned_event = est._plan(solver, n, config, private, delta, accountant, 1)
        from fastdp.solvers._common import check_run_arguments
        loss, lam, epochs, sigma, clip = check_run_arguments(
            est._loss, config["lam"], config["epochs"], noise, config["clip"], allow_zero_lam=True)
        dual = _dual_step(name, loss, lam * n, sampler, n, clip, config["options"])
        if dual is None:
            eta = config["options"].get("learning_rate", 1.0)
            reg = config["options"].get("reg", "paper")
            rho, kappa = decay_and_step(eta, lam, float(sampler.expected_batch_size(n)), reg)
        rng = check_random_state(est.random_state)
        sampling_rng, noise_rng = split_random_state(rng)
        epoch_ends = sampler.epoch_boundaries(n, epochs)
        clip = math.inf if clip is None else float(clip)
        setup = WorkerSetup(
            n_rows=n, n_features=d, shift=shift, classes=classes, row_map=row_map,
            max_row_norm=1.0 if private and row_map.bound == "reject" else None,
            loss_code=loss.code, clip=clip, sampler=sampler,
            sampling_key=sampling_key(sampling_rng), n_steps=int(epoch_ends[-1]),
            num_threads=int(config.get("num_threads") or 1), dual=dual)
        engine.prepare(setup)   # the last check of the shards: nothing reserved or drawn yet
        reservation = None
        if est.ledger is not None:
            reservation = est.ledger.reserve(planned_event, label=type(est).__name__)
        try:
            width = d + int(row_map.fit_intercept)
            noise_std = sigma * clip if sigma > 0 else 0.0   # C: DP-SGD and DP-SCD (released v)
            if dual is None:
                theta, stats = run_dpsgd(engine, n_features=width, epoch_ends=epoch_ends,
                                         rho=rho, kappa=kappa, noise_std=noise_std,
                                         noise_key=sampling_key(noise_rng))
            else:
                v, stats = run_dpscd(engine, n_features=width, epoch_ends=epoch_ends,
                                     noise_std=noise_std, noise_key=sampling_key(noise_rng))
                theta = v / dual.lam_n
        except KeyboardInterrupt:
            if reservation is not None:
                reservation.cancel()   # nothing leaves the driver before the run ends
            raise
        except BaseException:
            if reservation is not None:
                reservation.commit()   # a failure during training may depend on the data
            raise
        if reservation is not None:
            reservation.commit()
    finally:
        engine.close()
    est._set_fitted(theta.reshape(1, -1), row_map=row_map, classes=classes, solver_name=name,
                    solver=solver, multi_class=None, config=config, noise=noise, delta=delta,
                    private=private, accountant=accountant, event=planned_event,
                    sampler=sampler.name, sample_rate=float(sampler.sample_rate(n)),
                    n_iter=int(epoch_ends[-1]), history=None, solver_result=None,
                    charged=reservation is not None, started=started)
    est.n_features_in_ = d
    est.distributed_stats_ = dataclasses.asdict(stats)
    return est
