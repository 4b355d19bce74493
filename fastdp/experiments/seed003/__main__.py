"""``python -m fastdp.experiments.seed003``: see :func:`fastdp.experiments.seed003.main`."""

from fastdp.experiments.seed003.cli import main

if __name__ == "__main__":
    main()
