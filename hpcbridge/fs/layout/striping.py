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
    objects allocated yet, or data not on the object servers)."""

    start: int
    end: int
    layout: RoundRobinLayout | None


@dataclass(frozen=True)
class ComponentLayout:
    """A file whose byte ranges use different layouts (Lustre progressive file layouts)."""

    components: tuple[Component, ...]

    def blocks(self, start: int, length: int, merge_up_to: int = 0) -> list[BlockLocation]:
        """Block locations of ``[start, start+length)`` across the components covering it."""
        end = start + length
        blocks: list[BlockLocation] = []
        for component in sorted(self.components, key=lambda c: c.start):
            lo, hi = max(start, component.start), min(end, component.end)
            if lo >= hi:
                continue
            if component.layout is None:
                blocks.append(BlockLocation(lo, hi - lo))
            else:
                blocks.extend(component.layout.blocks(lo, hi - lo, merge_up_to))
        return blocks
