"""asv benchmarks of the estimators' ``fit`` end to end (fastdp.linear_model).

Everything a user pays for: scikit-learn's input checks, fastdp's validation
(row-norm bound, canonical CSR), the budget-to-noise calibration, the solver
epochs and the model.  5 epochs, ε = 1, default δ, L = 1000, on the synthetic
problem at both sizes (``common.py``); ``peakmem_fit`` on the largest problem
only (memory of the whole process, so the data are included: compare with
``peakmem_data_only``).  ``track_train_accuracy`` makes a privacy-utility
regression visible next to the speed.
"""

import time

from . import common

ESTIMATORS = ["logistic/dpscd", "logistic/dpsgd", "ridge/dpscd", "svm/dpscd"]


def _estimator(name):
    from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge

    model, solver = name.split("/")
    cls = {"logistic": DPLogisticRegression, "ridge": DPRidge, "svm": DPLinearSVC}[model]
    return cls(epsilon=1.0, alpha=common.LAM, solver=solver, batch_size=common.BATCH, epochs=5,
               random_state=0)


class EstimatorFit:
    timer = time.process_time   # CPU time: the machine may be shared
    params = (common.SIZES, ESTIMATORS)
    param_names = ["n_samples", "estimator"]
    timeout = 900
    repeat = 3
    number = 1
    processes = 1

    def setup_cache(self):
        return common.all_sizes()

    def setup(self, data, n_samples, estimator):
        self.X, self.y = data[n_samples]
        _estimator(estimator).fit(self.X[:2000], self.y[:2000])      # warm imports

    def time_fit(self, data, n_samples, estimator):
        _estimator(estimator).fit(self.X, self.y)

    def track_train_accuracy(self, data, n_samples, estimator):
        model = _estimator(estimator).fit(self.X, self.y)
        if estimator.startswith("ridge"):
            return float(((model.predict(self.X) > 0) * 2.0 - 1.0 == self.y).mean())
        return float(model.score(self.X, self.y))

    track_train_accuracy.unit = "accuracy"


class EstimatorPeakMemory:
    """Peak memory of fit on the largest problem (9.8 M stored entries, 118 MB of CSR)."""

    params = ESTIMATORS
    param_names = ["estimator"]
    timeout = 900
    processes = 1

    def setup_cache(self):
        return common.synthetic(common.LARGEST)

    def setup(self, data, estimator):
        self.X, self.y = data

    def peakmem_fit(self, data, estimator):
        _estimator(estimator).fit(self.X, self.y)

    def peakmem_data_only(self, data, estimator):
        self.X.sum()
