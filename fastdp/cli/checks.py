"""Checks ``fastdp train`` runs on its inputs before any privacy budget is reserved.

A fit charges the ledger before it trains; whatever can fail after it (a
test file that does not exist or does not fit the model, an output path that
cannot be written, labels a classifier cannot use) is checked here first, so
a mistake costs no budget.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

from fastdp.cli.arguments import _UsageError

#: a classifier given more distinct integer labels than this gets a warning
MANY_CLASSES = 20


def check_writable(path, what):
    """Raise a clear error unless the file ``path`` can be created or replaced.

    Parameters
    ----------
    path : str or path-like
        The file to be written (its missing parent directories may be created).
    what : str
        What the file is, for the message (e.g. ``"--out"``).
    """
    from fastdp.exceptions import ValidationError

    target = os.path.abspath(os.fspath(path))
    if os.path.isdir(target):
        raise ValidationError(f"{what} {path}: is a directory, not a file path.")
    parent = os.path.dirname(target)
    while not os.path.exists(parent):          # save_model creates missing directories
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValidationError(f"{what} {path}: {parent} is a file, not a directory.")
    try:   # a real attempt: permission bits do not tell (root, read-only mounts, /proc)
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise ValidationError(f"{what} {path}: cannot write in {parent} "
                              f"({exc.strerror or exc}).") from None
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise ValidationError(f"{what} {path}: the existing file is not writable.")


def check_output_paths(args):
    """Refuse ``--out`` and a new ``--ledger`` file that could not be written."""
    if args.out:
        from fastdp.persistence import model_paths

        for path in model_paths(args.out):
            check_writable(path, "--out")
    if args.ledger and not os.path.exists(args.ledger):
        check_writable(args.ledger, "--ledger")


def check_classifier_labels(y, where):
    """Refuse labels that look like regression targets; warn about very many classes.

    Non-integer labels are refused (a classifier would make a class of every
    value); more than :data:`MANY_CLASSES` distinct integers give a one-line
    warning on stderr.
    """
    from fastdp.exceptions import ValidationError

    y = np.asarray(y)
    if y.dtype.kind != "f":
        return
    classes = np.unique(y)
    fractional = classes[classes != np.round(classes)]
    if fractional.size:
        raise ValidationError(
            f"{where}: label {fractional[0]:g} is not a class number ({classes.size} distinct "
            "values): these look like regression targets; use --model ridge.")
    if classes.size > MANY_CLASSES:
        print(f"fastdp: warning: {where} has {classes.size} distinct labels "
              f"({classes[0]:g} .. {classes[-1]:g}), each a class; if they are regression "
              "targets, use --model ridge.", file=sys.stderr)


def check_flags(args):
    """Argument combinations that are wrong whatever the data (usage errors, exit 2)."""
    if args.budget is not None and not args.ledger:
        raise _UsageError("--budget needs --ledger FILE.")
    if args.ledger and args.budget is None and not os.path.exists(args.ledger):
        raise _UsageError(f"ledger {args.ledger} does not exist; pass --budget EPSILON (and "
                          "optionally --budget-delta) to create it.")
