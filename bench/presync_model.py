#!/usr/bin/env python3
"""A model of mtsched's pre-sync at 2 to 100k ranks (issue 40).

The pre-sync (lib/Autotune/PreSync.cpp) is a barrier bounded by the arrival
deadline D (--pre-sync-timeout-ms), then one all-gather of every rank's
arrival record bounded by the agreement timeout G (--agreement-timeout-ms).
It falls back when a rank arrives more than D after the first one, when the
all-gather does not finish within G, or when the all-gather cannot run at all.
This script predicts

* the cost once every rank is there, for three implementations:
  - `thread`: ThreadGroup (lib/Runtime/Communicator.cpp): one mutex and one
    condition variable per group; every arrival takes the mutex and wakes
    every waiter (notify_all), a completed slot is copied out and garbage
    collected under the mutex. Modelled as a discrete-event simulation of N
    threads on C cores: a woken thread costs `t_wake` of a core, a fraction
    `front` of woken threads runs ahead of the others (the thundering herd),
    each turn holds the mutex `t_crit`, leaving an operation scans N entries
    (`t_scan` each), and the real records cost `t_byte` per byte copied and
    decoded. A notify_all costs its sender `t_notify` per thread asleep
    (waiting at least `t_asleep`), under the mutex (fitted on
    `mtsched-bench-presync --stagger-us` where the measurements have it).
  - `mpi`: MpiCommunicator under Open MPI 4.1 (coll/libnbc):
    barrier = one control message to each of the P-1 peers + MPI_Ibarrier
    (dissemination, ceil(log2 P) rounds); allGather = MPI_Iallgather of the
    sizes + MPI_Iallgatherv of the bytes, both *linear* in libnbc (each rank
    posts P-1 sends and P-1 receives in one round). Costs: `alpha` per round
    (latency), `o` per message a rank posts or receives, `1/bw` per byte
    through the rank's share of its host's NIC. On one machine with more
    ranks than cores, each round also waits for the peers to be scheduled
    (`t_poll` per extra process per core).
  - `hier`: the proposed hierarchical agreement (not implemented): the same
    exchange among the h ranks of a host over shared memory, then the host
    leaders agree on a fixed-size digest (hashes, arrival min/max, a bitmap
    of late ranks) by recursive doubling over L = P/h leaders, rank 0's cache
    entries broadcast down a binomial tree, and the verdict back inside each
    host.
* the record each rank sends, from encodeArrival(): about 0.5 KB of header
  and flags, the process groups' text hex-encoded (O(P) bytes when the
  declared groups cover every rank, as a TP x DP layout's do), two
  fingerprints and the rank's cache entries; and whether the all-gather's
  total passes INT_MAX, where MpiCommunicator::allGather fails;
* the probability of a fallback for an arrival-skew distribution (log-normal
  or normal body plus a log-normal straggler mixture), by exact quadrature
  over the earliest arrival and by Monte Carlo with a fixed seed, and the
  deadline D that keeps it under a target.

`validate` compares like with like: where mtsched-opt's report split the
pre-sync's cost (sync.last_wait_ms, sync.exchange_ms, sync.rank_cost_ms),
a real pre-sync point is the runs' median rank against the model's median
rank with the arrivals spread as measured (sync.skew_ms); without that,
the reporting rank against the model's median rank, as before.

Python 3 standard library only. Subcommands: `cost`, `fallback`,
`deadline`, `validate` (fits the thread and MPI models to measurements of
mtsched-bench-presync and of mtsched-opt's pre-sync, bench/results/
presync-scale-2026-11-28/, and prints predicted vs measured), `table` (the
docs/RANKS.md table at 4k, 16k, 100k ranks), `thread` (the simulation
alone), `selftest` (invariants). Deterministic: the Monte Carlo takes
--seed, the rest is closed-form or a deterministic simulation.
"""

import argparse
import heapq
import math
import random
import re
import statistics
import sys

INT_MAX = 2**31 - 1

# --------------------------------------------------------------------------
# What one rank sends (PreSync.cpp, encodeArrival / protocolFlags)
# --------------------------------------------------------------------------

# protocolFlags() with the driver's defaults and a device named like the
# GPU machines' ("h200" plus a 16-digit hash); only its length matters.
DEFAULT_FLAGS = (
    "collective-mode=deferred fusion-heuristic=benchmark "
    "fusion-speedup-threshold=1 tie-tolerance=0.01 max-epilogue-length=8 "
    "max-extra-writes=1 backend=cuda device=h200(B693E45DEE6D37EA) "
    "bench-runs=10 warmup-runs=2 sim-noise=0 seed=0 pre-sync-timeout-ms=5000 "
    "agreement-timeout-ms=2000 size-hints-m= size-hints-bytes= prune-top-k=0 "
    "split-tuning=on collective-fallback= cache-only=false "
    "choice-timeout-ms=30000 on-sync-failure=fallback")


def group_text_bytes(ranks, layout):
    """Bytes of groupMembership() for `ranks` ranks: '@name = [0, 1, ...]\\n'
    per group. layout: 'world' (one group of every rank), 'tp:K' (P/K groups
    of K consecutive ranks, as a TP x DP layout declares them; collectives
    over the world need no group), or 'none'."""
    def digits_sum(lo, hi):  # total decimal digits of lo..hi-1
        total, d, start = 0, 1, 0
        while start < hi:
            end = 10**d
            a, b = max(lo, start), min(hi, end)
            if a < b:
                total += (b - a) * d
            start, d = end, d + 1
        return total

    def group(name, lo, hi):
        n = hi - lo
        return len("@%s = [" % name) + digits_sum(lo, hi) + 2 * max(0, n - 1) + 2

    if layout == "none":
        return 0
    if layout == "world":
        return group("world", 0, ranks)
    m = re.fullmatch(r"tp:(\d+)", layout)
    if not m:
        raise SystemExit("error: --groups must be world, tp:K or none")
    k = int(m.group(1))
    total = 0
    for g in range(0, ranks, k):
        total += group("tp%d" % (g // k), g, min(ranks, g + k))
    return total


def message_bytes(ranks, layout="world", bundle=0, hashed_groups=False):
    """Length of encodeArrival() for one rank."""
    header = len("v2\n1\n") + 20 + 11  # at-ns (19 digits), wait-ns (~10)
    flags = len(DEFAULT_FLAGS) + 1
    groups = 17 if hashed_groups else 2 * group_text_bytes(ranks, layout) + 1
    fingerprints = 2 * 17
    return header + flags + groups + fingerprints + bundle


# --------------------------------------------------------------------------
# Thread ranks: discrete-event simulation of ThreadGroup on C cores
# --------------------------------------------------------------------------

def simulate_threads(n, cores, kinds, t_wake, t_scan, front, msg=18, t_byte=0.0,
                     t_entry=0.0, t_crit=0.1, skewed=False, stats=None, arrive_at=None,
                     t_notify=0.0, t_asleep=3.0):
    """Discrete-event simulation of n thread ranks going through the
    operations `kinds` ("barrier" or "gather") of one ThreadGroup on `cores`
    cores. Returns exit[k][thread], the time each thread left operation k,
    in µs from the start.

    One mutex and one condition variable serve the group: each arrival takes
    the mutex, deposits and wakes every sleeping thread (notify_all). A woken
    thread costs t_wake of a core and t_crit under the mutex; the fraction
    `front` of woken threads run before those already waiting for a core
    (Linux favours a thread that just woke), the rest queue behind them:
    front=0 grows about linearly with n, front=1 is the full quadratic
    thundering herd. Leaving a completed operation scans n entries under the
    mutex (t_scan each; twice for a gather, which copies every rank's string
    out); a gather also copies n*msg bytes under the mutex and decodes them
    outside it: t_byte per byte copied, plus t_entry per record and
    2*t_byte per byte to decode and compare (outside the mutex).
    skewed=False: every thread starts runnable (the bench's loop after its
    untimed barrier). skewed=True: all but the last thread already sleep in
    the first operation (ranks that arrived apart, as in a real run).
    arrive_at: instead, each thread's arrival time at the first operation
    (µs; it is not runnable before).
    t_notify: what a notify_all costs the thread that sends it, per thread
    it wakes, under the mutex: the futex wakes are made while the mutex is
    held, and the woken threads preempt the sender on its core (measured
    apart: mtsched-bench-presync --stagger-us, where each arrival finds
    every earlier rank asleep). A thread that began waiting less than
    t_asleep µs before is not asleep yet and costs nothing to wake (the
    same bench with 2 ranks: 0.4 µs at --stagger-us=1 and 2, 3.3 µs from 5
    to 100; bench/results/presync-fit-2026-11-28/stagger-2.txt).
    stats: a dict that receives "cpu_us", the core time the threads worked
    (t_wake, critical sections and decoding; not waiting for the mutex)."""
    ops = len(kinds)
    arrived = [0] * (ops + 1)
    op_of = [0] * n            # the op each thread is in
    deposited = [False] * n    # has it deposited in op_of
    sleeping = {}              # ordered: the order they went to sleep, and when
    exit_at = [[0.0] * n for _ in range(ops)]
    if arrive_at is not None:
        runq = []              # each thread comes at its arrival time
    elif skewed:
        for th in range(n - 1):
            deposited[th] = True
            sleeping[th] = -math.inf
        arrived[0] = n - 1
        runq = [n - 1]
    else:
        runq = list(range(n))  # FIFO of runnable threads
    head = 0
    free_cores = cores
    mutex_free_at = 0.0
    events = []                # (time, seq, what, thread)
    seq = 0
    now = 0.0
    credit = 0.0
    pending = {}
    cpu = [0.0]

    def turn(th, at):
        # Decides, in mutex order, what the thread does while it holds the
        # mutex: its cost under the mutex, and on its core after it.
        k = op_of[th]
        crit, post = t_crit, 0.0
        actions = []
        woke = False
        while k < ops:
            if not deposited[th]:
                arrived[k] += 1
                deposited[th] = True
                actions.append(("notify", k))
                if not woke:
                    # A later notify in this turn finds the same sleepers
                    # already woken by this one; one that began waiting
                    # less than t_asleep ago is not asleep yet.
                    crit += t_notify * sum(1 for t in sleeping.values() if at - t >= t_asleep)
                    woke = True
                if arrived[k] < n:
                    actions.append(("sleep", k))
                    break
            elif arrived[k] < n:
                actions.append(("sleep", k))  # spurious wake-up
                break
            # Complete: copy out (gather) and collect the slots.
            gather = kinds[k] == "gather"
            crit += t_scan * n * (2 if gather else 1)
            if gather:
                crit += n * msg * t_byte
                post += n * (t_entry + 2 * msg * t_byte)
            actions.append(("exit", k))
            k += 1
            op_of[th] = k
            deposited[th] = False
            if k < ops:
                crit += t_crit
        pending[th] = actions
        return crit, post

    def start_turns():
        nonlocal head, free_cores, seq, mutex_free_at
        while free_cores > 0 and head < len(runq):
            th = runq[head]
            head += 1
            free_cores -= 1
            # The thread runs t_wake on its core, then takes the mutex
            # (FIFO) and does its critical section; decoding follows on
            # its core, outside the mutex.
            grant = max(now + t_wake, mutex_free_at)
            crit, post = turn(th, grant)
            cpu[0] += t_wake + crit + post
            mutex_free_at = grant + crit
            seq += 1
            heapq.heappush(events, (mutex_free_at, seq, 0, th))
            seq += 1
            heapq.heappush(events, (mutex_free_at + post, seq, 1, th))

    if arrive_at is not None:
        for th in sorted(range(n), key=lambda th: (arrive_at[th], th)):
            seq += 1
            heapq.heappush(events, (arrive_at[th], seq, 2, th))
    start_turns()
    while events:
        t, _, what, th = heapq.heappop(events)
        now = t
        if what == 2:          # a thread arrives at the first operation
            runq.append(th)
            start_turns()
            continue
        if what == 1:          # the core is free again
            free_cores += 1
            if head > 4096:
                del runq[:head]
                head = 0
            start_turns()
            continue
        for act, k in pending[th]:
            if act == "notify":
                for s in list(sleeping):
                    del sleeping[s]
                    credit += front
                    if credit >= 1.0:
                        credit -= 1.0
                        runq.insert(head, s)
                    else:
                        runq.append(s)
            elif act == "sleep":
                sleeping[th] = now
            elif act == "exit":
                exit_at[k][th] = now
        start_turns()
    if stats is not None:
        stats["cpu_us"] = cpu[0]
    return exit_at


def thread_cost_us(n, cores, t_wake, t_scan, front, samples=2, **kw):
    """The bench's sample (mtsched-bench-presync --ranks=n): an untimed
    barrier, then the timed barrier and all-gather of 18 bytes; the slowest
    rank's time of the last of `samples` iterations, in µs."""
    kw.setdefault("t_notify", Params.t_notify)
    exit_at = simulate_threads(n, cores, ["barrier", "barrier", "gather"] * samples,
                               t_wake, t_scan, front, **kw)
    last = samples - 1
    t0 = exit_at[3 * last]          # leaving the untimed barrier
    t1 = exit_at[3 * last + 2]      # leaving the all-gather
    return max(b - a for a, b in zip(t0, t1))


def thread_presync_us(n, cores, t_wake, t_scan, front, msg, t_byte, t_entry,
                      t_notify=None, spread=0.0):
    """A real pre-sync's `sync.cost_ms` (in µs): ranks arrived apart, the
    last one completes the barrier, then the all-gather of msg-byte records;
    the report's cost is the last rank's barrier wait plus the reporting
    rank's all-gather, taken here as the median rank's."""
    return thread_presync_range(n, cores, t_wake, t_scan, front, msg, t_byte, t_entry,
                                t_notify=t_notify, spread=spread)[1]


def thread_presync_range(n, cores, t_wake, t_scan, front, msg, t_byte, t_entry,
                         stats=None, t_notify=None, spread=0.0, parts=None, follow=False):
    """(fastest, median, slowest) rank's view of thread_presync_us: the
    report's number is the reporting rank's, wherever it landed, and each
    rank's own is the last arrival's barrier wait plus its own exchange
    (sync.rank_cost_ms in the report gives their min, median and max).
    spread: the arrivals' spread (sync.skew_ms, µs), the ranks arriving
    evenly over it; 0: all but the last already asleep. follow: the first
    World operation after the pre-sync (mtsched-opt's first node's
    agreement) is simulated too, as ranks that left early start it, and
    wake the others, while those are still leaving.
    parts: a dict that receives "last_wait"."""
    if t_notify is None:
        t_notify = Params.t_notify
    arrive = None
    if spread > 0 and n > 1:
        arrive = [spread * i / (n - 1) for i in range(n)]
    kinds = ["barrier", "gather"] + (["barrier"] if follow else [])
    exit_at = simulate_threads(n, cores, kinds, t_wake, t_scan,
                               front, msg=msg, t_byte=t_byte, t_entry=t_entry,
                               skewed=arrive is None, stats=stats, arrive_at=arrive,
                               t_notify=t_notify)
    start = arrive if arrive else [0.0] * n
    last_wait = min(exit_at[0][i] - start[i] for i in range(n)) if arrive else exit_at[0][n - 1]
    if parts is not None:
        parts["last_wait"] = last_wait
    gather = sorted(b - a for a, b in zip(exit_at[0], exit_at[1]))
    return tuple(last_wait + g for g in (gather[0], gather[len(gather) // 2], gather[-1]))


def thread_stagger_last_wait_us(n, cores, t_wake, t_scan, front, t_notify, stagger=1000.0):
    """mtsched-bench-presync --stagger-us: rank r arrives r * stagger µs
    after rank 0, every earlier rank asleep; the last arrival's barrier
    wait (its last_wait_us)."""
    arrive = [stagger * i for i in range(n)]
    exit_at = simulate_threads(n, cores, ["barrier", "gather"], t_wake, t_scan, front,
                               arrive_at=arrive, t_notify=t_notify)
    return min(exit_at[0][i] - arrive[i] for i in range(n))


def thread_hier_presync_us(n, cores, t_wake, t_scan, front, groups, t_byte, t_entry,
                           parts=None):
    """The hierarchical pre-sync on thread ranks (--pre-sync=hier: groups of
    h = round(sqrt(n)) consecutive ranks stand in for hosts), as the
    reporting rank (rank 0, a leader) sees it: every group's barrier and
    all-gather of full records (h records each), the leaders' all-gather of
    L = n/h digests of ~120 bytes, then the verdict broadcast inside a group
    (one barrier's worth). A composition of the fitted flat simulation, not
    a simulation of its own.

    The L groups run at once on the shared cores, each on its own mutex and
    condition variable: what adds up is their work on the cores, not their
    waits. Rank 0's leader waits for the slowest group, which ends no
    earlier than one group's exchange alone (its critical path) and no
    earlier than all L groups' core time spread over the cores:
    max(local, L * cpu(local) / cores), where only a group's leader decodes
    the group's records. (Until 2026-11-28 this was
    L * local, every group's exchange in full one after another, which
    also counted each group's waits L times.)"""
    h = max(2, round(math.sqrt(n)))
    leaders = -(-n // h)
    msg = message_bytes(n, groups)
    st = {}
    local = thread_presync_range(h, cores, t_wake, t_scan, front, msg, t_byte, t_entry,
                                 stats=st)[1]
    # Only a group's leader decodes its group's records (leaderVerdict in
    # lib/Autotune/PreSyncHier.cpp); the simulation decoded on every rank.
    cpu = st["cpu_us"] - (h - 1) * h * (t_entry + 2 * msg * t_byte)
    groups_done = max(local, leaders * cpu / cores)
    across = thread_presync_us(leaders, cores, t_wake, t_scan, front, 120, t_byte, t_entry)
    back = thread_cost_us(h, cores, t_wake, t_scan, front, samples=1)
    if parts is not None:
        parts.update(local=local, groups=groups_done, across=across, back=back,
                     leaders=leaders)
    return groups_done + across + back


# --------------------------------------------------------------------------
# MPI ranks (Open MPI 4.1, libnbc)
# --------------------------------------------------------------------------

def log2c(p):
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


def mpi_local_cost_us(p, cores, alpha, o, t_poll):
    """MpiCommunicator's barrier + all-gather on one machine, shared memory,
    p processes on `cores` cores, 18-byte messages (the bench's)."""
    rounds = log2c(p) + 2            # Ibarrier + Iallgather + Iallgatherv
    msgs = (p - 1) + 4 * (p - 1)     # control + 2 linear all-gathers (send+recv)
    over = max(0.0, p / cores - 1.0)
    return rounds * (alpha + over * t_poll) + msgs * o * max(1.0, p / cores)


def mpi_cluster_cost(p, prm, m):
    """Flat pre-sync on a cluster: returns a dict of its parts in µs and the
    bytes each rank receives. m: bytes per rank's message."""
    h = prm.per_host
    a_net, a_shm, o = prm.alpha_net, prm.alpha_shm, prm.o
    k_shm = log2c(h)  # dissemination rounds whose partner is on the host
    r = log2c(p)
    barrier = (p - 1) * o + min(r, k_shm) * (a_shm + 2 * o) + max(0, r - k_shm) * (a_net + 2 * o)
    sizes = 2 * (p - 1) * o + a_net
    recv_bytes = (p - 1) * m
    # Each rank's off-host bytes go through its NIC (nic_gbs per rank).
    bw_us = max(0, p - h) * m / (prm.nic_gbs * 1e3)  # GB/s -> bytes per µs
    data = 2 * (p - 1) * o + a_net + bw_us
    decode = p * (prm.t_entry + 3 * m * prm.t_byte)
    connect = (p - 1) * prm.t_connect
    parts = dict(barrier=barrier, sizes=sizes, data=data, decode=decode,
                 connect=connect)
    parts["total"] = sum(parts.values())
    return parts, recv_bytes, p * m


def hier_cluster_cost(p, prm, m, bundle):
    """The hierarchical agreement: shared-memory exchange among the h ranks
    of a host, leaders' recursive doubling of a digest, rank 0's bundle down
    a binomial tree, the verdict back inside the host."""
    h = min(prm.per_host, p)
    leaders = max(1, p // h)
    a_net, a_shm, o = prm.alpha_net, prm.alpha_shm, prm.o
    local = mpi_local_cost_us(h, h, a_shm, o, 0.0) + h * (prm.t_entry + 3 * m * prm.t_byte)
    digest = 64 + (h + 7) // 8
    rl = log2c(leaders)
    across_barrier = rl * (a_net + 2 * o)
    across = rl * (a_net + 2 * o + digest / (prm.nic_gbs * 1e3))
    bcast = rl * (a_net + 2 * o + bundle / (prm.nic_gbs * 1e3)) if bundle else 0.0
    back = log2c(h) * (a_shm + 2 * o)
    parts = dict(local=local, barrier=across_barrier, leaders=across,
                 bundle=bcast, back=back)
    parts["total"] = sum(parts.values())
    return parts, h * m + rl * digest + (rl * bundle if bundle else 0), h * m


# --------------------------------------------------------------------------
# Arrival skew and the fallback probability
# --------------------------------------------------------------------------

class Skew:
    """Arrival offsets in ms: with probability 1-q from the body (kind
    "lognormal": median `median` ms, log-sd `sigma`; kind "normal": mean
    `median` ms, sd `sigma` ms), with probability q a straggler (log-normal,
    median `tail_median` ms, log-sd `tail_sigma`)."""

    def __init__(self, kind, median, sigma, q=0.0, tail_median=0.0, tail_sigma=1.0):
        self.kind, self.median, self.sigma = kind, median, sigma
        self.q, self.tail_median, self.tail_sigma = q, tail_median, tail_sigma

    @staticmethod
    def _ln_sf(x, med, s):
        if x <= 0:
            return 1.0
        return 0.5 * math.erfc((math.log(x) - math.log(med)) / (s * math.sqrt(2)))

    @staticmethod
    def _ln_cdf(x, med, s):
        if x <= 0:
            return 0.0
        return 0.5 * math.erfc(-(math.log(x) - math.log(med)) / (s * math.sqrt(2)))

    def sf(self, x):
        if self.kind == "lognormal":
            body = self._ln_sf(x, self.median, self.sigma)
        else:
            body = 0.5 * math.erfc((x - self.median) / (self.sigma * math.sqrt(2)))
        if self.q == 0:
            return body
        return (1 - self.q) * body + self.q * self._ln_sf(x, self.tail_median, self.tail_sigma)

    def cdf(self, x):
        if self.kind == "lognormal":
            body = self._ln_cdf(x, self.median, self.sigma)
        else:
            body = 0.5 * math.erfc(-(x - self.median) / (self.sigma * math.sqrt(2)))
        if self.q == 0:
            return body
        return (1 - self.q) * body + self.q * self._ln_cdf(x, self.tail_median, self.tail_sigma)

    def _bracket(self):
        if self.kind == "lognormal":
            lo = 1e-12
        else:
            lo = self.median - 40 * self.sigma
        hi = max(self.median, self.tail_median) * 1e9 + 40 * self.sigma
        return lo, hi

    def _invert(self, f, target, increasing):
        lo, hi = self._bracket()
        log = self.kind == "lognormal"
        for _ in range(200):
            mid = math.sqrt(lo * hi) if log else 0.5 * (lo + hi)
            v = f(mid)
            if (v < target) == increasing:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-9 * max(1.0, abs(hi)):
                break
        return 0.5 * (lo + hi)

    def quantile_lower(self, u):   # x with cdf(x) = u (accurate for small u)
        return self._invert(self.cdf, u, True)

    def quantile_upper(self, s):   # x with sf(x) = s (accurate for small s)
        return self._invert(self.sf, s, False)


def p_late_given_min(skew, p, x, d):
    """P(some of the other p-1 ranks arrives after x + d | the first arrived
    at x)."""
    s0 = skew.sf(x)
    if s0 <= 0:
        return 0.0
    ratio = min(1.0, skew.sf(x + d) / s0)
    if ratio >= 1.0:
        return 1.0
    return -math.expm1((p - 1) * math.log1p(-ratio))


def min_at(skew, p, w):
    """The earliest of p arrivals at quantile w of its own distribution."""
    u = -math.expm1(math.log1p(-w) / p)  # cdf of the minimum's value
    return skew.quantile_lower(u)


def p_fallback_exact(skew, p, d, points=400):
    """P(max - min > d) by quadrature over the earliest arrival's quantile."""
    total = 0.0
    for i in range(points):
        w = (i + 0.5) / points
        total += p_late_given_min(skew, p, min_at(skew, p, w), d)
    return total / points


def sample_range(skew, p, rng):
    x = min_at(skew, p, rng.random())
    v = rng.random()
    # The latest of the other p-1, conditioned on all being after x.
    # P(max <= y | all > x) = (1 - sf(y)/sf(x))^(p-1) = v.
    s = skew.sf(x) * -math.expm1(math.log(v) / (p - 1)) if v > 0 else skew.sf(x)
    y = skew.quantile_upper(s) if s > 0 else x
    return max(0.0, y - x)


def p_fallback_mc(skew, p, d, trials, seed):
    rng = random.Random(seed)
    ranges = [sample_range(skew, p, rng) for _ in range(trials)]
    late = sum(1 for r in ranges if r > d)
    return late / trials, ranges


def recommend_deadline(skew, p, target, points=400):
    """The smallest deadline (ms, 3 significant digits) whose exact
    fallback probability from skew alone is at most target."""
    lo, hi = 0.0, 1.0
    while p_fallback_exact(skew, p, hi, points) > target:
        lo, hi = hi, hi * 2
        if hi > 1e12:
            return float("inf")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if p_fallback_exact(skew, p, mid, points) > target:
            lo = mid
        else:
            hi = mid
    # Rounded up to 3 significant digits, so the target still holds.
    step = 10.0 ** (math.floor(math.log10(hi)) - 2)
    return math.ceil(hi / step - 1e-9) * step


SKEW_PRESETS = {
    # One loaded 2-core machine (docs/RANKS.md: 8 thread ranks on a 1k-node
    # graph, median skew 79 ms, max 138 ms; 10k nodes up to 771 ms).
    "host": dict(kind="lognormal", median=60.0, sigma=0.6, q=0.01, tail_median=300.0, tail_sigma=0.5),
    # A cluster job (assumed, not measured): process start, CUDA init and
    # graph import spread ranks by about a second, and 1 in 10^4 ranks is a
    # straggler (slow node, file system) around 10 s.
    "cluster": dict(kind="lognormal", median=1000.0, sigma=0.5, q=1e-4, tail_median=10000.0, tail_sigma=0.7),
}


def make_skew(args):
    base = dict(SKEW_PRESETS[args.skew])
    for key in ("median", "sigma", "q", "tail_median", "tail_sigma"):
        v = getattr(args, "skew_" + key)
        if v is not None:
            base[key] = v
    if args.skew_kind:
        base["kind"] = args.skew_kind
    return Skew(**base)


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------

# Where `validate` starts its fit of (t_wake, t_scan, front): fixed, so the
# fit does not depend on the defaults it produced.
FIT_START = (3.0, 0.01, 0.3)
FIT_START_NOTIFY = 3.0


class Params:
    # Cluster network (assumed; override by flags): one MPI small-message
    # latency across hosts, per-message software overhead, the per-rank
    # share of the host NIC, ranks per host.
    alpha_net = 2.0      # µs
    alpha_shm = 0.5      # µs, replaced by the fit of MPI on this machine
    o = 0.6              # µs per message posted or received (the MPI fit here)
    nic_gbs = 25.0       # GB/s per rank (a 200 Gb/s NIC per GPU)
    t_byte = 0.00078     # µs per byte received, 3 times: copied, decoded,
                         # compared (the fit of thread ranks' records here)
    t_entry = 0.3        # µs per record decoded (allocations; the fit here
                         # cannot tell it from zero)
    t_connect = 0.0      # µs per new peer endpoint (first contact)
    per_host = 8
    # Thread ranks on the 2-core development machine: the values `validate`
    # fitted on 2026-11-28 (bench/results/presync-scale-2026-11-28/
    # validate.txt), from the fixed start FIT_START.
    t_wake = 3.63
    t_scan = 0.0376
    front = 0.876
    # What a notify_all costs its sender per thread it wakes: 0 in the fit
    # above (those measurements cannot tell it apart); `validate` fits it
    # where the measurements have `--stagger-us` runs
    # (bench/results/presync-fit-2026-11-28/: about 8 µs).
    t_notify = 0.0
    cores = 2
    t_poll = 8.0


def add_common(ap):
    ap.add_argument("--alpha-net", type=float, default=Params.alpha_net, help="µs")
    ap.add_argument("--alpha-shm", type=float, default=Params.alpha_shm, help="µs")
    ap.add_argument("--o", type=float, default=Params.o, help="µs per message")
    ap.add_argument("--nic-gbs", type=float, default=Params.nic_gbs,
                    help="GB/s of network bandwidth per rank")
    ap.add_argument("--t-byte", type=float, default=Params.t_byte,
                    help="µs per record byte copied, decoded or compared")
    ap.add_argument("--t-entry", type=float, default=Params.t_entry, help="µs per record decoded")
    ap.add_argument("--t-connect", type=float, default=Params.t_connect,
                    help="µs to set up the endpoint of each new peer")
    ap.add_argument("--per-host", type=int, default=Params.per_host, help="ranks per host")
    ap.add_argument("--groups", default="tp:8", help="world | tp:K | none")
    ap.add_argument("--bundle", type=int, default=0, help="cache bytes per rank")
    ap.add_argument("--hashed-groups", action="store_true",
                    help="groups sent as a 16-digit hash (the proposed fix)")
    ap.add_argument("--skew", default="cluster", choices=sorted(SKEW_PRESETS),
                    help="preset arrival distribution; the --skew-* flags override its fields")
    ap.add_argument("--skew-kind", choices=["lognormal", "normal"])
    for key in ("median", "sigma", "q", "tail-median", "tail-sigma"):
        ap.add_argument("--skew-" + key, type=float, dest="skew_" + key.replace("-", "_"))
    ap.add_argument("--agreement-ms", type=float, default=2000.0,
                    help="the agreement timeout G (--agreement-timeout-ms)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trials", type=int, default=2000)


def fmt_ms(us):
    ms = us / 1e3
    if ms >= 100:
        return "%.0f" % ms
    if ms >= 1:
        return "%.1f" % ms
    return "%.3f" % ms


def fmt_bytes(b):
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= k:
            return "%.1f %s" % (b / k, unit)
    return "%d B" % b


# --------------------------------------------------------------------------
# Subcommands
# --------------------------------------------------------------------------

def cmd_cost(args):
    prm = args
    for p in args.ranks:
        m = message_bytes(p, args.groups, args.bundle, args.hashed_groups)
        flat, recv, total = mpi_cluster_cost(p, prm, m)
        hier, hrecv, _ = hier_cluster_cost(p, prm, message_bytes(p, args.groups, args.bundle, True), args.bundle)
        broken = total > INT_MAX
        print("ranks=%d message=%s flat_ms=%s flat_recv=%s flat_total=%s%s hier_ms=%s hier_recv=%s"
              % (p, fmt_bytes(m), fmt_ms(flat["total"]), fmt_bytes(recv), fmt_bytes(total),
                 " FAILS(total>INT_MAX)" if broken else "", fmt_ms(hier["total"]), fmt_bytes(hrecv)))
        print("  flat parts ms: " + " ".join("%s=%s" % (k, fmt_ms(v)) for k, v in flat.items() if k != "total"))
        print("  hier parts ms: " + " ".join("%s=%s" % (k, fmt_ms(v)) for k, v in hier.items() if k != "total"))
    return 0


def cmd_fallback(args):
    skew = make_skew(args)
    for p in args.ranks:
        exact = p_fallback_exact(skew, p, args.deadline_ms)
        mc, ranges = p_fallback_mc(skew, p, args.deadline_ms, args.trials, args.seed)
        ranges.sort()
        print("ranks=%d deadline_ms=%g p_fallback_exact=%.3e p_fallback_mc=%.3e trials=%d seed=%d "
              "skew_median_ms=%.0f skew_p99_ms=%.0f"
              % (p, args.deadline_ms, exact, mc, args.trials, args.seed,
                 ranges[len(ranges) // 2], ranges[min(len(ranges) - 1, int(0.99 * len(ranges)))]))
    return 0


def cmd_deadline(args):
    skew = make_skew(args)
    for p in args.ranks:
        d = recommend_deadline(skew, p, args.target)
        print("ranks=%d target=%g deadline_ms=%g p_fallback_exact=%.3e"
              % (p, args.target, d, p_fallback_exact(skew, p, d)))
    return 0


def parse_measurements(paths, skews=None, runs=None):
    """{('threads'|'mpi'|'stagger'|'opt'|'opt-hier', ranks): [µs per run]}
    from the run scripts' output ('stagger': the bench's last_wait_us with
    --stagger-us; 'opt': mtsched-opt's flat pre-sync on thread ranks,
    'opt-hier' its hierarchical one). skews: a dict that receives each
    'opt-hier' run's sync.skew_ms, in the same order. runs: a dict that
    receives each 'opt' run's fields where the report split the cost (µs:
    cost, skew, last_wait, exchange, rank_min, rank_median, rank_max)."""
    out = {}
    stag = re.compile(r"presync-staggered threads ranks=(\d+) stagger_us=\d+ samples=\d+ "
                      r"last_wait_us=([\d.]+)")
    split = re.compile(r"presync-opt threads ranks=(\d+) ok=True cost_ms=([\d.]+) "
                       r"skew_ms=([\d.]+) last_wait_ms=([\d.]+) exchange_ms=([\d.]+) "
                       r"rank_cost_ms=([\d.]+)/([\d.]+)/([\d.]+)")
    pat = re.compile(r"presync (threads|mpi) ranks=(\d+) samples=\d+ failed=(\d+) median_us=([\d.]+)")
    opt = re.compile(r"presync-opt threads ranks=(\d+) ok=True cost_ms=([\d.]+)")
    hier = re.compile(r"presync-opt-hier threads ranks=(\d+) ok=True cost_ms=([\d.]+) "
                      r"skew_ms=([\d.]+)")
    for path in paths:
        with open(path) as f:
            for line in f:
                mt = pat.search(line)
                if mt and int(mt.group(3)) == 0:
                    out.setdefault((mt.group(1), int(mt.group(2))), []).append(float(mt.group(4)))
                mt = stag.search(line)
                if mt:
                    out.setdefault(("stagger", int(mt.group(1))), []).append(float(mt.group(2)))
                mt = opt.search(line)
                if mt:
                    out.setdefault(("opt", int(mt.group(1))), []).append(1e3 * float(mt.group(2)))
                mt = split.search(line)
                if mt and runs is not None:
                    v = [1e3 * float(x) for x in mt.groups()[1:]]
                    runs.setdefault(("opt", int(mt.group(1))), []).append(dict(zip(
                        ("cost", "skew", "last_wait", "exchange", "rank_min", "rank_median",
                         "rank_max"), v)))
                mt = hier.search(line)
                if mt:
                    key = ("opt-hier", int(mt.group(1)))
                    out.setdefault(key, []).append(1e3 * float(mt.group(2)))
                    if skews is not None:
                        skews.setdefault(key, []).append(1e3 * float(mt.group(3)))
    return out


def nelder_mead(f, x0, steps, iters):
    """Minimises f from x0 (a small deterministic Nelder-Mead)."""
    pts = [list(x0)] + [[x + (s if i == j else 0) for j, x in enumerate(x0)]
                        for i, s in enumerate(steps)]
    vals = [f(x) for x in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=lambda i: vals[i])
        pts = [pts[i] for i in order]
        vals = [vals[i] for i in order]
        n = len(x0)
        c = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        xr = [c[j] + (c[j] - pts[-1][j]) for j in range(n)]
        fr = f(xr)
        if fr < vals[0]:
            xe = [c[j] + 2 * (c[j] - pts[-1][j]) for j in range(n)]
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [c[j] + 0.5 * (pts[-1][j] - c[j]) for j in range(n)]
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                for i in range(1, len(pts)):
                    pts[i] = [pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]) for j in range(n)]
                    vals[i] = f(pts[i])
    i = min(range(len(pts)), key=lambda i: vals[i])
    return pts[i], vals[i]


def cmd_validate(args):
    skews, runs = {}, {}
    meas = parse_measurements(args.measurements, skews, runs)
    med = {k: statistics.median(v) for k, v in meas.items()}
    # Where the report split the cost, a point is the median over runs of
    # the median rank's own cost (sync.rank_cost_ms), the arrivals spread
    # as they did (sync.skew_ms): like with like, as the model's median
    # rank is not the reporting rank.
    split_opt = {k for k in runs if len(runs[k]) == len(meas[k])}
    for k in split_opt:
        med[k] = statistics.median(r["rank_median"] for r in runs[k])
    fit_thr = [n for n in args.fit_threads if ("threads", n) in med]
    fit_mpi = [n for n in args.fit_mpi if ("mpi", n) in med]
    # The staggered bench's last waits fix t_notify; without them it is 0
    # (the fit before 2026-11-28's presync-fit runs).
    fit_stag = sorted(n for (k, n) in med if k == "stagger")
    cores = args.cores

    def thr_params(x):
        return (math.exp(x[0]), math.exp(x[1]), 1 / (1 + math.exp(-x[2])),
                math.exp(x[3]) if fit_stag else 0.0)

    def thr_loss(x):
        w, s, f, tn = thr_params(x)
        loss = sum((math.log(thread_cost_us(n, cores, w, s, f, t_notify=tn)) -
                    math.log(med[("threads", n)])) ** 2 for n in fit_thr)
        return loss + sum((math.log(thread_stagger_last_wait_us(n, cores, w, s, f, tn)) -
                           math.log(med[("stagger", n)])) ** 2 for n in fit_stag)

    def mpi_loss(x):
        a, o, t = (math.exp(v) for v in x)
        return sum((math.log(mpi_local_cost_us(n, cores, a, o, t)) - math.log(med[("mpi", n)])) ** 2
                   for n in fit_mpi)

    w0, s0, f0 = FIT_START
    x0 = [math.log(w0), math.log(s0), math.log(f0 / (1 - f0))]
    x, _ = nelder_mead(thr_loss, x0 + ([math.log(FIT_START_NOTIFY)] if fit_stag else []),
                       [0.5] * (4 if fit_stag else 3), args.fit_iters)
    tw, ts, tf, tn = thr_params(x)
    y, _ = nelder_mead(mpi_loss, [math.log(v) for v in (Params.alpha_shm, Params.o, Params.t_poll)],
                       [0.5, 0.5, 0.5], args.fit_iters)
    a, o, tp = (math.exp(v) for v in y)
    # The real pre-sync's records (gen_groups.py graphs, W/8 groups of 8):
    # two more parameters, the cost per record decoded and per byte.
    fit_opt = [n for n in args.fit_opt if ("opt", n) in med]

    def opt_range(n, tb, te, parts=None):
        if ("opt", n) in split_opt:
            spread = statistics.median(r["skew"] for r in runs[("opt", n)])
            return thread_presync_range(n, cores, tw, ts, tf, message_bytes(n, "tp:8"), tb, te,
                                        t_notify=tn, spread=spread, follow=True, parts=parts)
        return thread_presync_range(n, cores, tw, ts, tf, message_bytes(n, "tp:8"), tb, te,
                                    t_notify=tn, parts=parts)

    def opt_pred(n, tb, te):
        return opt_range(n, tb, te)[1]

    tb, te = 0.0, 0.0
    if fit_opt:
        z, _ = nelder_mead(lambda x: sum((math.log(opt_pred(n, math.exp(x[0]), math.exp(x[1]))) -
                                          math.log(med[("opt", n)])) ** 2 for n in fit_opt),
                           [math.log(1e-4), math.log(0.5)], [0.5, 0.5], args.fit_iters)
        tb, te = math.exp(z[0]), math.exp(z[1])
    print("fit threads on %s: t_wake=%.3g us t_scan=%.3g us front=%.3g (cores=%d)"
          % (fit_thr, tw, ts, tf, cores))
    if fit_stag:
        print("fit staggered last waits on %s: t_notify=%.3g us" % (fit_stag, tn))
    print("fit pre-sync records on %s: t_byte=%.3g us t_entry=%.3g us" % (fit_opt, tb, te))
    print("fit mpi on %s: alpha_shm=%.3g us o=%.3g us t_poll=%.3g us" % (fit_mpi, a, o, tp))
    print("| ranks | kind | measured median µs (runs) | model µs | model / measured | fitted on |")
    print("|---:|---|---|---:|---:|---|")
    worst = 1.0
    order = {"threads": 0, "stagger": 1, "mpi": 2, "opt": 3, "opt-hier": 4}
    for (kind, n) in sorted(med, key=lambda k: (order[k[0]], k[1])):
        if args.kinds and kind not in args.kinds:
            continue
        if kind == "threads":
            pred = thread_cost_us(n, cores, tw, ts, tf, t_notify=tn)
            fitted = n in fit_thr
        elif kind == "stagger":
            pred = thread_stagger_last_wait_us(n, cores, tw, ts, tf, tn)
            fitted = True
        elif kind == "opt" and (kind, n) in split_opt:
            pt = {}
            lo, pred, hi = opt_range(n, tb, te, parts=pt)
            rs = runs[(kind, n)]
            inside = sum(1 for r in rs if lo <= r["cost"] <= hi)
            fitted = ("%s; spread %.0f; last wait %.0f, model %.0f; ranks' range %.0f-%.0f "
                      "holds the reporting rank in %d of %d runs" % (
                          "yes" if n in fit_opt else "no",
                          statistics.median(r["skew"] for r in rs),
                          statistics.median(r["last_wait"] for r in rs), pt["last_wait"],
                          lo, hi, inside, len(rs)))
        elif kind == "opt":
            lo, pred, hi = opt_range(n, tb, te)
            fitted = n in fit_opt
            inside = sum(1 for v in meas[(kind, n)] if lo <= v <= hi)
            fitted = "%s; ranks' range %.0f-%.0f holds %d of %d runs" % (
                "yes" if fitted else "no", lo, hi, inside, len(meas[(kind, n)]))
        elif kind == "opt-hier":
            # The hierarchical cost_ms also holds the arrivals' spread: rank
            # 0's leader waits for the last host, whose last rank arrives up
            # to skew_ms after rank 0's host completed (the flat barrier
            # absorbs that wait into the barrier instead). The runs' own
            # spread is the input, as the arrival skew is elsewhere.
            spread = statistics.median(skews[(kind, n)])
            pred = thread_hier_presync_us(n, cores, tw, ts, tf, "tp:8", tb, te) + spread
            fitted = "no; + the runs' median spread %.0f" % spread
        else:
            pred = mpi_local_cost_us(n, cores, a, o, tp)
            fitted = n in fit_mpi
        ratio = pred / med[(kind, n)]
        worst = max(worst, ratio, 1 / ratio)
        listed = ", ".join("%.1f" % v for v in meas[(kind, n)])
        if (kind, n) in split_opt:
            listed = "each run's median rank: " + ", ".join(
                "%.1f" % r["rank_median"] for r in runs[(kind, n)])
        label = {"threads": "threads, bench", "mpi": "MPI, bench",
                 "stagger": "threads, bench --stagger-us, last wait",
                 "opt": ("threads, mtsched-opt, median rank" if (kind, n) in split_opt
                         else "threads, mtsched-opt"),
                 "opt-hier": "threads, mtsched-opt, hier"}[kind]
        print("| %d | %s | %.1f (%s) | %.1f | %.2f | %s |"
              % (n, label, med[(kind, n)], listed, pred, ratio,
                 fitted if isinstance(fitted, str) else "yes" if fitted else "no"))
    for n in args.predict_opt:
        print("prediction: threads, mtsched-opt, %d ranks: %.1f us" % (n, opt_pred(n, tb, te)))
    print("worst factor %.2f (limit %.1f)" % (worst, args.limit))
    return 0 if worst <= args.limit else 1


def cmd_table(args):
    skew = make_skew(args)
    print("| ranks | message | flat: bytes each rank receives | flat cost ms | "
          "flat, groups hashed: cost ms | hierarchical cost ms | skew p50 / p99 ms | "
          "fallback at D=5000 ms | deadline for p<=%g |" % args.target)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in args.ranks:
        m = message_bytes(p, args.groups, args.bundle, False)
        mh = message_bytes(p, args.groups, args.bundle, True)
        flat, recv, total = mpi_cluster_cost(p, args, m)
        flat_h, _, _ = mpi_cluster_cost(p, args, mh)
        hier, _, _ = hier_cluster_cost(p, args, mh, args.bundle)
        if total > INT_MAX:
            flat_s = "fails (%s > 2 GiB)" % fmt_bytes(total)
        else:
            flat_s = fmt_ms(flat["total"])
            # G bounds the exchange (sizes and data), not the decoding.
            if (flat["sizes"] + flat["data"]) / 1e3 > args.agreement_ms:
                flat_s += " (exchange > G: falls back)"
        p5 = p_fallback_exact(skew, p, 5000.0)
        _, ranges = p_fallback_mc(skew, p, 0.0, args.trials, args.seed)
        ranges.sort()
        d = recommend_deadline(skew, p, args.target)
        print("| %d | %s | %s | %s | %s | %s | %.0f / %.0f | %.2g | %g ms |"
              % (p, fmt_bytes(m), fmt_bytes(recv), flat_s, fmt_ms(flat_h["total"]),
                 fmt_ms(hier["total"]), ranges[len(ranges) // 2],
                 ranges[min(len(ranges) - 1, int(0.99 * len(ranges)))], p5, d))
    return 0


def cmd_selftest(args):
    """Invariants of the model, quick (about 2 s): each failure is printed
    and makes the exit status 1."""
    failures = []
    checks = 0

    def check(ok, what):
        nonlocal checks
        checks += 1
        if not ok:
            failures.append(what)
            print("selftest: FAILED: " + what)

    # The groups' text: the formula against the text groupMembership()
    # builds, for a few sizes and both layouts.
    for p in (1, 7, 10, 11, 123, 1001):
        text = "@world = [" + ", ".join(str(r) for r in range(p)) + "]\n"
        check(group_text_bytes(p, "world") == len(text), "world group text, %d ranks" % p)
        text = ""
        for g in range(0, p, 4):
            text += "@tp%d = [" % (g // 4) + ", ".join(str(r) for r in range(g, min(p, g + 4))) + "]\n"
        check(group_text_bytes(p, "tp:4") == len(text), "tp:4 group text, %d ranks" % p)
    # The flat all-gather passes INT_MAX bytes between 8k and 16k ranks when
    # a group covers the world, never with the groups hashed.
    prm = Params()
    check(mpi_cluster_cost(8192, prm, message_bytes(8192))[2] < INT_MAX, "8k ranks fit in INT_MAX")
    check(mpi_cluster_cost(16384, prm, message_bytes(16384))[2] > INT_MAX, "16k ranks pass INT_MAX")
    check(mpi_cluster_cost(100000, prm, message_bytes(100000, hashed_groups=True))[2] < INT_MAX,
          "hashed groups fit at 100k")
    # Costs grow with the rank count; the hierarchical one stays below the flat.
    prev = 0.0
    for p in (16, 256, 4096, 65536):
        flat = mpi_cluster_cost(p, prm, message_bytes(p, hashed_groups=True))[0]["total"]
        hier = hier_cluster_cost(p, prm, message_bytes(p, hashed_groups=True), 0)[0]["total"]
        check(flat > prev, "flat cost grows at %d ranks" % p)
        check(hier < flat, "hierarchical below flat at %d ranks" % p)
        prev = flat
    # Thread ranks: deterministic and growing with the rank count.
    a = [thread_cost_us(n, 2, Params.t_wake, Params.t_scan, Params.front) for n in (2, 8, 32)]
    b = [thread_cost_us(n, 2, Params.t_wake, Params.t_scan, Params.front) for n in (2, 8, 32)]
    check(a == b, "thread simulation is deterministic")
    check(a[0] < a[1] < a[2], "thread cost grows with ranks")
    check(thread_cost_us(8, 8, Params.t_wake, Params.t_scan, Params.front) < a[1],
          "more cores, less contention")
    # A notify_all costs its sender t_notify per sleeper: with every
    # earlier rank asleep, the last arrival's barrier wait grows by
    # (n-1) * t_notify, and spreading the arrivals over time leaves the
    # fastest and slowest ranks' costs ordered.
    for n in (4, 16):
        base = thread_stagger_last_wait_us(n, 2, Params.t_wake, Params.t_scan, Params.front, 0.0)
        more = thread_stagger_last_wait_us(n, 2, Params.t_wake, Params.t_scan, Params.front, 8.0)
        check(abs(more - base - 8.0 * (n - 1)) < 1e-6 * more,
              "staggered last wait grows by (n-1) t_notify at %d ranks" % n)
    lo, mid, hi = thread_presync_range(64, 2, Params.t_wake, Params.t_scan, Params.front,
                                       message_bytes(64, "tp:8"), Params.t_byte, Params.t_entry,
                                       t_notify=8.0, spread=4000.0, follow=True)
    check(lo <= mid <= hi, "ranks' costs ordered with arrivals spread")
    # The hierarchical composition on thread ranks: the groups overlap, so
    # it costs more than one group's exchange and less than every group's
    # one after another; far below the flat one from 256 ranks.
    for n in (64, 256):
        pt = {}
        hier = thread_hier_presync_us(n, 2, Params.t_wake, Params.t_scan, Params.front,
                                      "tp:8", Params.t_byte, Params.t_entry, parts=pt)
        flat = thread_presync_us(n, 2, Params.t_wake, Params.t_scan, Params.front,
                                 message_bytes(n, "tp:8"), Params.t_byte, Params.t_entry)
        check(pt["local"] <= pt["groups"] < pt["leaders"] * pt["local"],
              "hier groups between one group and all in turn, %d ranks" % n)
        check(n < 256 or hier < flat / 5, "hier far below flat at %d ranks" % n)
    # The fallback probability: falls with the deadline, rises with ranks,
    # and the Monte Carlo agrees with the quadrature.
    skew = Skew(**SKEW_PRESETS["cluster"])
    ps = [p_fallback_exact(skew, 1000, d) for d in (2000, 4000, 8000, 16000)]
    check(all(x > y for x, y in zip(ps, ps[1:])), "P(fallback) falls with the deadline")
    check(p_fallback_exact(skew, 10000, 4000) > ps[1], "P(fallback) rises with ranks")
    exact = p_fallback_exact(skew, 1000, 4000)
    mc, _ = p_fallback_mc(skew, 1000, 4000, 2000, 7)
    sd = math.sqrt(exact * (1 - exact) / 2000)
    check(abs(mc - exact) < 5 * sd + 1e-3, "Monte Carlo %.4f vs quadrature %.4f" % (mc, exact))
    mc2, r2 = p_fallback_mc(skew, 1000, 4000, 2000, 7)
    _, r3 = p_fallback_mc(skew, 1000, 4000, 2000, 8)
    check(mc2 == mc, "same seed, same estimate")
    check(r2 != r3, "another seed, other samples")
    # The recommended deadline meets the target, and 10% less would not.
    d = recommend_deadline(skew, 1000, 1e-3)
    check(p_fallback_exact(skew, 1000, d) <= 1e-3, "deadline %g meets 1e-3" % d)
    check(p_fallback_exact(skew, 1000, 0.9 * d) > 1e-3, "deadline %g is not too generous" % d)
    # Normal skew: the range of p normal arrivals is about sd * 2 * z.
    nskew = Skew("normal", 0.0, 100.0)
    check(0.4 < p_fallback_exact(nskew, 1000, 650.0) < 0.6, "normal skew range median near 650 ms")
    print("selftest: %d checks, %d failed" % (checks, len(failures)))
    return 1 if failures else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cost", help="cost once every rank is there (cluster MPI, flat and hierarchical)")
    add_common(c)
    c.add_argument("--ranks", type=int, nargs="+", default=[4096, 16384, 100000])
    f = sub.add_parser("fallback", help="P(fallback) for a deadline and skew")
    add_common(f)
    f.add_argument("--ranks", type=int, nargs="+", default=[4096, 16384, 100000])
    f.add_argument("--deadline-ms", type=float, default=5000.0)
    d = sub.add_parser("deadline", help="deadline for a target fallback probability")
    add_common(d)
    d.add_argument("--ranks", type=int, nargs="+", default=[4096, 16384, 100000])
    d.add_argument("--target", type=float, default=1e-3)
    t = sub.add_parser("table", help="the docs/RANKS.md table")
    add_common(t)
    t.add_argument("--ranks", type=int, nargs="+", default=[4096, 16384, 100000])
    t.add_argument("--target", type=float, default=1e-3)
    v = sub.add_parser("validate", help="fit on a subset of measurements, compare all")
    v.add_argument("measurements", nargs="+")
    v.add_argument("--cores", type=int, default=Params.cores)
    v.add_argument("--fit-threads", type=int, nargs="+", default=[2, 16, 128])
    v.add_argument("--fit-mpi", type=int, nargs="+", default=[2, 4, 8])
    v.add_argument("--fit-opt", type=int, nargs="+", default=[128, 512])
    v.add_argument("--predict-opt", type=int, nargs="*", default=[],
                   help="also predict mtsched-opt's pre-sync at these thread rank counts")
    v.add_argument("--fit-iters", type=int, default=60)
    v.add_argument("--limit", type=float, default=2.0)
    v.add_argument("--kinds", nargs="+", default=[],
                   choices=["threads", "mpi", "opt", "opt-hier"],
                   help="compare only these rows (the fit uses every file)")
    s = sub.add_parser("thread", help="simulate thread ranks (the fitted parameters by default)")
    s.add_argument("--ranks", type=int, nargs="+", default=[2, 8, 64])
    s.add_argument("--cores", type=int, default=Params.cores)
    s.add_argument("--t-wake", type=float, default=Params.t_wake)
    s.add_argument("--t-scan", type=float, default=Params.t_scan)
    s.add_argument("--front", type=float, default=Params.front)
    th = sub.add_parser("thread-hier", help="mtsched-opt's pre-sync on thread ranks, "
                        "flat and hierarchical (gen_groups.py graphs; the fitted parameters)")
    th.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    th.add_argument("--cores", type=int, default=Params.cores)
    th.add_argument("--t-byte-opt", type=float, default=Params.t_byte,
                    help="µs per byte of a real record (fitted on 128 and 512 ranks)")
    th.add_argument("--t-entry-opt", type=float, default=Params.t_entry)
    sub.add_parser("selftest", help="check the model's invariants (quick)")
    args = ap.parse_args(argv)
    if args.cmd == "thread-hier":
        for n in args.ranks:
            flat = thread_presync_us(n, args.cores, Params.t_wake, Params.t_scan, Params.front,
                                     message_bytes(n, "tp:8"), args.t_byte_opt, args.t_entry_opt)
            hier = thread_hier_presync_us(n, args.cores, Params.t_wake, Params.t_scan,
                                          Params.front, "tp:8", args.t_byte_opt,
                                          args.t_entry_opt)
            print("ranks=%d flat_model_ms=%.2f hier_model_ms=%.2f" % (n, flat / 1e3, hier / 1e3))
        return 0
    if args.cmd == "thread":
        for n in args.ranks:
            print("ranks=%d cores=%d model_us=%.1f" % (n, args.cores, thread_cost_us(
                n, args.cores, args.t_wake, args.t_scan, args.front)))
        return 0
    return dict(cost=cmd_cost, fallback=cmd_fallback, deadline=cmd_deadline,
                table=cmd_table, validate=cmd_validate, selftest=cmd_selftest)[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
