"""The entry point of the ``fastdp`` console script."""

from __future__ import annotations

import sys

from fastdp.cli.arguments import _one_line, _UsageError
from fastdp.cli.parser import build_parser


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
        return args.func(args)
    except KeyboardInterrupt:
        print("fastdp: interrupted", file=sys.stderr)
        return 130
    except user_errors as exc:
        if args.debug:
            raise
        print(f"fastdp: error: {_one_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, _UsageError) else 1
