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
    fastdp reproduce {seed000,...,seed004,all} [--quick] [--out DIR] [--resume] [--budget-min M] [-- ...]
    fastdp demo [--quick]

``DATA`` is a LIBSVM/svmlight file (plain, .gz, .bz2 or .xz), a binary
dataset made by ``fastdp convert`` (a directory, e.g. ``data.fdp``, opened
memory-mapped: see docs/large-data.md) or ``dataset:NAME`` for one of the
real datasets of :mod:`fastdp.datasets` (e.g. ``dataset:phishing``,
``dataset:a9a:test``).  Loading and converting show a progress bar on a
terminal.

User mistakes (a missing file, a malformed LIBSVM line, ε <= 0, an unknown
solver, a budget that would be exceeded, ...) print one line
``fastdp: error: ...`` on stderr and exit with status 1 (2 for command-line
syntax errors); ``--debug`` shows the traceback instead.

Privacy: ``train`` releases the model (and prints its privacy report); the
training utility it prints reads the training data and is a non-private
diagnostic, as is everything ``evaluate`` prints about a dataset you pass.
The ledger (``--ledger``) is charged before training, so a refused fit
releases nothing.
"""

from fastdp.cli.commands import REPRODUCTIONS
from fastdp.cli.entry import main
from fastdp.cli.parser import build_parser

__all__ = ["main", "build_parser", "REPRODUCTIONS"]
