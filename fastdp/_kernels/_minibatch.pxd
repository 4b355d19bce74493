# cython: language_level=3
"""The step loop of the mini-batch (DP-)SGD kernels, and the noise steps of every epoch kernel.

``_sgd.pyx`` (a GLM: one coefficient per column of X) and ``_multinomial.pyx``
(softmax over K classes: K coefficients per column, stored feature-major)
run the same steps (see their module docstrings)::

    1. lazy noise: every column the batch reads is brought up to step t-1
    2. the clipped per-example gradients of the batch from one theta = a w
    3. decay a <- rho a, then the sparse gradient step in w units
    4. eager noise on every coordinate; fold a into w below 1e-100

They differ only in step 2 and in the gradient scattered in step 3, which a
:data:`StepModel` selects (``K == 1``: a GLM's coefficient, ``K >= 2``: the
softmax residual).  :func:`run_steps` is that loop; an entry point runs its
own checks (loss code, class indices, row map), fills a :data:`StepModel` and
calls :func:`run_step_kernel`, which checks the rest
(:func:`check_step_arguments`), sets up a :data:`StepRule` (:func:`step_rule`)
and runs the loop inside ``nogil``.

Rows are read through the CSR view of ``_csr.pxd``, row map included (the
estimators' mapped rows, ``fastdp._mapped_rows.MappedRows``): a mapped value
or the appended constant enters every sum exactly where, and with the value,
it has in the materialised matrix, so a mapped run and a run on the written-out
copy give the same bits.

Clipping reads each row's squared norm from the entry point's ``sq_norms``; given
None, the kernel sums it from the row it has just read (the GLM: alongside the
margin, ``_csr.pxd: row_dot_sq``; the softmax: after the scores, ``row_sq_norm``),
the squares of the same values in the same order as ``_scd.row_squared_norms``
with the same row map, so the same bits without a pass over X before the steps
(the estimators' mapped rows); such a sum is never negative, and a NaN is taken
as ``inf`` (``clipping_sq_norm``: clipped to 0, never unclipped).

Draws, threads and bits are as the kernels' docstrings describe: every draw in
the sequential part, batches parallel over rows (residuals) and columns
(scatter), each column updated in batch order; the same bits for any thread
count and either path of the timing gate.

The noise steps (lazy noise brought up to date, eager noise, the final flush:
:func:`bring_up_to_date`, :func:`add_eager_noise`, :func:`flush_pending_noise`),
the cache hints of a serial pass (:func:`prefetch_ahead`) and the pending-noise
scales are also those of DP-SCD (``_scd.pyx``), whose coordinate step differs;
they take the dense vector as :data:`coef_t` (float64, or DP-SCD's float32 v).
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY, exp, sqrt
from libc.stdint cimport int32_t, int64_t
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal, random_standard_normal_fill

from fastdp._kernels._checks cimport (
    bit_generator_of, check_batches, check_csr, check_length, check_min_length, check_sq_norms,
    check_csr_structure, check_rows_as_read, check_step_count, check_threads, column_splits_of,
    raise_failure, raise_invalid, rows_unsafe,
)
from fastdp._kernels._csr cimport (
    CsrRow, CsrView, FASTDP_PREFETCH, clipping_sq_norm, coef_t, csr_row, index_t, mapped_view,
    prefetch_row, real_t, row_sq_norm, row_value,
)
from fastdp._kernels._gate cimport GatedBatch, ParallelGate, gate_close, gate_open, gate_slot
from fastdp._kernels._glm cimport (
    ClippedLoss, ColumnRange, LazyNoise, RowBatch, collect_pending, every_column,
    gradient_coefficient, lazy_noise_scratch, row_span, scatter_rows, step_batch, thread_columns,
)


# ---------------------------------------------------------------------------
# the per-example gradient of a step
# ---------------------------------------------------------------------------

ctypedef struct SoftmaxLoss:
    # What the clipped residual of an example needs.
    Py_ssize_t K              # number of classes
    double clip               # C, the bound on each example's gradient (Frobenius norm)
    bint clipping             # clip < inf
    const int64_t* labels     # class index of each row
    const double* sq_norms    # squared row norms (read only when clipping); NULL: computed
                              # from each row as it is read


ctypedef struct StepModel:
    # Which gradient a step computes.  K == 1: a GLM, ``glm``; the example's gradient
    # is coefs[q] x_j.  K >= 2: the softmax over K classes, ``softmax``; the gradient
    # is R[q] x_j^T (R[q]: K numbers), and w holds K coefficients per column of X.
    Py_ssize_t K
    ClippedLoss glm
    SoftmaxLoss softmax


cdef inline void softmax_residual(const SoftmaxLoss* s, const CsrView[real_t, index_t]* X,
                                  int64_t j, const double* w, double a,
                                  double* r) noexcept nogil:
    """Clipped residual r (K) of row j: ``g_j = r x_j^T`` clipped to Frobenius norm C.

    ``r = softmax(a W^T x_j) - e_label``, then ``r *= min(1, C / (||r|| ||x_j||))``
    (``||x_j||^2`` from ``sq_norms``, or, when it is NULL, summed from the row just
    read, :func:`row_sq_norm`: the bits of the up-front scan); a product, so a zero row
    gives no division by 0.  The scores sum the row's entries in storage order, a row
    map's appended entry last (where the materialised matrix stores it).
    """
    cdef CsrRow[real_t, index_t] row = csr_row(X, j)
    cdef Py_ssize_t K = s.K
    cdef int64_t label = s.labels[j]
    cdef index_t p                      # position within the row
    cdef Py_ssize_t c, base             # class, offset of the row's column in w
    cdef double x                       # a value of the row as read
    cdef double top                     # largest score
    cdef double total                   # sum of the exponentials
    cdef double rest                    # their sum over the classes other than the label
    cdef double norm2                   # ||r||^2
    cdef double g                       # ||g_j|| = ||r|| ||x_j||, then the clip factor
    cdef double sq                      # ||x_j||^2
    for c in range(K):
        r[c] = 0.0
    if row.mapped:
        for p in range(row.nnz):
            x = row_value(&row, p)
            base = <Py_ssize_t>row.columns[p] * K
            for c in range(K):
                r[c] = r[c] + x * w[base + c]
    else:
        for p in range(row.nnz):
            x = <double>row.values[p]
            base = <Py_ssize_t>row.columns[p] * K
            for c in range(K):
                r[c] = r[c] + x * w[base + c]
    if row.tail_column >= 0:
        x = row.tail
        base = <Py_ssize_t>row.tail_column * K
        for c in range(K):
            r[c] = r[c] + x * w[base + c]
    top = r[0]
    for c in range(1, K):
        if r[c] > top:
            top = r[c]
    total = 0.0
    for c in range(K):
        r[c] = exp(a * (r[c] - top))          # a > 0: the shift keeps every exponent <= 0
        total = total + r[c]
    r[label] = 0.0
    rest = 0.0
    for c in range(K):
        rest = rest + r[c]                    # sum over k != label, without cancellation
    norm2 = 0.0
    for c in range(K):
        r[c] = r[c] / total
        norm2 = norm2 + r[c] * r[c]
    r[label] = -rest / total
    norm2 = norm2 + r[label] * r[label]
    if s.clipping:
        if s.sq_norms != NULL:
            sq = s.sq_norms[j]
        else:                           # the row's entries are still in cache
            sq = clipping_sq_norm(row_sq_norm(&row))
        g = sqrt(norm2 * sq)
        if g > s.clip:
            g = s.clip / g
            for c in range(K):
                r[c] = r[c] * g


cdef inline void scatter_residuals(const CsrView[real_t, index_t]* X, RowBatch batch,
                                   const double* R, Py_ssize_t K, double scale, double* w,
                                   ColumnRange columns) noexcept nogil:
    """``w[c, :] += scale * x_{rows[q], c} * R[q, :]`` for q = 0..count-1 (in this order),
    for the columns c of ``columns`` (a row map's appended column included).

    Each column receives its updates in the same order whichever range it
    falls in, so splitting the columns among threads changes no bit.
    """
    cdef int64_t q, j                   # position in the batch, row number
    cdef index_t k, k0, k1              # storage positions of the row's entries in range
    cdef Py_ssize_t c, base             # class, offset of a column in w
    cdef double z                       # scale * x
    cdef const double* rq               # the residual of row q
    cdef CsrRow[real_t, index_t] row    # row j with its map (mapped views only)
    cdef bint mapped = X.row_scale != NULL or X.row_shrink != NULL or X.tail_column >= 0
    for q in range(batch.count):
        j = batch.rows[q]
        rq = &R[q * K]
        row_span(X, j, columns, &k0, &k1)
        if not mapped:
            for k in range(k0, k1):
                z = scale * <double>X.data[k]
                base = <Py_ssize_t>X.indices[k] * K
                for c in range(K):
                    w[base + c] = w[base + c] + z * rq[c]
            continue
        row = csr_row(X, j)
        for k in range(k0, k1):
            z = scale * row_value(&row, k - X.indptr[j])
            base = <Py_ssize_t>X.indices[k] * K
            for c in range(K):
                w[base + c] = w[base + c] + z * rq[c]
        if row.tail_column >= 0 and (columns.every or (
                columns.lo <= row.tail_column and row.tail_column < columns.hi)):
            z = scale * row.tail
            base = <Py_ssize_t>row.tail_column * K
            for c in range(K):
                w[base + c] = w[base + c] + z * rq[c]


cdef inline void example_gradient(const StepModel* model, const CsrView[real_t, index_t]* X,
                                  int64_t j, const double* w, double a,
                                  double* out) noexcept nogil:
    """The clipped gradient of row j at ``theta = a w``, as its K numbers ``out[0..K-1]``."""
    if model.K == 1:
        out[0] = gradient_coefficient(&model.glm, X, j, w, a)
    else:
        softmax_residual(&model.softmax, X, j, w, a, out)


cdef inline void scatter_gradients(const StepModel* model, const CsrView[real_t, index_t]* X,
                                   RowBatch batch, const double* grads, double scale,
                                   double* w, ColumnRange columns) noexcept nogil:
    """``w += scale * sum_q`` (gradient of batch row q), over the columns of ``columns``."""
    if model.K == 1:
        scatter_rows(X, batch, grads, scale, w, columns)
    else:
        scatter_residuals(X, batch, grads, model.K, scale, w, columns)


# ---------------------------------------------------------------------------
# the step loop
# ---------------------------------------------------------------------------

ctypedef struct StepRule:
    # theta <- rho theta - kappa (G + xi) at every step, and how it runs.
    double rho                # decay factor in (0, 1]
    double kappa              # step factor eta / L
    double step_std           # kappa * noise_std: one step's noise, theta units
    const double* noise_scale # noise_scale[p]: std of p pending steps (theta units)
    bint noisy                # noise_std > 0
    bint lazy                 # noisy and drawn lazily
    int nt                    # threads (>= 1)
    Py_ssize_t parallel_min_rows   # smallest batch that may take the parallel path
    const int64_t* splits     # the threads' column ranges (nt + 1 entries)


cdef inline void fold(double* w, Py_ssize_t size, double a) noexcept nogil:
    """w *= a (folds the scale of theta = a w into w)."""
    cdef Py_ssize_t i
    for i in range(size):
        w[i] = w[i] * a


cdef inline void add_column_noise(bitgen_t* rng, coef_t* wcol, Py_ssize_t K, double scale,
                                  double* normals) noexcept nogil:
    """``wcol[k] += scale * z_k`` for K fresh standard normals (drawn in order k = 0..K-1),
    in float64 (rounded to the type of w once)."""
    cdef Py_ssize_t c
    if K == 1:
        wcol[0] = <coef_t>(<double>wcol[0] + scale * random_standard_normal(rng))
        return
    random_standard_normal_fill(rng, K, normals)
    for c in range(K):
        wcol[c] = <coef_t>(<double>wcol[c] + scale * normals[c])


cdef inline int64_t add_pending_noise(bitgen_t* rng, const LazyNoise* pending, int64_t n_owing,
                                      coef_t* w, Py_ssize_t K, const double* noise_scale,
                                      double a) noexcept nogil:
    """The noise the listed columns owe (``collect_pending``), in list order; returns the
    draws.  One coefficient per column: the normals in one run (the same stream and order
    as one draw per column), then the scattered adds with w prefetched ahead."""
    cdef int64_t i, c
    if K == 1:
        random_standard_normal_fill(rng, n_owing, pending.normals)
        for i in range(n_owing):
            if i + 16 < n_owing:
                FASTDP_PREFETCH(&w[pending.columns[i + 16]])
            c = pending.columns[i]
            w[c] = <coef_t>(<double>w[c] + (noise_scale[pending.owed[i]] / a) * pending.normals[i])
        return n_owing
    for i in range(n_owing):
        if i + 8 < n_owing:
            FASTDP_PREFETCH(&w[pending.columns[i + 8] * K])
        add_column_noise(rng, &w[pending.columns[i] * K], K, noise_scale[pending.owed[i]] / a,
                         pending.normals)
    return n_owing * K


cdef inline int64_t bring_up_to_date(const CsrView[real_t, index_t]* X, RowBatch batch,
                                     int32_t t_prev, LazyNoise* pending, bitgen_t* rng,
                                     coef_t* w, Py_ssize_t K, const double* noise_scale,
                                     double a) noexcept nogil:
    """Step 1 with lazy noise: every column the batch reads gets the noise of the steps
    up to ``t_prev`` it still owes (``noise_scale[p] / a``: the std of p pending steps, in
    w units); returns the draws."""
    cdef int64_t n_owing = collect_pending(X, batch, t_prev, pending)
    return add_pending_noise(rng, pending, n_owing, w, K, noise_scale, a)


cdef inline int64_t add_eager_noise(bitgen_t* rng, coef_t* w, Py_ssize_t size,
                                    double std) noexcept nogil:
    """Eager noise: ``w[i] += std * z_i`` for i = 0..size-1, in order; returns the draws."""
    cdef Py_ssize_t i
    for i in range(size):
        w[i] = <coef_t>(<double>w[i] + std * random_standard_normal(rng))
    return size


cdef inline int64_t flush_pending_noise(bitgen_t* rng, LazyNoise* pending, coef_t* w,
                                        Py_ssize_t m, Py_ssize_t K, int32_t n_steps,
                                        const double* noise_scale, double a) noexcept nogil:
    """The final flush of a lazy call: each of the m columns (K coefficients each) gets
    the noise of the steps up to ``n_steps`` it still owes, so nothing leaves the call
    with pending noise; returns the draws."""
    cdef int64_t c                      # column
    cdef int64_t n_draws = 0
    cdef int32_t owed                   # steps of noise column c owes
    for c in range(m):
        owed = n_steps - pending.last[c]
        if owed > 0:
            add_column_noise(rng, &w[c * K], K, noise_scale[owed] / a, pending.normals)
            n_draws += K
            pending.last[c] = n_steps
    return n_draws


cdef inline int64_t prefetch_ahead(const CsrView[real_t, index_t]* X, RowBatch batch,
                                   int64_t q) noexcept nogil:
    """Cache hints for a serial pass at batch position q: the row pointers 8 rows ahead,
    the whole row 4 ahead; returns that row's number (-1 past the batch's end), whose
    per-row data the caller may hint too."""
    if q + 8 < batch.count:
        FASTDP_PREFETCH(&X.indptr[batch.rows[q + 8]])
    if q + 4 >= batch.count:
        return -1
    prefetch_row(X, batch.rows[q + 4])
    return batch.rows[q + 4]


cdef inline void prefetch_example(const StepModel* model, const CsrView[real_t, index_t]* X,
                                  RowBatch batch, int64_t q) noexcept nogil:
    """:func:`prefetch_ahead`, and the label and norm of the row 4 ahead."""
    cdef int64_t j = prefetch_ahead(X, batch, q)
    if j < 0:
        return
    if model.K == 1:
        FASTDP_PREFETCH(&model.glm.y[j])
        if model.glm.clipping and model.glm.sq_norms != NULL:
            FASTDP_PREFETCH(&model.glm.sq_norms[j])
    else:
        FASTDP_PREFETCH(&model.softmax.labels[j])
        if model.softmax.clipping and model.softmax.sq_norms != NULL:
            FASTDP_PREFETCH(&model.softmax.sq_norms[j])


cdef inline int64_t run_steps(const StepModel* model, const CsrView[real_t, index_t]* X,
                              double* w, Py_ssize_t m, const int64_t* batch_ptr,
                              const int64_t* rows, Py_ssize_t n_steps, double* grads,
                              LazyNoise* pending, bitgen_t* rng, ParallelGate* gate,
                              const StepRule* rule) noexcept nogil:
    """Run steps 1..n_steps in place on ``w`` (m columns of K coefficients; theta on entry
    and exit); returns the standard normal draws taken.

    Step t reads ``rows[batch_ptr[t - 1]:batch_ptr[t]]``; ``grads`` holds K numbers per
    row of the largest batch.  Nothing leaves with pending noise (final flush).  A view
    whose rows are checked as read (``_checks.pxd: rows_unsafe``) stops before the first
    step that would read a flawed row, w left half-way (the caller raises).
    """
    cdef Py_ssize_t K = model.K
    cdef Py_ssize_t size = m * K        # coefficients in w
    cdef int nt = rule.nt
    cdef int64_t n_draws = 0
    cdef int64_t t, c                   # step, column
    cdef Py_ssize_t q                   # position in the batch
    cdef int tid                        # OpenMP thread
    cdef double a = 1.0                 # theta = a w
    cdef RowBatch batch                 # the rows of step t
    cdef GatedBatch timed               # the path the gate chose for the batch
    if rule.lazy:
        for c in range(m):
            pending.last[c] = 0
    for t in range(1, n_steps + 1):
        batch = step_batch(rows, batch_ptr, t)
        # 0. a trusted (not scanned) structure: check the rows not read before, or stop
        if rows_unsafe(X, batch.rows, batch.count):
            return n_draws              # X.failure names the row; the entry point raises
        # 1. lazy noise: bring every column the batch reads up to step t-1
        if rule.lazy and batch.count > 0:
            n_draws += bring_up_to_date(X, batch, <int32_t>(t - 1), pending, rng, w, K,
                                        rule.noise_scale, a)
        # 2. clipped per-example gradients from the same theta = a w
        timed = gate_open(gate, nt, batch.count, rule.parallel_min_rows)
        if timed.path == 1:
            for q in prange(batch.count, num_threads=nt, schedule="static"):
                example_gradient(model, X, batch.rows[q], w, a, &grads[q * K])
        else:
            for q in range(batch.count):
                prefetch_example(model, X, batch, q)
                example_gradient(model, X, batch.rows[q], w, a, &grads[q * K])
        # 3. decay, then the sparse gradient step in w units
        a = a * rule.rho
        if batch.count > 0:
            if timed.path == 1:
                for tid in prange(nt, num_threads=nt, schedule="static"):
                    scatter_gradients(model, X, batch, grads, -rule.kappa / a, w,
                                      thread_columns(rule.splits, tid))
            else:
                scatter_gradients(model, X, batch, grads, -rule.kappa / a, w, every_column())
        gate_close(&timed, batch.count)
        # 4. eager noise on every coordinate
        if rule.noisy and not rule.lazy:
            n_draws += add_eager_noise(rng, w, size, rule.step_std / a)
        if a < 1e-100:                  # fold before a underflows
            fold(w, size, a)
            a = 1.0
    # final flush: nothing leaves this call with pending noise
    if rule.lazy:
        n_draws += flush_pending_noise(rng, pending, w, m, K, <int32_t>n_steps, rule.noise_scale,
                                       a)
    if a != 1.0:
        fold(w, size, a)
    return n_draws


# ---------------------------------------------------------------------------
# set-up and checks of an entry point
# ---------------------------------------------------------------------------

cdef inline object pending_noise_scale_array(double rho, Py_ssize_t n_steps):
    """``sqrt(h(p))`` for p = 0..n_steps, ``h(p) = sum_{i<p} rho^(2i)`` (closed form),
    as ``expm1(2 p log rho) / expm1(2 log rho)`` (accurate for rho close to 1; ``h(p) = p``
    for rho = 1).  Raises ``ValidationError`` unless ``0 < rho <= 1`` and ``n_steps >= 0``."""
    import numpy as np
    if not (0.0 < rho <= 1.0) or n_steps < 0:
        raise_invalid(f"pending_noise_scales: need 0 < rho <= 1 and n_steps >= 0; got "
                      f"rho={rho}, n_steps={n_steps}.")
    p = np.arange(n_steps + 1, dtype=np.float64)
    if rho == 1.0:
        return np.sqrt(p)
    u = 2.0 * np.log(rho)
    return np.sqrt(np.expm1(p * u) / np.expm1(u))


cdef inline StepRule step_rule(str caller, Py_ssize_t n_steps, Py_ssize_t m, Py_ssize_t K,
                               double rho, double kappa, double noise_std, bint lazy_noise,
                               object bit_generator, int num_threads,
                               Py_ssize_t parallel_min_rows, object column_splits, str what,
                               int32_t[::1] last_noised, LazyNoise* pending, bitgen_t** rng,
                               list keep) except *:
    """The :data:`StepRule` of a call of ``n_steps`` steps on m columns of K coefficients,
    its lazy-noise scratch (``pending``) and its generator (``rng``, NULL without noise).

    The arrays the rule points to are appended to ``keep`` (they must outlive the call);
    ``what`` names m in the message about ``column_splits``.
    """
    cdef StepRule rule
    cdef const double[::1] scales
    cdef const int64_t[::1] splits
    rule.rho = rho
    rule.kappa = kappa
    rule.step_std = kappa * noise_std
    rule.noisy = noise_std > 0.0
    rule.lazy = lazy_noise and rule.noisy
    rule.nt = num_threads if num_threads > 0 else 1
    rule.parallel_min_rows = parallel_min_rows
    scale_arr = rule.step_std * pending_noise_scale_array(rho, n_steps)
    splits_arr = column_splits_of(caller, column_splits, rule.nt, m, what)
    keep.extend((scale_arr, splits_arr))
    scales = scale_arr
    splits = splits_arr
    rule.noise_scale = &scales[0]
    rule.splits = &splits[0]
    pending[0] = lazy_noise_scratch(last_noised, m if rule.lazy else 0,
                                    (m if K == 1 else K) if rule.lazy else 0, keep)
    rng[0] = bit_generator_of(caller, bit_generator) if rule.noisy else NULL
    return rule


cdef inline int check_step_arguments(str caller, Py_ssize_t K, Py_ssize_t n_data,
                                     const index_t[::1] indices, const index_t[::1] indptr,
                                     Py_ssize_t n_labels, const double[::1] sq_norms,
                                     Py_ssize_t m, Py_ssize_t n_last,
                                     const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
                                     Py_ssize_t n_buffer, double clip, double rho, double kappa,
                                     double noise_std, bint lazy, int num_threads,
                                     object check_structure, object token_class,
                                     int64_t stored_columns) except -1:
    """The checks every step kernel runs (its own come before): the CSR arrays, one label
    and (when clipping, unless ``sq_norms`` is None: computed in the kernel) one valid
    squared norm per row, ``last_noised`` (>= m in lazy noisy
    mode), the batches and a buffer of K numbers per row of the largest one,
    ``0 < rho <= 1``, ``kappa > 0``, ``clip > 0``, ``noise_std >= 0``, the thread count, and,
    unless ``check_structure`` proves it, the CSR structure (stored columns below
    ``stored_columns``); returns the proof (``_checks.pxd: check_csr_structure``).  The
    messages name the arguments of the GLM kernel (K == 1) or of the multinomial one."""
    cdef int64_t n_rows, largest
    cdef bint glm = K == 1
    check_csr(caller, n_data, indices, indptr)
    n_rows = indptr.shape[0] - 1
    check_length(caller, "y", n_labels, n_rows,
                 "one label per row of X" if glm else "one class index per row of X")
    if clip < INFINITY and sq_norms is not None:
        check_length(caller, "sq_norms", sq_norms.shape[0], n_rows,
                     "one squared norm per row of X")
        check_sq_norms(caller, sq_norms)
    if lazy:
        check_min_length(caller, "last_noised", n_last, m,
                         "one per coefficient of w, in lazy noisy mode" if glm
                         else "one per feature (row of w), in lazy noisy mode")
    largest = check_batches(caller, batch_ptr, batch_idx, n_rows)
    check_min_length(caller, "coef_buffer" if glm else "residual_buffer", n_buffer, largest * K,
                     "one per row of the largest batch" if glm
                     else "K per row of the largest batch")
    if not (0.0 < rho <= 1.0) or not kappa > 0.0 or not clip > 0.0 or not noise_std >= 0.0:
        raise_invalid(f"{caller}: need 0 < rho <= 1, kappa > 0, clip > 0 (inf for none) and "
                      f"noise_std >= 0; got rho={rho}, kappa={kappa}, clip={clip}, "
                      f"noise_std={noise_std}.")
    check_threads(caller, num_threads)
    return check_csr_structure(caller, check_structure, token_class, indices, indptr,
                               stored_columns, "w")


cdef inline int64_t run_step_kernel(
        str caller, const StepModel* model, const real_t[::1] data, const index_t[::1] indices,
        const index_t[::1] indptr, Py_ssize_t n_labels, const double[::1] sq_norms, double* w,
        Py_ssize_t m, const int64_t[::1] batch_ptr, const int64_t[::1] batch_idx,
        double[::1] buffer, int32_t[::1] last_noised, double clip, double rho, double kappa,
        double noise_std, bint lazy_noise, object bit_generator, int num_threads,
        Py_ssize_t parallel_min_rows, object column_splits, str what, object check_structure,
        object token_class, const double[::1] row_scale, const double[::1] row_shrink,
        double tail_value, int64_t tail_column, int64_t stored_columns,
        ParallelGate* gates) except -1:
    """An entry point's common part: check its arguments (:func:`check_step_arguments`),
    set up the rule, read X through its row map (:func:`mapped_view`) and run the steps
    without the GIL (:func:`run_steps`), with the entry point's timing gate for
    ``num_threads`` (in ``gates``); returns the draws.  ``what`` names m in messages."""
    cdef Py_ssize_t n_steps = batch_ptr.shape[0] - 1
    cdef int64_t n_draws
    cdef LazyNoise pending                          # lazy-noise bookkeeping
    cdef bitgen_t* rng                              # NULL without noise
    cdef StepRule rule
    cdef CsrView[real_t, index_t] X
    cdef ParallelGate gate
    cdef int64_t failure[2]                         # a flawed row read (trusted structure)
    cdef int proof = check_step_arguments(
        caller, model.K, data.shape[0], indices, indptr, n_labels, sq_norms, m,
        last_noised.shape[0], batch_ptr, batch_idx, buffer.shape[0], clip, rho, kappa, noise_std,
        lazy_noise and noise_std > 0.0, num_threads, check_structure, token_class,
        stored_columns)
    if n_steps <= 0:
        return 0
    check_step_count(caller, n_steps)
    keep = []                                       # arrays the rule points to
    rule = step_rule(caller, n_steps, m, model.K, rho, kappa, noise_std, lazy_noise,
                     bit_generator, num_threads, parallel_min_rows, column_splits, what,
                     last_noised, &pending, &rng, keep)
    X = mapped_view(data, indices, indptr, row_scale, row_shrink, tail_value, tail_column)
    check_rows_as_read(&X, proof, check_structure, failure)
    gate = gates[gate_slot(num_threads)]
    with nogil:
        n_draws = run_steps(model, &X, w, m, &batch_ptr[0],
                            &batch_idx[0] if batch_idx.shape[0] > 0 else NULL, n_steps,
                            &buffer[0] if buffer.shape[0] > 0 else NULL, &pending, rng, &gate,
                            &rule)
    gates[gate_slot(num_threads)] = gate
    if X.row_checked != NULL:
        raise_failure(caller, failure, X.check_below)
    return n_draws
