"""The argparse parser of the ``fastdp`` command."""

from __future__ import annotations

from fastdp.cli.arguments import (
    _Parser,
    _ROW_BOUNDS,
    _auto_or,
    _clip,
    _epsilon,
    _option,
    _positive_float,
    _positive_int,
    _probability,
    _rate,
    _sampler_name,
    _minutes,
    _seed,
)
from fastdp.cli.train import _MODELS, _cmd_convert, _cmd_train
from fastdp.cli.commands import (
    DEFAULT_REPRODUCTION_DIR,
    REPRODUCTIONS,
    _cmd_demo,
    _cmd_evaluate,
    _cmd_ledger_show,
    _cmd_ledger_upgrade,
    _cmd_predict,
    _cmd_privacy_calibrate,
    _cmd_privacy_epsilon,
    _cmd_reproduce,
)


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
    p.add_argument("--accountant", default="auto",
                   choices=("auto", "rdp", "pld_own", "pld", "moments"),
                   help="accountant (default auto: the smaller of the own-PLD and RDP bounds)")


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
    p.add_argument("--accountant", choices=("auto", "rdp", "pld_own", "pld", "moments"),
                   default="auto")
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
    p.add_argument("--seed", type=_seed, default=None, help="random seed (same seed, same bits)")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="show progress per epoch also in logs (one line per epoch) and the "
                   "estimator's summary line; on a terminal a progress bar is shown anyway")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bar on a terminal")
    p.add_argument("--dtype", choices=("float64", "float32"), default=None,
                   help="value type of the data (float32 halves its memory; default float64, "
                   "or what a binary dataset holds)")
    p.add_argument("--ledger", metavar="FILE", help="privacy ledger JSON file to charge")
    p.add_argument("--budget", type=_positive_float, default=None,
                   help="epsilon budget when --ledger creates a new file")
    p.add_argument("--budget-delta", type=_probability, default=None,
                   help="delta of a new ledger (default: --delta)")
    p.add_argument("--out", metavar="MODEL", help="save the model as MODEL.json + MODEL.npz")
    p.add_argument("--key-file", metavar="FILE", help="a secret key (the file's bytes): "
                   "authenticate the saved model with an HMAC under it")
    p.add_argument("--test", metavar="DATA", help="also report utility on this test file")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="data-parallel DP-SGD (multinomial for K > 2 classes) or, with "
                        "--solver dpscd, dual DP-SCD on Ray ('local' for a local cluster); see "
                        "docs/distributed.md")
    p.add_argument("--workers", type=_positive_int, default=2, help="Ray workers (with --ray)")
    p.add_argument("--shards", type=_positive_int, default=None,
                   help="shards of whole row blocks (with --ray; default: min(16, blocks), the "
                        "same model for any --workers up to 16; --workers if more)")
    p.add_argument("--block-size", type=_positive_int, default=4096,
                   help="rows per block, the unit shards are cut in (with --ray)")
    p.add_argument("--placement", choices=("node", "spread"), default="node",
                   help="with --ray: one worker per node (default) or Ray's SPREAD strategy")
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
    p.add_argument("--key-file", metavar="FILE", help="a secret key (the file's bytes): "
                   "refuse a model whose HMAC does not verify under it")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("evaluate", help="utility of a saved model on a dataset")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("data", metavar="DATA")
    p.add_argument("--key-file", metavar="FILE", help="a secret key (the file's bytes): "
                   "refuse a model whose HMAC does not verify under it")
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
    p.add_argument("--out", default=DEFAULT_REPRODUCTION_DIR, help="output directory (default "
                   f"./{DEFAULT_REPRODUCTION_DIR}, in the current directory; a --quick run "
                   "never writes into a checkout's committed reproductions/)")
    p.add_argument("--resume", action="store_true", help="continue OUT/SEED_units.jsonl: skip "
                   "the units it holds (without it an existing checkpoint is an error)")
    p.add_argument("--budget-min", type=_minutes, default=None, metavar="M",
                   help="start no unit after M minutes (per reproduction), then write the report")
    # arguments after a lone "--" go to the reproduction's own command line (see main)
    p.set_defaults(func=_cmd_reproduce)

    p = sub.add_parser("demo", help="fastdp's main job (the README's `make demo`)")
    p.add_argument("--quick", action="store_true", help="smaller synthetic problem")
    p.add_argument("--seed", type=_seed, default=0)
    p.set_defaults(func=_cmd_demo)
    return parser
