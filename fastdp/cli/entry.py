"""The entry point of the ``fastdp`` console script."""

from __future__ import annotations

import contextlib
import sys
import warnings

from fastdp.cli.arguments import _one_line, _UsageError
from fastdp.cli.parser import build_parser


@contextlib.contextmanager
def _one_line_warnings(debug):
    """Show each warning of a command as one line ``fastdp: warning: ...`` on stderr.

    Python would print the file, line and source line of the call.  numpy's
    floating-point warnings (``overflow encountered in ...``: arithmetic the
    command then reports as an error, or handles) are dropped unless
    ``--debug``, which keeps Python's own display of everything.
    """
    if debug:
        yield
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if not (issubclass(category, RuntimeWarning) and " encountered in " in str(message)):
            print(f"fastdp: warning: {_one_line(message)}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def main(argv=None):
    """Entry point of the ``fastdp`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "reproduce" in argv and "--" in argv[argv.index("reproduce"):]:
        cut = argv.index("--", argv.index("reproduce"))
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    args.extra = extra
    from fastdp.exceptions import FastDPError

    user_errors = (FastDPError, ValueError, OSError, _UsageError)
    try:
        with _one_line_warnings(args.debug):
            return args.func(args)
    except KeyboardInterrupt:
        print("fastdp: interrupted", file=sys.stderr)
        return 130
    except user_errors as exc:
        if args.debug:
            raise
        print(f"fastdp: error: {_one_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, _UsageError) else 1
