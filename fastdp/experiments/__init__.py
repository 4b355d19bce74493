"""Paper reproductions, one module per seed (``python -m fastdp.experiments.seed002``)."""
