"""Entry points: :func:`fit_distributed` (estimator on shards) and the single-machine keyed path.

:func:`fit_distributed` trains a DP estimator (``DPLogisticRegression``,
``DPLinearSVC``, ``DPRidge``) with DP-SGD, dual DP-SCD or a Gaussian
line-search solver (:mod:`.line_search`) on data it never holds: the workers
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
from fastdp.distributed.data_parallel.dual import DualStep, engine_history_terms, run_dpscd
from fastdp.distributed.data_parallel.executors import LocalWorkers
from fastdp.distributed.data_parallel.shards import ShardValidationError, array_source
from fastdp.distributed.data_parallel.worker import WorkerSetup
from fastdp.exceptions import ValidationError
from fastdp.sampling_blocks import BlockPoissonSampler, sampling_key

__all__ = ["fit_distributed", "fit_in_memory", "keyed_dpsgd"]


def keyed_dpsgd(X, y, *, sampler, sampling_rng, noise_rng, loss, lam, epochs, sigma, clip, eta,
                reg, rho, kappa, num_threads, algorithm, record_history, callback, n_classes=0):
    """DP-SGD on one machine with block-keyed lots (``fastdp.solvers.sgd`` delegates here).

    Runs the data-parallel step loop with one in-process worker holding all of
    ``X`` cut into the default shards (:func:`~fastdp.sampling_blocks.default_shard_count`),
    so the result is bit-identical to a run with the default shards on any
    number of machines.  Arguments as resolved by ``fastdp.solvers.sgd``;
    ``n_classes = K >= 2`` is multinomial DP-SGD (``fastdp.solvers.multinomial``
    delegates here with ``loss=None``, ``y`` the class indices).
    """
    from fastdp.losses import primal_objective
    from fastdp.solvers._common import sampled_gaussian_event
    from fastdp.solvers._result import SolverResult

    n, m = X.shape
    private = sigma > 0.0
    noise_std = sigma * clip if private else 0.0
    source = array_source(X, y, block_size=sampler.block_size)   # the default shards
    epoch_ends = sampler.epoch_boundaries(n, epochs)
    setup = WorkerSetup(n_rows=n, n_features=m, shift=0, classes=None, row_map=None,
                        max_row_norm=None, loss_code=-1 if n_classes else loss.code,
                        clip=float(clip) if clip is not None else math.inf, sampler=sampler,
                        sampling_key=sampling_key(sampling_rng), n_steps=int(epoch_ends[-1]),
                        num_threads=num_threads, n_classes=n_classes)
    history = [] if record_history else None

    def released(theta):
        return theta.T if n_classes else theta       # multinomial: (K, d)

    def objective(theta):
        if n_classes:
            from fastdp.solvers.multinomial import multinomial_objective
            return multinomial_objective(theta.T, X, y, lam)
        return primal_objective(theta, X, y, loss, lam)

    def on_epoch(epoch, done, theta):
        if record_history:
            history.append({"epoch": epoch, "n_iter": done, "primal_objective": objective(theta)})
        if callback is not None:
            callback({"epoch": epoch, "n_iter": done, "coef": released(theta)})

    executor = LocalWorkers(1)
    executor.open(source)
    executor.prepare(setup)
    theta, stats = run_dpsgd(executor, n_features=m, epoch_ends=epoch_ends, rho=rho, kappa=kappa,
                             noise_std=noise_std, noise_key=sampling_key(noise_rng),
                             callback=on_epoch, algorithm=algorithm, n_classes=n_classes)
    done = int(epoch_ends[-1])
    extra = {"learning_rate": eta, "reg": reg, "rho": rho, "kappa": kappa,
             "dtype": np.dtype(X.dtype).name}
    if n_classes:
        extra = {"learning_rate": eta, "rho": rho, "kappa": kappa, "n_classes": n_classes,
                 "dtype": np.dtype(X.dtype).name}
    return SolverResult(
        coef=np.ascontiguousarray(released(theta)), alpha=None, v=None, n_iter=done,
        epochs=epochs, algorithm=algorithm, loss="multinomial" if n_classes else loss.name,
        lam=lam, noise_multiplier=sigma, sensitivity=clip if private else 0.0,
        noise_std=noise_std, clip=clip, batch_size=float(sampler.expected_batch_size(n)),
        sample_rate=float(sampler.sample_rate(n)), sampler=sampler.name,
        adjacency=sampler.adjacency, event=sampled_gaussian_event(sampler, n, done, sigma),
        lazy_noise=True, diagnostics={"n_noise_draws": int(stats.n_noise_draws)},
        num_threads=num_threads, history=history, extra=extra)


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
    elif labels.shape[0] >= 2:
        classes = labels
    else:
        raise ValidationError(f"{type(estimator).__name__} needs at least two classes; "
                              f"{source.name} has {labels.shape[0]}.")
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
        ``fit``; ``solver`` must be ``"auto"``, ``"dpsgd"`` (multinomial for
        more than two classes with the logistic loss), ``"dpscd"`` (dual
        DP-SCD, ``released="v"``: alpha stays on the workers; two classes or
        regression) or one of the Gaussian line-search family
        (``"dp_blsgd"``, ``"dp_blsgd_adaptive"``, ``"dp_blsgd_ac"``,
        ``"dp_blgd"``, ``"dpagd"``; two classes or regression; see
        :mod:`.line_search`), ``sampler`` None, ``"block_poisson"`` or a
        :class:`~fastdp.sampling_blocks.BlockPoissonSampler` with the
        source's block size.  ``callback`` (DP-SGD, DP-SCD) gets the released
        state after every epoch; ``record_history`` is computed from the
        workers' per-shard sums (DP-SCD: also their conjugate sums and
        ``X_s^T alpha_s``; the same entries as ``fit``).
    engine : LocalWorkers or RayWorkers, optional
        Default ``LocalWorkers(1)``; an ``n_shards`` set on it must equal the
        source's.  The estimator's own ``engine`` parameter is not used here.

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
    started = time.perf_counter()
    if not hasattr(estimator, "_set_fitted"):
        raise ValidationError("fit_distributed needs an estimator, e.g. DPLogisticRegression().")
    engine = LocalWorkers(1) if engine is None else engine
    if getattr(engine, "n_shards", None) not in (None, source.n_shards):
        raise ValidationError(f"the engine asks for n_shards={engine.n_shards} but the source "
                              f"{source.name} has {source.n_shards} shards.")
    return _fit(source, estimator, engine, started)


def fit_in_memory(estimator, X, y):
    """``estimator.fit(X, y)`` with ``estimator.engine`` set: the rows cut into shards.

    X and y are validated here as ``fit`` does (scikit-learn's checks,
    feature names), the labels encoded (two classes: -1/+1 with
    ``classes_[1]`` as +1; K > 2: class indices), and the rows cut into
    ``engine.n_shards`` shards of whole blocks of the sampler's ``block_size``
    (default 4096).  By default the shards are a rule of the data
    (:func:`~fastdp.sampling_blocks.default_shard_count`: 16, or one per
    block for fewer blocks), so 1, 2, ..., 16 workers train the same model;
    more workers than that get one shard each (at most one per block).
    The engine is copied: the estimator's parameter is not changed by the
    fit.  The workers then run exactly as for :func:`fit_distributed` (same
    event, epsilon, ledger charge).  Bits: with one shard, those of ``fit``
    with the block-keyed sampler on one machine; otherwise they depend only
    on the number of shards (within 1e-12 relative of one shard); with the
    default shards they are those of ``fit`` with the keyed sampler.

    The workers of a :class:`LocalWorkers` engine hold copies of their rows
    (memory about twice X); a :class:`RayWorkers` actor is sent only its own
    rows (views of X's arrays put in the object store, no copy on the
    driver).  For data the driver cannot hold, use :func:`fit_distributed`
    with a file source.
    """
    import copy

    from fastdp.sampling_blocks import DEFAULT_BLOCK_SIZE, block_ranges, default_shard_count

    started = time.perf_counter()
    est = estimator
    est._check_public_params()
    X, y = est._validate_X(X, y, reset=True)
    y, classes, _, _ = est._targets(y, X.shape[0])
    engine = copy.deepcopy(est.engine)
    if not hasattr(engine, "prepare"):
        raise ValidationError(f"engine must be None, LocalWorkers(...) or RayWorkers(...); got "
                              f"{est.engine!r}.")
    block_size = (est.sampler.block_size if isinstance(est.sampler, BlockPoissonSampler)
                  else DEFAULT_BLOCK_SIZE)
    n_shards = engine.n_shards
    if n_shards is None:   # the data's rule; more workers than it: one shard each
        n_shards = max(default_shard_count(X.shape[0], block_size),
                       min(engine.n_workers, -(-X.shape[0] // block_size)))
    block_ranges(X.shape[0], block_size, n_shards)   # a clear error for too few blocks
    source = array_source(X, np.asarray(y, dtype=np.float64), n_shards=n_shards,
                          block_size=block_size, name="X")
    return _fit(source, est, engine, started, label_classes=classes)


_ENGINE_SOLVERS = ("auto", "dpsgd", "dpscd")


def _check_engine_settings(est, private):
    """Public settings the engine cannot honour: a clear error before anything is read."""
    if est.solver not in (_ENGINE_SOLVERS if private else ("sgd",)) + _LINE_SEARCH_SOLVERS:
        raise ValidationError(f"the data-parallel engine runs DP-SGD (multinomial included), "
                              f"dual DP-SCD or the Gaussian line-search family (solver='auto', "
                              f"'dpsgd', 'dpscd', {', '.join(map(repr, _LINE_SEARCH_SOLVERS))}; "
                              f"'sgd' at epsilon=inf); got solver={est.solver!r}.")
    if est.sampler not in (None, "block_poisson") and not isinstance(est.sampler,
                                                                   BlockPoissonSampler):
        raise ValidationError("the data-parallel engine draws lots with the block-keyed Poisson "
                              f"sampler; got sampler={est.sampler!r} (use None or "
                              "'block_poisson').")
    if not est.lazy_noise and est.solver not in _LINE_SEARCH_SOLVERS:
        raise ValidationError("the data-parallel engine draws exact lazy noise only "
                              "(lazy_noise=True; eager noise has the same law).")


_LINE_SEARCH_SOLVERS = ("dp_blsgd", "line_search", "dp_blsgd_adaptive", "dp_blsgd_ac",
                        "dp_blgd", "dpagd", "dp_agd")


def _fit(source, est, engine, started, label_classes=None):
    """The shared body of :func:`fit_distributed` and :func:`fit_in_memory`."""
    from fastdp._validation import check_random_state
    from fastdp.losses import get_loss
    from fastdp.privacy import get_accountant

    row_map = est._check_public_params()
    private = est._private()
    _check_engine_settings(est, private)
    try:
        summaries = engine.open(source)
        n, d, shift, classes = _combine(source, summaries, est)
        n_labels = 0 if classes is None else classes.shape[0]
        delta = est._check_params(n)
        name, solver, multinomial = est._resolve_solver(private, n_labels > 2)
        if n_labels > 2 and not multinomial:
            raise ValidationError(
                f"{source.name} has {n_labels} classes: the engine trains them as one multinomial "
                f"DP-SGD model (logistic loss, solver='dpsgd'); {type(est).__name__} with "
                f"solver={est.solver!r} would need one-vs-rest fits, which it does not run.")
        if est.callback is not None and not solver.supports_callback:
            raise ValidationError(f"solver {name!r} does not take a per-epoch callback.")
        n_classes = n_labels if multinomial else 0
        width = d + int(row_map.fit_intercept)
        config, rule = est._solver_config(name, solver, n, width, private,
                                          n_labels if multinomial else 2)
        sampler = (est.sampler if isinstance(est.sampler, BlockPoissonSampler) else
                   BlockPoissonSampler(batch_size=config["batch_size"],
                                       block_size=source.block_size))
        if sampler.block_size != source.block_size:
            raise ValidationError(f"the sampler's block_size {sampler.block_size} differs from "
                                  f"the source's {source.block_size}.")
        oracle = None
        if name in _LINE_SEARCH_SOLVERS:
            from fastdp.distributed.data_parallel.line_search import EngineLotSampler, ShardOracle

            oracle = ShardOracle(engine, n, width, est._loss)
            config["sampler"] = EngineLotSampler(sampler, oracle)   # lots drawn by the workers
        else:
            config["sampler"] = sampler
        config["n_features"] = width
        config["loss"] = est._loss
        if multinomial:
            config["n_classes"] = n_classes
        est._settle_clip(config, rule, solver, n, est._loss)
        solver.check_params(n, config, private=private)
        accountant = get_accountant(est.accountant)
        noise, one_event, planned_event = est._plan(solver, n, config, private, delta,
                                                    accountant, 1)
        rng = check_random_state(est.random_state)
        released = []    # epochs whose state a callback saw (released)
        on_epoch = _epoch_hooks(est, row_map, released, width, n_classes)
        base = dict(n_rows=n, n_features=d, shift=shift, classes=classes, row_map=row_map,
                    max_row_norm=1.0 if private and row_map.bound == "reject" else None,
                    num_threads=int(config.get("num_threads") or 1), n_classes=n_classes)
        if oracle is not None:
            # the sampling key is drawn inside the solver (its stream); lots carry it
            setup = WorkerSetup(loss_code=get_loss(est._loss).code, clip=math.inf,
                                sampler=sampler, sampling_key=np.zeros(2, dtype=np.uint64),
                                n_steps=0, **base)

            def run():
                return _run_line_search(solver, oracle, config, noise, rng, one_event)
        else:
            setup, run = _sgd_or_scd(name, est, engine, config, noise, sampler, n, rng, base,
                                     on_epoch)
        engine.prepare(setup)   # the last check of the shards: nothing reserved or drawn yet
        reservation = None
        if est.ledger is not None:
            reservation = est.ledger.reserve(planned_event, label=type(est).__name__)
        try:
            theta, stats, n_iter, history, result = run()
        except KeyboardInterrupt as exc:
            if reservation is not None:
                if released:   # a callback already saw a released state
                    reservation.commit()
                    exc.add_note("fastdp: the privacy ledger keeps this fit's charge: the "
                                 "callback already received released states.")
                else:
                    reservation.cancel()   # nothing left the driver
            raise
        except BaseException:
            if reservation is not None:
                reservation.commit()   # a failure during training may depend on the data
            raise
        if reservation is not None:
            reservation.commit()
    finally:
        engine.close()
    est._set_fitted(theta.T if n_classes else theta.reshape(1, -1), row_map=row_map,
                    classes=classes if label_classes is None else label_classes,
                    solver_name=name, solver=solver,
                    multi_class="multinomial" if n_classes else None, config=config,
                    noise=noise, delta=delta, private=private, accountant=accountant,
                    event=planned_event,
                    sampler=result.sampler if result is not None else sampler.name,
                    sample_rate=(result.sample_rate if result is not None
                                 else float(sampler.sample_rate(n))),
                    n_iter=n_iter, history=history, solver_result=result,
                    charged=reservation is not None, started=started)
    est.n_features_in_ = d
    est.distributed_stats_ = stats
    return est


def _epoch_hooks(est, row_map, released, width, n_classes):
    """``on_epoch(epoch, n_done, coef, objective)`` for DP-SGD and DP-SCD, or None.

    Calls the estimator's ``callback`` with the released state shaped as the
    fitted model shows it (as ``fit`` does) and, with ``record_history``,
    appends ``{"epoch", "n_iter", **objective()}`` (``objective()`` computes
    the solver's history terms from the workers' per-shard sums: a
    non-private diagnostic, as in ``fit``).
    """
    if est.callback is None and not est.record_history:
        return None
    history = []

    def on_epoch(epoch, done, coef, objective, extra=None):
        if est.record_history:
            history.append({"epoch": epoch, "n_iter": done, **objective()})
        if est.callback is not None:
            released.append(epoch)
            state = {"epoch": epoch, "n_iter": done, "coef": coef, **(extra or {})}
            split, intercept = row_map.split_coef(np.asarray(coef).reshape(-1, width))
            state["coef"] = est._shape_coef(split)
            state["intercept"] = est._shape_intercept(intercept)
            est.callback(state)

    on_epoch.history = history if est.record_history else None
    return on_epoch


def _primal_objective(engine, theta, loss, lam, n, n_classes):
    """``(1/n) sum_i loss_i + (lam/2) ||theta||^2`` from the workers' per-shard loss sums."""
    total = 0.0
    for parts in engine.broadcast("loss_totals", theta, None if n_classes else loss.name):
        for part in parts:   # shard order
            total += part
    flat = np.asarray(theta).ravel()
    return float(total / n + 0.5 * lam * flat @ flat)


def _sgd_or_scd(name, est, engine, config, noise, sampler, n, rng, base, on_epoch):
    """Worker setup and run of DP-SGD (multinomial included) or dual DP-SCD."""
    from fastdp.solvers._common import check_run_arguments, split_random_state
    from fastdp.solvers.sgd import decay_and_step

    loss, lam, epochs, sigma, clip = check_run_arguments(
        est._loss, config["lam"], config["epochs"], noise, config["clip"], allow_zero_lam=True)
    dual = _dual_step(name, loss, lam * n, sampler, n, clip, config["options"])
    if dual is None:
        eta = config["options"].get("learning_rate", 1.0)
        reg = config["options"].get("reg", "paper")
        rho, kappa = decay_and_step(eta, lam, float(sampler.expected_batch_size(n)), reg)
    sampling_rng, noise_rng = split_random_state(rng)
    epoch_ends = sampler.epoch_boundaries(n, epochs)
    clip = math.inf if clip is None else float(clip)
    n_classes = base["n_classes"]
    setup = WorkerSetup(loss_code=loss.code, clip=clip, sampler=sampler,
                        sampling_key=sampling_key(sampling_rng), n_steps=int(epoch_ends[-1]),
                        dual=dual, **base)
    noise_std = sigma * clip if sigma > 0 else 0.0   # C: DP-SGD and DP-SCD (released v)

    def callback(epoch, done, theta):
        if on_epoch is None:
            return
        if dual is None:
            on_epoch(epoch, done, theta.T if n_classes else theta,
                     lambda: {"primal_objective": _primal_objective(engine, theta, loss, lam, n,
                                                                    n_classes)})
        else:
            coef = theta / dual.lam_n
            on_epoch(epoch, done, coef, lambda: engine_history_terms(engine, coef, loss, lam, n),
                     {"v": theta.copy()})

    def run():
        if dual is None:
            theta, stats = run_dpsgd(engine, n_features=config["n_features"],
                                     epoch_ends=epoch_ends, rho=rho, kappa=kappa,
                                     noise_std=noise_std, noise_key=sampling_key(noise_rng),
                                     callback=callback, n_classes=n_classes)
        else:
            v, stats = run_dpscd(engine, n_features=config["n_features"], epoch_ends=epoch_ends,
                                 noise_std=noise_std, noise_key=sampling_key(noise_rng),
                                 callback=callback)
            theta = v / dual.lam_n
        history = None if on_epoch is None else on_epoch.history
        return theta, dataclasses.asdict(stats), int(epoch_ends[-1]), history, None

    return setup, run


def _run_line_search(solver, oracle, config, noise, rng, one_event):
    """One run of a line-search solver on the shard oracle (its loop runs on the driver)."""
    from fastdp.solvers.settings import SolverProblem

    settings = solver.settings(config, noise)
    started = time.perf_counter()
    result = solver.solve(SolverProblem(oracle, None, config["loss"]), settings, rng)
    if result.event != one_event:   # internal consistency guard, as in fit
        raise RuntimeError("the solver ran a different mechanism from the one accounted for.")
    theta = np.asarray(result.coef, dtype=np.float64)
    stats = oracle.stats(result.n_iter)
    stats["seconds_driver"] = time.perf_counter() - started - stats["seconds_workers"]
    return theta, stats, int(result.n_iter), result.history, result
