"""Moved to :mod:`fastdp.privacy.filters` (issue 19: privacy filters live in the privacy layer).

The running RDP budget of DP-BLSGD is :class:`fastdp.privacy.filters.RdpBudgetFilter`;
this module only keeps the old import path working.
"""

from fastdp.privacy.filters import (  # noqa: F401  (old import path)
    AMPLIFICATIONS,
    RdpBudgetFilter,
    paper_orders,
    rdp_poisson_tight_all,
)

__all__ = ["AMPLIFICATIONS", "RdpBudgetFilter", "paper_orders", "rdp_poisson_tight_all"]
