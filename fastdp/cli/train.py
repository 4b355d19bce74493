"""``fastdp train`` (in memory or ``--ray``) and ``fastdp convert``."""

from __future__ import annotations

import math
import time

from fastdp.cli.arguments import _ROW_BOUNDS, _UsageError
from fastdp.cli.data import _libsvm_errors, _load_data, _utility
from fastdp.cli.reports import _print_ledger_and_save, _print_privacy


_MODELS = {"ridge": "DPRidge", "logistic": "DPLogisticRegression", "svm": "DPLinearSVC"}


def _open_ledger(path, budget, budget_delta, delta):
    import os

    from fastdp.privacy.ledger import PrivacyLedger

    if os.path.exists(path):
        ledger = PrivacyLedger.load(path)
        if budget is not None and budget != ledger.epsilon:
            raise _UsageError(f"ledger {path} has budget epsilon={ledger.epsilon:g}, not "
                              f"--budget {budget:g}; drop --budget to use the file's budget.")
        return ledger
    if budget is None:
        raise _UsageError(f"ledger {path} does not exist; pass --budget EPSILON (and optionally "
                          "--budget-delta) to create it.")
    return PrivacyLedger(budget, budget_delta if budget_delta is not None else delta, path=path)


def _estimator_from_args(args, cls, n_rows, *, sampler=None):
    """The estimator ``fastdp train`` fits, and its ledger: ``(model, ledger or None)``.

    One definition for both routes (in memory and ``--ray``): the default
    delta of ``n_rows`` rows, the ledger (``--ledger``, ``--budget``), the
    solver options and every estimator parameter from ``args``.  ``sampler``
    replaces ``--sampler`` (the ``--ray`` route draws block-keyed lots).
    """
    from fastdp.linear_model import default_delta

    delta = args.delta if args.delta is not None else default_delta(n_rows)
    ledger = None
    if args.ledger:
        ledger = _open_ledger(args.ledger, args.budget, args.budget_delta, delta)
    elif args.budget is not None:
        raise _UsageError("--budget needs --ledger FILE.")
    options = dict(args.solver_option or [])
    if args.learning_rate is not None:
        options["learning_rate"] = args.learning_rate
    model = cls(epsilon=args.epsilon, delta=delta, alpha=args.alpha, solver=args.solver,
                batch_size=args.batch_size, clip=args.clip, epochs=args.epochs,
                sampler=args.sampler if sampler is None else sampler,
                accountant=args.accountant, solver_options=options or None,
                normalize=_ROW_BOUNDS[args.normalize], fit_intercept=not args.no_intercept,
                ledger=ledger, random_state=args.seed, verbose=int(args.verbose))
    return model, ledger


def _cmd_train(args):
    from fastdp import linear_model

    started = time.perf_counter()
    cls = getattr(linear_model, _MODELS[args.model])
    if args.ray is not None:  # data-parallel: the Ray workers read the file, this process does not
        from fastdp.distributed.data_parallel.cli import train_on_ray
        return train_on_ray(args, cls, _estimator_from_args, _print_privacy, _UsageError,
                            _print_ledger_and_save)
    X, y, where = _load_data(args.data, dtype=args.dtype)
    model, ledger = _estimator_from_args(args, cls, X.shape[0])
    model.fit(X, y)
    elapsed = time.perf_counter() - started
    print(f"fastdp train: {cls.__name__} (solver {model.solver_}) on {where}: "
          f"{X.shape[0]} rows, {X.shape[1]} features")
    _print_privacy(model, target=None if math.isinf(args.epsilon) else args.epsilon,
                   accountant=args.accountant)
    name, value = _utility(model, X, y)
    print(f"utility          training {name} {value:.6g} (reads the training data: "
          "non-private diagnostic)")
    if args.test:
        Xt, yt, twhere = _load_data(args.test, n_features=X.shape[1])
        name, value = _utility(model, Xt, yt)
        print(f"                 test {name} {value:.6g} on {twhere}")
    print(f"time             fit {model.fit_time_:.3f} s, total {elapsed:.3f} s")
    return _print_ledger_and_save(args, model, ledger)


def _cmd_convert(args):
    from fastdp.io.binary import convert_libsvm

    started = time.perf_counter()
    zero_based = {"auto": "auto", "true": True, "false": False}[args.zero_based]
    with _libsvm_errors(args.src):
        header = convert_libsvm(args.src, args.dst, dtype=args.dtype,
                                index_dtype=args.index_dtype, n_features=args.n_features,
                                zero_based=zero_based, overwrite=args.overwrite, progress=None)
    n, d = header["shape"]
    print(f"fastdp convert: {args.src} -> {args.dst}: {n} rows, {d} features, "
          f"{header['nnz']} entries ({header['dtype']} values, {header['index_dtype']} "
          f"indices) in {time.perf_counter() - started:.1f} s")
    print(f"train on it with: fastdp train {args.dst} --model ...")
    return 0
