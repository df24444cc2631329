"""The work step's allocator events → the step's memory peak, the lines whose
tensors are live there, and which saved tensors are activations.

``profile_memory`` records every allocation and free of the tensor allocators
(CPU; CUDA's caching allocator) as an event inside the op that made it. Walked
in time order, per device:

* *peak*: the largest rise of allocated bytes above where the step began (what
  was allocated before the call, parameters and inputs, is not in the events:
  on CUDA ``held_before`` comes from the allocator itself, on CPU it is unknown);
* *live at the peak*: allocations made during the step and not yet freed at
  that instant, each credited to the line of the op that made it (forward
  activations, backward gradients alike);
* a saved tensor (``step.SAVED_PREFIX`` marker) is an *activation* when its
  storage was allocated during the step and is still live when it is saved;
  otherwise it existed before the call (a parameter, an input).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainium_lens.harness.attribution.kinds import FWD, OPTIM_PREFIXES, OPTIMIZER
from trainium_lens.harness.work.step import SAVED_PREFIX, Saved

Owner = tuple[Any, int]  # (label or None, phase)


@dataclass
class Live:
    size: int
    owner: Owner


@dataclass
class Memory:
    device: str = ""
    peak_bytes: int = 0  # largest rise above the step's start
    peak_phase: int = 0  # phase of the op that reached the peak
    peak_owner: Any = None
    at_peak: dict[Any, int] = field(default_factory=dict)  # label -> bytes live at the peak
    allocated: dict[Owner, int] = field(default_factory=dict)  # gross bytes allocated per owner
    saved_by: dict[Any, int] = field(default_factory=dict)  # label -> bytes it saved (first saver)
    activations_by: dict[Any, int] = field(default_factory=dict)  # of which allocated in the step
    saved_total: int = 0
    events: int = 0  # allocator events seen on the device


def _owner_of(node: Any, resolve: Callable[[Any], Owner | None]) -> Owner:
    p = node.parent
    while p is not None:
        found = resolve(p)
        if found is not None:
            return found
        p = p.parent
    return (None, 0)


def walk(
    roots: list[Any],
    resolve: Callable[[Any], Owner | None],
    saved: list[Saved],
    device_type: str,
    is_allocation: Callable[[Any], bool],
) -> Memory:
    """``resolve(node)``: the (label, phase) a profiler node stands for, or None to
    look further up; ``device_type``: the backend's (``cpu``, ``cuda``)."""
    allocs: list[tuple[int, int, Any]] = []  # (time, order, node)
    # the optimizer's ranges, by time: the line labels' ranges can enclose them in the
    # tree, so an allocation's parents need not name the optimizer it ran in
    optimizer: list[tuple[int, int]] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        if is_allocation(node) or node.name.startswith(SAVED_PREFIX):
            allocs.append((node.start_time_ns, len(allocs), node))
        elif node.name.startswith(OPTIM_PREFIXES):
            optimizer.append((node.start_time_ns, node.end_time_ns))
        stack.extend(node.children)
    allocs.sort(key=lambda t: (t[0], t[1]))
    mem = Memory(device=device_type)
    live: dict[int, Live] = {}  # allocation id -> live allocation made in the step
    by_ptr: dict[int, int] = {}  # ptr -> allocation id (live, made in the step)
    level, peak_at = 0, -1
    mine = []  # this device's allocator events, in time order
    for _t, _i, node in allocs:
        if node.name.startswith(SAVED_PREFIX):
            _saved(mem, node, saved, by_ptr, device_type, resolve)
            continue
        f = node.extra_fields
        if getattr(f.device, "type", str(f.device)) != device_type:
            continue
        mine.append(node)
        size = int(f.alloc_size)
        level += size
        if size > 0:
            owner = _owner_of(node, resolve)
            live[f.allocation_id] = Live(size, owner)
            by_ptr[f.ptr] = f.allocation_id
            mem.allocated[owner] = mem.allocated.get(owner, 0) + size
            if level > mem.peak_bytes:
                mem.peak_bytes, peak_at = level, len(mine) - 1
                mem.peak_owner, mem.peak_phase = owner
                t = node.start_time_ns
                if mem.peak_phase == FWD and any(a <= t <= b for a, b in optimizer):
                    mem.peak_phase = OPTIMIZER  # its ops are forward ops of their line (tree.py)
        else:
            gone = live.pop(f.allocation_id, None)
            if gone is not None and by_ptr.get(f.ptr) == f.allocation_id:
                del by_ptr[f.ptr]
    mem.events = len(mine)
    mem.at_peak = _by_label(_live_after(mine[: peak_at + 1], resolve))
    return mem


def _live_after(events: list[Any], resolve: Callable[[Any], Owner | None]) -> dict[int, Live]:
    """The allocations made by ``events`` and not freed by them (replayed once:
    keeping a copy at every new peak would cost the square of the events)."""
    live: dict[int, Live] = {}
    for node in events:
        f = node.extra_fields
        if int(f.alloc_size) > 0:
            live[f.allocation_id] = Live(int(f.alloc_size), (None, 0))
        else:
            live.pop(f.allocation_id, None)
    for node in events:
        f = node.extra_fields
        if f.allocation_id in live and int(f.alloc_size) > 0:
            live[f.allocation_id].owner = _owner_of(node, resolve)
    return live


def _by_label(live: dict[int, Live]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for a in live.values():
        out[a.owner[0]] = out.get(a.owner[0], 0) + a.size
    return out


def _saved(
    mem: Memory,
    node: Any,
    saved: list[Saved],
    by_ptr: dict[int, int],
    device_type: str,
    resolve: Callable[[Any], Owner | None],
) -> None:
    try:
        record = saved[int(node.name[len(SAVED_PREFIX) :])]
    except (ValueError, IndexError):
        return
    label = _owner_of(node, resolve)[0]
    mem.saved_total += record.nbytes
    mem.saved_by[label] = mem.saved_by.get(label, 0) + record.nbytes
    on_device = record.device.split(":")[0] == device_type
    if on_device and record.ptr in by_ptr:
        mem.activations_by[label] = mem.activations_by.get(label, 0) + record.nbytes
