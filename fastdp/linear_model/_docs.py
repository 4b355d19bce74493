"""The Parameters and Attributes sections shared by the estimators' docstrings.
"""




_PARAMETERS_DOC = """
    Parameters
    ----------
    epsilon : float, default=1.0
        Target privacy budget (> 0) of the whole fit.  ``np.inf`` trains
        without privacy and returns the exact minimiser of the objective
        (``solver="exact"``).
    delta : float or None, default=None
        Target delta in (0, 1); ``None`` means ``min(1e-5, 1/(10 N))``.
    alpha : float or "auto", default="auto"
        L2 strength lambda of the 1/N-averaged objective (as in ``SGDRegressor``).
        ``"auto"`` is ``0.1/N`` (scikit-learn's ``C=10``), or for output and
        objective perturbation a rule of (N, d, epsilon) (see :mod:`fastdp.defaults`).
    solver : str, default="auto"
        ``"auto"``: DP-SGD (multinomial for more than two classes) with the
        documented defaults of :mod:`fastdp.defaults` when private, the exact
        optimum when ``epsilon=np.inf``.  Others: ``"dpscd"`` (dual DP-SCD),
        ``"seq_dpscd"``, ``"dpsgd"``, ``"output"``, ``"objective"``, the
        accelerated and line-search solvers listed in
        :data:`fastdp.solvers.registry.ESTIMATOR_SOLVER_NAMES`.
    batch_size : int or None, default=None
        Expected mini-batch size L (``None``: the solver's default: the DP-SGD
        rule, else ``min(1000, N)``).
    clip : float or "auto", default="auto"
        Bound C on each update (DP-SCD: each coordinate step; DP-SGD: each
        per-example gradient).  ``"auto"``: for DP-SGD 0.3 with the logistic
        loss (binary or multinomial) and 1 with the hinge and squared losses
        (see :mod:`fastdp.defaults`), else the solver's rule
        of public quantities (DP-SCD: ``lam N / L``, capped at 1 for classifiers).
    epochs : float or "auto", default="auto"
        Passes over the data; ``T = floor(epochs N / L)`` steps.  ``"auto"``:
        the DP-SGD rule (5 to 80 epochs, growing with epsilon), else 10.
    sampler : {"poisson", "fixed", "shuffle"} or None, default=None
        Mini-batch sampler; each is accounted for by its own event.  ``None``
        picks the solver's default (``"poisson"``: add/remove adjacency, exact
        accounting; ``"fixed"`` for seqDP-SCD).
    accountant : {"auto", "rdp", "pld_own", "pld", "moments"} or accountant, default="auto"
        Accountant used to calibrate the noise and to report ``epsilon_``;
        ``"auto"`` is the smaller of the own-PLD and RDP bounds (the one used
        is named in ``privacy_report_.accountant``, e.g. ``"auto (pld_own)"``).
    noise_multiplier : float or None, default=None
        Bypass calibration and use this noise parameter (``epsilon_`` is then
        computed for it).
    solver_options : dict or None, default=None
        Solver-specific settings (e.g. ``{"learning_rate": 2.0}`` for DP-SGD,
        ``{"box_eps": 1e-4}`` for DP-SCD); unknown keys are rejected.
    normalize : {"auto", True, "clip", False}, default="auto"
        How each row is bounded to L2 norm <= 1, the bound the privacy proofs
        need: ``True`` (``"normalize"``) rescales every row to norm 1,
        ``"clip"`` scales down only rows above 1, ``False`` (``"reject"``)
        refuses data with a row above 1.  ``"auto"`` normalises for the
        classifiers (the sign of a score does not depend on a row's scale) and
        clips for :class:`DPRidge` (keeps the linear model on small rows).
        Per example, with public parameters: costs no privacy.  The same map
        is applied by ``predict``, ``decision_function``, ``predict_proba``
        and ``score``.
    fit_intercept : bool, default=True
        Learn an intercept, privately, in the same mechanism: each row gets a
        constant column ``intercept_scaling`` and the augmented row is scaled
        by ``1/sqrt(1 + intercept_scaling^2)`` so that its norm stays <= 1
        (:class:`~fastdp.preprocessing.RowMap`).  The intercept is one more
        coefficient of a row within the bound: the sensitivity, the event and
        the epsilon are unchanged.  It is regularised like the weights.
    intercept_scaling : float, default=0.5
        The public value c of the constant column (> 0).  A larger c learns
        the intercept faster but shrinks the features by ``1/sqrt(1 + c^2)``
        (less signal against the same noise); 0.5 measured best on the
        development sets (docs/defaults.md).
    ledger : fastdp.privacy.ledger.PrivacyLedger or None
        Charged with the fit's event before training; refuses fits over budget.
    record_history : bool, default=False
        Record per-epoch objectives in ``history_`` (non-private diagnostics).
    callback : callable or None, default=None
        Called after every epoch with a dict of the released state (``epoch``,
        ``n_iter``, ``coef``); for solvers that support it (DP-SCD, DP-SGD).
        It sees only what the mechanism releases, so it costs no privacy.
    lazy_noise : bool, default=True
        Lazy (exact) noise in the kernel; ``False`` uses the eager path.
    num_threads : int or None, default=None
        OpenMP threads; results are identical for any value.
    random_state : int, numpy Generator or None, default=None
        Seed of the sampling and noise streams.
    verbose : int, default=0
        Show a per-epoch progress bar (on a terminal; one plain line per epoch
        on stderr otherwise, for logs) and print a privacy report after fitting.
    engine : LocalWorkers, RayWorkers or None, default=None
        ``None``: train on this machine.  An engine of
        :mod:`fastdp.distributed.data_parallel` (e.g.
        ``RayWorkers(address="auto", n_workers=4)``) trains data-parallel:
        ``fit`` cuts the rows into ``engine.n_shards`` shards (default
        ``n_workers``, at most one per block) of whole sampling blocks, the
        workers return clipped partial sums and one noise draw per step is
        added here.  DP-SGD (multinomial for K > 2 classes) and dual DP-SCD;
        lots from the block-keyed Poisson sampler.  Same event, ``epsilon_``
        and ledger charge as without an engine; the coefficients equal those
        of the one-machine fit with ``sampler=BlockPoissonSampler(...)`` (bit
        for bit with one shard, within 1e-12 relative otherwise).  The engine
        is copied for each fit and is not saved by ``save_model`` (stored as
        ``null``).  See docs/distributed.md.
"""

_ATTRIBUTES_DOC = """
    Attributes
    ----------
    coef_ : ndarray
        Weights acting on the bounded rows ``b(x)`` (see ``normalize``).
    intercept_ : float or ndarray
        The privately learnt intercept (0 with ``fit_intercept=False``).
    row_map_ : fastdp.preprocessing.RowMap
        The per-example map applied in ``fit`` and in prediction.
    solver_, alpha_, batch_size_, epochs_, learning_rate_ : the resolved settings.
    noise_multiplier_, epsilon_, delta_ : float
        Noise parameter used (its meaning in ``noise_name_``); epsilon computed
        by the accountant for the event of the whole fit (never the target);
        delta.  After scikit-learn's ``GridSearchCV``, ``best_estimator_.epsilon_``
        is *one* fit's epsilon, not the search's: use
        :mod:`fastdp.model_selection` for an accounted search.
    privacy_event_ : fastdp.privacy.events.DpEvent
        The event of the whole fit (all one-vs-rest fits composed).
    privacy_report_ : EpsilonReport or None
    n_iter_ : int
        Mini-batch iterations T (of one fit).
    history_ : list of dict or None
"""
