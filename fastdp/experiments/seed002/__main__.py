"""``python -m fastdp.experiments.seed002``: see :func:`fastdp.experiments.seed002.main`."""

from fastdp.experiments.seed002.cli import main

if __name__ == "__main__":
    main()
