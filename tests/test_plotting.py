"""fastdp.plotting renders headless (Agg) and draws what it is given."""
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from fastdp import plotting  # noqa: E402
from fastdp.exceptions import ValidationError  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_importing_fastdp_does_not_import_matplotlib():
    code = ("import sys, fastdp, fastdp.plotting, fastdp.cli, fastdp.persistence; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=plotting.__file__.rsplit("/fastdp/", 1)[0])
    assert out.stdout.strip() == "False"


def test_privacy_utility_curve_with_band_and_baseline(tmp_path):
    eps = [0.1, 0.5, 1.0, 2.0]
    ax = plotting.plot_privacy_utility(
        {"DP-SCD": {"x": eps, "y": [0.7, 0.8, 0.85, 0.9], "lower": [0.6, 0.75, 0.8, 0.88],
                    "upper": [0.75, 0.82, 0.87, 0.91]},
         "DP-SGD": ([2.0, 0.1, 1.0, 0.5], [0.88, 0.65, 0.83, 0.78])},   # unsorted input
        baselines={"SCD": 0.93}, delta=1e-3, ylabel="accuracy", title="phishing")
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["DP-SCD", "DP-SGD", "SCD (non-private)"]
    np.testing.assert_array_equal(lines[1].get_xdata(), eps)       # sorted by epsilon
    np.testing.assert_array_equal(lines[1].get_ydata(), [0.65, 0.78, 0.83, 0.88])
    assert lines[2].get_ydata()[0] == 0.93 and lines[2].get_linestyle() == "--"
    assert ax.get_xscale() == "log" and "δ = 0.001" in ax.get_xlabel()
    assert len(ax.collections) == 1                                   # one band
    path = plotting.save_figure(ax, tmp_path / "pu" / "curve.png")
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_convergence_against_reference_and_sigma_plot(tmp_path):
    epochs = np.arange(1, 6)
    ax = plotting.plot_convergence({"SCD": (epochs, 1.0 + 2.0 ** -epochs)}, reference=1.0)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), 2.0 ** -epochs)
    assert ax.get_yscale() == "log" and "optimum" in ax.get_ylabel()
    ax2 = plotting.plot_sigma_vs_epsilon([0.5, 1, 2], {"rdp": [3, 2, 1], "moments": [4, 3, 2]})
    assert ax2.get_yscale() == "log" and len(ax2.get_lines()) == 2
    for name, axes in (("conv.svg", ax), ("sigma.pdf", ax2)):
        assert plotting.save_figure(axes.figure, tmp_path / name).stat().st_size > 0


def test_draws_into_given_axes():
    ax = plotting.new_axes()
    assert plotting.plot_convergence({"a": ([1, 2], [3, 2])}, ax=ax, logy=False) is ax


@pytest.mark.parametrize("call", [
    lambda: plotting.plot_privacy_utility({}),
    lambda: plotting.plot_privacy_utility({"a": ([1, 2], [1])}),
    lambda: plotting.plot_privacy_utility({"a": {"x": [1], "y": [1], "lower": [0]}}),
    lambda: plotting.plot_privacy_utility({"a": {"y": [1]}}),
    lambda: plotting.plot_convergence({"a": 3}),
    lambda: plotting.plot_sigma_vs_epsilon([1], {}),
    lambda: plotting.save_figure("not a figure", "x.png"),
])
def test_bad_input_raises_validation_error(call):
    with pytest.raises(ValidationError):
        call()
