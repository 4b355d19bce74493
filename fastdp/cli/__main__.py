"""``python -m fastdp.cli``: the ``fastdp`` command line."""

from fastdp.cli.entry import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
