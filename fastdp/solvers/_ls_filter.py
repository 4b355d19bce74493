"""Moved to the privacy layer (issue 19: privacy filters live in the privacy layer).

The zCDP filter is :class:`fastdp.privacy.filters.ZcdpFilter`, the zCDP rules
are :func:`fastdp.privacy.zcdp.zcdp_of` and the cap of an (ε, δ) target is
:func:`fastdp.privacy.zcdp.rho_for_epsilon`; this module only keeps the old
import path working.
"""

from fastdp.privacy.filters import ZcdpFilter  # noqa: F401  (old import path)
from fastdp.privacy.zcdp import rho_for_epsilon as rho_cap_for  # noqa: F401
from fastdp.privacy.zcdp import zcdp_of  # noqa: F401

__all__ = ["zcdp_of", "ZcdpFilter", "rho_cap_for"]
