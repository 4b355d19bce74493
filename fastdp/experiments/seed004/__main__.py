"""``python -m fastdp.experiments.seed004``: see :func:`fastdp.experiments.seed004.main`."""

from fastdp.experiments.seed004.cli import main

if __name__ == "__main__":
    main()
