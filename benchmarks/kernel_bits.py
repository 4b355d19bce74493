"""Fingerprint the bits of every compiled kernel, to compare two builds (issue 19).

Runs the DP-SCD kernel (dual and sequential, every loss, float32/float64 values,
int32/int64 indices, with and without a row map, lazy and eager noise, 1 and 2
threads), the DP-SGD and multinomial DP-SGD kernels, the GLM entry points, the
compiled losses and the LIBSVM parser, plus estimator fits (in memory and
memory-mapped, ``dpscd``/``seq_dpscd``/``dpsgd``), and prints one SHA-256 per
output.  A refactoring that keeps behaviour gives the same lines::

    PYTHONPATH=<old tree> python3 benchmarks/kernel_bits.py > old.txt
    PYTHONPATH=<new tree> python3 benchmarks/kernel_bits.py > new.txt
    diff old.txt new.txt && echo same bits
"""
import hashlib
import os
import sys
import tempfile
import warnings

import numpy as np
import scipy.sparse as sp


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:24]


def _data(n=700, m=120, density=0.06, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, m, density=density, format="csr", random_state=rng)
    X.data = rng.normal(size=X.data.size)
    X.sum_duplicates()
    X.sort_indices()
    y = np.where(X @ rng.normal(size=m) > 0, 1.0, -1.0)
    return X, y, rng


def _arrays(X, real, index):
    return (np.ascontiguousarray(X.data, dtype=real), np.ascontiguousarray(X.indices, dtype=index),
            np.ascontiguousarray(X.indptr, dtype=index))


def _row_map(n, mapped, rng):
    if not mapped:
        return {}
    return dict(row_scale=rng.uniform(0.5, 1.5, size=n), row_shrink=rng.uniform(0.3, 1.0, size=n),
                tail_value=1.0)


def _batches(n, steps, size, rng):
    idx = np.concatenate([rng.choice(n, size=size, replace=False) for _ in range(steps)])
    return np.arange(0, steps * size + 1, size, dtype=np.int64), idx.astype(np.int64)


def _norms(data, indptr, rm):
    from fastdp._kernels import _scd
    kw = {}
    if rm:
        kw = dict(row_scale=rm["row_scale"], row_shrink=rm["row_shrink"],
                  tail_value=rm["tail_value"], tail=True)
    return _scd.row_squared_norms(data, indptr, **kw)


def scd_kernel(out):
    from fastdp._kernels import _scd
    X, y, _ = _data()
    n, m = X.shape
    for real in (np.float32, np.float64):
        for index in (np.int32, np.int64):
            data, indices, indptr = _arrays(X, real, index)
            for mapped in (False, True):
                rm = _row_map(n, mapped, np.random.default_rng(1))
                sq = _norms(data, indptr, rm)
                cols = m + 1 if mapped else m
                kw = dict(rm, tail_column=m) if mapped else {}
                for loss in (0, 1, 2):
                    for sequential in (False, True):
                        for lazy in (False, True):
                            for threads in (1, 2):
                                rng = np.random.default_rng(7)
                                bp, bi = _batches(n, 6, 150, rng)
                                alpha = np.zeros(n, dtype=real)
                                v = np.zeros(cols, dtype=real)
                                draws = _scd.run_dual_scd(
                                    data, indices, indptr, y, sq, alpha, v, bp, bi,
                                    np.empty(150), np.zeros(cols, dtype=np.int32), loss,
                                    1e-2 * n, 1.5, 0.5, 0.01, sequential, 0.3, 0.2, lazy,
                                    np.random.PCG64(3), threads, 1, **kw)
                                key = (f"scd {np.dtype(real).name} {np.dtype(index).name} "
                                       f"map={mapped} loss={loss} seq={sequential} lazy={lazy} "
                                       f"nt={threads}")
                                out[key] = _digest(alpha, v, np.array(draws))
                out[f"scd norms {np.dtype(real).name} {np.dtype(index).name} map={mapped}"] = \
                    _digest(sq)


def sgd_kernels(out):
    from fastdp._kernels import _multinomial, _sgd
    X, y, _ = _data(seed=1)
    n, m = X.shape
    classes = (np.arange(n) % 4).astype(np.int64)
    for real in (np.float32, np.float64):
        for index in (np.int32, np.int64):
            data, indices, indptr = _arrays(X, real, index)
            for mapped in (False, True):
                rm = _row_map(n, mapped, np.random.default_rng(2))
                sq = _norms(data, indptr, rm)
                cols = m + 1 if mapped else m
                kw = dict(rm, tail_column=m) if mapped else {}
                for lazy in (False, True):
                    for threads in (1, 2):
                        for loss in (0, 1, 2):
                            bp, bi = _batches(n, 6, 150, np.random.default_rng(8))
                            w = np.zeros(cols)
                            d = _sgd.run_sgd(data, indices, indptr, y, sq, w, bp, bi,
                                             np.empty(150), np.zeros(cols, dtype=np.int32), loss,
                                             1.0, 0.99, 0.3, 0.4, lazy, np.random.PCG64(4),
                                             threads, 1, **kw)
                            out[f"sgd {np.dtype(real).name} {np.dtype(index).name} map={mapped} "
                                f"loss={loss} lazy={lazy} nt={threads}"] = _digest(w, np.array(d))
                        bp, bi = _batches(n, 6, 150, np.random.default_rng(9))
                        W = np.zeros((cols, 4))
                        d = _multinomial.run_multinomial_sgd(
                            data, indices, indptr, classes, sq, W, bp, bi, np.empty(600),
                            np.zeros(cols, dtype=np.int32), 1.0, 0.99, 0.3, 0.4, lazy,
                            np.random.PCG64(5), threads, 1, **kw)
                        out[f"multinomial {np.dtype(real).name} {np.dtype(index).name} "
                            f"map={mapped} lazy={lazy} nt={threads}"] = _digest(W, np.array(d))


def glm_kernels(out):
    from fastdp._kernels import _glm
    X, y, rng = _data(n=900, seed=2)
    n, m = X.shape
    rows = np.random.default_rng(3).integers(0, n, size=800).astype(np.int64)
    theta = np.random.default_rng(4).normal(size=m + 1)
    weights = np.random.default_rng(5).normal(size=rows.size)
    for real in (np.float32, np.float64):
        for index in (np.int32, np.int64):
            data, indices, indptr = _arrays(X, real, index)
            for threads in (1, 2):
                for mapped in (False, True):
                    rm = _row_map(n, mapped, np.random.default_rng(6))
                    kw = dict(rm, tail_column=m) if mapped else {}
                    cols = m + 1 if mapped else m
                    z = np.empty(rows.size)
                    _glm.margins(data, indices, indptr, rows, theta[:cols], z, threads, **kw)
                    s = np.zeros(cols)
                    _glm.weighted_row_sum(data, indices, indptr, rows, weights, s, threads, **kw)
                    out[f"glm margins/scatter {np.dtype(real).name} {np.dtype(index).name} "
                        f"map={mapped} nt={threads}"] = _digest(z, s)
                for loss in (0, 1, 2):
                    for clip in (0.3, np.inf):
                        g = np.zeros(m)
                        _glm.clipped_gradient_sum(data, indices, indptr, y, rows, theta[:m], loss,
                                                  clip, g, threads)
                        out[f"glm gradient {np.dtype(real).name} {np.dtype(index).name} "
                            f"loss={loss} clip={clip} nt={threads}"] = _digest(g)


def losses(out):
    from fastdp._kernels import _losses
    rng = np.random.default_rng(11)
    z = rng.normal(scale=5, size=2000)
    y = np.where(rng.random(2000) < 0.5, -1.0, 1.0)
    a = rng.uniform(-1, 1, size=2000)
    s = rng.uniform(0, 2, size=2000)
    for loss in (0, 1, 2):
        out[f"losses {loss}"] = _digest(_losses.values(loss, z, y), _losses.derivatives(loss, z, y),
                                        _losses.dual_steps(loss, a, y, z, s, 0.01))


def libsvm(out):
    from fastdp.io.libsvm import load_libsvm
    data = os.environ.get("FASTDP_DATA", "/work/shared/data")
    for name in ("a9a", "cpusmall", "mushrooms", "abalone"):
        folder = os.path.join(data, name)
        if not os.path.isdir(folder):
            continue
        for f in sorted(os.listdir(folder)):
            path = os.path.join(folder, f)
            if os.path.isfile(path) and not f.endswith((".md", ".json", ".txt")):
                try:
                    X, y = load_libsvm(path)[:2]
                except Exception as exc:          # not a LIBSVM file
                    out[f"libsvm {name}/{f}"] = type(exc).__name__
                    continue
                X = X.tocsr()
                out[f"libsvm {name}/{f}"] = _digest(X.data, X.indices, X.indptr, y)
    text = (b"1 qid:3 1:0.5 3:1e-310 7:123456789012345678901234\n-1 2:inf 4:-0.0 5:1_0\n"
            b"+1 1:4.9406564584124654e-324 9:1.7976931348623157e308 # c\n\n0 3:.5e+2\r\n")
    with tempfile.NamedTemporaryFile(suffix=".svm", delete=False) as fh:
        fh.write(text)
    try:
        X, y = load_libsvm(fh.name)[:2]
        X = X.tocsr()
        out["libsvm edge cases"] = _digest(X.data, X.indices, X.indptr, y)
    except Exception as exc:
        out["libsvm edge cases"] = f"{type(exc).__name__}: {exc}"
    finally:
        os.unlink(fh.name)


def estimators(out):
    from fastdp.linear_model import DPLinearSVC, DPLogisticRegression, DPRidge
    X, y, rng = _data(n=1200, m=200, seed=4)
    yr = X @ np.random.default_rng(0).normal(size=200)
    with tempfile.TemporaryDirectory() as tmp:
        mm = {}
        for dtype in (np.float32, np.float64):
            Xd = X.astype(dtype)
            arrs = []
            for name, arr in (("data", Xd.data), ("indices", Xd.indices), ("indptr", Xd.indptr)):
                path = os.path.join(tmp, f"{name}{np.dtype(dtype).name}.npy")
                np.save(path, arr)
                arrs.append(np.load(path, mmap_mode="r"))
            mm[dtype] = sp.csr_matrix(tuple(arrs), shape=X.shape)
        for est, target in ((DPRidge, yr), (DPLogisticRegression, y), (DPLinearSVC, y)):
            for solver in ("dpscd", "seq_dpscd", "dpsgd"):
                for dtype in (np.float32, np.float64):
                    for where in ("memory", "mapped"):
                        Xf = X.astype(dtype) if where == "memory" else mm[dtype]
                        for threads in (1, 2):
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                try:
                                    f = est(epsilon=1.0, solver=solver, epochs=2, batch_size=200,
                                            num_threads=threads, random_state=3).fit(Xf, target)
                                    val = _digest(f.coef_, np.atleast_1d(f.intercept_))
                                except Exception as exc:
                                    val = f"{type(exc).__name__}"
                            out[f"fit {est.__name__} {solver} {np.dtype(dtype).name} {where} "
                                f"nt={threads}"] = val


def main():
    import fastdp
    print(f"# fastdp from {os.path.dirname(fastdp.__file__)}", file=sys.stderr)
    out = {}
    for part in (scd_kernel, sgd_kernels, glm_kernels, losses, libsvm, estimators):
        part(out)
    for key in sorted(out):
        print(f"{key}: {out[key]}")


if __name__ == "__main__":
    main()
