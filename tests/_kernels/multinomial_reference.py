"""Plain numpy reference of the multinomial (DP-)SGD kernel (fastdp/_kernels/_multinomial.pyx).

For tests only.  It keeps Theta (K x d) explicitly (no scale trick, no
feature-major layout) and takes its standard normals from a
``numpy.random.Generator`` in the order the kernel's docstring states, so
with a generator seeded like the kernel's bit generator the two agree to
rounding.
"""
import numpy as np
from scipy.special import softmax


def clipped_residuals(X, y, rows, theta, clip):
    """R (len(rows) x K) with clip(g_i, C) = R[i] x_i^T, g_i = (softmax(theta x_i) - e_y) x_i^T."""
    Xb = X[rows]
    R = softmax(np.asarray(Xb @ theta.T), axis=1)
    R[np.arange(len(rows)), y[rows]] -= 1.0
    if np.isinf(clip):
        return R
    frob = np.linalg.norm(R, axis=1) * np.sqrt(np.asarray(Xb.multiply(Xb).sum(axis=1)).ravel())
    return R * np.minimum(1.0, clip / np.where(frob > 0, frob, 1.0))[:, None]


def pending_scales(rho, n_steps):
    """sqrt(sum_{i<p} rho^(2i)) for p = 0..n_steps, by direct summation."""
    powers = rho ** (2.0 * np.arange(n_steps))
    return np.sqrt(np.concatenate([[0.0], np.cumsum(powers)]))


def run_multinomial_reference(X, y, theta, batch_ptr, batch_idx, *, clip, rho, kappa, noise_std,
                              lazy_noise, rng):
    """Run the steps on a copy of theta (K x d); returns (theta, n_draws)."""
    theta = np.array(theta, dtype=np.float64)
    X = X.tocsr().astype(np.float64)  # the kernel reads float32 values as doubles
    K, d = theta.shape
    n_steps = len(batch_ptr) - 1
    scales = kappa * noise_std * pending_scales(rho, n_steps)
    last = np.zeros(d, dtype=np.int64)
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
                        theta[:, c] += scales[owed] * rng.standard_normal(K)
                        draws += K
                    last[c] = t - 1
        grad = (clipped_residuals(X, y, rows, theta, clip).T @ X[rows] if rows.size
                else np.zeros((K, d)))
        theta = rho * theta - kappa * np.asarray(grad)
        if noisy and not lazy_noise:
            theta += kappa * noise_std * rng.standard_normal((d, K)).T   # column-major order
            draws += d * K
    if noisy and lazy_noise:
        for c in range(d):
            owed = n_steps - last[c]
            if owed > 0:
                theta[:, c] += scales[owed] * rng.standard_normal(K)
                draws += K
    return theta, draws
