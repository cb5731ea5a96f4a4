"""Which ranks aggregate: one node map per communicator, ROMIO's ``cb_config_list``/``cb_nodes``.

Nodes are found with ``MPI_Comm_split_type(COMM_TYPE_SHARED)`` (ranks that share memory) and
named by ``MPI_Get_processor_name``. The default places one aggregator per node and more on
wide nodes: a single process cannot both receive every peer's data and feed the file system at
the node's speed once a node runs many ranks (mpich issue #7531).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import numpy as np

from .hints import Hints

__all__ = ["NodeMap", "node_map", "choose_aggregators", "DEFAULT_RANKS_PER_AGGREGATOR"]

#: On a node with n ranks the default is ceil(n / this) aggregators: one per node up to this
#: many ranks, then one more per this many ranks (mpich #7531: one per node is too few on wide nodes).
DEFAULT_RANKS_PER_AGGREGATOR = 2


@dataclass(frozen=True)
class NodeMap:
    """Node of every rank of a communicator: ``node[r]``, ``local_rank[r]``, ``hostnames[node]``."""

    node: np.ndarray
    local_rank: np.ndarray
    hostnames: tuple[str, ...]

    def ranks_on(self, node: int) -> np.ndarray:
        """Ranks on ``node``, in local-rank order."""
        members = np.flatnonzero(self.node == node)
        return members[np.argsort(self.local_rank[members], kind="stable")]


def node_map(comm) -> NodeMap:
    """Collective: the node map of ``comm``."""
    from mpi4py import MPI

    shared = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    try:
        local_rank = shared.rank
        leader = shared.bcast(comm.rank, root=0)  # the node's lowest rank names it
    finally:
        shared.Free()
    entries = comm.allgather((leader, local_rank, MPI.Get_processor_name()))
    leaders = sorted({e[0] for e in entries})
    index = {leader_rank: i for i, leader_rank in enumerate(leaders)}
    hostnames = [""] * len(leaders)
    for leader_rank, _, host in entries:
        hostnames[index[leader_rank]] = host
    return NodeMap(np.array([index[e[0]] for e in entries], dtype=np.int64),
                   np.array([e[1] for e in entries], dtype=np.int64), tuple(hostnames))


def _spread(members: np.ndarray, count: int) -> np.ndarray:
    """``count`` of a node's ranks, spread evenly over its local ranks (over sockets, typically)."""
    if count >= members.size:
        return members
    picks = (np.arange(count) * members.size) // count
    return members[picks]


def choose_aggregators(nodes: NodeMap, hints: Hints) -> np.ndarray:
    """Aggregator ranks (sorted) from ``cb_config_list`` and ``cb_nodes``.

    ``cb_config_list`` entries are matched in order against each node's hostname (glob patterns
    allowed, ``*`` for any); the first match gives the node's maximum number of aggregators.
    ``cb_nodes`` then caps the total, taking nodes round-robin so aggregators stay spread out.
    """
    per_node = []
    for node, host in enumerate(nodes.hostnames):
        members = nodes.ranks_on(node)
        if hints.cb_config_list is None:
            limit = -(-members.size // DEFAULT_RANKS_PER_AGGREGATOR)
        else:
            limit = 0
            for pattern, count in hints.cb_config_list:
                if fnmatch.fnmatchcase(host, pattern):
                    limit = members.size if count < 0 else count
                    break
        per_node.append(_spread(members, min(limit, members.size)))
    if not any(p.size for p in per_node):
        raise ValueError(f"hint cb_config_list {hints.as_dict().get('cb_config_list')!r} matches none of the "
                         f"hosts {', '.join(sorted(set(nodes.hostnames)))}: no rank would aggregate")
    total = sum(p.size for p in per_node)
    wanted = total if hints.cb_nodes is None else min(hints.cb_nodes, total)
    chosen: list[int] = []
    depth = 0
    while len(chosen) < wanted:  # round-robin over nodes: node 0's first, node 1's first, ...
        for picks in per_node:
            if depth < picks.size and len(chosen) < wanted:
                chosen.append(int(picks[depth]))
        depth += 1
    return np.array(sorted(chosen), dtype=np.int64)
