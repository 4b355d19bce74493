"""σ and calibration time: RDP vs fastdp's own PLD ("auto") vs dp-accounting's PLD (issue 31).

For each setting (q, T, target ε, δ = 1e-5) it calibrates the noise multiplier
of T Poisson-subsampled Gaussian steps with

* ``accountant="rdp"``;
* ``accountant="auto"`` (the smaller of the own-PLD and RDP bounds; a fresh
  accountant per calibration, so no cache is reused);
* dp-accounting's pessimistic PLD (``accountant="pld"``, grid 1e-4), optional
  (``--dp-accounting``: seconds to a minute per setting);

and prints σ, the noise variance saved against RDP, the wall time, and the ε
of the returned σ under dp-accounting's PLD (grid 1e-4) as an independent
check.  Run: ``python benchmarks/pld_calibration.py [--dp-accounting]``.
"""

import argparse
import time

from fastdp.privacy import calibrate_noise_multiplier
from fastdp.privacy.accountants import get_accountant

TABLE = [  # q, T, target ε
    (0.01, 1000, 1.0),
    (0.004, 2500, 0.1),
    (0.02, 500, 8.0),
    (0.001, 10000, 1.0),
    (0.01, 10000, 0.5),
    (0.001, 100000, 2.0),
    (0.0001, 100000, 1.0),
]
DELTA = 1e-5


def _timed(fn):
    """(result, wall seconds, CPU seconds of this process)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def _dpa_epsilon(sigma, q, steps):
    from dp_accounting.pld import privacy_loss_distribution as pld

    return pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=1e-4
                                       ).self_compose(steps).get_epsilon_for_delta(DELTA)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dp-accounting", action="store_true",
                        help="also calibrate with dp-accounting's PLD (slow)")
    parser.add_argument("--check", action="store_true",
                        help="ε of the auto σ under dp-accounting's PLD (grid 1e-4)")
    parser.add_argument("--rows", type=int, default=len(TABLE), help="first rows only")
    args = parser.parse_args(argv)
    print("| q, T, ε | σ rdp | σ auto (own pld) | variance saved | auto time (wall / CPU) | "
          + ("σ dp-accounting pld | its time (wall / CPU) | " if args.dp_accounting else "")
          + ("dp-accounting ε at σ auto |" if args.check else ""))
    for q, steps, eps in TABLE[:args.rows]:
        rdp, _, _ = _timed(lambda: calibrate_noise_multiplier(eps, DELTA, q, steps,
                                                              accountant="rdp"))
        auto, t_auto, c_auto = _timed(lambda: calibrate_noise_multiplier(
            eps, DELTA, q, steps, accountant=get_accountant("auto")))
        saved = 1 - (float(auto) / float(rdp)) ** 2
        row = (f"| {q:g}, {steps:,}, {eps:g} | {float(rdp):.4f} | {float(auto):.4f} | "
               f"{100 * saved:.0f} % | {t_auto:.2f} / {c_auto:.2f} s | ")
        if args.dp_accounting:
            dpa, t_dpa, c_dpa = _timed(lambda: calibrate_noise_multiplier(
                eps, DELTA, q, steps, accountant=get_accountant("pld")))
            row += f"{float(dpa):.4f} | {t_dpa:.1f} / {c_dpa:.1f} s | "
        if args.check:
            row += f"{_dpa_epsilon(float(auto), q, steps):.5f} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
