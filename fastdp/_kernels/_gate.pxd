# cython: language_level=3
"""The serial/parallel timing gate of the compiled kernels, written once.

A kernel whose batch may run on one thread or on several (OpenMP) asks a
:data:`ParallelGate` which path to take (:func:`gate_begin`), runs the batch,
and tells the gate how long it took (:func:`gate_end`).  Both paths give the
same bits, so the choice may follow measured times: on a busy machine, where
OpenMP threads wait for a core at every barrier, the parallel path is soon
left; where it pays, it is kept.  Each kernel module keeps a table of gates,
one per thread count (:func:`gate_slot`), reset at import (:func:`gates_reset`).
"""
from libc.stdint cimport int64_t


cdef extern from *:
    """
    #if defined(_OPENMP)
    #include <omp.h>
    static double fastdp_glm_now(void) { return omp_get_wtime(); }
    #else
    static double fastdp_glm_now(void) { return 0.0; }
    #endif
    """
    double fastdp_glm_now() nogil


ctypedef struct ParallelGate:
    # Which path (serial or OpenMP) a kernel should take for the next batch.
    # Only speed depends on it: both paths give the same bits, so the choice
    # may follow measured times.  The preferred path's seconds per batch row
    # are smoothed (exponential moving average); every ``interval`` batches
    # the other path is re-tried for two batches, the first discarded (it pays
    # for moving the data between cores' caches, or for starting the threads),
    # the second compared.  A re-try that loses at least doubles the interval
    # (more when it lost by far; up to GATE_MAX_INTERVAL); one that wins
    # switches paths.  On a busy machine,
    # where OpenMP threads wait for a core at every barrier, the parallel path
    # is soon left; where it pays, it is kept.
    double per_row[2]
    int64_t seen[2]
    int64_t interval
    int64_t countdown
    int probe_batches
    int preferred
    double started            # clock at the start of the batch being timed


cdef enum:
    GATE_FIRST_INTERVAL = 32
    GATE_MAX_INTERVAL = 8192
    GATE_SLOTS = 9            # one gate per thread count 0..7, the last shared by 8 and more


cdef inline void gate_reset(ParallelGate* g) noexcept nogil:
    g.per_row[0] = -1.0
    g.per_row[1] = -1.0
    g.seen[0] = 0
    g.seen[1] = 0
    g.interval = GATE_FIRST_INTERVAL
    g.countdown = 0
    g.probe_batches = 0
    g.preferred = 1
    g.started = 0.0


cdef inline void gates_reset(ParallelGate* gates, int count) noexcept nogil:
    cdef int i
    for i in range(count):
        gate_reset(&gates[i])


cdef inline int gate_slot(int64_t num_threads) noexcept nogil:
    """The gate of a thread count in a table of GATE_SLOTS gates."""
    return <int>num_threads if 0 < num_threads < GATE_SLOTS - 1 else GATE_SLOTS - 1


cdef inline int gate_choose(ParallelGate* g) noexcept nogil:
    """1 for the parallel path, 0 for the serial one."""
    if g.seen[1] < 2:
        return 1
    if g.countdown <= 0:
        return 1 - g.preferred
    return g.preferred


cdef inline void gate_record(ParallelGate* g, int path, double seconds,
                             int64_t rows) noexcept nogil:
    """Fold the time of one batch of ``rows`` rows taken on ``path`` into the gate."""
    cdef double x, ratio
    if rows <= 0 or seconds <= 0.0:
        return
    x = seconds / <double>rows
    g.seen[path] += 1
    if g.seen[path] == 1:
        return                                  # warm-up: thread start, first touch
    if path == g.preferred:
        if g.per_row[path] < 0.0:
            g.per_row[path] = x
        else:
            g.per_row[path] = 0.75 * g.per_row[path] + 0.25 * x
        g.countdown -= 1
        return
    # a re-try of the other path
    g.probe_batches += 1
    if g.probe_batches < 2:
        return                                  # pays for the cache migration
    g.probe_batches = 0
    g.per_row[path] = x
    if g.per_row[g.preferred] < 0.0 or x < g.per_row[g.preferred]:
        g.preferred = path
        g.interval = GATE_FIRST_INTERVAL
    else:
        # wait at least twice as long, and long enough that re-tries cost at
        # most ~5% (a re-try is two batches at `ratio` times the price)
        ratio = x / g.per_row[g.preferred]
        g.interval = 2 * g.interval
        if ratio * 40.0 > <double>g.interval:
            g.interval = <int64_t>(ratio * 40.0)
        if g.interval > GATE_MAX_INTERVAL:
            g.interval = GATE_MAX_INTERVAL
    g.countdown = g.interval


cdef inline int gate_begin(ParallelGate* g, bint eligible) noexcept nogil:
    """The path of the next batch (1 parallel, 0 serial), its clock started.

    ``eligible``: the batch may run in parallel at all (more than one thread,
    enough rows); if not, the serial path, untimed.
    """
    if not eligible:
        return 0
    g.started = fastdp_glm_now()
    return gate_choose(g)


cdef inline void gate_end(ParallelGate* g, bint eligible, int path, int64_t rows) noexcept nogil:
    """Record the batch begun by :func:`gate_begin` (nothing unless eligible)."""
    if eligible:
        gate_record(g, path, fastdp_glm_now() - g.started, rows)


cdef inline dict gate_state(const ParallelGate* g):
    """The gate as a dict (diagnostics for benchmarks)."""
    return {"seconds_per_row_serial": g.per_row[0], "seconds_per_row_parallel": g.per_row[1],
            "parallel_preferred": bool(g.preferred), "retry_interval": g.interval,
            "batches_to_retry": g.countdown}


ctypedef struct GatedBatch:
    # One batch timed by a gate: opened by :func:`gate_open`, closed by :func:`gate_close`.
    ParallelGate* gate        # the gate that chose the path
    bint eligible             # the batch may run in parallel (threads > 1, enough rows)
    int path                  # 1: parallel, 0: serial
    int nt                    # threads of the path taken (1 on the serial path)


cdef inline GatedBatch gate_open(ParallelGate* g, int num_threads, int64_t rows,
                                 int64_t min_rows) noexcept nogil:
    """Begin a batch of ``rows`` rows: eligible for the parallel path when
    ``num_threads > 1`` and ``rows >= min_rows``; the gate picks the path."""
    cdef GatedBatch b
    b.gate = g
    b.eligible = num_threads > 1 and rows >= min_rows
    b.path = gate_begin(g, b.eligible)
    b.nt = num_threads if b.path == 1 else 1
    return b


cdef inline void gate_close(const GatedBatch* b, int64_t rows) noexcept nogil:
    """Record the batch begun by :func:`gate_open` (its time, if it was eligible)."""
    gate_end(b.gate, b.eligible, b.path, rows)
