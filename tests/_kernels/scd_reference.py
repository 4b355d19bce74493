"""Plain numpy reference of the DP-SCD kernel (``fastdp._kernels._scd``), for tests only.

It follows the kernel's documented draw order exactly, using scalar
``Generator.standard_normal()`` calls on a Generator built on the same bit
generator state, so with the same seed it sees the same Gaussians and must
match the compiled kernel to rounding (1e-12).  It also returns every drawn
noise value, which lets tests check the exact identity
``v - X alpha = sum_t (eta_v - X_B eta_alpha)`` (spec 000 section 4.1).
"""
import numpy as np

RIDGE, LOGISTIC, HINGE = 0, 1, 2


def coordinate_step(loss, alpha_j, y_j, m_j, s_j, box_eps):
    """Closed-form zeta of spec 000 section 2.1 (before scaling)."""
    if loss == RIDGE:
        return (y_j - m_j - alpha_j) / (1.0 + s_j)
    ya = min(max(y_j * alpha_j, box_eps), 1.0 - box_eps)
    a_t = y_j * ya
    if loss == HINGE:
        if s_j > 0:
            z_hat = (y_j - m_j) / s_j
        else:
            z_hat = np.copysign(np.inf, y_j - m_j) if y_j != m_j else 0.0
    else:
        p = ya
        g = y_j * np.log(p / (1.0 - p)) + m_j
        h = 1.0 / (p * (1.0 - p)) + s_j
        z_hat = -g / h
    return y_j * min(max(y_j * (a_t + z_hat), box_eps), 1.0 - box_eps) - a_t


def scale(zeta, clip):
    """zeta / max(1, |zeta| / C)."""
    ratio = abs(zeta) / clip
    return zeta / ratio if ratio > 1.0 else zeta


def dual_scd_reference(X, y, alpha, v, batches, *, loss, lam_n, sigma_prime, clip=np.inf,
                       box_eps=1e-4, sequential=False, noise_std_alpha=0.0, noise_std_v=0.0,
                       lazy_noise=False, noise_rng=None):
    """Run the batches on copies of (alpha, v); return (alpha, v, noise_log).

    ``X`` is a scipy CSR matrix (float64), ``batches`` a list of index arrays.
    ``noise_log`` holds, per step, the alpha noise (array over the batch) and, in
    eager mode, the v noise (array of length M).
    """
    X = X.tocsr()
    alpha = np.array(alpha, dtype=np.float64)
    v = np.array(v, dtype=np.float64)
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    n_features = X.shape[1]
    last = np.zeros(n_features, dtype=np.int64)
    log = {"alpha": [], "v": []}

    def step_of(j):
        lo, hi = X.indptr[j], X.indptr[j + 1]
        m = float(np.dot(X.data[lo:hi], v[X.indices[lo:hi]])) / lam_n
        z = coordinate_step(loss, alpha[j], y[j], m, sigma_prime * sq[j] / lam_n, box_eps)
        return scale(z, clip)

    def apply(j, z):
        lo, hi = X.indptr[j], X.indptr[j + 1]
        alpha[j] += z
        v[X.indices[lo:hi]] += z * X.data[lo:hi]

    for t, batch in enumerate(batches, start=1):
        batch = np.asarray(batch, dtype=np.int64)
        if lazy_noise and noise_std_v > 0:
            for j in batch:
                for c in X.indices[X.indptr[j]:X.indptr[j + 1]]:
                    pending = (t - 1) - last[c]
                    if pending > 0:
                        v[c] += noise_std_v * np.sqrt(pending) * noise_rng.standard_normal()
                        last[c] = t - 1
        if sequential:
            for j in batch:
                apply(j, step_of(j))
        else:
            zetas = [step_of(j) for j in batch]
            for j, z in zip(batch, zetas):
                apply(j, z)
        eta_a = np.zeros(len(batch))
        if noise_std_alpha > 0:
            for i, j in enumerate(batch):
                eta_a[i] = noise_std_alpha * noise_rng.standard_normal()
                alpha[j] += eta_a[i]
        log["alpha"].append(eta_a)
        if noise_std_v > 0 and not lazy_noise:
            eta_v = np.array([noise_std_v * noise_rng.standard_normal() for _ in range(n_features)])
            v += eta_v
            log["v"].append(eta_v)
    if lazy_noise and noise_std_v > 0:
        n_steps = len(batches)
        for c in range(n_features):
            pending = n_steps - last[c]
            if pending > 0:
                v[c] += noise_std_v * np.sqrt(pending) * noise_rng.standard_normal()
    return alpha, v, log
