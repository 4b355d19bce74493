"""Where the workers run: in this process (:class:`LocalWorkers`) or as Ray actors (:class:`RayWorkers`).

Both give the same bits: a worker's step is a pure function of (t, the model
coordinates sent), and the driver reduces per-shard partial sums in shard
order (:mod:`.driver`).

Fault tolerance (:class:`RayWorkers`): when a call fails because an actor
died, the driver starts a new actor for the same shards, which reloads and
re-maps them, and retries the step with the same model values (the driver's
state, unchanged until every partial sum of the step has arrived): the run
completes with the same result as without the failure.  Workers with state
(dual DP-SCD: alpha) cannot retry a step after a restart; the executor raises
:class:`~.driver.WorkersRestarted` instead, and the driver restores every
worker from the last epoch checkpoint (:meth:`checkpoint`, kept in the Ray
object store) and replays the epoch (:mod:`.dual`).
"""

import numbers
import os

import numpy as np

from fastdp.distributed.data_parallel.driver import WorkersRestarted
from fastdp.distributed.data_parallel.shards import ShardValidationError
from fastdp.distributed.data_parallel.worker import ShardWorker
from fastdp.exceptions import ValidationError

__all__ = ["LocalWorkers", "RayWorkers", "shard_assignment", "worker_sources"]


def shard_assignment(n_shards, n_workers):
    """Consecutive shard numbers of each worker (as even as possible)."""
    if not 1 <= n_workers <= n_shards:
        raise ValidationError(f"n_workers must be in [1, n_shards = {n_shards}]; got {n_workers}.")
    edges = [(n_shards * w) // n_workers for w in range(n_workers + 1)]
    return [list(range(edges[w], edges[w + 1])) for w in range(n_workers)]


_STEP_METHODS = ("step", "gradient_sums")   # what fail_at counts
_PLACEMENTS = ("node", "spread")


def _least_used_node(ray, used, w):
    """Node id (hex) for worker ``w``: at start (``w == len(used)``) the w-th alive node in
    id order, round robin; for a restart, the alive node holding the fewest other workers
    (ties: id order)."""
    alive = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    if w >= len(used):
        return alive[w % len(alive)]
    others = [node for i, node in enumerate(used) if i != w]
    return min(alive, key=lambda node: (others.count(node), alive.index(node)))


def worker_sources(source, assignment):
    """The source each worker is sent: only its own rows when the loader holds them in memory.

    A loader with a ``part(start, stop)`` method (:class:`~.shards.ArrayRows`)
    is cut to the worker's rows (views of X's arrays: the driver makes no
    copy, and a remote worker receives only its shard); other loaders read
    the rows where the worker runs, and every worker gets the same source.
    """
    import dataclasses

    part = getattr(source.loader, "part", None)
    if part is None:
        return [source] * len(assignment)
    specs = source.shards()
    return [dataclasses.replace(source, loader=part(specs[s[0]].start, specs[s[-1]].stop))
            for s in assignment]


def _count(name, value):
    """An int >= 1 (bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValidationError(f"{name} must be an int >= 1; got {value!r}.")
    return int(value)


def _raise_shard_errors(replies):
    errors = [detail for status, detail in replies if status != "ok"]
    if errors:
        raise ShardValidationError("; ".join(errors))


class _Workers:
    """Shared logic: open (load + check), prepare (map), columns, step."""

    n_workers = 1
    restarts = 0

    def open(self, source):
        """Start the workers; each loads and checks its shards.  Returns the shard summaries."""
        self.source = source
        self.assignment = shard_assignment(source.n_shards, min(self.n_workers, source.n_shards))
        self._start()
        replies = self._call("load", [()] * len(self.assignment))
        _raise_shard_errors(replies)
        return [s for _, summaries in replies for s in summaries]

    def prepare(self, setup):
        self.setup = setup
        _raise_shard_errors(self._call("prepare", [(setup,)] * len(self.assignment)))

    def columns(self, t):
        return self._call("columns", [(t,)] * len(self.assignment))

    def step(self, t, theta_values):
        return self._call("step", [(t, v) for v in theta_values])

    def broadcast(self, method, *args):
        """``method(*args)`` on every worker (the same arguments); the replies in worker order."""
        return self._call(method, [args] * len(self.assignment))

    def scatter(self, method, args):
        """``method(*args[w])`` on worker w (its own arguments); the replies in worker order."""
        if len(args) != len(self.assignment):
            raise ValueError(f"{len(args)} argument tuples for {len(self.assignment)} workers")
        return self._call(method, [tuple(a) for a in args])

    def checkpoint(self, initial=False):
        """Keep every worker's private state (dual DP-SCD: alpha) as of now.

        ``initial``: the start of the run (no call: workers start from zero).
        """
        self._saved = [None] * len(self.assignment) if initial else self._keep("checkpoint")

    def restore(self):
        """Every worker back to the last :meth:`checkpoint` (retried if a worker dies)."""
        while True:
            try:
                self._call("restore", [(s,) for s in self._saved])
                return
            except WorkersRestarted:
                continue

    def _keep(self, method):
        return self._call(method, [()] * len(self.assignment))

    def close(self):
        """Drop the run's state (the source, the workers and their shards, the checkpoint).

        The executor keeps its configuration (and ``restarts``) and can run again.
        """
        for name in ("source", "workers", "setup", "_saved", "_source_refs"):
            if name in self.__dict__:
                setattr(self, name, [] if name == "workers" else None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LocalWorkers(_Workers):
    """Workers in this process (the single-machine path; tests).

    Parameters
    ----------
    n_workers : int, default=1
    n_shards : int or None, default=None
        Shards an estimator's ``fit(X, y)`` cuts the rows into when this is its
        ``engine`` (None: ``n_workers``).  :func:`fit_distributed` takes the
        source's shards (an ``n_shards`` set here must agree).
    """

    name = "local"

    def __init__(self, n_workers=1, *, n_shards=None):
        self.n_workers = _count("n_workers", n_workers)
        self.n_shards = None if n_shards is None else _count("n_shards", n_shards)

    def __repr__(self):
        shards = "" if self.n_shards is None else f", n_shards={self.n_shards}"
        return f"LocalWorkers(n_workers={self.n_workers}{shards})"

    def _start(self):
        self.workers = [ShardWorker(self.source, shards) for shards in self.assignment]

    def _call(self, method, args):
        return [getattr(w, method)(*a) for w, a in zip(self.workers, args)]

    def run_tasks(self, function, args):
        """``[function(*a) for a in args]`` in this process (e.g. counting LIBSVM rows)."""
        return [function(*a) for a in args]


def _import_ray():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("RayWorkers needs Ray: pip install 'fastdp[ray]'.") from exc
    return ray


class RayWorkers(_Workers):
    """One Ray actor per worker; each loads its own shards (the driver never holds X).

    Parameters
    ----------
    address : str or None
        Ray cluster to join (``ray.init(address=...)``), e.g. ``"auto"`` or
        ``"10.0.0.1:6379"``.  None: an already initialised Ray, or a local
        one with ``num_cpus=2``, no dashboard, bound to 127.0.0.1.
    n_workers : int, default=2
        Actors (at most the number of shards).
    n_shards : int or None, default=None
        Shards an estimator's ``fit(X, y)`` cuts the rows into when this is its
        ``engine`` (None: ``n_workers``).  :func:`fit_distributed` takes the
        source's shards (an ``n_shards`` set here must agree).
    num_cpus : float, default=0
        CPUs each actor reserves (0: placed whatever the free CPUs).
    placement : {"node", "spread"}, default="node"
        ``"node"``: one worker per node: worker w goes to the w-th alive node
        (sorted by node id, round robin when there are more workers than
        nodes) with a soft node affinity; a worker restarted after its node
        is lost goes to the alive node with the fewest of this run's workers.
        ``"spread"``: Ray's ``"SPREAD"`` strategy (best effort: two workers
        may share a node while another is idle).
    max_failures : int, default=3
        Actor restarts allowed before the run is abandoned.
    fail_at : (int, int), optional
        Fault injection for tests: ``ray.kill`` worker ``fail_at[0]`` while
        step ``fail_at[1]`` is in flight (once); a step is a DP-SGD/DP-SCD
        step or a line-search solver's gradient query.
    """

    name = "ray"

    def __init__(self, address=None, n_workers=2, *, n_shards=None, num_cpus=0, max_failures=3,
                 fail_at=None, placement="node"):
        self.address = address
        self.n_workers = _count("n_workers", n_workers)
        self.n_shards = None if n_shards is None else _count("n_shards", n_shards)
        self.num_cpus = float(num_cpus)
        self.max_failures = int(max_failures)
        self.fail_at = fail_at
        if placement not in _PLACEMENTS:
            raise ValidationError(f"placement must be one of {_PLACEMENTS}; got {placement!r}.")
        self.placement = placement
        self.actors = []
        self.actor_nodes = []
        self.restarts = 0
        self.setup = None

    def __repr__(self):
        shards = "" if self.n_shards is None else f", n_shards={self.n_shards}"
        where = "" if self.placement == "node" else f", placement={self.placement!r}"
        return (f"RayWorkers(address={self.address!r}, n_workers={self.n_workers}{shards}"
                f"{where})")

    def _ray(self):
        ray = _import_ray()
        if not ray.is_initialized():
            if self.address is None:
                os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
                from ray._private import ray_constants
                ray_constants.ENABLE_RAY_CLUSTER = False     # loopback only for a local cluster
                ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                         log_to_driver=False, configure_logging=False)
            else:
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
        return ray

    def _new_actor(self, w):
        ray = self._ray()
        strategy, node = "SPREAD", None
        if self.placement == "node":
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            node = _least_used_node(ray, self.actor_nodes, w)
            # hard affinity: a soft one falls back to any node whenever the chosen node's
            # raylet answers late (seen under load: two workers on one node); a node that
            # dies before the actor starts fails the actor, which the restart loop replaces
            # on a live node
            strategy = NodeAffinitySchedulingStrategy(node, soft=False)
        Actor = ray.remote(num_cpus=self.num_cpus, max_restarts=0, max_task_retries=0,
                           scheduling_strategy=strategy)(ShardWorker)
        actor = Actor.remote(self._source_refs[w], self.assignment[w])
        if w < len(self.actor_nodes):
            self.actor_nodes[w] = node
        else:
            self.actor_nodes.append(node)
        return actor

    def _start(self):
        ray = self._ray()
        self._source_refs = [ray.put(s) for s in worker_sources(self.source, self.assignment)]
        self.actor_nodes = []
        self.actors = [self._new_actor(w) for w in range(len(self.assignment))]

    def worker_nodes(self):
        """The node id each worker runs on (asked from the workers), in worker order."""
        ray = self._ray()
        return ray.get([a.node_id.remote() for a in self.actors])

    def broadcast(self, method, *args):
        """As :meth:`_Workers.broadcast`; arrays are put in the object store once for all actors."""
        ray = self._ray()
        args = tuple(ray.put(a) if isinstance(a, np.ndarray) and a.nbytes > 4096 else a
                     for a in args)
        return super().broadcast(method, *args)

    def run_tasks(self, function, args):
        """``[function(*a) for a in args]`` as Ray tasks spread over the nodes."""
        ray = self._ray()
        task = ray.remote(num_cpus=self.num_cpus, scheduling_strategy="SPREAD")(function)
        return ray.get([task.remote(*a) for a in args])

    def _call(self, method, args):
        ray = self._ray()
        failures = 0
        while True:
            refs = [getattr(a, method).remote(*x) for a, x in zip(self.actors, args)]
            if self.fail_at is not None and method in _STEP_METHODS:
                self._n_step_calls = getattr(self, "_n_step_calls", 0) + 1
                if self._n_step_calls == self.fail_at[1]:
                    ray.kill(self.actors[self.fail_at[0]], no_restart=True)
                    self.fail_at = None
            try:
                return ray.get(refs)
            except ray.exceptions.RayActorError as exc:
                failures += 1
                if failures > self.max_failures:
                    raise RuntimeError(f"RayWorkers: more than {self.max_failures} worker "
                                       "failures in one call") from exc
                self._restart_dead(ray)
                if getattr(self.setup, "dual", None) is not None:
                    raise WorkersRestarted() from exc   # state lost: the driver replays

    def _keep(self, method):
        """Run ``method`` on every actor; keep the results on the driver's node.

        The values are fetched (numpy arrays come as read-only views of the
        driver node's object store, not copies on the driver's heap): a copy
        that stayed in the object store of the worker's node would be lost
        with that node (``ObjectReconstructionFailedError``: an actor's
        result cannot be recomputed).  Dual DP-SCD: 8 bytes per row per epoch.
        """
        ray = self._ray()
        refs = [getattr(a, method).remote() for a in self.actors]
        try:   # a dead actor's result holds its error: restart and replay
            return ray.get(refs)
        except ray.exceptions.RayActorError as exc:
            self._restart_dead(ray)
            raise WorkersRestarted() from exc

    def _restart_dead(self, ray):
        for w, actor in enumerate(self.actors):
            try:
                ray.get(actor.ping.remote(), timeout=60)
                continue
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass
            self.actors[w] = self._new_actor(w)
            self.restarts += 1
            if self.setup is not None:   # reload and re-map its shards before the retry
                status, detail = ray.get(self.actors[w].prepare.remote(self.setup))
                if status != "ok":
                    raise ShardValidationError(detail)

    def close(self):
        if self.actors:
            ray = self._ray()
            for a in self.actors:
                ray.kill(a)
            self.actors = []
            self.actor_nodes = []
        super().close()
