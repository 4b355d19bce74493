"""Plain numpy reference of the (DP-)SGD kernel (fastdp/_kernels/_sgd.pyx), for tests only.

It keeps theta explicitly (no scale trick) and takes its standard normals
from a ``numpy.random.Generator`` in the order the kernel's docstring states,
so with a generator seeded like the kernel's bit generator the two agree to
rounding.
"""
import numpy as np
from scipy.special import expit


def loss_derivative(loss, z, y):
    if loss == "squared":
        return z - y
    if loss == "logistic":
        return -y * expit(-y * z)
    return np.where(y * z < 1.0, -y, 0.0)


def clipped_coefficients(X, y, rows, theta, loss, clip):
    """Coefficients c_i with clip(loss'(x_i^T theta) x_i, C) = c_i x_i."""
    Xb = X[rows]
    d = loss_derivative(loss, np.asarray(Xb @ theta).ravel(), y[rows])
    if np.isinf(clip):
        return d
    norms = np.abs(d) * np.sqrt(np.asarray(Xb.multiply(Xb).sum(axis=1)).ravel())
    return d * np.minimum(1.0, clip / np.where(norms > 0, norms, 1.0))


def pending_scales(rho, n_steps):
    """sqrt(sum_{i<p} rho^(2i)) for p = 0..n_steps, by direct summation."""
    powers = rho ** (2.0 * np.arange(n_steps))
    return np.sqrt(np.concatenate([[0.0], np.cumsum(powers)]))


def run_sgd_reference(X, y, theta, batch_ptr, batch_idx, *, loss, clip, rho, kappa, noise_std,
                      lazy_noise, rng):
    """Run the steps on a copy of theta; returns (theta, n_draws)."""
    theta = np.array(theta, dtype=np.float64)
    X = X.tocsr().astype(np.float64)  # the kernel reads float32 values as doubles
    m = X.shape[1]
    n_steps = len(batch_ptr) - 1
    scales = kappa * noise_std * pending_scales(rho, n_steps)
    last = np.zeros(m, dtype=np.int64)
    draws = 0
    noisy = noise_std > 0
    for t in range(1, n_steps + 1):
        rows = batch_idx[batch_ptr[t - 1]:batch_ptr[t]]
        if noisy and lazy_noise:
            seen = set()
            for j in rows:
                for c in X.indices[X.indptr[j]:X.indptr[j + 1]]:
                    if c in seen:
                        continue
                    seen.add(c)
                    owed = (t - 1) - last[c]
                    if owed > 0:
                        theta[c] += scales[owed] * rng.standard_normal()
                        draws += 1
                    last[c] = t - 1
        coefs = clipped_coefficients(X, y, rows, theta, loss, clip)
        grad = np.asarray(X[rows].T @ coefs).ravel() if rows.size else np.zeros(m)
        theta = rho * theta - kappa * grad
        if noisy and not lazy_noise:
            theta += kappa * noise_std * rng.standard_normal(m)
            draws += m
    if noisy and lazy_noise:
        for c in range(m):
            owed = n_steps - last[c]
            if owed > 0:
                theta[c] += scales[owed] * rng.standard_normal()
                draws += 1
    return theta, draws
