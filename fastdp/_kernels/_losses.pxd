# cython: language_level=3
"""The GLM losses of the compiled kernels: one definition, cimported by every kernel.

``from fastdp._kernels._losses cimport ...`` gives the loss code (the C enum
:data:`LossCode`, which Python sees as the ``IntEnum``
``fastdp._kernels._losses.LossCode``; ``fastdp.losses.Loss.code`` maps each
loss object to it) and, per loss, inline ``nogil`` functions of the
prediction ``z = x^T theta`` and the label ``y`` (``+-1`` for logistic and
hinge):

=========  ===================  ===========================  ===========================
code       loss(z, y)           d loss / dz                  dual coordinate step
=========  ===================  ===========================  ===========================
SQUARED    (z - y)^2 / 2        z - y                        closed form
LOGISTIC   log(1 + exp(-y z))   -y / (1 + exp(y z))          one Newton step, then the box
HINGE      max(0, 1 - y z)      -y if y z < 1, else 0        exact minimiser in the box
=========  ===================  ===========================  ===========================

The numpy versions of the same formulas are :mod:`fastdp.losses` (the only
Python implementation); ``_losses.pyx`` exposes these compiled ones to the
tests that compare the two.
"""
from libc.math cimport INFINITY, copysign, exp, log, log1p


cpdef enum LossCode:
    SQUARED = 0        # squared loss (ridge regression)
    LOGISTIC = 1       # logistic loss (logistic regression)
    HINGE = 2          # hinge loss (linear SVM)


cdef inline bint is_loss_code(long code) noexcept nogil:
    return code == SQUARED or code == LOGISTIC or code == HINGE


cdef inline double loss_value(int loss, double z, double y) noexcept nogil:
    """loss(z, y); the logistic loss in the overflow-free form
    ``log1p(exp(-t))`` for ``t = y z >= 0``, ``-t + log1p(exp(t))`` below."""
    cdef double t, r
    if loss == SQUARED:
        r = z - y
        return 0.5 * r * r
    t = y * z
    if loss == LOGISTIC:
        if t >= 0.0:
            return log1p(exp(-t))
        return -t + log1p(exp(t))
    r = 1.0 - t
    return r if r > 0.0 else 0.0


cdef inline double loss_derivative(int loss, double z, double y) noexcept nogil:
    """d loss(z, y) / dz: squared ``z - y``; logistic ``-y / (1 + exp(y z))``;
    hinge ``-y`` if ``y z < 1`` else 0 (the subgradient 0 at the kink)."""
    cdef double yz, e
    if loss == SQUARED:
        return z - y
    yz = y * z
    if loss == LOGISTIC:
        if yz > 0.0:
            e = exp(-yz)
            return -y * e / (1.0 + e)
        return -y / (1.0 + exp(yz))
    if yz < 1.0:
        return -y
    return 0.0


cdef inline double clamp(double x, double lo, double hi) noexcept nogil:
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


cdef inline double dual_coordinate_step(int loss, double alpha_j, double y_j, double m_j,
                                        double s_j, double box_eps) noexcept nogil:
    """Closed-form minimiser zeta of the local SDCA subproblem ``N G*_j`` (spec 000
    section 2.1), before any scaling.

    ``alpha_j`` is the dual coordinate, ``m_j = x_j^T v / (lam N)`` the margin,
    ``s_j = sigma' ||x_j||^2 / (lam N)``; logistic and hinge work in the box
    ``alpha y in [box_eps, 1 - box_eps]`` (``alpha_j`` projected into it first).
    """
    cdef double ya          # alpha_j y_j projected into the box
    cdef double a_t         # the projected alpha_j
    cdef double z_hat       # unconstrained step from a_t
    cdef double g, h, p     # logistic: gradient, curvature, probability
    if loss == SQUARED:
        return (y_j - m_j - alpha_j) / (1.0 + s_j)
    ya = clamp(y_j * alpha_j, box_eps, 1.0 - box_eps)
    a_t = y_j * ya
    if loss == HINGE:
        if s_j > 0.0:
            z_hat = (y_j - m_j) / s_j
        elif y_j != m_j:
            z_hat = copysign(INFINITY, y_j - m_j)
        else:
            z_hat = 0.0
    else:
        p = ya
        g = y_j * log(p / (1.0 - p)) + m_j
        h = 1.0 / (p * (1.0 - p)) + s_j
        z_hat = -g / h
    return y_j * clamp(y_j * (a_t + z_hat), box_eps, 1.0 - box_eps) - a_t
