"""Plots of privacy-utility trade-offs, convergence and noise calibration.

matplotlib is an optional dependency (``pip install fastdp[plot]``) and is
imported only when a plot is drawn, never when fastdp is imported.  Figures
are built with the object-oriented API (:class:`matplotlib.figure.Figure`,
no pyplot state), so they render headless (Agg) in scripts, CI and the
reproductions; pass ``ax=`` to draw into your own axes instead.

* :func:`plot_privacy_utility`: utility (accuracy, MSE, ...) against ε for
  several solvers, with optional bands (e.g. quartiles over seeds) and dashed
  non-private baselines.
* :func:`plot_convergence`: objective against epochs, one curve per run.
* :func:`plot_sigma_vs_epsilon`: the noise multiplier σ each accountant needs
  for a target ε.
* :func:`save_figure`: write a figure to PNG/PDF/SVG.

Every function returns the :class:`matplotlib.axes.Axes` it drew on (its
figure is ``ax.figure``).

Privacy: plotting is post-processing of what you pass in.  Utility measured on
the training data (objective values, training accuracy) is a non-private
diagnostic; state which numbers are which in titles and captions.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = ["plot_privacy_utility", "plot_convergence", "plot_sigma_vs_epsilon", "save_figure",
           "new_axes"]


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "fastdp.plotting needs matplotlib; install it with `pip install fastdp[plot]` "
            "(or `pip install matplotlib`).") from exc
    return Figure


def new_axes(figsize=(5.5, 4.0)):
    """A fresh Axes on its own headless :class:`~matplotlib.figure.Figure`."""
    Figure = _matplotlib()
    fig = Figure(figsize=figsize, layout="constrained")
    return fig.add_subplot()


def _axes(ax):
    return new_axes() if ax is None else ax


def _series(name, xs, ys):
    xs = np.asarray(xs, dtype=np.float64).ravel()
    ys = np.asarray(ys, dtype=np.float64).ravel()
    if xs.shape != ys.shape or xs.size == 0:
        raise ValidationError(f"series {name!r}: x and y must be non-empty and of equal length; "
                              f"got {xs.size} and {ys.size} values.")
    return xs, ys


def _unpack(name, spec):
    """``(x, y, lower, upper)`` from a dict with x/y/(lower, upper) or a pair (x, y)."""
    if isinstance(spec, Mapping):
        try:
            x, y = spec["x"], spec["y"]
        except KeyError as exc:
            raise ValidationError(f"series {name!r} needs keys 'x' and 'y'; got {sorted(spec)}.") \
                from exc
        lower, upper = spec.get("lower"), spec.get("upper")
    else:
        try:
            x, y = spec
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"series {name!r} must be (x, y) or a dict with 'x', 'y'.") \
                from exc
        lower = upper = None
    x, y = _series(name, x, y)
    if (lower is None) != (upper is None):
        raise ValidationError(f"series {name!r}: give both 'lower' and 'upper' or neither.")
    if lower is not None:
        _, lower = _series(name, x, lower)
        _, upper = _series(name, x, upper)
    return x, y, lower, upper


def plot_privacy_utility(curves: Mapping[str, object], *, ax=None, ylabel: str = "test accuracy",
                         delta: Optional[float] = None,
                         baselines: Optional[Mapping[str, float]] = None,
                         title: Optional[str] = None, logx: bool = True,
                         markers: Sequence[str] = ("o", "s", "^", "D", "v", "P", "X")):
    """Utility against ε, one line per solver.

    Parameters
    ----------
    curves : mapping name -> (epsilons, values) or {"x", "y", "lower", "upper"}
        ``lower``/``upper`` draw a shaded band (e.g. quartiles over seeds).
    ax : matplotlib Axes, optional
    ylabel : str, default "test accuracy"
    delta : float, optional
        Stated in the x-axis label ("ε (δ = ...)").
    baselines : mapping name -> value, optional
        Dashed horizontal lines (non-private references).
    title : str, optional
    logx : bool, default True
        Logarithmic ε axis.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not curves:
        raise ValidationError("plot_privacy_utility needs at least one curve.")
    ax = _axes(ax)
    for k, (name, spec) in enumerate(curves.items()):
        x, y, lower, upper = _unpack(name, spec)
        order = np.argsort(x)
        (line,) = ax.plot(x[order], y[order], marker=markers[k % len(markers)], label=str(name))
        if lower is not None:
            ax.fill_between(x[order], lower[order], upper[order], color=line.get_color(),
                            alpha=0.2, linewidth=0)
    for k, (name, value) in enumerate((baselines or {}).items()):
        ax.axhline(float(value), linestyle="--", linewidth=1, color=f"C{(len(curves) + k) % 10}",
                   label=f"{name} (non-private)")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("ε" if delta is None else f"ε (δ = {delta:g})")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def plot_convergence(curves: Mapping[str, object], *, ax=None, ylabel: str = "training objective",
                     xlabel: str = "epoch", reference: Optional[float] = None, logy: bool = True,
                     title: Optional[str] = None):
    """Objective (or suboptimality) against epochs, one line per run.

    Parameters
    ----------
    curves : mapping name -> (epochs, values) or {"x", "y", "lower", "upper"}
    reference : float, optional
        The optimum P*; when given the curves show ``value - P*`` (values at or
        below P* are clipped to the smallest positive gap for the log axis).
    logy : bool, default True
    ylabel, xlabel, title : str

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not curves:
        raise ValidationError("plot_convergence needs at least one curve.")
    ax = _axes(ax)
    for name, spec in curves.items():
        x, y, lower, upper = _unpack(name, spec)
        if reference is not None:
            y = y - float(reference)
            positive = y[y > 0]
            floor = positive.min() if positive.size else 1e-16
            y = np.maximum(y, floor)
        (line,) = ax.plot(x, y, label=str(name))
        if lower is not None:
            shift = 0.0 if reference is None else float(reference)
            ax.fill_between(x, lower - shift, upper - shift, color=line.get_color(), alpha=0.2,
                            linewidth=0)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel if reference is None else f"{ylabel} − optimum")
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def plot_sigma_vs_epsilon(epsilons: Sequence[float], sigmas: Mapping[str, Sequence[float]], *,
                          ax=None, title: Optional[str] = None, logy: bool = True):
    """Noise multiplier σ needed for each target ε, one line per accountant.

    Parameters
    ----------
    epsilons : sequence of float
        Target ε values (shared by all lines).
    sigmas : mapping label -> sequence of σ (same length as ``epsilons``)
    ax : matplotlib Axes, optional
    title : str, optional
    logy : bool, default True

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not sigmas:
        raise ValidationError("plot_sigma_vs_epsilon needs at least one line.")
    ax = plot_privacy_utility({name: (epsilons, values) for name, values in sigmas.items()},
                              ax=ax, ylabel="noise multiplier σ", title=title, logx=True)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("target ε")
    return ax


def save_figure(ax_or_figure, path, *, dpi: int = 120):
    """Write the figure of ``ax_or_figure`` (an Axes or a Figure) to ``path``.

    The format follows the suffix (``.png``, ``.pdf``, ``.svg``); parent
    directories are created.  Returns the path.
    """
    from pathlib import Path

    figure = getattr(ax_or_figure, "figure", ax_or_figure)
    if not hasattr(figure, "savefig"):
        raise ValidationError(f"save_figure needs a matplotlib Axes or Figure; got "
                              f"{type(ax_or_figure).__name__}.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    return path
