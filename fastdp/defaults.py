"""Default hyperparameters of the estimators: documented rules of public quantities only.

A private model's hyperparameters may depend on what is public — the number
of examples n, the number of features d, the privacy target (epsilon, delta),
the loss and the row-norm bound (1 after the estimator's row map) — and never
on the private values: a default computed from the data would leak it and is
not accounted.  Every rule here takes only such quantities.

The DP-SGD rule (the default solver)
------------------------------------
With rows of norm <= 1 the gradient of the logistic and hinge losses has norm
<= 1.  For a fixed noise level the quantity that decides the model is the
total step length ``H = s T`` of the clipped update, ``s = eta C`` (the "time"
of the gradient flow the run approximates; with s/L fixed, the batch size L
hardly matters, the linear-scaling rule).  Too small an ``H`` under-trains,
too large an ``H`` lets the accumulated noise dominate.  On the development
datasets (a9a, phishing, mushrooms, w8a; 3 seeds, 14 settings each, see
docs/defaults.md) the best ``H`` grows linearly with ``epsilon n`` until the
model saturates:

    L   = 256 (at most n/4; sqrt(n) when n > 65 536)
    E   = clip(round(20 epsilon), 5, 80) epochs          (T = floor(E n / L) steps)
    s   = eta C = min(0.3 epsilon n / T, eta_max) = min(0.3 epsilon L / E, eta_max)
    eta_max = 8 (logistic: 2 / smoothness 1/4), 1 (squared: 1 / smoothness 1); 4 (hinge)
    C   = 0.3 (logistic, multinomial), 1 (hinge, squared);  eta = s / C

So ``s = 0.3 L / 20 = 3.84`` for 0.25 <= epsilon <= 4, and the epochs grow
with epsilon: fewer, less noisy steps at small epsilon; at large epsilon more
passes (up to 80) average the noise better (mushrooms at epsilon = 8: 98.95 %
with 20 epochs, 99.94 % with 80).  The cap ``eta_max`` keeps each step
stable (a step above ``2/beta`` diverges: a9a fell to 80 % with eta = 123).

The small-budget floor (binary logistic loss).  ``H = 0.3 epsilon n``
under-trains when ``epsilon n`` is small and the rows are low-dimensional:
the nominal total step ``s E n / L`` is at least

    H_min = 100 min(1, n / d)        (d: the row width, intercept column included)

so ``s = min(max(0.3 epsilon n, H_min) L / (E n), eta_max)``.  It acts only
where ``0.3 epsilon n < H_min`` (epsilon n < 333 for d <= n).  With d > n the
training set can be fitted whatever its labels, and a longer run fits noise,
so the floor shrinks as n / d.  It is not applied to the multinomial loss,
the hinge or the squared loss.  The constant was 300 (derived on mushrooms at
epsilon = 0.1 and held-out subsamples of 4k rows); on the corpus of issue 32,
chosen leave-one-dataset-out among {0, 100, 300}, 100 was chosen with every
set held out: with n of a few hundred (240-row synthetic set at epsilon = 1,
heart at epsilon = 0.1) a floor of 300 overshoots by 3 to 5 points, and
mushrooms at epsilon = 0.1 loses 1.3 points to it (still within 1 point of
the tuned grid).  Evidence: docs/defaults.md, "The small-budget floor" and
"Leave-one-dataset-out protocol".

The clip: a logistic gradient on a unit row has norm ``|l'| <= 1``, 0.5 at
the start.  ``C = 0.3`` clips the badly fitted examples to a common length
and cuts the noise (``sigma C``) by 3.3 at the same step ``s``: on
high-dimensional text (news20, d = 62k > n = 12.7k) it gained 2 to 10
accuracy points over ``C = 1``, on the four development sets 0 to 1.7 points
(never a loss of median accuracy), see docs/defaults.md.  A rule switching
on ``d > n`` (larger lots, a smaller step) did no better than ``C = 0.3``
alone on the held-out tasks, so there is one rule for every d (d enters
only through the small-budget floor's ``min(1, n / d)``).  The hinge
gradient is 0 or the row, so clipping it is a rescaling of ``eta`` (C = 1
kept); the squared loss keeps C = 1 (its gradients are not bounded by 1).
The squared loss's cap was ``1 / beta`` = 1 until issue 17's follow-up, then ``2 / beta`` = 2
(measured on cpusmall with unscaled targets).  Issue 32 puts it back to ``1 / beta``: at
``eta = 2 / beta`` the top eigendirection of the squared loss does not contract
(``1 - eta beta = -1``), so the noise added along it accumulates as a random walk instead
of decaying; with the targets scaled to [-1, 1] (``DPRidge``'s target map) single seeds
diverged (cal_housing on 1,000 rows, 5 seeds, R^2 median / worst at epsilon = 0.3:
-0.20 / -3.07 with the cap 2, -0.04 / -0.12 with 1; at epsilon = 1: -0.02 / -0.46 and
0.11 / 0.08; cpusmall on 1,000 rows at epsilon = 1: 0.22 / 0.19 and 0.32 / 0.23).
At ``epsilon = inf`` (non-private SGD) C = 1.
``alpha`` (the L2 strength) defaults to ``0.1 / n`` (scikit-learn's ``C = 10``):
on rows of norm <= 1 with the intercept column, ``1 / n`` (``C = 1``)
over-regularises (phishing 93.0 % vs 93.7 %, mushrooms 99.3 % vs 100 % at
epsilon = inf), and a private fit at large epsilon must not beat the
non-private one, or accuracy would fall as epsilon grows.

The multiclass rule (multinomial DP-SGD, K >= 3 classes)
--------------------------------------------------------
One K-class model is K weight vectors; a prediction compares them pairwise.
For a class pair (k, j) the multinomial run is a binary problem in which

* only the examples of the two classes (2/K of a lot) carry signal, so the
  lot ``L_K = (K/2) L`` keeps the binary rule's lot L per pair (at most n/4);
* the pair's update is 2/K of the multinomial update, so the step cap is
  ``(K/2) eta_max``.

So the multiclass rule takes the binary rule's total step at
``epsilon / kappa_K ** p`` with ``p = min(1, d / n)`` (:func:`multiclass_noise_power`), the
binary rule's epochs at epsilon, and the lot and cap scaled by K/2:

    L = min((K/2) L_binary, n/4),  E = clip(round(20 epsilon), 5, 80)
    e = epsilon / kappa_K ** min(1, d / n),  s = min(0.3 e L / E, (K/2) eta_max),  C = 0.3

Until issue 32 p was 1 at every d (:func:`multiclass_noise_factor`,
``kappa_K = 2 sqrt(ln K)``: a pair's margin carries the noise of two vectors and the
prediction is an argmax over K noisy scores).  That bound is on the noise of the *worst* of
K scores, and on low-dimensional data a total step divided by kappa_K (3 to 4 for K = 10
to 50) under-trains: on the corpus (pendigits, satimage, vowel, vehicle, wine and a
synthetic 50-class set) the tuned grid's best point at epsilon >= 1 had 3 times the rule's
total step.  Where d >= n (news20, sector) the model can fit the noise of the private
gradients, the argument of the floor's ``min(1, n / d)``, and kappa_K is kept.  Chosen
leave-one-dataset-out among p in {1, 1/2, 0, min(1, d/n)}: min(1, d/n) with 8 of 9
multiclass sets held out (pendigits held out: 1/2), and the most held-out cells within one
point of the tuned grid (18 of 25; p = 0: 14).  (news20, K = 20, n = 12.7k, d = 62k,
epsilon = 1: p = 1, L = 2560, E = 20, s = 11.1, 99 steps; pendigits, n = 7494, d = 17:
p = 0.0023.)  Evidence: docs/defaults.md, "Leave-one-dataset-out protocol".

The accelerated and line-search solvers (``solver=`` set by the user)
--------------------------------------------------------------------
Their own defaults (lot 1000, 10 epochs, clip 1 for the accelerated
solvers and DP-BLSGD, clip 3 for the adaptive line searches and DP-AGD)
were 5 to 25 points below a small tuned grid at epsilon <= 1.  With the
logistic loss on rows of norm <= 1 a gradient has norm <= 1, so:

* the accelerated solvers (Laplace noise calibrated to the L1 sensitivity
  ``2 sqrt(d) C``) take the DP-SGD rule's clip C = 0.3, which cuts their
  noise 3.3-fold; the momentum methods (heavy ball, Nesterov, MASG) run 3
  epochs instead of 10: they need about sqrt(10) ~ 3 times fewer steps
  than gradient descent, and every step spends budget;
* the adaptive line searches (DP-BLSGD adaptive and -AC, DP-BLGD, DP-AGD)
  take C = 1 (a clip of 3 never clips a gradient of norm <= 1 and triples
  the noise) and 40 nominal epochs (a larger planned horizon lets the
  adaptive budget rule spend the cap in more, cheaper steps); DP-BLGD and
  DP-AGD, with the step grid below, 100;
* fixed-split DP-BLSGD keeps its defaults (C = 1 already).

These are public constants (no n, d or data), except DP-AGD's and DP-BLGD's
noise-dominated regime (below), which reads n, d, epsilon and delta.  Only the logistic loss with
a finite epsilon is covered; the squared loss and epsilon = inf keep each
solver's own defaults.  Evidence: benchmarks/solver_defaults.py,
docs/defaults.md.

The step grids and objective clip of DP-AGD and DP-BLGD (logistic loss)
----------------------------------------------------------------------
Their own grids (DP-AGD: 21 steps in [0, 2] along the normalised gradient;
DP-BLGD: Armijo backtracking from eta0 = 1) and objective clip C_obj = 1 were
set for other data.  On rows of norm <= R (R = 1 after the row map) the mean
logistic objective with L2 strength mu is beta-smooth with
``beta = R^2 / 4 + mu``, its mean gradient has norm <= ``G = R`` (|l'| <= 1)
and ``G0 = R / 2`` at w = 0 (|l'(0)| = 1/2).  So:

* C_obj = ``l(-G R^2 / beta)`` = ``log(1 + e^4)`` = 4.02 (mu -> 0): the loss of an
  example whose margin fell by ``R G / beta``, the longest step the smoothness
  bound ever calls optimal along a unit direction (below), so that no
  example's loss is clipped flat by one such step from w = 0.  With C_obj = 1
  (= l(-0.54)) the minority class of a9a (24 %) is clipped flat after the
  first step, the clipped objective then rises along every descent direction,
  and DP-AGD's noisy min picks step 0 on every later iteration (and DP-BLGD's
  Armijo search fails): both predicted the majority class at every epsilon.
  (C_obj = l(-2) = 2.13 still left w8a's 3 % minority class flat.)
* DP-AGD's largest step ``step_max = G / beta`` (4 for mu -> 0): along a unit
  direction ``u`` the smoothness bound ``f(w - s u) <= f(w) - s g.u + beta s^2 / 2``
  is least at ``s = g.u / beta <= G / beta``; the grid keeps 21 equally spaced
  candidates in [0, step_max], and its every-10-iterations shrinking is
  capped at this initial step_max (the code's ``min(1.1 max, 2.0)`` with 2.0
  its initial value).
* DP-BLGD's backtracking grid ``eta0 b^k``, k < m: m = 20 candidates (was 10;
  under the paper's SVT analysis a search costs the same for any m) and
  ``eta0 = 2 (1 - a) / (beta b^(m - 1))`` = 278 (Armijo constant a = 0.5,
  factor b = 0.8): the smoothness bound accepts every step
  ``eta <= 2 (1 - a) / beta`` (= 4), so the grid's smallest candidate is a step
  the bound guarantees, and the larger ones (up to 69 times more) let the
  search take the long steps that the flat directions of unit-norm rows
  accept (a9a, w8a: curvature far below beta).  eta0 = 1 stopped at
  ||w|| ~ 1.8 even without noise; eta0 = 29.8 (m = 10) took its largest step
  on every iteration of w8a and stayed at the majority class.

With this grid the full-batch solvers run 100 nominal iterations (epochs =
100: the cap rho is split over 100 iterations, refinements end the run
earlier) instead of the adaptive line searches' 40: on a9a, phishing,
mushrooms, w8a and the held-out BANK (3 seeds, 5 epsilons) 100 gained on
38 of 50 (solver, data, epsilon) cells, mean +0.25 points, worst -0.6.

These read only R = 1, mu (public) and the search's constants; the
mechanisms are unchanged (what is drawn is what is accounted).

The noise-dominated regime of DP-AGD and DP-BLGD
------------------------------------------------
A full-batch run releases the clipped gradient sum with Gaussian noise; at
zCDP ``rho / T`` per release the noise of the mean gradient has norm about
``C sqrt(T d / (2 rho)) / n = C sqrt(T / 2) / s`` with the public index
``s = n sqrt(rho) / sqrt(d)`` (:func:`full_batch_noise_index`; rho from
(epsilon, delta) by Bun & Steinke's conversion, d counting the intercept).
At T = 100 and s < 50 that noise is above 0.14 C, more than a quarter of
the signal of C = 1 at w = 0 (the mean gradient there has norm <= 1/2): the
run is noise-dominated.  There (``s < NOISE_INDEX_THRESHOLD = 50``) both
solvers take the DP-SGD rule's clip C = 0.3 -- the badly fitted examples are
clipped to a common length and the noise falls 3.3-fold -- and DP-BLGD, whose
Armijo tests need a gradient accurate enough to accept a step, 40 nominal
iterations instead of 100 (2.5 times the budget per release); DP-AGD, which
refines a gradient that fails its test and ends early, keeps 100.  Above the
threshold nothing changes: at large epsilon C = 0.3 biases the gradient
(DP-AGD on a9a at epsilon = 8 stayed at the majority class).  At epsilon =
0.1 (delta = 1e-5) s is 15.7 for phishing, 9.0 for mushrooms, 43 for a9a and
34 for w8a; 45 for mushrooms at epsilon = 0.5.
Evidence (10 seeds): docs/defaults.md and
benchmarks/derive_line_search_small_eps.py.

Output and objective perturbation
---------------------------------
These release one perturbed minimiser, whose noise shrinks with the L2
strength (output perturbation's sensitivity is ``2 / (n alpha)``), so their
``alpha`` is the bias-variance knob.  On a9a, phishing and mushrooms the best
alpha followed ``kappa sqrt(d) / (n epsilon)`` over epsilon in {0.1, 1, 8}
(kappa 3 to 11 for output, 0.6 to 3 for objective perturbation), with
output perturbation saturating at about 1e-3:

    output:    alpha = max(5 sqrt(d) / (n epsilon), 1e-3)
    objective: alpha = 2 sqrt(d) / (n epsilon)

(a9a at epsilon = 1: output 82.9 % with 1e-3 against 67.1 % with the old 1e-4).

The DP-SCD rules (``solver="dpscd"`` and ``"seq_dpscd"``)
---------------------------------------------------------
Dual coordinate descent moves each dual variable ``alpha_j`` by at most the
clip C per visit, and an example is visited about E times in E epochs.  The
dual optimum of the logistic and hinge losses lies in the box
``alpha_j y_j in [0, 1]`` (the squared loss: ``alpha_j`` = the residual, in
[-2, 2] for targets scaled to [-1, 1]), so a run can reach it from 0 only if

    E C >= 1                                          (reach)

With the subproblem constant sigma' = L and unit rows, an unclipped dual step
is ``kappa / (1 + kappa)`` times the residual, ``kappa = lam n / L``, and the
old default clip ``C = lam n / L`` is that size.  The old defaults
(``lam = 0.1 / n``, L = 1000, E = 10) gave ``E C = 1e-3``: every alpha_j
stayed near 0, ``theta = v / (lam n)`` was the sum ``sum_j alpha_j x_j`` of
nearly equal dual variables, which points towards the majority class
(phishing, a9a: the majority class even at epsilon = inf).  The dual rule
takes the DP-SGD rule's lot and epochs and the least lam that reaches:

    L = the DP-SGD lot,  E = clip(round(20 epsilon), 5, 80)
    lam = L / (E n)   (kappa = 1 / E),   C = lam n / L = 1 / E

The noise on theta does not depend on lam: one step adds ``sigma C`` to v, so
``sigma C / (lam n) = sigma / L`` to theta, as DP-SGD with step 1 and lot L.
kappa E in {0.5, 1, 2} and C in {kappa, 0.3 kappa} were compared on phishing,
a9a, mushrooms, german.numer and heart (epsilon 0.1, 1, 8): kappa E = 1 and
C = kappa were within 1.3 points of the best cell everywhere except heart at
epsilon = 1 (3.6 points); the constant 1 is the reach bound, not a fit.

seqDP-SCD's updates of a batch are sequential, so its sensitivity is
``2 C sqrt(L (L + 1))`` (about 2 C L) against a signal of at most L C per
step: the noise-to-signal ratio of a step does not fall with L, while the
sampling rate L/n raises sigma.  Its rule takes L = 1, the epochs above,
``C = 1 / E`` (reach) and

    lam n = clip(SEQ_LAM_N epsilon^(-3/2), 1, n),   SEQ_LAM_N = 1000

with sigma' = 1 an unclipped step is ``lam n / (1 + lam n)`` of the
residual, and a larger ``lam n`` makes the dual optimum ``v* = lam n theta*``
larger against a noise on v that does not depend on lam, at the price of the
regularisation bias: the best ``lam n`` fell from >= 1000 at epsilon = 1 to
about 30 at epsilon = 8 on phishing, mushrooms and a9a (measured, see
docs/defaults.md; the constant and exponent were chosen on those three sets).

Everything here is a pure function: no data, no randomness.
"""

import math
import numbers

__all__ = ["default_alpha", "dpsgd_defaults", "multiclass_noise_factor", "multiclass_noise_power",
           "perturbation_alpha",
           "solver_defaults", "line_search_options", "logistic_smoothness",
           "full_batch_noise_index", "NOISE_INDEX_THRESHOLD", "NOISY_FULL_BATCH_DEFAULTS",
           "MAX_LEARNING_RATE", "CLIP", "SOLVER_DEFAULTS", "dual_scd_defaults", "default_epochs",
           "SEQ_LAM_N"]

#: eta_max per loss: 2/beta for the logistic loss (beta = 1/4 on rows of norm <= 1),
#: 1/beta for the squared loss (beta = 1; at 2/beta its noise does not decay), and 4 for
#: the non-smooth hinge loss.
MAX_LEARNING_RATE = {"logistic": 8.0, "multinomial": 8.0, "hinge": 4.0, "squared": 1.0}

_BATCH = 256
_MIN_EPOCHS, _MAX_EPOCHS = 5, 80
_LARGE_N = 65536
_STEP_FRACTION = 0.3
#: H_min: the least total step H = s T of the logistic rule when d <= n (see min_total_step)
MIN_TOTAL_STEP = 100.0

#: Clip C of the private DP-SGD rule per loss (1 where not listed). The step
#: is eta = s / C, so eta * C = s, the rule's step (see the module docstring).
CLIP = {"logistic": 0.3, "multinomial": 0.3}


def default_alpha(n_samples):
    """``0.1 / n``: scikit-learn's ``C = 10`` in fastdp's 1/n-averaged objective."""
    return 0.1 / float(n_samples)


def default_epochs(epsilon):
    """``clip(round(20 epsilon), 5, 80)`` epochs (80 at ``epsilon = inf``): the DP-SGD rule's."""
    eps = float(epsilon)
    if not math.isfinite(eps):
        return float(_MAX_EPOCHS)
    return float(min(_MAX_EPOCHS, max(_MIN_EPOCHS, round(20.0 * eps))))


#: lam n of the seqDP-SCD rule at epsilon = 1 (see "The DP-SCD rules" in the module docstring)
SEQ_LAM_N = 1000.0


def dual_scd_defaults(solver, n_samples, epsilon, batch_size=None, epochs=None):
    """The DP-SCD rule: lot, epochs, L2 strength and clip of ``"dpscd"`` / ``"seq_dpscd"``.

    Parameters
    ----------
    solver : {"dpscd", "seq_dpscd"}
    n_samples : int
        n (public).
    epsilon : float
        The target epsilon (``inf``: the rule's epsilon -> inf limit).
    batch_size, epochs : optional
        The user's L and E when set (the rule's lam and C then follow them).

    Returns
    -------
    dict
        ``batch_size``, ``epochs``, ``alpha`` (lam) and ``clip``.  Dual DP-SCD:
        ``lam = L / (E n)`` and ``C = lam n / L = 1 / E``; seqDP-SCD: L = 1,
        ``lam n = clip(SEQ_LAM_N epsilon^(-3/2), 1, n)``, ``C = 1 / E``.  See the module docstring.
    """
    n = int(n_samples)
    if solver == "seq_dpscd":
        L = 1 if batch_size is None else int(batch_size)
    else:
        L = default_batch_size(n) if batch_size is None else int(batch_size)
    E = default_epochs(epsilon) if epochs is None else float(epochs)
    if solver == "seq_dpscd":
        eps = float(epsilon)
        lam_n = SEQ_LAM_N * eps ** -1.5 if math.isfinite(eps) else 1.0
        lam_n = min(max(lam_n, 1.0), float(n))
        return {"batch_size": L, "epochs": E, "alpha": lam_n / n, "clip": 1.0 / E}
    return {"batch_size": L, "epochs": E, "alpha": L / (E * n), "clip": 1.0 / E}


def default_batch_size(n_samples):
    """Expected lot size L: 256, at most ``n // 4`` (and >= 1), ``sqrt(n)`` above 65 536."""
    n = int(n_samples)
    if n > _LARGE_N:
        return int(math.isqrt(n))
    return max(1, min(_BATCH, n // 4))


#: Defaults of the accelerated and line-search solvers for the logistic loss
#: at a finite epsilon (see the module docstring); aliases included.
_MOMENTUM = {"clip": 0.3, "epochs": 3.0}
_ADAPTIVE_LINE_SEARCH = {"clip": 1.0, "epochs": 40.0}
#: DP-BLGD and DP-AGD (full batch): 100 nominal iterations with the step-grid rule below
_FULL_BATCH_LINE_SEARCH = {"clip": 1.0, "epochs": 100.0}
SOLVER_DEFAULTS = {
    "dp_gd_laplace": {"clip": 0.3},
    "dp_heavy_ball": _MOMENTUM, "heavy_ball": _MOMENTUM,
    "dp_nesterov": _MOMENTUM, "nag": _MOMENTUM,
    "dp_masg": _MOMENTUM, "masg": _MOMENTUM,
    "dp_blsgd_adaptive": _ADAPTIVE_LINE_SEARCH, "dp_blsgd_ac": _ADAPTIVE_LINE_SEARCH,
    "dp_blgd": _FULL_BATCH_LINE_SEARCH, "dpagd": _FULL_BATCH_LINE_SEARCH,
    "dp_agd": _FULL_BATCH_LINE_SEARCH,
}


def solver_defaults(solver, loss, epsilon, n_samples=None, n_features=None, rho=None):
    """Default ``clip`` and ``epochs`` of an accelerated or line-search solver.

    Parameters
    ----------
    solver : str
        The estimator's ``solver`` name.
    loss : str
        The estimator's loss.
    epsilon : float
        The target epsilon.
    n_samples, n_features : int, optional
        n and d (public; d counts the intercept column).  With ``rho`` they
        select DP-AGD's and DP-BLGD's noise-dominated regime
        (:func:`full_batch_noise_index`); without them the regime is not
        applied.
    rho : float, optional
        The zCDP budget both solvers spend at the target (epsilon, delta):
        :func:`fastdp.privacy.zcdp.bun_steinke_rho`, computed by the caller
        (this foundations module does not import the privacy layer).

    Returns
    -------
    dict
        The settings the rule fixes (a subset of ``clip`` and ``epochs``);
        empty for other solvers, other losses and ``epsilon = inf``, which
        keep the solver's own defaults.
    """
    if loss != "logistic" or not math.isfinite(float(epsilon)):
        return {}
    if (solver in NOISY_FULL_BATCH_DEFAULTS and None not in (n_samples, n_features, rho)
            and full_batch_noise_index(n_samples, n_features, rho)
            < NOISE_INDEX_THRESHOLD):
        return dict(NOISY_FULL_BATCH_DEFAULTS[solver])
    return dict(SOLVER_DEFAULTS.get(solver, {}))


#: DP-AGD and DP-BLGD below the threshold: clip 0.3 (the DP-SGD rule's logistic clip);
#: DP-BLGD also 40 nominal iterations (the adaptive line searches'), DP-AGD keeps 100
#: (see "The noise-dominated regime" above)
_NOISY_AGD = {"clip": 0.3, "epochs": 100.0}
_NOISY_BLGD = {"clip": 0.3, "epochs": 40.0}
NOISY_FULL_BATCH_DEFAULTS = {"dpagd": _NOISY_AGD, "dp_agd": _NOISY_AGD, "dp_blgd": _NOISY_BLGD}
#: s below which a full-batch run is noise-dominated: the noise of one of 100 releases is
#: above 0.14 C, more than a quarter of the signal at C = 1 (see the module docstring)
NOISE_INDEX_THRESHOLD = 50.0


def full_batch_noise_index(n_samples, n_features, rho):
    """``s = n sqrt(rho) / sqrt(d)``: signal-to-noise index of a full-batch private run.

    ``rho`` is the zCDP budget of the run's ``(epsilon, delta)``, Bun & Steinke's
    conversion that DP-AGD and DP-BLGD spend
    (:func:`fastdp.privacy.zcdp.bun_steinke_rho`, computed by the caller).  A
    Gaussian release of the mean clipped gradient at zCDP ``rho / T`` has noise of
    norm about ``C sqrt(T d / (2 rho)) / n`` = ``C sqrt(T / 2) / s``: with T = 100
    nominal iterations it is ``7.07 C / s``.  Only public quantities enter (n, d,
    epsilon, delta).
    """
    return float(n_samples) * math.sqrt(float(rho)) / math.sqrt(max(float(n_features), 1.0))


def logistic_smoothness(mu=0.0, row_bound=1.0):
    """``beta = R^2 / 4 + mu``: smoothness of the mean L2-regularised logistic objective.

    Rows of norm <= R (public bound; 1 after the estimator's row map) and L2
    strength ``mu`` (the objective's ``mu/2 ||w||^2``).
    """
    return float(row_bound) ** 2 / 4.0 + float(mu)


#: Backtracking constants of the line searches (BlsgdSettings' defaults, written out
#: again so that this module stays free of solver imports; a test checks they agree).
_ARMIJO = {"armijo_alpha": 0.5, "beta": 0.8}
#: DP-BLGD's default number of backtracking candidates under the rule (its own: 10).
BLGD_MAX_IT = 20


def _real_in(value, low, high):
    """True when ``value`` is a real number in the open interval (low, high)."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and low < float(value) < high)


def line_search_options(solver, loss, alpha, options=None, row_bound=1.0):
    """Default step grid and objective clip of DP-AGD and DP-BLGD for the logistic loss.

    Parameters
    ----------
    solver : str
        The estimator's ``solver`` name.
    loss : str
        The estimator's loss.
    alpha : float
        The L2 strength mu (public).
    options : dict, optional
        The user's ``solver_options``: the Armijo constants ``armijo_alpha``,
        ``beta`` and ``max_it`` are read from them when given.
    row_bound : float, default 1
        R, the public bound on a row's L2 norm (1 after the row map).

    Returns
    -------
    dict
        ``solver_options`` defaults (an explicit option always wins):
        ``{"c_obj", "step_max"}`` for ``"dpagd"``/``"dp_agd"``,
        ``{"c_obj", "max_it", "eta0"}`` for ``"dp_blgd"``; empty for other solvers and
        losses.  See the module docstring for the derivation.
    """
    if loss != "logistic" or solver not in ("dpagd", "dp_agd", "dp_blgd"):
        return {}
    options = {} if options is None else options
    R = float(row_bound)
    beta = logistic_smoothness(alpha, R)
    out = {"c_obj": math.log1p(math.exp(R * R / beta))}     # l(-R G / beta), G = R
    if solver == "dp_blgd":
        a = options.get("armijo_alpha", _ARMIJO["armijo_alpha"])
        b = options.get("beta", _ARMIJO["beta"])
        m = options.get("max_it", BLGD_MAX_IT)
        if not (_real_in(a, 0.0, 1.0) and _real_in(b, 0.0, 1.0) and isinstance(m, numbers.Integral)
                and not isinstance(m, bool) and 1 <= m <= 10**4):
            return out      # invalid user constants: the solver's validation refuses them
        m = int(m)
        out["max_it"] = m
        out["eta0"] = float(2.0 * (1.0 - a) / (beta * b ** (m - 1)))
    else:
        out["step_max"] = R / beta                                     # G / beta, G = R
    return out


def multiclass_noise_factor(n_classes):
    """``kappa_K = 2 sqrt(ln K)``: the margin-noise inflation of a K-class multinomial model.

    A class pair's margin ``(w_k - w_j) . x`` carries the noise of two weight
    vectors (``sqrt 2``), and the prediction is an argmax over K noisy scores,
    whose expected maximum noise is at most ``sqrt(2 ln K)`` standard
    deviations.  The multiclass rule runs the binary rule at ``epsilon /
    kappa_K ** p`` with ``p = min(1, d / n)`` (:func:`multiclass_noise_power`;
    p = 1 at every d until issue 32; see the module docstring).
    """
    K = int(n_classes)
    if K < 3:
        raise ValueError(f"the multiclass factor is defined for K >= 3 classes; got {K}.")
    return 2.0 * math.sqrt(math.log(K))


def multiclass_noise_power(n_samples, n_features):
    """``p = min(1, d / n)``: the power of kappa_K that divides the multiclass rule's epsilon.

    Parameters
    ----------
    n_samples : int
        n (public).
    n_features : int or None
        d (public: the row width, intercept column included); None gives 1 (the rule
        before issue 32, as :func:`min_total_step` gives no floor without d).

    Returns
    -------
    float
        ``min(1, d / n)``: 0 for few features (the total step at epsilon), 1 where
        d >= n (at epsilon / kappa_K: with d >= n the model can fit the noise of the
        private gradients, the same argument as the floor's ``min(1, n / d)``).  Chosen
        leave-one-dataset-out among p in {1, 1/2, 0, min(1, d/n)} (docs/defaults.md).
    """
    if n_features is None:
        return 1.0
    n, d = int(n_samples), int(n_features)
    if n < 1:
        return 1.0
    return min(1.0, max(d, 0) / n)


def min_total_step(n_samples, n_features, loss):
    """``H_min = 100 min(1, n / d)``: the floor of the logistic rule's total step ``H = s T``.

    Parameters
    ----------
    n_samples : int
        n (public).
    n_features : int or None
        d (public: the width of the rows the solver reads, the intercept column
        included); None gives no floor (0).
    loss : str
        The floor is set for the binary ``"logistic"`` loss; 0 for the others
        (``"multinomial"`` included: measured, it lowered the multiclass tasks).

    Returns
    -------
    float
        ``MIN_TOTAL_STEP * min(1, n / d)``, or 0.  See the module docstring
        ("The small-budget floor").
    """
    if n_features is None or loss != "logistic":
        return 0.0
    n, d = int(n_samples), int(n_features)
    if n < 1 or d < 1:
        return 0.0
    return MIN_TOTAL_STEP * min(1.0, n / d)


def dpsgd_defaults(n_samples, epsilon, loss, n_classes=2, n_features=None):
    """The DP-SGD defaults for ``n_samples`` public examples at ``epsilon``.

    Parameters
    ----------
    n_samples : int
        n (public).
    epsilon : float
        The target epsilon (> 0; ``inf`` gives the epsilon -> inf limit of the rule).
    loss : {"logistic", "multinomial", "hinge", "squared"}
    n_classes : int, default 2
        K (public: the label set), read for the ``"multinomial"`` loss only
        (one K-class model; K >= 3).
    n_features : int, optional
        d (public: the row width the solver reads, intercept column included),
        read by the small-budget floor :func:`min_total_step` of the binary
        logistic loss and by :func:`multiclass_noise_power`; None: no floor and
        p = 1 (the rules before issue 17's follow-up and issue 32).

    Returns
    -------
    dict
        ``batch_size`` (int), ``epochs`` (float), ``learning_rate`` (float),
        ``clip`` (float).
    """
    n = int(n_samples)
    L = default_batch_size(n)
    eps = float(epsilon)
    epochs = float(min(_MAX_EPOCHS, max(_MIN_EPOCHS, round(20.0 * eps)))) \
        if math.isfinite(eps) else float(_MAX_EPOCHS)
    eta_max = MAX_LEARNING_RATE[loss]
    if loss == "multinomial" and math.isfinite(eps) and int(n_classes) >= 3:
        # the class-pair rule: each pair sees 2/K of a lot, so a lot of K/2 binary lots
        # keeps the binary rule's lot per pair; a pair's step is 2/K of the update, so the
        # cap on the update is K/2 times the binary cap.  The total step is the binary
        # rule's at eps / kappa_K ** min(1, d / n) (issue 32: dividing eps by kappa_K
        # under-trained low-dimensional data; chosen leave-one-dataset-out, docs/defaults.md).
        K = int(n_classes)
        L = max(1, min(L * K // 2, n // 4))
        eps = eps / multiclass_noise_factor(K) ** multiclass_noise_power(n, n_features)
        eta_max = 0.5 * K * eta_max
    if math.isfinite(eps):
        # the nominal total step H = s E n / L is 0.3 eps n, at least H_min (the floor;
        # where it does not act the step is computed exactly as without it)
        step = _STEP_FRACTION * eps * L / epochs
        floor = min_total_step(n, n_features, loss)
        if floor > _STEP_FRACTION * eps * n:
            step = floor * L / (epochs * n)
        step = min(step, eta_max)
    else:
        step = eta_max
    clip = CLIP.get(loss, 1.0) if math.isfinite(eps) else 1.0
    return {"batch_size": L, "epochs": epochs, "learning_rate": step / clip, "clip": clip}


def perturbation_alpha(n_samples, n_features, epsilon, solver):
    """Default L2 strength of output (``"output"``) or objective (``"objective"``) perturbation.

    Parameters
    ----------
    n_samples, n_features : int
        n and d (public; d counts the intercept column).
    epsilon : float
        Target epsilon; ``inf`` gives :func:`default_alpha`.
    solver : {"output", "objective"}

    Returns
    -------
    alpha : float
    """
    eps = float(epsilon)
    if not math.isfinite(eps):
        return default_alpha(n_samples)
    scaled = math.sqrt(float(n_features)) / (float(n_samples) * eps)
    if solver == "output":
        return max(5.0 * scaled, 1e-3)
    return 2.0 * scaled
