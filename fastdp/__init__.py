"""fastdp: fast differentially private optimisation.

Compiled kernels (Cython over CSR, numba for dense scalar loops) under a thin
Python layer that does privacy accounting, noise calibration and
scikit-learn-style estimators.
"""

__version__ = "0.1.0.dev0"

from fastdp.exceptions import (  # noqa: F401
    BudgetExceededError,
    DatasetNotFoundError,
    FastDPError,
    LibsvmParseError,
    PrivacyAnalysisError,
    ValidationError,
)
