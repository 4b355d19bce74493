"""Convergence theory of DP heavy ball (spec 002, sections 3.2-3.3 and 4.3-4.4).

Public functions of public parameters (step size, momentum, curvature
bounds, the noise level); nothing here reads data or costs privacy.  They
serve to choose (α, β, T) before a private run and to regenerate Fig. 1.

The noise level ``noise_variance`` is the per-coordinate variance σ² of the
injected noise: ``2 b²`` for Laplace of scale b (``"paper"`` convention) and
``b²`` for the authors' code (spec 002, section 7, item A2).
"""

import math

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = [
    "rho_hb",
    "rho_nag_reference",
    "hb_stationary_trace",
    "hb_stationary_suboptimality",
    "hb_quadratic_bound",
    "fig1_log_bound",
    "lmi_matrices",
    "lmi_min_eigenvalue",
    "prop34_bound",
    "hb_lmi_rate",
]


def _block_radius(a, b):
    """Largest modulus of the roots of z² − a z + b (complex square root)."""
    disc = np.asarray(a, dtype=np.complex128) ** 2 - 4.0 * np.asarray(b, dtype=np.complex128)
    root = np.sqrt(disc)
    return np.maximum(np.abs((a + root) / 2.0), np.abs((a - root) / 2.0))


def rho_hb(step_size, momentum, strong_convexity, smoothness):
    """Heavy-ball rate ρ = max |a_{λ,±}| over λ ∈ {μ, L} (eq. 3.18).

    a_{λ,±} are the roots of z² − (1 + β − αλ) z + β, the eigenvalues of the
    2×2 block [[1+β−αλ, −β], [1, 0]]; the spectral radius is quasi-convex in
    λ, so the extreme eigenvalues give the maximum over [μ, L].
    """
    a, b = float(step_size), float(momentum)
    return float(max(_block_radius(1.0 + b - a * lam, b)
                     for lam in (float(strong_convexity), float(smoothness))))


def rho_nag_reference(step_size, momentum, strong_convexity, smoothness):
    """ρ from the roots of z² − (1+β)(1−αλ) z + β(1−αλ), λ ∈ {μ, L}.

    These are Nesterov's eigenvalues; the authors' ``rho_HB_quad.m`` uses
    them for Fig. 1 (spec 002, section 7, item C1).
    """
    a, b = float(step_size), float(momentum)
    return float(max(_block_radius((1.0 + b) * (1.0 - a * lam), b * (1.0 - a * lam))
                     for lam in (float(strong_convexity), float(smoothness))))


def _eigenvalues(eigenvalues):
    lam = np.asarray(eigenvalues, dtype=np.float64).ravel()
    if lam.size == 0 or np.any(lam <= 0) or not np.all(np.isfinite(lam)):
        raise ValidationError("eigenvalues must be finite and > 0")
    return lam


def hb_stationary_trace(step_size, momentum, noise_variance, eigenvalues):
    """m(α, β) of Theorem 3.5: the stationary trace of Cov(x_t) for HB on a quadratic.

    ``(σ²/2) Σ_i 2α(1+β) / ((1−β) λ_i (2 + 2β − α λ_i))`` (the AR(2)
    stationary variance per eigen-direction; spec 002, section 4.4 (i)).
    """
    a, b, s2 = float(step_size), float(momentum), float(noise_variance)
    lam = _eigenvalues(eigenvalues)
    return float(0.5 * s2 * np.sum(2.0 * a * (1.0 + b) / ((1.0 - b) * lam * (2.0 + 2.0 * b - a * lam))))


def hb_stationary_suboptimality(step_size, momentum, noise_variance, eigenvalues):
    """Exact stationary E[F − F*] = ½ Σ λ_i Var_i of HB on a quadratic (<= L m(α, β))."""
    a, b, s2 = float(step_size), float(momentum), float(noise_variance)
    lam = _eigenvalues(eigenvalues)
    return float(0.5 * s2 * np.sum(a * (1.0 + b) / ((1.0 - b) * (2.0 + 2.0 * b - a * lam))))


def hb_quadratic_bound(t, step_size, momentum, noise_variance, eigenvalues, initial_distance2,
                       rate="hb", growth_constant=1.0):
    """Theorem 3.5 bound on E[F(x_t)] − F* for DP heavy ball on a quadratic.

    ``V(ξ_0) C_t² ρ^{2t} + L m(α, β)`` with ``V(ξ_0) = ‖ξ_0 − ξ*‖² +
    σ² α²/(1 − ρ²)``, ``C_t = growth_constant · t`` (spec C2: the constant is
    unspecified; Fig. 1 uses 1) and ``L`` the largest eigenvalue; printed as
    in the paper (the first term lacks an L/2 factor, spec 4.4 (iii)).

    Parameters
    ----------
    t : int or array of int
    rate : {"hb", "nag_reference"}
        ρ from eq. 3.18 (:func:`rho_hb`) or the authors' code
        (:func:`rho_nag_reference`, used for the published Fig. 1).
    """
    lam = _eigenvalues(eigenvalues)
    mu, L = float(lam.min()), float(lam.max())
    if rate == "hb":
        rho = rho_hb(step_size, momentum, mu, L)
    elif rate == "nag_reference":
        rho = rho_nag_reference(step_size, momentum, mu, L)
    else:
        raise ValidationError(f"rate must be 'hb' or 'nag_reference'; got {rate!r}")
    if rho >= 1.0:
        return np.full(np.shape(t), math.inf) if np.ndim(t) else math.inf
    t = np.asarray(t, dtype=np.float64)
    V = float(initial_distance2) + float(noise_variance) * float(step_size) ** 2 / (1.0 - rho ** 2)
    value = V * (growth_constant * t) ** 2 * rho ** (2.0 * t) + L * hb_stationary_trace(
        step_size, momentum, noise_variance, lam)
    return float(value) if value.ndim == 0 else value


def fig1_log_bound(horizons, step_size, momentum, noise_level, strong_convexity=0.1, smoothness=1.0,
                   initial_error=10.0, rate="nag_reference"):
    """The curves of Fig. 1: log of the Theorem 3.5 bound at t = T for a T-step run.

    σ_T² = (c_w T)² (``noise_level`` = c_w), Q = diag(μ, L) (the published
    figure uses μ = 0.1, spec C1), ``‖ξ_0 − ξ*‖² = initial_error``, C_t = t.
    Natural logarithm, as in the authors' script.
    """
    T = np.asarray(horizons, dtype=np.float64)
    lam = np.array([strong_convexity, smoothness], dtype=np.float64)
    out = np.empty_like(T)
    for i, horizon in enumerate(T.ravel()):
        s2 = (noise_level * horizon) ** 2
        out.ravel()[i] = math.log(hb_quadratic_bound(horizon, step_size, momentum, s2, lam,
                                                     initial_error, rate=rate))
    return out


# ---------------------------------------------------------------------------
# Proposition 3.4: LMI certificate for smooth strongly convex F
# ---------------------------------------------------------------------------


def lmi_matrices(step_size, momentum, strong_convexity, smoothness):
    """The scalar 3×3 matrices X_0, X_1, X_2 and the system (A, B) of Prop. 3.4.

    B = [−α, 0]ᵀ: the true heavy-ball dynamics (the paper's eq. 3.9 has a
    sign slip, spec 4.1).
    """
    a, b = float(step_size), float(momentum)
    mu, L = float(strong_convexity), float(smoothness)
    X0 = np.array([[2 * mu * L, 0.0, -(mu + L)], [0.0, 0.0, 0.0], [-(mu + L), 0.0, 2.0]])
    k = (1.0 - L * a) * b
    X1 = 0.5 * np.array([[-L * b * b, L * b * b, -k],
                         [L * b * b, -L * b * b, k],
                         [-k, k, a * (2.0 - L * a)]])
    X2 = 0.5 * np.array([[mu, 0.0, -1.0], [0.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    A = np.array([[1.0 + b, -b], [1.0, 0.0]])
    B = np.array([[-a], [0.0]])
    return X0, X1, X2, A, B


def _phi(A, B, P, rho2):
    top = np.hstack([A.T @ P @ A - rho2 * P, A.T @ P @ B])
    bottom = np.hstack([B.T @ P @ A, B.T @ P @ B])
    return np.vstack([top, bottom])


def lmi_min_eigenvalue(step_size, momentum, strong_convexity, smoothness, rho2, P, c0=0.0, c=1.0):
    """λ_min(c_0 X_0 + c [X_1 + (1 − ρ²) X_2] − Φ(A, B, P, ρ²)); ≥ 0 certifies rate ρ (eq. 3.14)."""
    X0, X1, X2, A, B = lmi_matrices(step_size, momentum, strong_convexity, smoothness)
    M = c0 * X0 + c * (X1 + (1.0 - rho2) * X2) - _phi(A, B, np.asarray(P, dtype=np.float64), rho2)
    return float(np.linalg.eigvalsh(0.5 * (M + M.T))[0])


def prop34_bound(t, rho2, P, c, initial_lyapunov, step_size, smoothness, n_features, noise_bound):
    """Bound (3.15) of Prop. 3.4, implemented literally (conservative, spec A3).

    ``ρ^{2t} V/c + ((1 − ρ^{2t})/(1 − ρ²)) (L d α²/2) 𝓔_T (1 + 2 P12²/(P22 c L + 2|P|))``
    with 0/0 = 0; ``initial_lyapunov`` is V_{P,c}(ξ_0).
    """
    P = np.asarray(P, dtype=np.float64)
    det = float(np.linalg.det(P))
    denom = P[1, 1] * c * smoothness + 2.0 * abs(det)
    extra = 0.0 if P[0, 1] == 0.0 else 2.0 * P[0, 1] ** 2 / denom
    t = np.asarray(t, dtype=np.float64)
    geometric = (1.0 - rho2 ** t) / (1.0 - rho2)
    return (rho2 ** t * initial_lyapunov / c
            + geometric * smoothness * n_features * step_size ** 2 / 2.0 * noise_bound * (1.0 + extra))


def _best_certificate(step_size, momentum, mu, L, rho2):
    """max over P ⪰ 0, c_0 ≥ 0 (c = 1) of min(λ_min(LMI), λ_min(P), c_0).

    The three terms are concave in (P11, P12, P22, c_0) (minimum eigenvalues
    of affine matrix functions), so the maximum of their minimum is a convex
    problem in four variables; Nelder–Mead from a few starts inside a box.
    A value >= 0 certifies ρ².
    """
    from scipy.optimize import minimize

    def negative(z):
        p11, p12, p22, c0 = np.clip(z, -1e3, 1e3)
        P = np.array([[p11, p12], [p12, p22]])
        value = min(lmi_min_eigenvalue(step_size, momentum, mu, L, rho2, P, c0=c0),
                    float(np.linalg.eigvalsh(P)[0]), c0)
        return -value + 1e-3 * float(np.sum(np.maximum(np.abs(z) - 1e3, 0.0)))

    best = -math.inf
    for start in ([0.0, 0.0, 0.0, 0.0], [1.0, -0.5, 0.5, 0.1], [L, -L / 2, L / 2, 0.05]):
        res = minimize(negative, start, method="Nelder-Mead",
                       options={"xatol": 1e-9, "fatol": 1e-13, "maxiter": 1500})
        best = max(best, -res.fun)
        if best >= 0.0:  # certified: no need to look further
            break
    return best


def hb_lmi_rate(step_size, momentum, strong_convexity, smoothness, tol=1e-3):
    """Smallest ρ (to ``tol``) certified by the LMI (3.14), by bisection on ρ.

    A small dense search (no SDP solver): at each ρ² the LMI's smallest
    eigenvalue is maximised over P ⪰ 0 and c_0 ≥ 0 with c = 1
    (:func:`_best_certificate`).  Returns ``math.inf`` when no ρ < 1 is
    certified (heavy ball is not globally convergent on every smooth strongly
    convex function, so infeasibility is expected for some (α, β)).
    """
    args = (step_size, momentum, strong_convexity, smoothness)
    if _best_certificate(*args, (1.0 - tol) ** 2) < -1e-10:
        return math.inf
    lo, hi = 0.0, 1.0 - tol
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if _best_certificate(*args, mid * mid) >= -1e-10:
            hi = mid
        else:
            lo = mid
    return hi
