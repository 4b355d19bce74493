"""Argument types of the ``fastdp`` command, its parser class and its one-line errors.

Every numeric argument is checked by the scalar checks of
:mod:`fastdp._validation` (the same checks, and the same domains, as the
Python API).
"""

from __future__ import annotations

import argparse
import sys


class _UsageError(Exception):
    """A command-line mistake found after parsing (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``fastdp train: error: ...``)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _parse_number(text, parse=float, kind="a number"):
    """``parse(text)``, strictly: no nan, and no infinity unless written as one.

    ``float("1e400")`` is ``inf`` and ``float("nan")`` is nan; a command-line
    number that overflows or is not a number is a mistake, never a silent
    ``inf`` (``--epsilon 1e400`` would otherwise train without privacy).
    Only the words ``inf``/``infinity`` give infinity (and only where the
    argument's own check allows it).
    """
    import math

    try:
        value = parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
    if isinstance(value, float) and math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r} (not a number)")
    if isinstance(value, float) and math.isinf(value) \
            and text.strip().lower().lstrip("+-") not in ("inf", "infinity"):
        raise argparse.ArgumentTypeError(f"{text!r} is too large for a float (it overflows to "
                                         "infinity); write inf if you mean it")
    return value


def _minutes(text):
    """A finite number of minutes >= 0."""
    from fastdp._validation import check_real

    return _checked(check_real, _parse_number(text), low=0.0, allow_inf=False)


def _checked(check, value, **options):
    """``check("value", value, **options)`` of :mod:`fastdp._validation`, as an argparse error."""
    from fastdp.exceptions import ValidationError

    try:
        return check("value", value, **options)
    except ValidationError as exc:   # argparse prefixes "argument --NAME: "
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value ")) from None


def _positive_float(text):
    """A finite number > 0."""
    from fastdp._validation import check_positive

    return _checked(check_positive, _parse_number(text))


def _epsilon(text):
    """A target ε > 0, or ``inf`` (no privacy)."""
    from fastdp._validation import check_positive

    return _checked(check_positive, _parse_number(text), allow_inf=True)


def _probability(text):
    """A δ in the open interval (0, 1)."""
    from fastdp._validation import check_delta

    return _checked(lambda name, value: check_delta(value, name=name), _parse_number(text))


def _rate(text):
    """A sampling rate in (0, 1]."""
    from fastdp._validation import check_real

    return _checked(check_real, _parse_number(text), low=0.0, high=1.0, low_open=True)


def _positive_int(text):
    """An integer >= 1."""
    from fastdp._validation import check_integer

    return _checked(check_integer, _parse_number(text, int, "an integer"), low=1)


def _seed(text):
    """A random seed: an integer >= 0."""
    from fastdp._validation import check_integer

    return _checked(check_integer, _parse_number(text, int, "an integer"), low=0)


def _sampler_name(text):
    """A sampler name of :data:`fastdp.sampling.SAMPLER_NAMES`; old spellings warn on stderr."""
    import warnings

    from fastdp.sampling import canonical_sampler_name

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        name = canonical_sampler_name(text)
    for w in caught:
        print(f"fastdp: warning: {w.message}", file=sys.stderr)
    if name == "none":
        print("fastdp: warning: sampling 'none' is deprecated; it is --sampler poisson with "
              "--sample-rate 1.", file=sys.stderr)
    return name


def _clip(text):
    return text if text == "auto" else _positive_float(text)


def _option(text):
    """``key=value`` with value parsed as JSON when possible (numbers, true, null)."""
    import json

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


_ROW_BOUNDS = {"auto": "auto", "normalize": "normalize", "clip": "clip", "reject": "reject"}


def _auto_or(convert):
    """argparse type: the word 'auto' or ``convert(text)``."""
    def parse(text):
        return "auto" if text == "auto" else convert(text)
    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


# Python spellings in library messages, and what a command-line user types instead.
_CLI_SPELLINGS = (
    ("pass normalize=True to the estimator", "pass --normalize (or drop --normalize reject)"),
    ("normalize=True", "--normalize"),
    ("Pass data_home=... or set the", "Set the"),
)


def _one_line(exc):
    text = str(exc) or type(exc).__name__
    for python, flag in _CLI_SPELLINGS:
        text = text.replace(python, flag)
    return " ".join(text.split())
