"""Several ranks for the torch.compile backend: each process one rank (one
GPU) of a torch.distributed world, as under ``mpirun`` or ``torchrun``.

What every rank must agree on, and how (docs/RUNTIME.md "Several ranks"):

* **The graph.** Every rank imports its Dynamo graph; the ranks compare the
  imported IR's hash (an all-gather of small objects). A rank whose import
  failed, or whose IR differs, makes every rank fall back to eager for that
  graph, with one warning each: a rank that ran the graph through mtsched
  beside one that ran it eagerly would call different collectives and hang.
* **The decisions.** Rank 0 alone runs ``mtsched-opt --ranks=<world>``
  (thread ranks, one GPU each, on rank 0's host: tensor parallelism within
  a host), which tunes the SPMD graph with its one pre-sync; the other
  ranks wait in a collective on the CPU (a gloo group: a waiting NCCL
  broadcast would spin a kernel on the very GPU being benchmarked). Rank 0
  broadcasts the decided text; every rank writes it to its own cache and
  loads the same module. A second process finds the decided IR in every
  rank's cache: the ranks compare the cache key and the decided text's
  hash, and where one rank misses, rank 0's copy is broadcast again.
* **The communicator.** Rank 0 makes the runtime's communicator id
  (NCCL's unique id), broadcast to every rank; each prepares the graph
  (``mtsched_module_set_ranks``), which opens the communicator on all of
  them at once. A rank whose prepare failed makes every rank fall back.

The exchanges go through a gloo process group made once over the world
(``torch.distributed.new_group(backend="gloo")``), so that nothing waits on
a GPU. ``Ranks.single()`` stands for a process outside a distributed world.
"""

import datetime
import hashlib

import torch

__all__ = ["Ranks", "Disagree", "agree", "broadcast", "gather", "sha"]

# mtsched-opt's choices the runtime runs across processes: NCCL only. The
# peer-memory collectives need the peers' buffers mapped into each process
# (cudaIpc handles), which the runtime does not exchange yet; hier is left
# out as it spans hosts (docs/RUNTIME.md "Several ranks").
DISABLED_CHOICES = "one_shot,two_shot,p2p,hier"
# How long a rank waits for rank 0's decision: mtsched-opt autotunes
# (seconds to minutes for a layer).
DECIDE_TIMEOUT = datetime.timedelta(minutes=30)


class Disagree(Exception):
    """The ranks did not agree; every rank raises it with the same text."""


def sha(text):
    return hashlib.sha256(text.encode() if isinstance(text, str)
                          else bytes(text)).hexdigest()[:24]


class Ranks:
    """This process's rank, the world's size and the group the backend's
    exchanges go through."""

    _GROUP = []

    def __init__(self, rank, world, group):
        self.rank = rank
        self.world = world
        self.group = group

    @classmethod
    def single(cls):
        return cls(0, 1, None)

    @classmethod
    def current(cls):
        """The torch.distributed world if one of several ranks is
        initialised, else single(). The gloo group is made once per
        process: every rank gets here at its first compiled graph, as
        every rank compiles the same graphs in the same order."""
        dist = getattr(torch, "distributed", None)
        if dist is None or not dist.is_available() or \
                not dist.is_initialized() or dist.get_world_size() < 2:
            return cls.single()
        if not cls._GROUP:
            if dist.get_backend() == "gloo":
                cls._GROUP.append(None)  # the world's own group
            else:
                cls._GROUP.append(dist.new_group(backend="gloo",
                                                 timeout=DECIDE_TIMEOUT))
        return cls(dist.get_rank(), dist.get_world_size(), cls._GROUP[0])

    @property
    def several(self):
        return self.world > 1


def gather(ranks, obj):
    """Every rank's obj, in rank order (every rank calls it)."""
    if not ranks.several:
        return [obj]
    import torch.distributed as dist
    out = [None] * ranks.world
    dist.all_gather_object(out, obj, group=ranks.group)
    return out


def broadcast(ranks, obj):
    """Rank 0's obj on every rank (every rank calls it; the others' obj is
    ignored)."""
    if not ranks.several:
        return obj
    import torch.distributed as dist
    box = [obj if ranks.rank == 0 else None]
    dist.broadcast_object_list(box, src=0, group=ranks.group)
    return box[0]


def agree(ranks, what, ok, value=None, reason=None):
    """Every rank's (ok, value) compared: returns the common value, or
    raises Disagree on every rank with the same text where a rank failed
    (its reason) or the values differ. `what` names the step."""
    got = gather(ranks, (bool(ok), value, reason))
    failed = [(r, why) for r, (o, _, why) in enumerate(got) if not o]
    if failed:
        r, why = failed[0]
        raise Disagree("%s: rank %d of %d: %s" % (what, r, ranks.world, why))
    values = [v for _, v, _ in got]
    if any(v != values[0] for v in values):
        raise Disagree("%s: the ranks differ (%s)" % (
            what, ", ".join("rank %d %s" % (r, v) for r, v in
                            enumerate(values))))
    return values[0]
