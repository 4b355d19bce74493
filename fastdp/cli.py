"""The ``fastdp`` command line (``fastdp ...`` or ``python -m fastdp ...``).

Subcommands::

    fastdp convert SRC DST.fdp [--dtype float32] [--index-dtype int32|int64] [--overwrite]
    fastdp train DATA --model {ridge,logistic,svm} [--solver dpscd] [--epsilon 1]
                 [--delta D] [--ledger FILE [--budget EPS]] [--out MODEL] [--test DATA]
    fastdp predict MODEL DATA [--output FILE]
    fastdp evaluate MODEL DATA
    fastdp privacy epsilon   --noise-multiplier S (--sample-rate Q --steps T | --n N --batch-size L --epochs E) --delta D [--sampler poisson]
    fastdp privacy calibrate --epsilon E          (--sample-rate Q --steps T | --n N --batch-size L --epochs E) --delta D [--sampler poisson]
    fastdp ledger show FILE
    fastdp ledger upgrade FILE
    fastdp reproduce {seed000,...,seed004,all} [--quick] [--out DIR] [--resume] [--budget-min M] [-- ...]
    fastdp demo [--quick]

``DATA`` is a LIBSVM/svmlight file (plain, .gz, .bz2 or .xz), a binary
dataset made by ``fastdp convert`` (a directory, e.g. ``data.fdp``, opened
memory-mapped: see docs/large-data.md) or ``dataset:NAME`` for one of the
real datasets of :mod:`fastdp.datasets` (e.g. ``dataset:phishing``,
``dataset:a9a:test``).  Loading and converting show a progress bar on a
terminal.

User mistakes (a missing file, a malformed LIBSVM line, ε <= 0, an unknown
solver, a budget that would be exceeded, ...) print one line
``fastdp: error: ...`` on stderr and exit with status 1 (2 for command-line
syntax errors); ``--debug`` shows the traceback instead.

Privacy: ``train`` releases the model (and prints its privacy report); the
training utility it prints reads the training data and is a non-private
diagnostic, as is everything ``evaluate`` prints about a dataset you pass.
The ledger (``--ledger``) is charged before training, so a refused fit
releases nothing.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import sys
import time

__all__ = ["main", "build_parser", "REPRODUCTIONS"]

REPRODUCTIONS = ("seed000", "seed001", "seed002", "seed003", "seed004")
_MODELS = {"ridge": "DPRidge", "logistic": "DPLogisticRegression", "svm": "DPLinearSVC"}


class _UsageError(Exception):
    """A command-line mistake found after parsing (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``fastdp train: error: ...``)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


# ---------------------------------------------------------------------------
# argument types
# ---------------------------------------------------------------------------
def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    if math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _epsilon(text):
    if text.strip().lower() in ("inf", "infinity"):
        return math.inf
    return _positive_float(text)


def _probability(text):
    value = _positive_float(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text}")
    return value


def _rate(text):
    value = _positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1], got {text}")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _sampler_name(text):
    """A sampler name of :data:`fastdp.sampling.SAMPLER_NAMES`; old spellings warn on stderr."""
    import warnings

    from fastdp.sampling import canonical_sampler_name

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        name = canonical_sampler_name(text)
    for w in caught:
        print(f"fastdp: warning: {w.message}", file=sys.stderr)
    if name == "none":
        print("fastdp: warning: sampling 'none' is deprecated; it is --sampler poisson with "
              "--sample-rate 1.", file=sys.stderr)
    return name


def _clip(text):
    return text if text == "auto" else _positive_float(text)


def _option(text):
    """``key=value`` with value parsed as JSON when possible (numbers, true, null)."""
    import json

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _load_binary(spec, n_features, dtype):
    """(X, y, description) of a binary dataset (``fastdp convert`` output), memory-mapped."""
    from fastdp.io.binary import open_binary
    from fastdp.io.libsvm import csr_from_arrays

    X, y = open_binary(spec)
    if dtype is not None and X.dtype != dtype:
        raise _UsageError(f"{spec} holds {X.dtype} values; convert it again with --dtype {dtype} "
                          "(or drop --dtype)")
    if n_features is not None and X.shape[1] != n_features:
        if X.shape[1] > n_features:
            raise _UsageError(f"{spec} has {X.shape[1]} features but the model expects "
                              f"{n_features}.")
        # the same arrays read as a wider matrix: the extra columns are empty
        X = csr_from_arrays(X.data, X.indices, X.indptr, (X.shape[0], n_features))
    return X, y, spec


def _load_data(spec, n_features=None, dtype=None):
    """(X, y, description) of a LIBSVM path, a binary dataset or ``dataset:NAME[:SUBSET]``."""
    from fastdp.exceptions import LibsvmParseError, ValidationError
    from fastdp.io.binary import is_binary_dataset

    if is_binary_dataset(spec) or spec.endswith(".fdp"):
        return _load_binary(spec, n_features, dtype)
    dtype = dtype or "float64"
    if spec.startswith("dataset:"):
        from fastdp.datasets import load_dataset

        parts = spec.split(":")
        name = parts[1]
        subset = parts[2] if len(parts) > 2 else "train"
        X, y = load_dataset(name, subset=subset, dtype=dtype)
        if n_features is not None and X.shape[1] != n_features:
            raise _UsageError(f"{spec} has {X.shape[1]} features but the model expects "
                              f"{n_features}.")
        return X, y, f"{name} ({subset})"
    from fastdp.datasets import load_libsvm

    try:
        X, y = load_libsvm(spec, n_features=n_features, dtype=dtype, progress=None)
    except LibsvmParseError as exc:
        raise ValidationError(f"{spec}: {exc}; fix the file (LIBSVM lines read "
                              "'LABEL INDEX:VALUE ...').") from exc
    except IsADirectoryError:
        raise ValidationError(f"{spec} is a directory, not a LIBSVM file.") from None
    except FileNotFoundError:
        from fastdp.datasets import DATASETS

        hint = (f"; for the bundled dataset use dataset:{spec}" if spec in DATASETS else "")
        raise ValidationError(f"no such file: {spec}{hint}") from None
    return X, y, spec


def _utility(model, X, y):
    """(name, value) of the model's (or a saved pipeline's) utility on (X, y)."""
    final = model.steps[-1][1] if hasattr(model, "steps") else model
    if type(final).__name__ == "DPRidge":
        residual = model.predict(X) - y
        return "MSE", float((residual ** 2).mean())
    return "accuracy", float(model.score(X, y))


def _adjacency_text(event):
    adjacency = getattr(event, "adjacency", None)
    if adjacency is None:
        return "none (not private)"
    value = getattr(adjacency, "value", str(adjacency))
    return {"add_remove": "add/remove one example",
            "replace_one": "replace one example"}.get(value, value)


def _print_privacy(model, *, target=None, accountant=None, out=print):
    eps = model.epsilon_
    if math.isinf(eps):
        out("privacy          NONE: epsilon = inf (non-private fit)")
        return
    target_text = "" if target is None else f" (target {target:g}"
    if accountant is not None:
        target_text += f", accountant {accountant}" if target_text else f" (accountant {accountant}"
    target_text += ")" if target_text else ""
    out("privacy")
    out(f"  epsilon        {eps:.6g}{target_text}")
    out(f"  delta          {model.delta_:.3g}")
    out(f"  noise          {model.noise_name_} = {model.noise_multiplier_:.6g}")
    out(f"  sampler        {model.sampler_} (sample rate q = {model.sample_rate_:.4g}, "
        f"T = {model.n_iter_} steps)")
    out(f"  adjacency      {_adjacency_text(model.privacy_event_)}")
    out("  private        the training examples (rows and labels); released: the model "
        "coefficients and intercept")
    if model.privacy_report_ is not None:
        out(f"  report         {model.privacy_report_}")


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


# ---------------------------------------------------------------------------
# subcommands
# ---------------------------------------------------------------------------
_ROW_BOUNDS = {"auto": "auto", "normalize": "normalize", "clip": "clip", "reject": "reject"}


def _auto_or(convert):
    """argparse type: the word 'auto' or ``convert(text)``."""
    def parse(text):
        return "auto" if text == "auto" else convert(text)
    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


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
        return train_on_ray(args, cls, _estimator_from_args, _print_privacy, _UsageError)
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
    if ledger is not None:
        print(f"ledger           {args.ledger}: spent {ledger.spent():.6g} of "
              f"{ledger.epsilon:g} at delta {ledger.delta:g} (remaining {ledger.remaining():.6g})")
    if args.out:
        from fastdp.persistence import model_paths, save_model

        json_path = save_model(model, args.out)
        print(f"model saved      {json_path} + {model_paths(json_path)[1]}")
    return 0


def _cmd_convert(args):
    from fastdp.exceptions import LibsvmParseError, ValidationError
    from fastdp.io.binary import convert_libsvm

    started = time.perf_counter()
    zero_based = {"auto": "auto", "true": True, "false": False}[args.zero_based]
    try:
        header = convert_libsvm(args.src, args.dst, dtype=args.dtype,
                                index_dtype=args.index_dtype, n_features=args.n_features,
                                zero_based=zero_based, overwrite=args.overwrite, progress=None)
    except LibsvmParseError as exc:
        raise ValidationError(f"{args.src}: {exc}; fix the file (LIBSVM lines read "
                              "'LABEL INDEX:VALUE ...').") from exc
    except IsADirectoryError:
        raise ValidationError(f"{args.src} is a directory, not a LIBSVM file.") from None
    except FileNotFoundError:
        raise ValidationError(f"no such file: {args.src}") from None
    n, d = header["shape"]
    print(f"fastdp convert: {args.src} -> {args.dst}: {n} rows, {d} features, "
          f"{header['nnz']} entries ({header['dtype']} values, {header['index_dtype']} "
          f"indices) in {time.perf_counter() - started:.1f} s")
    print(f"train on it with: fastdp train {args.dst} --model ...")
    return 0


def _load_model(path):
    from fastdp.persistence import load_model

    return load_model(path)


def _cmd_predict(args):
    model = _load_model(args.model)
    X, _, _ = _load_data(args.data, n_features=model.n_features_in_)
    predictions = model.predict(X)
    lines = "\n".join(f"{p:.10g}" if isinstance(p, (float, int)) or hasattr(p, "dtype") and
                      p.dtype.kind in "fiu" else str(p) for p in predictions)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(lines + "\n")
        print(f"wrote {len(predictions)} predictions to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(lines + "\n")
    return 0


def _cmd_evaluate(args):
    model = _load_model(args.model)
    X, y, where = _load_data(args.data, n_features=model.n_features_in_)
    final = model.steps[-1][1] if hasattr(model, "steps") else model  # a saved Pipeline
    meta = final.model_metadata_
    kind = type(final).__name__ if final is model else \
        f"Pipeline ({' -> '.join(type(s).__name__ for _, s in model.steps)})"
    print(f"fastdp evaluate: {kind} from {args.model} "
          f"(fastdp {meta.get('fastdp_version')}, seed {meta['privacy'].get('seed')})")
    _print_privacy(final, accountant=meta["privacy"].get("accountant"))
    if final is not model and not model.private_:
        print("  NOT PRIVATE    the pipeline holds scalers fitted on the training data "
              "without noise")
    name, value = _utility(model, X, y)
    print(f"utility          {name} {value:.6g} on {where} ({X.shape[0]} rows)")
    return 0


def _steps_and_rate(args):
    from fastdp.sampling import n_steps_for_epochs

    by_rate = args.sample_rate is not None or args.steps is not None
    by_size = any(v is not None for v in (args.n, args.batch_size, args.epochs))
    if by_rate == by_size:
        raise _UsageError("give either --sample-rate and --steps, or --n, --batch-size and "
                          "--epochs.")
    if by_rate:
        if args.sample_rate is None or args.steps is None:
            raise _UsageError("--sample-rate and --steps go together.")
        return args.sample_rate, args.steps, args.n
    if None in (args.n, args.batch_size, args.epochs):
        raise _UsageError("--n, --batch-size and --epochs go together.")
    if args.batch_size > args.n:
        raise _UsageError(f"--batch-size {args.batch_size} is larger than --n {args.n}.")
    steps = n_steps_for_epochs(args.epochs, args.n, args.batch_size)
    return args.batch_size / args.n, steps, args.n


def _numeric_range(what):
    """A context that turns the accountant's arithmetic overflow into one clear error."""
    import contextlib

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
            from fastdp.exceptions import ValidationError

            raise ValidationError(f"{what} is outside the range the accountant can evaluate "
                                  f"({type(exc).__name__}); use a value nearer 1.") from exc
    return guard()


def _cmd_privacy_epsilon(args):
    from fastdp.privacy import compute_epsilon_report

    q, steps, n = _steps_and_rate(args)
    with _numeric_range(f"--noise-multiplier {args.noise_multiplier:g}"):
        report = compute_epsilon_report(args.noise_multiplier, q, steps, args.delta,
                                        accountant=args.accountant, sampling=args.sampling,
                                        dataset_size=n)
    print(f"epsilon {report.epsilon:.6g}")
    print(f"  noise multiplier {args.noise_multiplier:g}, sample rate {q:.6g}, {steps} steps, "
          f"sampling {args.sampling}")
    print(f"  {report}")
    return 0


def _cmd_privacy_calibrate(args):
    from fastdp.privacy import calibrate_noise_multiplier

    q, steps, n = _steps_and_rate(args)
    with _numeric_range(f"--epsilon {args.epsilon:g}"):
        sigma = calibrate_noise_multiplier(args.epsilon, args.delta, q, steps,
                                           accountant=args.accountant, sampling=args.sampling,
                                           dataset_size=n)
    print(f"noise_multiplier {float(sigma):.6g}")
    print(f"  smallest sigma with epsilon <= {args.epsilon:g} at delta {args.delta:g} "
          f"({args.accountant}, sampling {args.sampling}, sample rate {q:.6g}, {steps} steps); "
          f"epsilon at sigma: {sigma.epsilon:.6g}")
    return 0


def _cmd_ledger_upgrade(args):
    import os

    from fastdp.privacy.ledger import PrivacyLedger

    if not os.path.exists(args.file):
        raise _UsageError(f"no such ledger file: {args.file}")
    ledger = PrivacyLedger.upgrade(args.file)
    print(f"ledger {args.file}: tamper-evident format, {len(ledger.entries)} entries kept, "
          f"budget epsilon {ledger.epsilon:g} at delta {ledger.delta:g}")
    return 0


def _cmd_ledger_show(args):
    import datetime
    import os

    from fastdp.privacy.ledger import PrivacyLedger

    if not os.path.exists(args.file):
        raise _UsageError(f"no such ledger file: {args.file}")
    ledger = PrivacyLedger.load(args.file)
    entries = ledger.entries
    print(f"ledger {args.file}")
    print(f"  budget     epsilon {ledger.epsilon:g} at delta {ledger.delta:g} "
          f"(accountant {ledger.accountant_name})")
    print(f"  spent      {ledger.spent():.6g}   remaining {ledger.remaining():.6g}   "
          f"entries {len(entries)}")
    if ledger.no_guarantee_entries():
        print(f"  WARNING    {len(ledger.no_guarantee_entries())} release(s) with NO GUARANTEE "
              "are not in the spent epsilon: the privacy loss of everything recorded is not "
              "bounded")
    for k, entry in enumerate(entries, start=1):
        when = datetime.datetime.fromtimestamp(entry.timestamp, datetime.timezone.utc)
        if entry in ledger.no_guarantee_entries():
            alone = "epsilon alone: NO GUARANTEE"
        else:
            alone = f"epsilon alone {ledger.accountant.epsilon(entry.event, ledger.delta):.6g}"
        print(f"  {k:3d}. {when:%Y-%m-%d %H:%M:%S} UTC  {entry.label or '(no label)'}  "
              f"{alone}  event {entry.event.to_dict().get('kind')}")
    return 0


def _run_reproduction(name, quick, out, extra, resume=False, budget_min=None):
    if importlib.util.find_spec(f"fastdp.experiments.{name}") is None:
        raise _UsageError(f"reproduction {name} is not available in this fastdp "
                          "(fastdp/experiments/{name}.py is missing).")
    module = importlib.import_module(f"fastdp.experiments.{name}")
    argv = (["--out", out] + (["--quick"] if quick else []) + (["--resume"] if resume else [])
            + ([] if budget_min is None else ["--budget-min", str(budget_min)]) + list(extra))
    print(f"== fastdp reproduce {name}{' --quick' if quick else ''}: writing {out}/{name}.md",
          flush=True)
    status = module.main(argv)
    return 0 if status is None else int(status)


def _cmd_reproduce(args):
    extra = list(args.extra)
    if args.which != "all":
        return _run_reproduction(args.which, args.quick, args.out, extra, args.resume,
                                 args.budget_min)
    if extra:
        raise _UsageError("extra arguments only go with a single reproduction, not 'all'.")
    failures = []
    for name in REPRODUCTIONS:
        try:
            if _run_reproduction(name, args.quick, args.out, (), args.resume,
                                 args.budget_min) != 0:
                failures.append(name)
        except Exception as exc:  # report, then go on with the next paper
            if args.debug:
                raise
            print(f"fastdp: error: {name}: {_one_line(exc)}", file=sys.stderr)
            failures.append(name)
    if failures:
        print(f"fastdp: error: reproductions failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


def _cmd_demo(args):
    from fastdp import demo

    argv = (["--quick"] if args.quick else []) + ["--seed", str(args.seed)]
    status = demo.main(argv)
    return 0 if status is None else int(status)


# ---------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------
def _add_accounting_arguments(p):
    p.add_argument("--delta", type=_probability, required=True, help="target delta in (0, 1)")
    p.add_argument("--sample-rate", type=_rate, help="q = batch size / n, in (0, 1]")
    p.add_argument("--steps", type=_positive_int, help="number of noisy steps T")
    p.add_argument("--n", type=_positive_int, help="dataset size (with --batch-size, --epochs)")
    p.add_argument("--batch-size", type=_positive_int, help="(expected) batch size L")
    p.add_argument("--epochs", type=_positive_float, help="passes; T = floor(epochs n / L)")
    p.add_argument("--sampler", "--sampling", dest="sampling", default="poisson",
                   type=_sampler_name, choices=("poisson", "fixed", "shuffle", "none"),
                   metavar="{poisson,fixed,shuffle}",
                   help="the sampler training runs (default poisson: add/remove adjacency); "
                   "the event is the one that sampler emits. --sampling and the spellings "
                   "fixed_size and none are deprecated")
    p.add_argument("--accountant", default="rdp", choices=("rdp", "pld", "moments"),
                   help="accountant (default rdp)")


def build_parser():
    """The argparse parser of the ``fastdp`` command."""
    from fastdp import __version__

    parser = _Parser(prog="fastdp", description="Fast differentially private optimisation: "
                     "train, evaluate and account for DP linear models.")
    parser.add_argument("--version", action="version", version=f"fastdp {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("train", help="train a DP model on a LIBSVM file",
                       description="Train a differentially private linear model and print its "
                       "privacy report, utility and time.")
    p.add_argument("data", metavar="DATA",
                   help="LIBSVM file, binary dataset (DIR.fdp) or dataset:NAME[:SUBSET]")
    p.add_argument("--model", required=True, choices=sorted(_MODELS),
                   help="ridge (squared loss), logistic, or svm (hinge loss)")
    from fastdp.solvers.registry import DOCUMENTED_SOLVER_NAMES

    p.add_argument("--solver", default="auto", metavar="SOLVER",
                   help="one of " + ", ".join(DOCUMENTED_SOLVER_NAMES) + " (default auto: "
                   "DP-SGD with fastdp's documented defaults, the exact optimum at --epsilon inf)")
    p.add_argument("--epsilon", type=_epsilon, default=1.0,
                   help="target epsilon > 0 (inf: non-private); default 1")
    p.add_argument("--delta", type=_probability, default=None,
                   help="target delta in (0, 1); default min(1e-5, 1/(10 n))")
    p.add_argument("--alpha", type=_auto_or(_positive_float), default="auto",
                   help="L2 strength lambda (default auto: 0.1/n; output/objective perturbation: a rule of n, d, epsilon)")
    p.add_argument("--epochs", type=_auto_or(_positive_float), default="auto",
                   help="passes over the data (default auto: the solver's rule)")
    p.add_argument("--batch-size", type=_positive_int, default=None)
    p.add_argument("--clip", type=_clip, default="auto", help="update/gradient bound C or auto")
    p.add_argument("--sampler", choices=("poisson", "fixed", "shuffle", "block_poisson"),
                   default=None)
    p.add_argument("--accountant", choices=("rdp", "pld", "moments"), default="rdp")
    p.add_argument("--learning-rate", type=_positive_float, default=None,
                   help="step size (dpsgd and sgd solvers)")
    p.add_argument("--solver-option", type=_option, action="append", metavar="KEY=VALUE",
                   help="solver-specific option (repeatable), e.g. box_eps=1e-4")
    p.add_argument("--normalize", nargs="?", const="normalize", default="auto",
                   choices=sorted(_ROW_BOUNDS),
                   help="how rows are bounded to norm 1 (per example: no privacy cost): "
                   "normalize (the flag alone), clip, reject (refuse rows above 1), or auto "
                   "(default: normalize for classifiers, clip for ridge)")
    p.add_argument("--no-intercept", action="store_true",
                   help="fit no intercept (default: a private intercept in the same mechanism)")
    p.add_argument("--seed", type=int, default=None, help="random seed (same seed, same bits)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="show progress per epoch (a bar on a terminal, one line per epoch in logs)")
    p.add_argument("--dtype", choices=("float64", "float32"), default=None,
                   help="value type of the data (float32 halves its memory; default float64, "
                   "or what a binary dataset holds)")
    p.add_argument("--ledger", metavar="FILE", help="privacy ledger JSON file to charge")
    p.add_argument("--budget", type=_positive_float, default=None,
                   help="epsilon budget when --ledger creates a new file")
    p.add_argument("--budget-delta", type=_probability, default=None,
                   help="delta of a new ledger (default: --delta)")
    p.add_argument("--out", metavar="MODEL", help="save the model as MODEL.json + MODEL.npz")
    p.add_argument("--test", metavar="DATA", help="also report utility on this test file")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="data-parallel DP-SGD (multinomial for K > 2 classes) or, with "
                        "--solver dpscd, dual DP-SCD on Ray ('local' for a local cluster); see "
                        "docs/distributed.md")
    p.add_argument("--workers", type=_positive_int, default=2, help="Ray workers (with --ray)")
    p.add_argument("--shards", type=_positive_int, default=None,
                   help="shards of whole row blocks (with --ray; default: --workers)")
    p.add_argument("--block-size", type=_positive_int, default=4096,
                   help="rows per sampling block (with --ray)")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("convert", help="convert a LIBSVM file into a binary dataset (DIR.fdp)",
                       description="Convert a LIBSVM file (plain, .gz, .bz2 or .xz) once, in one "
                       "streaming pass with bounded memory, into a directory of .npy arrays that "
                       "train, evaluate and predict open memory-mapped (data larger than RAM; "
                       "see docs/large-data.md).")
    p.add_argument("src", metavar="SRC", help="LIBSVM file")
    p.add_argument("dst", metavar="DST", help="binary dataset directory to create (e.g. data.fdp)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="value type on disk (float32 halves it; default float64)")
    p.add_argument("--index-dtype", choices=("int32", "int64"), default=None,
                   help="index type (default: int32 when the sizes fit, else int64)")
    p.add_argument("--n-features", type=_positive_int, default=None,
                   help="number of columns (default: largest index + 1)")
    p.add_argument("--zero-based", choices=("auto", "true", "false"), default="auto",
                   help="whether indices start at 0 (default auto: one-based unless an index 0 "
                   "occurs)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing DST")
    p.set_defaults(func=_cmd_convert)

    p = sub.add_parser("predict", help="predict with a saved model")
    p.add_argument("model", metavar="MODEL", help="MODEL.json (or its base path)")
    p.add_argument("data", metavar="DATA",
                   help="LIBSVM file, binary dataset (DIR.fdp) or dataset:NAME[:SUBSET]")
    p.add_argument("--output", metavar="FILE", help="write predictions here (default stdout)")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("evaluate", help="utility of a saved model on a dataset")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("data", metavar="DATA")
    p.set_defaults(func=_cmd_evaluate)

    privacy = sub.add_parser("privacy", help="privacy accounting").add_subparsers(
        dest="privacy_command", metavar="{epsilon,calibrate}", parser_class=_Parser)
    privacy.required = True
    p = privacy.add_parser("epsilon", help="epsilon of Gaussian noisy steps")
    p.add_argument("--noise-multiplier", type=_positive_float, required=True)
    _add_accounting_arguments(p)
    p.set_defaults(func=_cmd_privacy_epsilon)
    p = privacy.add_parser("calibrate", help="smallest noise multiplier for a target epsilon")
    p.add_argument("--epsilon", type=_positive_float, required=True)
    _add_accounting_arguments(p)
    p.set_defaults(func=_cmd_privacy_calibrate)

    ledger = sub.add_parser("ledger", help="privacy ledgers").add_subparsers(
        dest="ledger_command", metavar="{show,upgrade}", parser_class=_Parser)
    ledger.required = True
    p = ledger.add_parser("show", help="budget, spending and entries of a ledger file")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=_cmd_ledger_show)
    p = ledger.add_parser("upgrade", help="convert an old ledger file (no tamper evidence) to "
                          "the hash-chained format, in place; only for a file you trust")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=_cmd_ledger_upgrade)

    p = sub.add_parser("reproduce", help="run a paper reproduction",
                       description="Run the reproduction of a seed paper and write "
                       "OUT/SEED.md with tables and PNG figures. Arguments after a lone `--` go to the "
                       "reproduction's own command line (python -m fastdp.experiments.SEED --help).")
    p.add_argument("which", choices=REPRODUCTIONS + ("all",))
    p.add_argument("--quick", action="store_true", help="small grids (about 3 CPU minutes)")
    p.add_argument("--out", default="reproductions", help="output directory (default "
                   "reproductions)")
    p.add_argument("--resume", action="store_true", help="continue OUT/SEED_units.jsonl: skip "
                   "the units it holds (without it an existing checkpoint is an error)")
    p.add_argument("--budget-min", type=float, default=None, metavar="M",
                   help="start no unit after M minutes (per reproduction), then write the report")
    # arguments after a lone "--" go to the reproduction's own command line (see main)
    p.set_defaults(func=_cmd_reproduce)

    p = sub.add_parser("demo", help="fastdp's main job (the README's `make demo`)")
    p.add_argument("--quick", action="store_true", help="smaller synthetic problem")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_demo)
    return parser


# Python spellings in library messages, and what a command-line user types instead.
_CLI_SPELLINGS = (
    ("pass normalize=True to the estimator", "pass --normalize (or drop --normalize reject)"),
    ("normalize=True", "--normalize"),
    ("Pass data_home=... or set the", "Set the"),
)


def _one_line(exc):
    text = str(exc) or type(exc).__name__
    for python, flag in _CLI_SPELLINGS:
        text = text.replace(python, flag)
    return " ".join(text.split())


def main(argv=None):
    """Entry point of the ``fastdp`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "reproduce" in argv and "--" in argv[argv.index("reproduce"):]:
        cut = argv.index("--", argv.index("reproduce"))
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    args.extra = extra
    from fastdp.exceptions import FastDPError

    user_errors = (FastDPError, ValueError, OSError, _UsageError)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("fastdp: interrupted", file=sys.stderr)
        return 130
    except user_errors as exc:
        if args.debug:
            raise
        print(f"fastdp: error: {_one_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, _UsageError) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
