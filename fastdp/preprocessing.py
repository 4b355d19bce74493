"""Preprocessing, with what each step means for privacy.

DP guarantees in fastdp hold for neighbouring datasets that differ in one
example (row of ``X`` and its label). A preprocessing step keeps a mechanism's
guarantee when it is applied to each example *on its own*, with parameters that
do not depend on the data: then neighbouring datasets stay neighbours after the
step, and the mechanism's analysis applies unchanged. Such steps spend no
privacy budget and release nothing.

* :func:`normalize_rows` and :func:`clip_rows` are per-example maps:
  private-safe, and they give the row-norm bound the mechanisms need.
* :func:`scale_features_public` scales features with bounds the *user* gives
  (public knowledge, e.g. from a data dictionary): private-safe.
* :func:`scale_features_range` maps each feature's declared range onto
  ``[-1, 1] / sqrt(d)``: rows of norm <= 1 that keep the features' scale
  (for few features, where normalising rows discards it): private-safe.
* :func:`paper_preprocess` is the seed-000 (DP-SCD) pipeline: max-abs scaling
  fitted on the data and labels centred by the data's mean. These statistics
  depend on every example, so the pipeline is **not private**: it is there to
  reproduce the paper and warns when used.

All functions accept a dense array or a scipy sparse matrix (handled as CSR,
never densified) and return new arrays; the input is not modified.
"""

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fastdp._validation import (_row_blocks, check_rows_as_read, check_sparse_structure,
                               stored_kernel_sq_norms)
from fastdp.exceptions import ValidationError

__all__ = [
    "row_norms",
    "normalize_rows",
    "clip_rows",
    "scale_features_public",
    "scale_features_range",
    "paper_preprocess",
    "PaperPreprocessed",
    "NotPrivateWarning",
]


class NotPrivateWarning(UserWarning):
    """A step fitted on the private data ran: its output is not differentially private."""


def _as_float_matrix(X, name="X"):
    """Dense float ndarray or CSR copy-free view of X; rejects NaN/inf."""
    if sp.issparse(X):
        check_sparse_structure(X)  # before scipy converts it: scipy trusts the index arrays
        check_rows_as_read(X, name)  # so is a binary dataset's trusted structure
        X = X.tocsr()
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        values = X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValidationError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        values = X
    if not np.all(np.isfinite(values)):
        raise ValidationError(f"{name} contains NaN or infinite values; remove or impute them first")
    return X


def _csr_blocks(X):
    """``(r0, r1, row ids relative to r0, float64 values)`` of CSR ``X``, block by block of
    rows (:func:`fastdp._validation._row_blocks`): bounded temporaries, and every row's
    values in one block, in storage order."""
    for r0, r1 in _row_blocks(X.indptr):
        k0, k1 = int(X.indptr[r0]), int(X.indptr[r1])
        ids = np.repeat(np.arange(r1 - r0), np.diff(np.asarray(X.indptr[r0:r1 + 1])))
        yield r0, r1, ids, np.asarray(X.data[k0:k1], dtype=np.float64)


def _row_max_abs(X):
    """Largest absolute entry of every row (float64; 0 for empty rows)."""
    if sp.issparse(X):
        out = np.zeros(X.shape[0])
        for r0, r1, ids, values in _csr_blocks(X):
            np.maximum.at(out[r0:r1], ids, np.abs(values))
        return out
    return np.abs(X).max(axis=1, initial=0.0).astype(np.float64)


# Sums of squares are exact enough between these row norms; outside them the
# squares overflow or lose precision to underflow, and the row is rescaled.
_SAFE_NORM_RANGE = (1e-150, 1e150)


def _plain_row_norms(X):
    if sp.issparse(X):
        stored = stored_kernel_sq_norms(X)
        if stored is not None:  # a binary dataset: summed in storage order at conversion,
            return np.sqrt(stored)  # the same bits as the bincount below, without a scan
        # bincount sums each row's squares in storage order, so blocks of rows give the
        # bits of one call over all of X, without its O(nnz) temporaries
        out = np.empty(X.shape[0])
        for r0, r1, ids, values in _csr_blocks(X):
            out[r0:r1] = np.sqrt(np.bincount(ids, weights=values**2, minlength=r1 - r0))
        return out
    return np.sqrt(np.einsum("ij,ij->i", X, X, dtype=np.float64))


def _extreme_rows(X, norms):
    """Rows whose plain sum of squares overflowed or lost precision to underflow."""
    low, high = _SAFE_NORM_RANGE
    extreme = ~((norms >= low) & (norms <= high)) & (norms != 0.0)
    zero = np.flatnonzero(norms == 0.0)
    if zero.size:  # only these rows are read (all-zero rows, or squares that underflowed)
        extreme[zero[_row_max_abs(X[zero]) > 0.0]] = True
    return np.flatnonzero(extreme)


def _rescaled_rows(X, rows):
    """Float64 copy of ``X[rows]`` with each row divided by its largest |entry|, and the scales."""
    sub = X[rows]
    scale = _row_max_abs(sub)
    if sp.issparse(sub):
        sub = sp.csr_matrix(sub, dtype=np.float64)
        sub.data = sub.data / np.repeat(scale, np.diff(sub.indptr))
        return sub, scale
    return np.asarray(sub, dtype=np.float64) / scale[:, None], scale


def row_norms(X):
    """L2 norm of every row of a dense array or sparse matrix (float64).

    Ordinary rows use the plain square root of the sum of squares (bit for
    bit what scikit-learn computes); rows whose norm lies outside
    ``[1e-150, 1e150]`` are rescaled by their largest entry first, so that
    neither overflow nor underflow changes the result.

    Privacy: a per-example statistic of the private data; not for release.
    """
    return _checked_row_norms(_as_float_matrix(X))


def _checked_row_norms(X):
    """:func:`row_norms` of a float matrix already checked (dense, or CSR)."""
    norms = _plain_row_norms(X)
    rows = _extreme_rows(X, norms)
    if rows.size:
        sub, scale = _rescaled_rows(X, rows)
        norms[rows] = scale * _plain_row_norms(sub)
    return norms


def _scale_rows(X, factors):
    """New matrix with row i multiplied by factors[i] (same type and dtype)."""
    if sp.issparse(X):
        out = X.copy()
        out.data = (out.data * np.repeat(factors, np.diff(out.indptr))).astype(X.dtype, copy=False)
        return out
    return (X * factors[:, None]).astype(X.dtype, copy=False)


def normalize_rows(X):
    """Scale every row to unit L2 norm (zero rows stay zero).

    Same result as ``sklearn.preprocessing.normalize(X, norm="l2")`` up to the
    last bit of rounding: each row is divided by its norm.

    Privacy: a per-example map with no data-dependent parameters, so it is
    private-safe: neighbouring datasets (one example added, removed or
    replaced) stay neighbouring, and a DP mechanism run on the output keeps its
    guarantee. It spends no budget and releases nothing. It changes the data
    (the direction of each example is kept, its magnitude is discarded).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or sparse matrix

    Returns
    -------
    X_unit : ndarray or csr_matrix, same dtype as ``X`` (float32 or float64)
        Row norms are 1 up to floating-point rounding (a few ulp).
    """
    X = _as_float_matrix(X)
    plain = _plain_row_norms(X)
    norms = np.where(plain == 0.0, 1.0, plain)
    if sp.issparse(X):
        out = X.copy()
        out.data = (out.data / np.repeat(norms, np.diff(out.indptr))).astype(X.dtype, copy=False)
    else:
        out = (X / norms[:, None]).astype(X.dtype, copy=False)
    rows = _extreme_rows(X, plain)
    if rows.size:
        # divide by the largest entry first (exact scale), then by the norm of
        # the rescaled row, which is ordinary: no overflow, no lost precision.
        sub, _ = _rescaled_rows(X, rows)
        sub_norms = _plain_row_norms(sub)
        if sp.issparse(out):
            unit = sp.csr_matrix(sub)
            unit.data = unit.data / np.repeat(sub_norms, np.diff(unit.indptr))
            out = out.tolil()
            out[rows] = unit.astype(X.dtype)
            out = out.tocsr()
        else:
            out[rows] = (sub / sub_norms[:, None]).astype(X.dtype)
    return out


def clip_rows(X, max_norm=1.0):
    """Scale down every row whose L2 norm exceeds ``max_norm``; keep the others.

    Privacy: a per-example map, private-safe *when ``max_norm`` is public*
    (chosen without looking at the data). It spends no budget and releases
    nothing; afterwards every row satisfies ``||x_i|| <= max_norm``, the bound
    the mechanisms' sensitivity analyses use. Unlike :func:`normalize_rows` it
    keeps the magnitude of small examples.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or sparse matrix
    max_norm : float, default=1.0
        Public bound, > 0.

    Returns
    -------
    X_clipped : ndarray or csr_matrix, same dtype as ``X``
        Row norms are at most ``max_norm`` exactly (computed in float64): a
        row that rounding would push above the bound is shrunk by a few ulp.
    """
    if not (np.isscalar(max_norm) and np.isfinite(max_norm) and max_norm > 0):
        raise ValidationError(f"max_norm must be a finite number > 0, got {max_norm!r}")
    X = _as_float_matrix(X)
    norms = row_norms(X)
    factors = np.ones_like(norms)
    over = norms > max_norm
    factors[over] = max_norm / norms[over]
    out = _scale_rows(X, factors)
    for _ in range(8):  # rounding can leave a norm a few ulp above the bound
        still_over = over & (row_norms(out) > max_norm)
        if not still_over.any():
            break
        factors[still_over] = np.nextafter(factors[still_over], 0.0) * (1.0 - 2.0**-50)
        out = _scale_rows(X, factors)
    return out


def _public_bounds(bound, n_features, name):
    bound = np.asarray(bound, dtype=np.float64)
    if bound.ndim == 0:
        bound = np.full(n_features, float(bound))
    if bound.shape != (n_features,):
        raise ValidationError(
            f"{name} must be a number or an array of shape ({n_features},), got shape {bound.shape}"
        )
    if not np.all(np.isfinite(bound)):
        raise ValidationError(f"{name} must be finite")
    return bound


def scale_features_public(X, lower, upper, clip=True):
    """Scale each feature by a public bound: ``x_j / max(|lower_j|, |upper_j|)``.

    With ``clip=True`` values are first clipped to ``[lower_j, upper_j]``, so
    the output lies in ``[-1, 1]`` whatever the data. Zeros stay zeros, so
    sparse input stays sparse.

    Privacy: private-safe **only because the bounds are public**: they must
    come from outside the private data (a data dictionary, the measurement
    range, domain knowledge), never from the data's own minimum or maximum
    (that would be :func:`paper_preprocess`, which is not private). Applied to
    each example on its own, it spends no budget and releases nothing. Rows are
    not normalised: follow with :func:`normalize_rows` or :func:`clip_rows` to
    get the row-norm bound the mechanisms need.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features) or sparse matrix
    lower, upper : float or array of shape (n_features,)
        Public bounds with ``lower <= upper``. For sparse ``X`` they must
        contain 0 (``lower <= 0 <= upper``) so that clipping keeps zeros.
    clip : bool, default=True
        Clip to the bounds before scaling (recommended: a bound that the data
        violate would otherwise break the ``[-1, 1]`` guarantee).

    Returns
    -------
    X_scaled : ndarray or csr_matrix, same dtype as ``X``
    """
    X = _as_float_matrix(X)
    n_features = X.shape[1]
    lower = _public_bounds(lower, n_features, "lower")
    upper = _public_bounds(upper, n_features, "upper")
    if np.any(lower > upper):
        j = int(np.flatnonzero(lower > upper)[0])
        raise ValidationError(f"lower must be <= upper for every feature; feature {j}: {lower[j]} > {upper[j]}")
    if sp.issparse(X) and (np.any(lower > 0) or np.any(upper < 0)):
        raise ValidationError(
            "for sparse X the public bounds must contain 0 (lower <= 0 <= upper), otherwise clipping "
            "would fill in every implicit zero; densify X first if that is what you want"
        )
    scale = np.maximum(np.abs(lower), np.abs(upper))
    scale[scale == 0.0] = 1.0
    if sp.issparse(X):
        out = X.copy()
        columns = out.indices
        values = out.data.astype(np.float64)
        if clip:
            values = np.clip(values, lower[columns], upper[columns])
        out.data = (values / scale[columns]).astype(X.dtype, copy=False)
        return out
    values = np.clip(X, lower, upper) if clip else X
    return (values / scale).astype(X.dtype, copy=False)


def scale_features_range(X, lower, upper):
    """Map each feature's declared range ``[lower_j, upper_j]`` onto ``[-1, 1] / sqrt(d)``.

    ``z_j = (2 (clip(x_j, lower_j, upper_j) - lower_j) / (upper_j - lower_j) - 1) / sqrt(d)``,
    so every row has L2 norm <= 1 whatever the data (``|z_j| <= 1 / sqrt(d)``),
    and, unlike :func:`normalize_rows`, the map keeps where a row lies in
    feature space: two rows on one ray through the origin stay apart.  That is
    what a model on few features needs (with d = 2 a normalised row keeps one
    angle and loses its radius).  Train on the result with ``normalize="clip"``
    (a no-op on these rows) and apply the same map before prediction, e.g. in a
    :class:`sklearn.pipeline.Pipeline` with a
    :class:`~sklearn.preprocessing.FunctionTransformer`.

    Privacy: private-safe **only because the ranges are public**: they must come
    from outside the private data (a data dictionary, the measurement range,
    domain knowledge), never from the data's own minimum or maximum.  Applied
    to each example on its own, it spends no budget and releases nothing.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Dense (the shift to the range's centre fills in zeros; for sparse data
        use :func:`scale_features_public`, which keeps zeros).
    lower, upper : float or array of shape (n_features,)
        Public ranges with ``lower < upper`` for every feature.

    Returns
    -------
    X_scaled : ndarray of shape (n_samples, n_features), float64
    """
    if sp.issparse(X):
        raise ValidationError(
            "scale_features_range shifts every feature to its range's centre, which fills in "
            "the zeros of a sparse X; use scale_features_public (zeros stay zeros) or densify X.")
    X = np.asarray(_as_float_matrix(X), dtype=np.float64)
    d = X.shape[1]
    lower = _public_bounds(lower, d, "lower")
    upper = _public_bounds(upper, d, "upper")
    if np.any(lower >= upper):
        j = int(np.flatnonzero(lower >= upper)[0])
        raise ValidationError(f"lower must be < upper for every feature; feature {j}: "
                              f"{lower[j]} >= {upper[j]}")
    unit = 2.0 * (np.clip(X, lower, upper) - lower) / (upper - lower) - 1.0
    return np.clip(unit, -1.0, 1.0) / np.sqrt(max(d, 1))


@dataclass
class PaperPreprocessed:
    """Output of :func:`paper_preprocess`.

    Attributes
    ----------
    X, y : training data after the pipeline
    X_test, y_test : the test data transformed with the statistics of the
        training data (None when no test data were given)
    max_abs : ndarray of shape (n_features,)
        Per-feature scale fitted on the training data (1 where a column is 0).
    label_offset : float
        Training label mean subtracted from ``y`` (regression), 0 otherwise.
    private : bool
        Always False: the fitted statistics depend on every training example.
    """

    X: object
    y: np.ndarray
    X_test: object
    y_test: object
    max_abs: np.ndarray
    label_offset: float
    private: bool = False


def _max_abs(X):
    if sp.issparse(X):
        result = np.asarray(abs(X).max(axis=0).toarray()).ravel().astype(np.float64)
    else:
        result = np.abs(X).max(axis=0).astype(np.float64) if X.shape[0] else np.zeros(X.shape[1])
    result[result == 0.0] = 1.0
    return result


def _paper_labels(y, task, offset):
    y = np.asarray(y, dtype=np.float64).ravel()
    if task == "regression":
        return y - offset
    values = np.unique(y)
    if np.all(np.isin(values, [0.0, 1.0])):
        return np.where(y == 1.0, 1.0, -1.0)
    if np.all(np.isin(values, [-1.0, 1.0])):
        return y.copy()
    raise ValidationError(f"classification labels must be in {{0, 1}} or {{-1, +1}}, got {values[:5]}")


def paper_preprocess(X, y, task, X_test=None, y_test=None, warn=True):
    """Seed-000 (DP-SCD paper) preprocessing — NOT differentially private.

    As in ``shared/specs/000.md`` section 6.1: each feature is divided by its
    maximum absolute value on the training data (scikit-learn ``MaxAbsScaler``
    fitted on ``X``), then every example is scaled to unit L2 norm; for
    regression the labels are centred by the *training* mean, for
    classification labels {0, 1} are mapped to {-1, +1}. Test data, if given,
    are transformed with the training statistics.

    Privacy: **not private.** ``max_abs`` and the label mean are computed from
    every training example and are not accounted for by any mechanism (the
    paper leaves them out of its analysis too). Use it only to reproduce the
    paper; for a private pipeline use :func:`scale_features_public` with public
    bounds and :func:`normalize_rows`. A :class:`NotPrivateWarning` is emitted
    (``warn=False`` silences it) and the result carries ``private=False``.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    task : {"classification", "regression"}
    X_test, y_test : optional test data, transformed with the training statistics
    warn : bool, default=True

    Returns
    -------
    PaperPreprocessed
    """
    if task not in ("classification", "regression"):
        raise ValidationError(f"task must be 'classification' or 'regression', got {task!r}")
    if warn:
        warnings.warn(
            "paper_preprocess fits max-abs scaling (and the label mean) on the private data: the "
            "result is NOT differentially private. Use scale_features_public + normalize_rows for a "
            "private pipeline.",
            NotPrivateWarning,
            stacklevel=2,
        )
    X = _as_float_matrix(X)
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValidationError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels")
    max_abs = _max_abs(X)
    offset = float(y.mean()) if task == "regression" else 0.0

    def transform(data):
        data = _as_float_matrix(data, "X_test")
        if data.shape[1] != max_abs.shape[0]:
            raise ValidationError(f"X_test has {data.shape[1]} features, X has {max_abs.shape[0]}")
        if sp.issparse(data):
            scaled = data.copy()
            scaled.data = (scaled.data / max_abs[scaled.indices]).astype(data.dtype, copy=False)
        else:
            scaled = (data / max_abs).astype(data.dtype, copy=False)
        return normalize_rows(scaled)

    X_out = transform(X)
    y_out = _paper_labels(y, task, offset)
    X_test_out = transform(X_test) if X_test is not None else None
    y_test_out = _paper_labels(y_test, task, offset) if y_test is not None else None
    return PaperPreprocessed(X_out, y_out, X_test_out, y_test_out, max_abs, offset)


# --------------------------------------------------------------------------
# the estimators' per-example row map (row bound and intercept column)
# --------------------------------------------------------------------------

ROW_BOUNDS = ("normalize", "clip", "reject")
_SAFETY = 1.0 - 2.0**-40  # keeps mapped rows below norm 1 despite rounding
"""How an estimator bounds each row: rescale to norm 1, scale down rows above 1,
or refuse rows above 1 (the rows are then used as they are)."""


@dataclass(frozen=True)
class RowMap:
    """The per-example map an estimator applies to every row, in ``fit`` and in prediction.

    A row ``x`` becomes ``a * [b(x), c]`` where ``b`` is the row bound
    (:func:`normalize_rows`, :func:`clip_rows` to norm 1, or the identity for
    ``"reject"``, whose rows are checked to have norm <= 1), ``c`` the public
    ``intercept_scaling`` of the constant column (absent without intercept)
    and ``a = 1 / sqrt(1 + c^2)`` (1 without intercept), so every mapped row
    has norm at most 1: the bound the mechanisms' sensitivity analyses need.

    A linear model ``theta = [w, w0]`` on mapped rows predicts
    ``a w . b(x) + a c w0 = b(x) . coef + intercept`` with
    ``coef = a w`` and ``intercept = a c w0`` (:meth:`split_coef`), so the
    fitted estimator's ``coef_`` and ``intercept_`` act on the bounded rows
    ``b(x)`` exactly as scikit-learn's linear models act on theirs.

    Privacy: a per-example map whose parameters are public (fixed before the
    data is seen), so neighbouring datasets stay neighbours and it spends no
    privacy (see the module docstring).  The intercept is therefore learnt
    *inside* the same mechanism as the weights, covered by the same event:
    the constant column is one more feature of a row whose norm stays <= 1.

    Parameters
    ----------
    bound : {"normalize", "clip", "reject"}
    fit_intercept : bool
    intercept_scaling : float
        c > 0, public.
    """

    bound: str = "normalize"
    fit_intercept: bool = True
    intercept_scaling: float = 0.5

    def __post_init__(self):
        if self.bound not in ROW_BOUNDS:
            raise ValidationError(f"row bound must be one of {ROW_BOUNDS}; got {self.bound!r}.")
        c = self.intercept_scaling
        if isinstance(c, bool) or not (np.isscalar(c) and np.isreal(c) and np.isfinite(c) and c > 0):
            raise ValidationError(f"intercept_scaling must be a finite number > 0; got {c!r}.")

    @property
    def scale(self):
        """``a = 1 / sqrt(1 + c^2)`` with an intercept, else 1."""
        if not self.fit_intercept:
            return 1.0
        return 1.0 / float(np.hypot(1.0, self.intercept_scaling))

    def bound_rows(self, X):
        """``b(X)``: the rows after the row bound (no intercept column, no scale ``a``)."""
        if self.bound == "normalize":
            return normalize_rows(X)
        if self.bound == "clip":
            return clip_rows(X, 1.0)
        return X

    def bounded_dot(self, X, coef):
        """``b(X) @ coef``: the scores of a linear model on the bounded rows.

        Sparse ``X`` is bounded block by block of rows (each block's copy is
        at most about 2**20 entries), so prediction needs no copy of X; every
        row's score has the bits of ``bound_rows(X) @ coef`` (each row is
        bounded, and its product summed, on its own).  Dense ``X``: one copy.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n_samples, n_features), checked
        coef : ndarray of shape (n_features,) or (n_features, n_outputs)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        if not sp.issparse(X):
            return np.asarray(self.bound_rows(X) @ coef)
        X = X.tocsr()
        coef = np.asarray(coef)
        out = np.empty((X.shape[0],) + coef.shape[1:], dtype=np.result_type(X.dtype, coef.dtype))
        for r0, r1 in _row_blocks(X.indptr):
            out[r0:r1] = np.asarray(self.bound_rows(X[r0:r1]) @ coef)
        return out

    def _row_factors(self, X):
        """Per-row multipliers of ``a [b(x), c]``, a hair below exact so every norm is <= 1.

        The factor ``1 - 2^-40`` absorbs the rounding of the norms (a few ulp)
        so that no mapped row exceeds the bound by rounding; it changes no
        result beyond 1e-12 relative.
        """
        a = self.scale * _SAFETY
        if self.bound == "reject":
            return np.full(X.shape[0], a)
        norms = _checked_row_norms(X)
        if self.bound == "normalize":
            with np.errstate(over="ignore"):
                factors = a / np.where(norms == 0.0, 1.0, norms)
                # the rows are multiplied by the factor rounded to X's dtype: a row of
                # subnormal values needs one beyond that dtype's range (inf, then NaN rows)
                beyond = np.flatnonzero(~np.isfinite(factors.astype(X.dtype)))
            if beyond.size:
                i = int(beyond[0])
                raise ValidationError(
                    f"{beyond.size} rows of X have an L2 norm too small to be normalised in "
                    f"{X.dtype} (row {i}: {norms[i]:.3g}; scaling it to norm 1 overflows "
                    f"{X.dtype}); pass X as float64, rescale the data, or drop those rows.")
            return factors
        return a / np.maximum(norms, 1.0)

    def map_rows(self, X):
        """The mapped rows ``a [b(x), c]`` the solvers train on, without a copy of sparse ``X``.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n_samples, n_features)
            Already checked by :func:`fastdp._validation.check_X` (finite,
            float32/float64, canonical CSR); never modified.

        Returns
        -------
        X_mapped : fastdp._mapped_rows.MappedRows or ndarray
            Sparse ``X``: the rows described by O(n) numbers (one factor per
            row and the constant), read without a copy by DP-SGD, DP-SCD,
            the perturbation, exact, accelerated and line-search solvers;
            written out once (:meth:`~fastdp._mapped_rows.MappedRows.tocsr`)
            only where a run still needs the rows themselves (see
            ``docs/large-data.md``).  Dense ``X``: the mapped array (one copy;
            the solvers convert dense data to CSR anyway).  Every row has L2
            norm <= 1 up to the rounding of the dtype (see :meth:`transform`).
        """
        from fastdp._mapped_rows import MappedRows

        factors = self._row_factors(X)
        constant = self.scale * _SAFETY * self.intercept_scaling if self.fit_intercept else None
        if sp.issparse(X):
            return MappedRows(X.tocsr(), factors, constant)
        n, d = X.shape
        extra = int(self.fit_intercept)
        out = np.empty((n, d + extra), dtype=X.dtype)
        np.multiply(X, factors[:, None].astype(X.dtype), out=out[:, :d])
        if extra:
            out[:, d] = constant
        return out

    def transform(self, X):
        """The mapped rows ``a [b(x), c]`` the solvers train on, written out.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n_samples, n_features)
            Already checked (finite, float32/float64).

        Returns
        -------
        X_mapped : ndarray or csr_matrix of shape (n_samples, n_features + fit_intercept)
            Same dtype as ``X``; one new array of the size of ``X`` (plus one
            entry per row for the intercept column), written in blocks of
            rows, nothing else of size O(nnz).  Every row has L2 norm <= 1 up
            to the rounding of the dtype (float64: exactly; float32: a row can
            exceed 1 by a few 1e-8, which the mechanisms' ``check_X`` scales
            away).
        """
        mapped = self.map_rows(_as_float_matrix(X))
        return mapped.tocsr() if sp.issparse(X) else mapped

    def split_coef(self, theta):
        """``(coef, intercept)`` acting on ``b(x)`` from the coefficients on mapped rows.

        Parameters
        ----------
        theta : ndarray of shape (..., n_features + fit_intercept)

        Returns
        -------
        coef : ndarray of shape (..., n_features)
        intercept : ndarray of shape theta.shape[:-1] (zeros without intercept)
        """
        theta = np.asarray(theta, dtype=np.float64)
        if not self.fit_intercept:
            return _SAFETY * theta, np.zeros(theta.shape[:-1])
        a = self.scale * _SAFETY
        return a * theta[..., :-1], a * self.intercept_scaling * theta[..., -1]

    def to_dict(self):
        """JSON-ready parameters (inverse: ``RowMap(**d)``)."""
        return {"bound": self.bound, "fit_intercept": bool(self.fit_intercept),
                "intercept_scaling": float(self.intercept_scaling)}
