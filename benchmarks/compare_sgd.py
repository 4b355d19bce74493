"""Speed of one DP-SGD epoch against scikit-learn's SGDClassifier, snapml's DP-SGD and Opacus.

Problem: the synthetic LIBSVM-like problem of ``shared/research/anchors-perf.md``
(200 000 x 50 000, about 49 stored entries per row, unit-norm rows;
``fastdp.datasets.make_sparse_classification(..., random_state=0)``), logistic
loss, lambda = 1e-4, lot size L = 1000, clipping C = 1, Poisson sampling, the
noise multiplier calibrated for epsilon = 1, delta = 1e-6 over the timed
epochs (RDP accountant).

What is timed (CPU time of the process, ``time.process_time``, and wall time):

* fastdp ``dpsgd`` (lazy noise): the epoch time from the solver's per-epoch
  callback (median of epochs 2-4: the sampling of the lots plus the compiled
  epoch), and the end-to-end time of a 1-epoch call.  Also the eager-noise
  path and 2 threads (bit-identical results).
* scikit-learn ``SGDClassifier(loss="log_loss")`` (non-private, batch 1):
  ``(t(max_iter=5) - t(max_iter=1)) / 4`` per epoch, and a 1-epoch fit.
* snapml 1.17 ``LogisticRegression(privacy=True)`` (DP-SGD, batch 1000,
  ``privacy_epsilon=1``, ``grad_clip=1``): a 1-epoch fit (``max_iter=1``).
* Opacus (CPU torch): ``torch.nn.Linear(50000, 1)`` with
  ``PrivacyEngine.make_private(poisson_sampling=True)``, lots densified from
  the CSR rows in the collate function (Opacus has no sparse per-sample
  gradients); ``--opacus-lots`` lots timed and extrapolated to an epoch.

The peers are optional benchmark-only dependencies (``pip install snapml
opacus torch``); a missing one is reported and skipped.

Run: ``python benchmarks/compare_sgd.py`` (a few minutes, mostly snapml and
Opacus; ``--skip snapml,opacus`` to leave them out).  Numbers depend on
machine load; CPU time is the main figure.
"""
import argparse
import time
import warnings

import numpy as np

from fastdp.datasets import make_sparse_classification
from fastdp.privacy import calibrate_noise_multiplier
from fastdp.solvers.sgd import dpsgd

LAM = 1e-4
CLIP = 1.0
EPSILON, DELTA = 1.0, 1e-6


def timed(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c, time.perf_counter() - w, out


def fastdp_epoch(X, y, sigma, L, lazy_noise=True, num_threads=1, epochs=4):
    """(CPU, wall) of one epoch from the callback (median of epochs 2..), and of a 1-epoch call."""
    kw = dict(loss="logistic", lam=LAM, batch_size=L, clip=CLIP, noise_multiplier=sigma,
              learning_rate=1.0, lazy_noise=lazy_noise, random_state=0, num_threads=num_threads)
    stamps = [(time.process_time(), time.perf_counter())]
    dpsgd(X, y, epochs=epochs,
          callback=lambda state: stamps.append((time.process_time(), time.perf_counter())), **kw)
    per_epoch = tuple(np.median(np.diff(np.array(stamps), axis=0)[1:], axis=0))
    one = timed(lambda: dpsgd(X, y, epochs=1, **kw))[:2]
    return per_epoch, one


def sklearn_epoch(X, y):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    def fit(k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return SGDClassifier(loss="log_loss", alpha=LAM, fit_intercept=False, max_iter=k,
                                 tol=None, random_state=0).fit(X, y)

    c1, w1, _ = timed(lambda: fit(1))
    c5, w5, _ = timed(lambda: fit(5))
    return ((c5 - c1) / 4, (w5 - w1) / 4), (c1, w1)


def snapml_epoch(X, y, L):
    from snapml import LogisticRegression

    model = LogisticRegression(max_iter=1, regularizer=LAM * X.shape[0], privacy=True, dual=False,
                               eta=0.3, batch_size=L, privacy_epsilon=EPSILON, grad_clip=CLIP,
                               fit_intercept=False, n_jobs=1, random_state=0)
    c, w, _ = timed(lambda: model.fit(X, y))
    return c, w


def opacus_epoch(X, y, sigma, L, n_lots):
    import torch
    from opacus import PrivacyEngine

    torch.set_num_threads(1)
    torch.manual_seed(0)
    n, d = X.shape
    Xf = X.astype(np.float32)
    labels = torch.from_numpy(((y + 1) / 2).astype(np.float32))

    def collate(items):
        idx = np.sort(np.array([int(item[0]) for item in items], dtype=np.int64))
        return torch.from_numpy(Xf[idx].toarray()), labels[idx]

    dataset = torch.utils.data.TensorDataset(torch.arange(n))
    loader = torch.utils.data.DataLoader(dataset, batch_size=L, collate_fn=collate)
    model = torch.nn.Linear(d, 1, bias=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0, weight_decay=LAM)
    engine = PrivacyEngine(accountant="rdp")
    model, optimizer, loader = engine.make_private(
        module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=sigma,
        max_grad_norm=CLIP, poisson_sampling=True)
    criterion = torch.nn.BCEWithLogitsLoss()

    def run():
        for t, (xb, yb) in enumerate(loader):
            if t >= n_lots:
                break
            optimizer.zero_grad()
            if xb.shape[0] > 0:
                criterion(model(xb).squeeze(1), yb).backward()
            optimizer.step()

    c, w, _ = timed(run)
    steps_per_epoch = n / L
    return c * steps_per_epoch / n_lots, w * steps_per_epoch / n_lots


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=50_000)
    ap.add_argument("--nnz", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--opacus-lots", type=int, default=10)
    ap.add_argument("--skip", default="", help="comma-separated peers to skip: snapml,opacus")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))

    X, y = make_sparse_classification(args.n, args.d, args.nnz, random_state=0)
    n, L, epochs = X.shape[0], args.batch_size, 4
    sigma = float(calibrate_noise_multiplier(EPSILON, DELTA, L / n, epochs * n // L))
    print(f"data: {n} x {X.shape[1]}, nnz = {X.nnz} ({X.nnz / n:.1f}/row), {X.dtype}/"
          f"{X.indices.dtype}; logistic, lambda = {LAM}, L = {L}, C = {CLIP}, Poisson")
    print(f"sigma = {sigma:.4f} (epsilon = {EPSILON}, delta = {DELTA}, {epochs} epochs, RDP)")

    (ours_cpu, ours_wall), (one_cpu, one_wall) = fastdp_epoch(X, y, sigma, L)
    print(f"fastdp DP-SGD epoch (lazy noise): {ours_cpu:.3f} s CPU, {ours_wall:.3f} s wall; "
          f"1-epoch call end to end {one_cpu:.3f} s CPU, {one_wall:.3f} s wall")
    (eager_cpu, _), _ = fastdp_epoch(X, y, sigma, L, lazy_noise=False, epochs=3)
    print(f"fastdp DP-SGD epoch (eager noise): {eager_cpu:.3f} s CPU "
          f"({eager_cpu / ours_cpu:.1f}x the lazy epoch)")
    (cpu2, wall2), _ = fastdp_epoch(X, y, sigma, L, num_threads=2, epochs=3)
    print(f"fastdp DP-SGD epoch, 2 threads: {wall2:.3f} s wall ({cpu2:.3f} s CPU); "
          f"wall speed-up {ours_wall / wall2:.2f}x")

    (sk_cpu, sk_wall), (sk1_cpu, _) = sklearn_epoch(X, y)
    print(f"scikit-learn SGDClassifier epoch: {sk_cpu:.3f} s CPU, {sk_wall:.3f} s wall "
          f"(1-epoch fit {sk1_cpu:.3f} s CPU)")
    print(f"  ratio fastdp DP-SGD / sklearn SGD epoch (CPU): {ours_cpu / sk_cpu:.2f}x "
          "(target <= 2x)")

    if "snapml" not in skip:
        try:
            snap_cpu, snap_wall = snapml_epoch(X, y, L)
            print(f"snapml DP-SGD epoch: {snap_cpu:.2f} s CPU, {snap_wall:.2f} s wall")
            print(f"  speed-up over snapml DP-SGD (CPU): {snap_cpu / ours_cpu:.0f}x (target >= 50x)")
        except ImportError:
            print("snapml: not installed (pip install snapml)")
    if "opacus" not in skip:
        try:
            op_cpu, op_wall = opacus_epoch(X, y, sigma, L, args.opacus_lots)
            print(f"Opacus DP-SGD (torch CPU, linear model) epoch, extrapolated from "
                  f"{args.opacus_lots} lots: {op_cpu:.2f} s CPU, {op_wall:.2f} s wall")
            print(f"  speed-up over Opacus (CPU): {op_cpu / ours_cpu:.0f}x")
        except ImportError:
            print("Opacus: not installed (pip install torch opacus)")


if __name__ == "__main__":
    main()
