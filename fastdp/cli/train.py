"""``fastdp train`` (in memory or ``--ray``) and ``fastdp convert``."""

from __future__ import annotations

import math
import time

import numpy as np

from fastdp.cli.arguments import _ROW_BOUNDS, _UsageError
from fastdp.cli.checks import check_classifier_labels, check_flags, check_output_paths
from fastdp.cli.data import (
    _libsvm_errors,
    _load_data,
    _refuse_unsupported_compression,
    _utility,
)
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
    check_flags(args)
    ledger = None
    if args.ledger:
        ledger = _open_ledger(args.ledger, args.budget, args.budget_delta, delta)
    options = dict(args.solver_option or [])
    if args.learning_rate is not None:
        options["learning_rate"] = args.learning_rate
    model = cls(epsilon=args.epsilon, delta=delta, alpha=args.alpha, solver=args.solver,
                batch_size=args.batch_size, clip=args.clip, epochs=args.epochs,
                sampler=args.sampler if sampler is None else sampler,
                accountant=args.accountant, solver_options=options or None,
                normalize=_ROW_BOUNDS[args.normalize], fit_intercept=not args.no_intercept,
                ledger=ledger, random_state=args.seed,
                verbose=int(args.verbose or _progress_on_terminal(args)))
    return model, ledger


def _progress_on_terminal(args):
    """Show the epoch progress bar by default when stderr is a terminal (not with --quiet)."""
    import sys

    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def _fit(model, X, y, args, ledger):
    """``model.fit(X, y)``; Ctrl-C says what became of the ledger's charge.

    Without ``--verbose`` the estimator's closing summary line is not printed
    (the privacy report says it all); the progress bar on stderr stays.
    """
    import contextlib
    import io
    import sys

    spent = None if ledger is None else len(ledger.entries)
    quiet = contextlib.redirect_stdout(io.StringIO()) if not args.verbose else \
        contextlib.nullcontext()
    try:
        with quiet:
            model.fit(X, y)
    except KeyboardInterrupt:
        if ledger is not None and len(ledger.entries) > spent:
            print(f"fastdp: interrupted during the fit: its charge stays in the ledger "
                  f"{args.ledger} (the data were read); no model was saved", file=sys.stderr)
        elif ledger is not None:
            print(f"fastdp: interrupted before any release: nothing was charged to "
                  f"{args.ledger}; no model was saved", file=sys.stderr)
        raise


def _cmd_train(args):
    from fastdp import linear_model

    started = time.perf_counter()
    cls = getattr(linear_model, _MODELS[args.model])
    # everything that can fail is read and checked before the ledger is charged
    check_flags(args)
    check_output_paths(args)
    if args.ray is not None:  # data-parallel: the Ray workers read the file, this process does not
        from fastdp.distributed.data_parallel.cli import train_on_ray
        return train_on_ray(args, cls, _estimator_from_args, _print_privacy, _UsageError,
                            _print_ledger_and_save)
    X, y, where = _load_data(args.data, dtype=args.dtype)
    test = None
    if args.test:
        test = _load_data(args.test, n_features=X.shape[1])
    if args.model != "ridge":
        from fastdp.linear_model._fitted import check_known_labels

        check_classifier_labels(y, where)
        if test is not None:
            check_known_labels(np.unique(y), test[1], f"--test {test[2]}")
    model, ledger = _estimator_from_args(args, cls, X.shape[0])
    _fit(model, X, y, args, ledger)
    elapsed = time.perf_counter() - started
    print(f"fastdp train: {cls.__name__} (solver {model.solver_}) on {where}: "
          f"{X.shape[0]} rows, {X.shape[1]} features")
    _print_privacy(model, target=None if math.isinf(args.epsilon) else args.epsilon,
                   accountant=args.accountant)
    name, value = _utility(model, X, y)
    print(f"utility          training {name} {value:.6g} (reads the training data: "
          "non-private diagnostic)")
    if test is not None:
        Xt, yt, twhere = test
        name, value = _utility(model, Xt, yt)
        print(f"                 test {name} {value:.6g} on {twhere}")
    print(f"time             fit {model.fit_time_:.3f} s, total {elapsed:.3f} s")
    return _print_ledger_and_save(args, model, ledger)


def _cmd_convert(args):
    from fastdp.io.binary import convert_libsvm

    started = time.perf_counter()
    zero_based = {"auto": "auto", "true": True, "false": False}[args.zero_based]
    if args.src.startswith("dataset:"):
        header = _convert_named(args)
    else:
        _refuse_unsupported_compression(args.src)
        with _libsvm_errors(args.src):
            header = convert_libsvm(args.src, args.dst, dtype=args.dtype,
                                    index_dtype=args.index_dtype, n_features=args.n_features,
                                    zero_based=zero_based, overwrite=args.overwrite,
                                    progress=None)
    n, d = header["shape"]
    print(f"fastdp convert: {args.src} -> {args.dst}: {n} rows, {d} features, "
          f"{header['nnz']} entries ({header['dtype']} values, {header['index_dtype']} "
          f"indices) in {time.perf_counter() - started:.1f} s")
    print(f"train on it with: fastdp train {args.dst} --model ...")
    return 0


def _convert_named(args):
    """``fastdp convert dataset:NAME DST``: the named dataset (labels as ``train`` reads
    them) written as a binary dataset; returns its header."""
    import scipy.sparse as sp

    from fastdp.io.binary import save_binary

    if args.zero_based != "auto":
        raise _UsageError("--zero-based is for LIBSVM files, not dataset:NAME.")
    X, y, _ = _load_data(args.src, dtype=args.dtype)
    if args.n_features is not None and args.n_features < X.shape[1]:
        raise _UsageError(f"--n-features {args.n_features} is below the "
                          f"{X.shape[1]} features of {args.src}.")
    d = X.shape[1] if args.n_features is None else args.n_features
    X = sp.csr_matrix(X)
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))
    X.sort_indices()
    return save_binary(args.dst, [(X, y)], n_features=d, dtype=args.dtype,
                       index_dtype=args.index_dtype, overwrite=args.overwrite)
