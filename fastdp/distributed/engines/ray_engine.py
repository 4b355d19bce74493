"""Ray engine: one actor per agent, messages passed actor to actor (``pip install fastdp[ray]``).

Each agent is a Ray actor that holds its shard, its state and its noise key;
its local data never leaves it. A round costs one actor call per active
agent: ``advance(t, senders, weights, *partner_messages)`` mixes the round-t
messages (passed as ``ObjectRef``\\ s that Ray resolves inside the actor, so the
driver never fetches or relays a payload), takes the prox step, and returns
the agent's message for its *next* active round. Calls are submitted ahead
(pipelined); Ray runs each actor's calls in submission order, which gives
exactly the synchronous semantics of the algorithm.

Fault tolerance: every ``checkpoint_every`` rounds the driver asks every
actor for its state (kept in Ray's object store, owned by the driver, never
fetched). When an actor dies, the driver recreates it, restores every actor
to the last checkpoint and replays the rounds since. Noise is keyed to
``(agent, round)``, so the replay recomputes bit-identical messages: a message
that may already have been seen is never re-released with fresh noise, and
the result equals that of a run without failure.

Privacy: as :mod:`fastdp.distributed.node`. What crosses actor boundaries:
the messages ``z_i + a_t (g_i + nu_i)`` (dense ``dim``-vectors), the public
schedule, and the checkpoints (z, x and running averages: post-processing of
released messages). Shards go from the driver to their actor once (or are
loaded inside the actor with ``shard_loader``).
"""

import os
import time

import numpy as np

from fastdp.distributed.engines.base import Engine, EngineResult
from fastdp.distributed.node import (
    NodeState,
    apply_mix,
    averaged_iterate,
    catch_up,
    compute_message,
    mix_messages,
    validate_shard,
)
from fastdp.exceptions import ValidationError

__all__ = ["RayEngine", "NodeAgent"]


def _import_ray():
    # local clusters bind to 127.0.0.1 (Ray otherwise advertises the machine's NIC address)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the Ray engine needs Ray: pip install 'fastdp[ray]' (or pip install ray). "
            "The default engine='simulated' needs nothing extra.") from exc
    return ray


class NodeAgent:
    """The state machine of one agent (wrapped in a Ray actor by :class:`RayEngine`).

    Parameters
    ----------
    node : int
    program : NodeProgram
    shard : NodeShard or None
        The agent's data; ``None`` when ``shard_loader`` loads it in place.
    key : ndarray of 2 uint64
        The agent's noise key.
    active_rounds : ndarray of int
        The public rounds in which the agent is active.
    shard_loader : callable, optional
        ``shard_loader(node) -> NodeShard``, run inside the actor; what it
        returns is checked by :func:`~fastdp.distributed.node.validate_shard`.
    n_rows : int, optional
        The shard size the run was calibrated for (required with ``shard_loader``).
    """

    def __init__(self, node, program, shard, key, active_rounds, shard_loader=None, n_rows=None):
        self.node = int(node)
        self.program = program
        if shard_loader is None:
            self.shard = shard
        else:
            if n_rows is None:
                raise ValidationError("an agent that loads its shard needs the planned shard size.")
            self.shard = validate_shard(shard_loader(self.node), program, n_rows)
        self.key = key
        self.rounds = np.asarray(active_rounds, dtype=np.int64)
        self.state = NodeState.initial(program)
        self.pos = 0
        self.own = None

    def ping(self):
        return self.node

    def first_message(self):
        """Message for the first active round (or None); returns ``(ack, message)``."""
        self.own = self._next_message()
        return self.pos, self.own

    def _next_message(self):
        if self.pos >= len(self.rounds):
            return None
        return compute_message(self.program, self.state, self.shard, self.key,
                               int(self.rounds[self.pos]))

    def advance(self, t, senders, weights, *partner_messages):
        """Round ``t``: mix, prox step; returns ``(ack, message for the next active round)``."""
        if self.pos >= len(self.rounds) or int(self.rounds[self.pos]) != t:
            raise RuntimeError(f"agent {self.node} is not scheduled for round {t}")
        others = iter(partner_messages)
        msgs = [self.own if int(j) == self.node else next(others) for j in senders]
        apply_mix(self.program, self.state, t, mix_messages(weights, msgs))
        self.pos += 1
        self.own = self._next_message()
        return self.pos, self.own

    def averaged(self, t):
        return averaged_iterate(self.program, self.state, t)

    def finish(self, T):
        catch_up(self.program, self.state, T)
        p = self.program
        x = self.state.x if p.inactive_x == "literal" else p.prox_at(self.state.z, T + 1)
        return self.state.s / p.tables["A"][T], self.state.z, x

    def get_state(self):
        return self.state.copy(), self.pos, None if self.own is None else self.own.copy()

    def set_state(self, checkpoint):
        state, pos, own = checkpoint
        self.state, self.pos, self.own = state.copy(), int(pos), None if own is None else own.copy()
        return self.pos

    def crash(self):  # fault injection for tests
        os._exit(1)


class RayEngine(Engine):
    """One Ray actor per agent (see the module docstring).

    Parameters
    ----------
    checkpoint_every : int, default=64
        Rounds between checkpoints (and between flow-control barriers).
    max_failures : int, default=3
        Recoveries allowed before the run is abandoned.
    init_kwargs : dict, optional
        Passed to ``ray.init`` when Ray is not running yet. Default: a local
        cluster with ``num_cpus=2``, no dashboard, every service bound to
        127.0.0.1 (the engine sets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
        which makes Ray use the loopback address). Give ``address`` to join a
        running cluster. An already initialised Ray is used as it is.
    shard_loader : callable, optional
        ``shard_loader(node) -> NodeShard`` run inside each actor, so the data
        never passes through the driver (the ``shards`` given to ``run`` are
        then ignored).
    fail_at : (int, int), optional
        Fault injection for tests: kill agent ``fail_at[0]``'s actor right
        after round ``fail_at[1]`` is submitted (once).
    """

    name = "ray"

    def __init__(self, checkpoint_every=64, max_failures=3, init_kwargs=None, shard_loader=None,
                 fail_at=None):
        if int(checkpoint_every) < 1:
            raise ValidationError("checkpoint_every must be >= 1.")
        self.checkpoint_every = int(checkpoint_every)
        self.max_failures = int(max_failures)
        self.init_kwargs = init_kwargs
        self.shard_loader = shard_loader
        self.fail_at = fail_at

    def __repr__(self):
        return f"RayEngine(checkpoint_every={self.checkpoint_every})"

    def _ensure_ray(self):
        ray = _import_ray()
        if not ray.is_initialized():
            if self.init_kwargs is None or "address" not in self.init_kwargs:
                from ray._private import ray_constants
                ray_constants.ENABLE_RAY_CLUSTER = False     # loopback only for a local cluster
            kwargs = dict(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                          log_to_driver=False, configure_logging=False)
            kwargs.update(self.init_kwargs or {})
            ray.init(**kwargs)
        return ray

    def run(self, program, shards, schedule, keys, eval_rounds=(), diagnostics=None):
        if diagnostics is not None:
            raise ValidationError(
                "the y^(t) diagnostic reads every agent's z in every round: record it with "
                "engine='simulated', which gives the same bits as the Ray engine.")
        ray = self._ensure_ray()
        Agent = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(NodeAgent)
        n, T = schedule.n_nodes, schedule.n_rounds
        rounds = [schedule.active_rounds(i) for i in range(n)]
        program_ref = ray.put(program)
        shard_refs = [None] * n if self.shard_loader is not None else [ray.put(s) for s in shards]

        def make(i):
            return Agent.remote(i, program_ref, shard_refs[i], keys[i], rounds[i], self.shard_loader,
                                shards[i].n_samples)

        actors = [make(i) for i in range(n)]
        try:
            return self._rounds(ray, actors, make, program, schedule, rounds, eval_rounds)
        finally:
            for a in actors:
                ray.kill(a)

    def _rounds(self, ray, actors, make, program, schedule, rounds, eval_rounds):
        n, T = schedule.n_nodes, schedule.n_rounds
        pending, acks = {}, []
        for i in range(n):
            ack, msg = actors[i].first_message.options(num_returns=2).remote()
            pending[i] = msg
            acks.append(ack)
        ray.get(acks)
        evals = sorted(set(int(t) for t in eval_rounds))
        history, restarts, failures = [], 0, 0
        fail_at = self.fail_at
        start = time.perf_counter()
        t0 = 0
        while t0 < T:
            t1 = min(T, t0 + self.checkpoint_every)
            checkpoint = [a.get_state.remote() for a in actors]
            saved_pending = dict(pending)
            try:
                window_history = []
                acks = []
                for t in range(t0 + 1, t1 + 1):
                    rnd = schedule.round(t)
                    new = {}
                    for receivers, senders, weights in rnd.groups:
                        for i in receivers:
                            others = [pending[int(j)] for j in senders if j != i]
                            ack, msg = actors[i].advance.options(num_returns=2).remote(
                                t, senders, weights, *others)
                            new[int(i)] = msg
                            acks.append(ack)
                    pending.update(new)
                    if fail_at is not None and t == fail_at[1]:
                        actors[fail_at[0]].crash.remote()
                        fail_at = None
                    if t in evals:
                        avg = ray.get([a.averaged.remote(t) for a in actors])
                        window_history.append((t, np.mean(avg, axis=0)))
                ray.get(acks)
                history.extend(window_history)
                t0 = t1
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
                failures += 1
                if failures > self.max_failures:
                    raise RuntimeError(f"Ray engine: more than {self.max_failures} failures") from exc
                for i, a in enumerate(actors):
                    try:
                        ray.get(a.ping.remote(), timeout=60)
                    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                        actors[i] = make(i)
                        restarts += 1
                ray.get([a.set_state.remote(c) for a, c in zip(actors, checkpoint)])
                pending = saved_pending
        outs = ray.get([a.finish.remote(T) for a in actors])
        seconds = time.perf_counter() - start
        n_messages = schedule.n_messages()
        return EngineResult(
            node_averages=np.stack([o[0] for o in outs]), z=np.stack([o[1] for o in outs]),
            x=np.stack([o[2] for o in outs]), history=history, n_messages=n_messages,
            message_bytes=n_messages * program.dim * program.message_itemsize, seconds=seconds, restarts=restarts)
