"""Exception types raised by fastdp.

Every error caused by what the user passed in is a :class:`ValidationError`,
which subclasses :class:`ValueError` so that generic ``except ValueError``
handlers (and scikit-learn's estimator checks) keep working.
"""

import fastdp._import_check  # noqa: F401,E402  (a clear error for a namespace 'fastdp')

__all__ = [
    "FastDPError",
    "ValidationError",
    "LibsvmParseError",
    "PrivacyAnalysisError",
    "BudgetExceededError",
    "DatasetNotFoundError",
]


class FastDPError(Exception):
    """Base class of every exception fastdp raises on purpose."""


class ValidationError(FastDPError, ValueError):
    """Input data or parameters are invalid; the message says what to do."""


class LibsvmParseError(ValidationError):
    """A LIBSVM/svmlight file is malformed.

    Attributes
    ----------
    line_number : int
        1-based number of the offending line in the (decompressed) file.
    """

    def __init__(self, message, line_number):
        super().__init__(f"line {line_number}: {message}")
        self.line_number = line_number


class PrivacyAnalysisError(FastDPError, ValueError):
    """A combination of privacy events that no sound analysis covers."""


class BudgetExceededError(FastDPError, RuntimeError):
    """Running the requested mechanism would exceed the privacy budget.

    Raised *before* anything is released, so nothing has been spent.
    """


class DatasetNotFoundError(FastDPError, FileNotFoundError):
    """A named real dataset could not be found; the message lists where fastdp looked."""


class WeakPrivacyWarning(UserWarning):
    """The requested guarantee is legal but weak, e.g. delta >= 1/n, which permits
    releasing one whole example."""
