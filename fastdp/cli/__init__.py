"""The ``fastdp`` command line (``fastdp ...`` or ``python -m fastdp ...``).

Subcommands::

    fastdp convert SRC DST.fdp [--dtype float32] [--index-dtype int32|int64] [--overwrite]
    fastdp train DATA --model {ridge,logistic,svm} [--solver dpscd] [--epsilon 1]
                 [--delta D] [--ledger FILE [--budget EPS]] [--out MODEL] [--test DATA]
    fastdp predict MODEL DATA [--output FILE]
    fastdp evaluate MODEL DATA
    fastdp privacy epsilon   --noise-multiplier S (--sample-rate Q --steps T | --n N --batch-size L --epochs E) --delta D [--sampler poisson]
    fastdp privacy calibrate --epsilon E          (--sample-rate Q --steps T | --n N --batch-size L --epochs E) --delta D [--sampler poisson]
    fastdp ledger show FILE
    fastdp ledger upgrade FILE
    fastdp reproduce {seed000,...,seed004,all} [--quick] [--out DIR (default ./fastdp-reproductions)] [--resume] [--budget-min M] [-- ...]
    fastdp demo [--quick]

``DATA`` is a LIBSVM/svmlight file (plain, .gz, .bz2 or .xz), a binary
dataset made by ``fastdp convert`` (a directory, e.g. ``data.fdp``, opened
memory-mapped: see docs/large-data.md) or ``dataset:NAME`` for one of the
real datasets of :mod:`fastdp.datasets` (e.g. ``dataset:phishing``,
``dataset:a9a:test``).  Loading and converting show a progress bar on a
terminal.

User mistakes print one line ``fastdp: error: ...`` on stderr: status 2 for a
wrong command line (syntax, a number that is not one, ε <= 0, flags that do
not go together), status 1 for a wrong input (a missing or malformed file,
data that does not fit the model, a path that cannot be written, a budget
that would be exceeded); warnings are one line ``fastdp: warning: ...``.
``--debug`` shows the traceback instead (docs/cli.md).

Privacy: ``train`` releases the model (and prints its privacy report); the
training utility it prints reads the training data and is a non-private
diagnostic, as is everything ``evaluate`` prints about a dataset you pass.
The ledger (``--ledger``) is charged before training, so a refused fit
releases nothing; ``train`` reads and checks all its inputs (the ``--test``
file, the labels, the output paths) before that charge.
"""

from fastdp.cli.commands import REPRODUCTIONS
from fastdp.cli.entry import main
from fastdp.cli.parser import build_parser

__all__ = ["main", "build_parser", "REPRODUCTIONS"]
