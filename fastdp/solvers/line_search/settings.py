"""Hyper-parameters of DP-BLSGD / DP-BLGD (spec 003 §6.2, §8), validated once.

Defaults are the paper's convex settings and the spec's recommended
decisions; every decision is a switch (see :class:`BlsgdSettings`).
"""

import dataclasses
import functools
import numbers

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


@dataclasses.dataclass
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
        """Check every field and fill the budget defaults from ``epsilon``."""
        self.sample_rate = _real("sample_rate", self.sample_rate, low=0.0, high=1.0, low_open=True)
        eps_iter = epsilon / 100.0 if self.epsilon_iter is None else self.epsilon_iter
        self.epsilon_iter = _real("epsilon_iter", eps_iter, low=0.0, low_open=True)
        for name, default in (("epsilon_bt", self.epsilon_iter),
                              ("rho_grad", self.epsilon_iter ** 2 / 2.0),
                              ("rho_bt", self.epsilon_iter ** 2 / 2.0)):
            value = getattr(self, name)
            setattr(self, name, _real(name, default if value is None else value, low=0.0,
                                      low_open=True))
        self.noise = _choice("noise", self.noise, ("laplace", "gaussian"))
        self.c_grad = _real("c_grad", self.c_grad, low=0.0, low_open=True)
        self.c_obj = _real("c_obj", self.c_obj, low=0.0, low_open=True)
        self.amplification = _choice("amplification", self.amplification, AMPLIFICATIONS)
        self.check = _choice("check", self.check, ("unamplified", "amplified"))
        if self.fixed_order is not None:
            self.fixed_order = _integer("fixed_order", self.fixed_order, low=2)
        self.batch_accounting = _choice("batch_accounting", self.batch_accounting,
                                        ("separate", "joint"))
        self.svt_analysis = _choice("svt_analysis", self.svt_analysis, ("paper", "conservative"))
        self.normalize = _choice("normalize", self.normalize, ("expected", "actual"))
        self.mu = _real("mu", self.mu, low=0.0)
        self.eta0 = _real("eta0", self.eta0, low=0.0, low_open=True)
        self.max_it = _integer("max_it", self.max_it, high=MAX_CANDIDATES)
        self.alpha = _real("alpha", self.alpha, low=0.0, high=1.0, low_open=True, high_open=True)
        self.beta = _real("beta", self.beta, low=0.0, high=1.0, low_open=True, high_open=True)
        self.xi = _real("xi", self.xi, low=0.0)
        self.tau = _integer("tau", self.tau)
        self.varsigma = _real("varsigma", self.varsigma, low=0.0, low_open=True)
        self.eta0_cap = _choice("eta0_cap", self.eta0_cap, ("current", "initial"))
        self.phi_max = _real("phi_max", self.phi_max, low=1.0, low_open=True)
        self.phi_min = _real("phi_min", self.phi_min, low=0.0, high=1.0, low_open=True,
                             high_open=True)
        self.psi = _real("psi", self.psi, low=0.0, high=1.0, high_open=True)
        self.budget_rule = _choice("budget_rule", self.budget_rule, BUDGET_RULES)
        self.adaptive_clipping = _flag("adaptive_clipping", self.adaptive_clipping)
        self.zeta = _real("zeta", self.zeta, low=0.0, high=1.0, high_open=True)
        self.armijo_scale = _choice("armijo_scale", self.armijo_scale, ARMIJO_SCALES)
        self.init = _choice("init", self.init, ("normal", "zeros"))
        self.init_scale = _real("init_scale", self.init_scale, low=0.0)
        self.stop_when_ls_unaffordable = _flag("stop_when_ls_unaffordable",
                                               self.stop_when_ls_unaffordable)
        self.budget_filter = _choice("budget_filter", self.budget_filter, ("rdp_paper", "zcdp"))
        if self.max_iter is not None:
            self.max_iter = _integer("max_iter", self.max_iter, low=0)
        return self

    @classmethod
    def from_options(cls, options):
        """Build from a dict, rejecting unknown keys with the list of known ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValidationError(f"unknown DP-BLSGD settings {unknown}; known: {sorted(known)}.")
        return cls(**options)
