"""``python -m fastdp.experiments.seed000``: see :func:`fastdp.experiments.seed000.main`."""

from fastdp.experiments.seed000.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
