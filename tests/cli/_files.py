"""Small LIBSVM files and an in-process runner for the command-line tests of tests/cli/."""
import numpy as np
from sklearn.datasets import dump_svmlight_file

from fastdp import cli


def write_libsvm(path, n=300, d=6, labels=(0, 1), seed=0, targets=None):
    """A LIBSVM file of ``n`` planted linear rows with the two ``labels``, or ``targets``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.standard_normal(d)
    y = np.where(X @ w > 0, labels[1], labels[0]) if targets is None else targets(X, rng)
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return path


def run(capsys, *args):
    """``fastdp ARGS`` in this process: ``(status, stdout, stderr)``."""
    status = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err
