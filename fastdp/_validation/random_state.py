"""``random_state`` to :class:`numpy.random.Generator`.
"""

import numbers

import numpy as np

from fastdp.exceptions import ValidationError


def check_random_state(random_state):
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    Parameters
    ----------
    random_state : None, int, numpy.random.SeedSequence, numpy.random.BitGenerator or numpy.random.Generator
        ``None`` gives a generator seeded from fresh OS entropy (not
        reproducible). A non-negative int or a ``SeedSequence`` gives a new
        reproducible generator. A ``Generator`` is returned as is (the caller's
        stream advances as fastdp draws from it). A ``BitGenerator`` is wrapped.

    Returns
    -------
    rng : numpy.random.Generator

    Raises
    ------
    ValidationError
        For negative ints, bools, legacy ``numpy.random.RandomState`` objects
        and anything else.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, (bool, np.bool_)):
        raise ValidationError(f"random_state must be None, an int or a Generator; got {random_state!r}.")
    if isinstance(random_state, numbers.Integral):
        if random_state < 0:
            raise ValidationError(
                f"random_state must be a non-negative int; got {random_state}."
            )
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        raise ValidationError(
            "fastdp draws randomness only from numpy.random.Generator; the legacy "
            "numpy.random.RandomState is not accepted. Pass an int seed or "
            "numpy.random.default_rng(seed)."
        )
    raise ValidationError(
        f"random_state must be None, an int, a numpy.random.SeedSequence or a "
        f"numpy.random.Generator; got {type(random_state).__name__}."
    )
