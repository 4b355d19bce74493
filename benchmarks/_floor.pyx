# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The bare floor: the least work any epoch over a CSR matrix must do (benchmark only).

* :func:`matvec`: ``out = X @ w``, one pass in storage order (one gather per
  stored entry);
* :func:`dot_axpy`: for each row i in ``order``: ``s = x_i . v`` then
  ``v += step * s * x_i`` -- one gather plus one scatter per stored entry, the
  data movement of one SCD/SGD epoch with batch size 1 and nothing else.

Built by ``benchmarks/compare.py`` into its cache directory (never shipped).
float64 values, int32 indices and pointers (the synthetic problem's layout).
"""
from libc.stdint cimport int32_t, int64_t


def matvec(const double[::1] data, const int32_t[::1] indices, const int32_t[::1] indptr,
           const double[::1] w, double[::1] out):
    cdef Py_ssize_t i, n = indptr.shape[0] - 1
    cdef int32_t k
    cdef double s
    with nogil:
        for i in range(n):
            s = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                s = s + data[k] * w[indices[k]]
            out[i] = s


def dot_axpy(const double[::1] data, const int32_t[::1] indices, const int32_t[::1] indptr,
             const int64_t[::1] order, double[::1] v, double step):
    cdef Py_ssize_t q, i
    cdef int32_t k
    cdef double s
    with nogil:
        for q in range(order.shape[0]):
            i = order[q]
            s = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                s = s + data[k] * v[indices[k]]
            s = step * s
            for k in range(indptr[i], indptr[i + 1]):
                v[indices[k]] = v[indices[k]] + s * data[k]
