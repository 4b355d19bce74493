"""Hyper-parameters of DP-BLSGD / DP-BLGD (spec 003 §6.2, §8), validated once.

Defaults are the paper's convex settings and the spec's recommended
decisions; every decision is a switch (see :class:`BlsgdSettings`).
"""

import dataclasses
import functools
import numbers
import types

from fastdp._validation import check_integer, check_real
from fastdp.exceptions import ValidationError
from fastdp.privacy.filters import AMPLIFICATIONS
from fastdp.solvers.line_search.adapt import BUDGET_RULES
from fastdp.solvers.line_search.search import ARMIJO_SCALES

__all__ = ["BlsgdSettings", "MAX_CANDIDATES"]


#: The settings are finite reals and integers >= 1 unless a field says otherwise.
_real = functools.partial(check_real, allow_inf=False)
_integer = functools.partial(check_integer, low=1)


MAX_CANDIDATES = 10**4
"""Most candidate steps of one line search (``max_it``) or step selection
(``n_candidates``): each costs a pass over the batch and a noise draw."""


def _flag(name, value):
    if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
        raise ValidationError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


def _choice(name, value, choices):
    if value not in choices:
        raise ValidationError(f"{name} must be one of {tuple(choices)}; got {value!r}.")
    return value


@dataclasses.dataclass(frozen=True)
class BlsgdSettings:
    """Settings of :func:`fastdp.solvers.line_search.dp_blsgd` (spec 003 names).

    Privacy-relevant
    ----------------
    sample_rate : q of the Poisson batches (paper 0.1; 1 = full batch, no amplification).
    epsilon_iter : per-call budget ε_iter (default ε/100, §4.5).
    epsilon_bt, rho_grad, rho_bt : initial budgets (defaults ε_iter, ε_iter²/2, ε_iter²/2).
    noise : "laplace" (ε_BT, eq. 4) or "gaussian" (ρ_BT, eq. 5) NOISYBTLS.
    c_grad, c_obj : gradient / objective clipping thresholds (paper 3 and 1).
    amplification, check, fixed_order, batch_accounting : see
        :class:`~fastdp.privacy.filters.RdpBudgetFilter` (defaults "zw_general",
        "unamplified", None, "joint"; ``batch_accounting="separate"`` is the paper's
        slightly optimistic per-call amplification).
    svt_analysis : "paper" (Thms 2/3) or "conservative" (pure ε_BT / naive composition).
    normalize : "expected" (divide by the public m = q·n, default) or "actual" (|B|,
        paper-literal; the batch size is then not protected by the analysis).
    budget_filter : "rdp_paper" (default: the paper's running per-order RDP budget,
        :class:`~fastdp.privacy.filters.RdpBudgetFilter`) or "zcdp" (the sound zCDP
        privacy filter :class:`~fastdp.privacy.filters.ZcdpFilter`: cap ρ from (ε, δ), every call
        charged unsampled, the run's event is the cap; ignores ``amplification``,
        ``check``, ``fixed_order``, ``batch_accounting``).

    Algorithm
    ---------
    mu : L2 strength of (μ/2)‖w‖², all coordinates (paper 1e-3).
    eta0, max_it, alpha, beta : backtracking (η0 = 1, 10 candidates, α = 0.5, β = 0.8).
    xi : budget increase rate ξ (0.3). tau, varsigma, eta0_cap : η0 adaptation.
    phi_max, phi_min, psi : CHEB thresholds and angle EMA.
    budget_rule : "adap" (CHEB), "no", "must" (Fig. 1e ablations).
    adaptive_clipping, zeta : the "-AC" variant (C ← (1−ζ)C once per iteration).
    armijo_scale : "mean" (default) or "paper_literal" (§8 A2).
    init : "normal" (N(0, init_scale²)) or "zeros". init_scale : 0.01.
    stop_when_ls_unaffordable : stop once gradient + line search is unaffordable.
    max_iter : optional cap on iterations (None: until the budget is spent).
    """

    sample_rate: float = 0.1
    epsilon_iter: float = None
    epsilon_bt: float = None
    rho_grad: float = None
    rho_bt: float = None
    noise: str = "laplace"
    c_grad: float = 3.0
    c_obj: float = 1.0
    amplification: str = "zw_general"
    check: str = "unamplified"
    fixed_order: int = None
    batch_accounting: str = "joint"
    svt_analysis: str = "paper"
    normalize: str = "expected"
    mu: float = 1e-3
    eta0: float = 1.0
    max_it: int = 10
    alpha: float = 0.5
    beta: float = 0.8
    xi: float = 0.3
    tau: int = 10
    varsigma: float = 1.2
    eta0_cap: str = "current"
    phi_max: float = 1.1
    phi_min: float = 0.5
    psi: float = 0.8
    budget_rule: str = "adap"
    adaptive_clipping: bool = False
    zeta: float = 0.05
    armijo_scale: str = "mean"
    init: str = "normal"
    init_scale: float = 0.01
    stop_when_ls_unaffordable: bool = False
    max_iter: int = None
    budget_filter: str = "rdp_paper"

    def validate(self, epsilon):
        """The checked settings, budget defaults filled from ``epsilon`` (a new instance:
        the settings are frozen)."""
        s = types.SimpleNamespace(**{f.name: getattr(self, f.name)
                                     for f in dataclasses.fields(self)})
        s.sample_rate = _real("sample_rate", s.sample_rate, low=0.0, high=1.0, low_open=True)
        eps_iter = epsilon / 100.0 if s.epsilon_iter is None else s.epsilon_iter
        s.epsilon_iter = _real("epsilon_iter", eps_iter, low=0.0, low_open=True)
        for name, default in (("epsilon_bt", s.epsilon_iter),
                              ("rho_grad", s.epsilon_iter ** 2 / 2.0),
                              ("rho_bt", s.epsilon_iter ** 2 / 2.0)):
            value = getattr(s, name)
            setattr(s, name, _real(name, default if value is None else value, low=0.0,
                                   low_open=True))
        s.noise = _choice("noise", s.noise, ("laplace", "gaussian"))
        s.c_grad = _real("c_grad", s.c_grad, low=0.0, low_open=True)
        s.c_obj = _real("c_obj", s.c_obj, low=0.0, low_open=True)
        s.amplification = _choice("amplification", s.amplification, AMPLIFICATIONS)
        s.check = _choice("check", s.check, ("unamplified", "amplified"))
        if s.fixed_order is not None:
            s.fixed_order = _integer("fixed_order", s.fixed_order, low=2)
        s.batch_accounting = _choice("batch_accounting", s.batch_accounting,
                                     ("separate", "joint"))
        s.svt_analysis = _choice("svt_analysis", s.svt_analysis, ("paper", "conservative"))
        s.normalize = _choice("normalize", s.normalize, ("expected", "actual"))
        s.mu = _real("mu", s.mu, low=0.0)
        s.eta0 = _real("eta0", s.eta0, low=0.0, low_open=True)
        s.max_it = _integer("max_it", s.max_it, high=MAX_CANDIDATES)
        s.alpha = _real("alpha", s.alpha, low=0.0, high=1.0, low_open=True, high_open=True)
        s.beta = _real("beta", s.beta, low=0.0, high=1.0, low_open=True, high_open=True)
        s.xi = _real("xi", s.xi, low=0.0, low_open=True)  # xi = 0: a release of budget 0
        s.tau = _integer("tau", s.tau)
        s.varsigma = _real("varsigma", s.varsigma, low=0.0, low_open=True)
        s.eta0_cap = _choice("eta0_cap", s.eta0_cap, ("current", "initial"))
        s.phi_max = _real("phi_max", s.phi_max, low=1.0, low_open=True)
        s.phi_min = _real("phi_min", s.phi_min, low=0.0, high=1.0, low_open=True,
                             high_open=True)
        s.psi = _real("psi", s.psi, low=0.0, high=1.0, high_open=True)
        s.budget_rule = _choice("budget_rule", s.budget_rule, BUDGET_RULES)
        s.adaptive_clipping = _flag("adaptive_clipping", s.adaptive_clipping)
        s.zeta = _real("zeta", s.zeta, low=0.0, high=1.0, high_open=True)
        s.armijo_scale = _choice("armijo_scale", s.armijo_scale, ARMIJO_SCALES)
        s.init = _choice("init", s.init, ("normal", "zeros"))
        s.init_scale = _real("init_scale", s.init_scale, low=0.0)
        s.stop_when_ls_unaffordable = _flag("stop_when_ls_unaffordable",
                                               s.stop_when_ls_unaffordable)
        s.budget_filter = _choice("budget_filter", s.budget_filter, ("rdp_paper", "zcdp"))
        if s.max_iter is not None:
            s.max_iter = _integer("max_iter", s.max_iter, low=0)
        return dataclasses.replace(self, **vars(s))

    @classmethod
    def from_options(cls, options):
        """Build from a dict, rejecting unknown keys with the list of known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValidationError(f"unknown DP-BLSGD settings {unknown}; known: {sorted(known)}.")
        return cls(**options)
