"""Side-by-side noise calibration: fastdp vs dp_accounting vs an Opacus-style search.

Runs in one process, on the calibration settings K1-K4 of
../shared/research/anchors-dp-libs.md §2.3 (Poisson-subsampled Gaussian,
add/remove adjacency), and prints for each method the σ it returns, the ε of
that σ under fastdp's exact RDP accountant, the CPU time, and the time ratio
against fastdp.

Methods
-------
fastdp
    ``fastdp.privacy.calibrate_noise_multiplier`` (RDP, relative tolerance
    1e-6 in σ, conservative), with a fresh accountant (empty cache) each run.
dp_accounting
    ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism`` with
    ``dp_accounting.rdp.RdpAccountant`` (its default tolerance, 1e-6 in σ).
opacus-style
    A faithful re-implementation of Opacus' ``get_noise_multiplier`` loop
    (``opacus/accountants/utils.py``): double ``sigma_high`` from 10 until ε is
    below target, then bisect until ``target − ε_high ≤ 0.01`` (absolute) and
    return ``sigma_high``. Its RDP engine is dp_accounting's sampled-Gaussian
    RDP over Opacus' order grid with the Balle et al. 2020 conversion (what
    Opacus' ``analysis/rdp.py`` computes).

Usage::

    python benchmarks/compare_accounting.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import dp_accounting
import numpy as np
from dp_accounting import mechanism_calibration
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

from fastdp.privacy import RdpAccountant, calibrate_noise_multiplier, compute_epsilon

SETTINGS = {
    # id: q, T, target ε, δ
    "K1": (256 / 60000, 14_063, 1.0, 1e-5),
    "K2": (256 / 60000, 14_063, 8.0, 1e-5),
    "K3": (0.01, 10_000, 0.1, 1e-3),
    "K4": (1e-3, 100_000, 2.0, 1e-7),
}

OPACUS_ALPHAS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))
OPACUS_MAX_SIGMA = 1e6


def fastdp_calibrate(q, steps, target, delta):
    return float(calibrate_noise_multiplier(target, delta, q, steps, accountant=RdpAccountant()))


def dp_accounting_calibrate(q, steps, target, delta):
    def make_event(sigma):
        return dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)

    return float(mechanism_calibration.calibrate_dp_mechanism(
        dp_rdp.RdpAccountant, make_event, target, delta))


def opacus_style_epsilon(sigma, q, steps, delta):
    rdp = steps * dp_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, OPACUS_ALPHAS)
    return dp_rdp.compute_epsilon(OPACUS_ALPHAS, rdp, delta)[0]


def opacus_style_calibrate(q, steps, target, delta, epsilon_tolerance=0.01):
    eps_high = float("inf")
    sigma_low, sigma_high = 0.0, 10.0
    while eps_high > target:
        sigma_high = 2 * sigma_high
        eps_high = opacus_style_epsilon(sigma_high, q, steps, delta)
        if sigma_high > OPACUS_MAX_SIGMA:
            raise ValueError("The privacy budget is too low.")
    while target - eps_high > epsilon_tolerance:
        sigma = (sigma_low + sigma_high) / 2
        eps = opacus_style_epsilon(sigma, q, steps, delta)
        if eps < target:
            sigma_high, eps_high = sigma, eps
        else:
            sigma_low = sigma
    return sigma_high


METHODS = {
    "fastdp": fastdp_calibrate,
    "dp_accounting": dp_accounting_calibrate,
    "opacus-style": opacus_style_calibrate,
}


def timed(func, args, repeats):
    best, value = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        value = func(*args)
        best = min(best, time.process_time() - start)
    return value, best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per method; the fastest counts")
    args = parser.parse_args(argv)

    fastdp_calibrate(*SETTINGS["K1"])        # warm module-level tables once
    header = (f"{'id':3} {'method':14} {'sigma':>12} {'eps(sigma)':>13} {'<=target':>8} "
              f"{'CPU ms':>9} {'x fastdp':>9}")
    print("eps(sigma): fastdp's exact RDP accountant (dp_accounting's default orders); "
          "target must not be exceeded")
    print(header)
    print("-" * len(header))
    ratios = {name: [] for name in METHODS if name != "fastdp"}
    for sid, (q, steps, target, delta) in SETTINGS.items():
        results = {}
        for name, func in METHODS.items():
            repeats = args.repeats if name != "dp_accounting" else max(1, min(args.repeats, 2))
            results[name] = timed(func, (q, steps, target, delta), repeats)
        base = results["fastdp"][1]
        for name, (sigma, seconds) in results.items():
            eps = compute_epsilon(sigma, q, steps, delta)
            ratio = seconds / base if base > 0 else float("nan")
            if name != "fastdp":
                ratios[name].append(ratio)
            ok = "yes" if eps <= target else "NO"
            print(f"{sid:3} {name:14} {sigma:12.7f} {eps:13.10f} {ok:>8} "
                  f"{seconds * 1e3:9.2f} {ratio:9.1f}")
        print()
    for name, values in ratios.items():
        print(f"time ratio {name} / fastdp: geometric mean {np.exp(np.mean(np.log(values))):.0f}x, "
              f"min {min(values):.0f}x, max {max(values):.0f}x")


if __name__ == "__main__":
    main()
