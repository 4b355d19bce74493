"""``python -m fastdp``: the ``fastdp`` command line (see :mod:`fastdp.cli`)."""

from fastdp.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
