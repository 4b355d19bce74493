"""Small random LIBSVM text files for the tests of the binary format."""

import numpy as np


def write_random_libsvm(path, n, d, seed, *, low, high, max_entries):
    """Write ``n`` rows of 1 to ``max_entries - 1`` entries in ``d`` columns, values uniform
    in ``[low, high)``, labels ±1, to ``path`` (returned)."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        cols = np.sort(rng.choice(d, size=rng.integers(1, max_entries), replace=False))
        vals = rng.uniform(low, high, cols.size)
        label = 1 if rng.random() < 0.5 else -1
        lines.append(f"{label} " + " ".join(f"{c + 1}:{v:.6f}" for c, v in zip(cols, vals)))
    path.write_text("\n".join(lines) + "\n")
    return path
