"""``python -m fastdp.experiments.seed004``: the command line.
"""

import json
import sys
from pathlib import Path

from fastdp.exceptions import ValidationError
from fastdp.experiments import runner
from fastdp.experiments.seed004.report import write_report
from fastdp.experiments.seed004.units import report_from_units, reproduce


def main(argv=None):
    """``python -m fastdp.experiments.seed004 [--quick] [--out DIR] ...``; returns 0."""
    ap = runner.base_parser(__doc__.splitlines()[0], name="seed004",
                            quick_help="a9a, 1 epoch, ε ∈ {0.2, 1.0}, seed 0")
    ap.add_argument("--datasets", default=None,
                    help="comma-separated (default a9a,news20; --quick: a9a)")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--float32-only", action="store_true",
                    help="only (re-)run the float32-message comparisons")
    ap.add_argument("--float32-penalties", default="l2,l1",
                    help="penalties of the float32 comparisons (default: both)")
    ap.add_argument("--calibrations", default="paper,accountant",
                    help="calibrations, the first one with priority (default: paper,accountant)")
    args = ap.parse_args(argv)
    command = "python -m fastdp.experiments.seed004 " + " ".join(
        sys.argv[1:] if argv is None else argv)
    out = Path(args.out)
    checkpoint = runner.checkpoint_path(args, "seed004")
    if args.report_only:
        if checkpoint.exists():
            path = report_from_units(out, checkpoint, command=command)
        elif (out / "seed004.json").exists():      # a report made before the unit checkpoint
            saved = json.loads((out / "seed004.json").read_text())
            path = write_report(out, saved["datasets"], epochs=saved["epochs"],
                                seeds=saved["seeds"], command=saved.get("command", ""),
                                summary=saved.get("summary", ()))
        else:
            ap.error(f"--report-only needs {checkpoint} (or {out / 'seed004.json'}); "
                     "run the grid first.")
        print(f"wrote {path}")
        return 0
    datasets = (args.datasets or ("a9a" if args.quick else "a9a,news20")).split(",")
    calibrations = tuple(args.calibrations.split(","))
    if sorted(calibrations) != ["accountant", "paper"]:
        ap.error("--calibrations takes paper and accountant, in the order of priority")
    try:
        path = reproduce(out, quick=args.quick, datasets=datasets, seeds=args.seeds,
                         data_home=args.data_home, resume=args.resume,
                         budget_min=args.budget_min, checkpoint=checkpoint,
                         calibrations=calibrations, float32_only=args.float32_only,
                         float32_penalties=tuple(args.float32_penalties.split(",")),
                         command=command)
    except ValidationError as exc:
        ap.error(str(exc))
    print("no report: the time budget ran out before the first unit (rerun with --resume)"
          if path is None else f"wrote {path}")
    return 0
