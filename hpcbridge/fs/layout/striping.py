"""Round-robin (RAID-0) striping, the layout model shared by OrangeFS and Lustre."""

from __future__ import annotations

from dataclasses import dataclass

from ..types import BlockLocation

__all__ = ["RoundRobinLayout", "Component", "ComponentLayout"]


@dataclass(frozen=True)
class RoundRobinLayout:
    """Stripe unit ``i`` of the file (bytes ``[i*stripe_size, (i+1)*stripe_size)``) lives on
    ``targets[i % len(targets)]``; ``hosts[j]`` are the hosts serving target ``j`` (may be empty)."""

    stripe_size: int
    targets: tuple[str, ...]
    hosts: tuple[tuple[str, ...], ...] = ()

    def locate(self, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(hosts, targets)`` of stripe unit ``index``."""
        j = index % len(self.targets)
        return (self.hosts[j] if self.hosts else ()), (self.targets[j],)

    def blocks(self, start: int, length: int, merge_up_to: int = 0) -> list[BlockLocation]:
        """Block locations of ``[start, start+length)``, one per stripe unit (merged where
        consecutive units share a target, up to ``merge_up_to`` bytes)."""
        from . import striped_blocks

        return striped_blocks(start, length, self.stripe_size, self.locate, merge_up_to)


@dataclass(frozen=True)
class Component:
    """One extent ``[start, end)`` of a composite layout and its own layout (None: no data
    objects allocated yet, or data not on the object servers).

    ``mirror`` numbers the copy of the file the component belongs to (Lustre FLR: every mirror
    has its own components over the same bytes); ``stale`` marks a copy not holding the current
    data.
    """

    start: int
    end: int
    layout: RoundRobinLayout | None
    mirror: int = 0
    stale: bool = False


@dataclass(frozen=True)
class ComponentLayout:
    """A file whose byte ranges use different layouts (Lustre progressive file layouts)."""

    components: tuple[Component, ...]

    def blocks(self, start: int, length: int, merge_up_to: int = 0) -> list[BlockLocation]:
        """Block locations of ``[start, start+length)`` across the components covering it.

        The blocks cover the range exactly once, as Hadoop's do: where mirrors hold the same
        bytes, the range is cut wherever any mirror's blocks are cut and each piece lists the
        targets (and hosts) of every current mirror, as an HDFS block lists its replicas.
        Stale mirrors are left out; bytes no current component covers are a block without
        targets.
        """
        end = start + length
        per_mirror: dict[int, list[BlockLocation]] = {}
        for component in sorted(self.components, key=lambda c: (c.mirror, c.start)):
            lo, hi = max(start, component.start), min(end, component.end)
            if lo >= hi or component.stale:
                continue
            blocks = per_mirror.setdefault(component.mirror, [])
            if component.layout is None:
                blocks.append(BlockLocation(lo, hi - lo))
            else:
                blocks.extend(component.layout.blocks(lo, hi - lo, merge_up_to))
        cuts = sorted({start, end}.union(*({b.offset, b.end} for bs in per_mirror.values() for b in bs)))
        cursors = dict.fromkeys(per_mirror, 0)
        out: list[BlockLocation] = []
        for lo, hi in zip(cuts, cuts[1:]):
            hosts: dict[str, None] = {}
            racks: dict[str, None] = {}
            targets: dict[str, None] = {}
            for mirror, blocks in per_mirror.items():
                i = cursors[mirror]
                while i < len(blocks) and blocks[i].end <= lo:
                    i += 1
                cursors[mirror] = i
                if i < len(blocks) and blocks[i].offset <= lo:
                    hosts.update(dict.fromkeys(blocks[i].hosts))
                    racks.update(dict.fromkeys(blocks[i].racks))
                    targets.update(dict.fromkeys(blocks[i].targets))
            out.append(BlockLocation(lo, hi - lo, tuple(hosts), tuple(racks), tuple(targets)))
        return out
