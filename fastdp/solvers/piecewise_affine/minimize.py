"""One entry point for the spec-001 mechanisms (:func:`dp_minimize`), and their evaluation."""

from fastdp.solvers.piecewise_affine.checks import check_choice
from fastdp.solvers.piecewise_affine.exponential import exponential_mechanism
from fastdp.solvers.piecewise_affine.perturbation import offset_perturbation, solution_perturbation
from fastdp.solvers.piecewise_affine.subgradient import dp_subgradient

__all__ = ["METHODS", "dp_minimize", "evaluate"]

METHODS = ("offset_perturbation", "solution_perturbation", "exponential", "subgradient")
_METHOD_ALIASES = {"data_perturbation": "offset_perturbation", "M_P": "offset_perturbation",
                   "M_S": "solution_perturbation", "M_E": "exponential",
                   "exponential_mechanism": "exponential", "dp_subgradient": "subgradient"}


_DISPATCH = {
    "offset_perturbation": offset_perturbation,
    "solution_perturbation": solution_perturbation,
    "exponential": exponential_mechanism,
    "subgradient": dp_subgradient,
}


def dp_minimize(problem, epsilon, method="subgradient", *, random_state=None, **options):
    """Minimise a piecewise affine objective with epsilon-DP in the offsets.

    Parameters
    ----------
    problem : PiecewiseAffineProblem or SumOfPinballProblem
        Public slopes and constraint set, private offsets, adjacency radius b_max.
    epsilon : float
        Pure epsilon of one released output.
    method : {"subgradient", "exponential", "solution_perturbation", "offset_perturbation"}
        Algorithm 2, M_E, M_S or M_P ("M_P", "M_S", "M_E" are accepted aliases).
    random_state : None, int, SeedSequence or Generator
    **options
        Passed to the mechanism (see :func:`dp_subgradient`,
        :func:`exponential_mechanism`, :func:`solution_perturbation`,
        :func:`offset_perturbation`), e.g. ``n_runs`` for independent repetitions.

    Returns
    -------
    PiecewiseAffineResult
        What is private, the adjacency and what was released are those of the
        chosen mechanism; ``result.event`` describes the release.
    """
    method = _METHOD_ALIASES.get(method, method)
    check_choice("method", method, METHODS)
    return _DISPATCH[method](problem, epsilon, random_state=random_state, **options)


def evaluate(problem, result):
    """Objective gaps f(x) - f_opt of a result and its baselines (**non-private**).

    Reads b: for experiments and tests, never for publication.
    """
    f_opt = problem.solve()[1]
    out = {"f_opt": f_opt, "gap": problem.value(result.x) - f_opt}
    for name, X in result.baselines.items():
        out[f"gap_{name}"] = problem.value(X) - f_opt
    return out
