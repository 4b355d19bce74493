"""Checks of the values in X: finite everywhere, and not empty.

The error messages name the first offending row (for the data owner, not for
publication).
"""

import numpy as np

from fastdp._validation.blocks import _row_blocks
from fastdp.exceptions import ValidationError


def _first_bad_row_message(bad_rows, what):
    first = int(bad_rows[0])
    return (
        f"X contains {what} in {len(bad_rows)} row(s) (first: row {first}). "
        "Remove or impute these values before fitting (for example with "
        "sklearn.impute.SimpleImputer or by dropping the rows)."
    )


def _reject_non_finite_dense(X):
    finite = np.isfinite(X)
    if finite.all():
        return
    bad_rows = np.flatnonzero(~finite.all(axis=1))
    what = "NaN" if np.isnan(X[bad_rows[0]]).any() else "infinity"
    raise ValidationError(_first_bad_row_message(bad_rows, what))


def _reject_non_finite_csr(X):
    data = X.data
    bad = []  # positions of non-finite values, block by block (bounded temporaries)
    for r0, r1 in _row_blocks(X.indptr):
        k0, k1 = int(X.indptr[r0]), int(X.indptr[r1])
        finite = np.isfinite(data[k0:k1])
        if not finite.all():
            bad.append(k0 + np.flatnonzero(~finite))
    if not bad:
        return
    bad_positions = np.concatenate(bad)
    bad_rows = np.unique(np.searchsorted(X.indptr, bad_positions, side="right") - 1)
    what = "NaN" if np.isnan(data[bad_positions[0]]) else "infinity"
    raise ValidationError(_first_bad_row_message(bad_rows, what))


def _reject_empty(shape):
    n_samples, n_features = shape
    if n_samples == 0:
        raise ValidationError(
            f"X has shape {shape}: it has no examples (0 rows). Pass at least one "
            "example; check that filtering or splitting did not remove them all."
        )
    if n_features == 0:
        raise ValidationError(
            f"X has shape {shape}: it has no features (0 columns). Pass at least one "
            "feature column."
        )
