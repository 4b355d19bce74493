"""``fastdp predict``, ``evaluate``, ``privacy``, ``ledger``, ``reproduce`` and ``demo``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from fastdp.cli.arguments import _one_line, _UsageError
from fastdp.cli.data import _load_data, _load_model, _utility
from fastdp.cli.reports import _print_privacy


REPRODUCTIONS = ("seed000", "seed001", "seed002", "seed003", "seed004")


def _cmd_predict(args):
    model = _load_model(args.model, getattr(args, "key_file", None))
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
    model = _load_model(args.model, getattr(args, "key_file", None))
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


#: Most memory the PLD grid of ``fastdp privacy epsilon --accountant pld`` may take.
_PLD_GRID_BYTES = 4 * 2**30


def _check_pld_grid(sigma, q, steps, vdi=1e-4):
    """Refuse a PLD evaluation whose grid would not fit in memory, before it starts.

    One Gaussian step's privacy loss spans about ``1/(2 sigma^2) + 8/sigma``
    either way (tails cut at 8 standard deviations; subsampling shrinks the
    upper side to ``log(1 + q (e^L - 1))``); T composed steps spread over
    about ``10 sqrt(T)`` times that; the grid has one float64 per ``vdi`` of
    it, a few times over for the FFT.  sigma = 0.1, q = 0.5, T = 1000 would
    need tens of GB (it took 73 s and 10 GB before being refused here).
    """
    import math

    from fastdp.exceptions import ValidationError

    if not (sigma > 0 and math.isfinite(sigma)):
        return
    loss = 1.0 / (2.0 * sigma * sigma) + 8.0 / sigma
    upper = loss if q >= 1 else math.log1p(q * math.expm1(min(loss, 700.0)))
    width = loss + upper
    points = width * 10.0 * math.sqrt(max(steps, 1)) / vdi
    if 32.0 * points > _PLD_GRID_BYTES:
        raise ValidationError(
            f"the PLD accountant would need a grid of about {points:.2g} points "
            f"({32 * points / 2**30:.0f} GiB) for noise multiplier {sigma:g}, sample rate "
            f"{q:g} and {steps} steps; use --accountant rdp (fast, slightly looser) or more "
            "noise.")


def _cmd_privacy_epsilon(args):
    from fastdp.privacy import compute_epsilon_report

    q, steps, n = _steps_and_rate(args)
    if args.accountant == "pld":
        _check_pld_grid(args.noise_multiplier, q, steps)
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


def _existing_ledger(path, opener):
    """``PrivacyLedger.<opener>(path)`` for a ledger file that must exist (else a usage error)."""
    import os

    from fastdp.privacy.ledger import PrivacyLedger

    from fastdp.exceptions import ValidationError

    if not os.path.exists(path):   # a missing input file: exit status 1, as for any other
        raise ValidationError(f"no such ledger file: {path}")
    return getattr(PrivacyLedger, opener)(path)


def _cmd_ledger_upgrade(args):
    ledger = _existing_ledger(args.file, "upgrade")
    print(f"ledger {args.file}: tamper-evident format, {len(ledger.entries)} entries kept, "
          f"budget epsilon {ledger.epsilon:g} at delta {ledger.delta:g}")
    return 0


def _cmd_ledger_show(args):
    import datetime

    ledger = _existing_ledger(args.file, "load")
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


#: where ``fastdp reproduce`` writes unless ``--out`` says otherwise (in the current directory)
DEFAULT_REPRODUCTION_DIR = "fastdp-reproductions"


def _committed_reports():
    """The ``reproductions/`` directory of the source checkout fastdp runs from (its
    committed full-run reports), or None for an installed fastdp."""
    from pathlib import Path

    import fastdp

    directory = Path(fastdp.__file__).resolve().parents[1] / "reproductions"
    return directory if (directory.parent / "pyproject.toml").is_file() else None


def _check_reproduction_out(name, quick, out, extra, resume):
    """Refuse, before anything runs, what the reproduction would refuse or regret.

    A ``--quick`` run into the checkout's ``reproductions/`` would overwrite the
    committed full-run reports; an existing checkpoint without ``--resume``
    is the reproduction's own error (with its usage banner) after a slow start.
    """
    from pathlib import Path

    committed = _committed_reports()
    if quick and committed is not None and Path(out).resolve() == committed:
        raise _UsageError(f"--out {out} holds the committed full-run reports of this checkout; "
                          "a --quick run would overwrite them: pass another --out (default "
                          f"./{DEFAULT_REPRODUCTION_DIR}).")
    checkpoint = Path(out) / f"{name}_units.jsonl"
    if checkpoint.is_file() and checkpoint.stat().st_size and not resume \
            and "--report-only" not in extra and "--checkpoint" not in extra:
        raise _UsageError(f"{checkpoint} holds the units of an earlier run: pass --resume to "
                          "continue it, `-- --report-only` to rewrite its report, or another "
                          "--out (or remove the file) to start over.")


def _run_reproduction(name, quick, out, extra, resume=False, budget_min=None):
    if importlib.util.find_spec(f"fastdp.experiments.{name}") is None:
        raise _UsageError(f"reproduction {name} is not available in this fastdp "
                          "(fastdp/experiments/{name}.py is missing).")
    _check_reproduction_out(name, quick, out, extra, resume)
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
