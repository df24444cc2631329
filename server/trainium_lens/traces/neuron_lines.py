"""Per-line device figures from a device profile's instructions (``neuron_profile``).

Engines run in parallel, so a line's time is the **union** of its instructions'
intervals (per engine and overall), never the sum of durations. Each instruction
is credited to one line, so per engine the lines' times and the unattributed time
add up to the engine's busy time:

* each of the instruction's stack frames (a fused instruction carries several) is
  walked to its first user frame; the line most of them reach gets the
  instruction, ties going to the frame listed first; the other lines it reaches
  are *covered* (listed, no time);
* an instruction without frames takes the line the host's HLO metadata gives its
  name (``hlo_lines``), else it is unattributed;
* every user frame of its stacks gets it as *total* (a helper's callers).

Work — ``raw_flops``, ``adjusted_flops``, HBM read/write and spill bytes — follows
the same rule: the credited line gets it as self, every line its stacks pass
through as total. Work is a **sum** (counts add up; intervals do not).
``phases`` (an instruction name → ``"backward"``) splits a line's figures into
forward and backward where the host result knows which is which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from trainium_lens.harness.intervals import union_length
from trainium_lens.harness.stacks import user_places
from trainium_lens.traces.neuron_profile import Frame, Instruction, Profile

LIBRARY_PARTS = (
    "site-packages/",
    "dist-packages/",
    "/torch/",
    "/torch_xla/",
    "/torch_neuronx/",
    "/lib/python3",
)
Place = tuple[str, int]


@dataclass
class LineTime:
    file: str
    line: int
    time_ns: int = 0  # forward: union of the intervals of the instructions credited here
    engines: dict[str, int] = field(default_factory=dict)  # union per engine, every phase
    instructions: int = 0  # credited to this line, every phase
    hlo_names: list[str] = field(default_factory=list)  # credited to this line
    total_ns: int = 0  # forward: union of every instruction whose user stack passes here
    covered: list[str] = field(default_factory=list)  # fused here, credited to another line
    per_hlo: dict[str, int] = field(default_factory=dict)  # credited instructions: union per name
    backward_ns: int = 0  # the same for instructions ``phases`` calls backward
    backward_total_ns: int = 0
    work: dict[str, int] = field(default_factory=dict)  # forward, credited: sum per work field
    total_work: dict[str, int] = field(default_factory=dict)  # forward, through the stack
    backward_work: dict[str, int] = field(default_factory=dict)


@dataclass
class LineReport:
    """``line_times``' answer. Reconciliation: an engine runs one instruction at a
    time, so per engine the lines' times plus ``unattributed_engines`` equal
    ``busy_engines`` (each instruction is credited to one line); per work field
    the lines' ``work`` + ``backward_work`` plus ``unattributed_work`` equal ``work``."""

    lines: list[LineTime]
    busy_ns: int  # union of every instruction, all engines
    busy_engines: dict[str, int]
    unattributed_ns: int  # union of the instructions no user line reaches
    unattributed_engines: dict[str, int]
    opcodes: dict[str, str] = field(default_factory=dict)  # instruction name → its opcode
    schema: str | None = None  # the profile's schema version
    work_fields: tuple[str, ...] = ()  # the work the profile carries; the rest is unknown, not 0
    work: dict[str, int] = field(default_factory=dict)  # every instruction
    unattributed_work: dict[str, int] = field(default_factory=dict)
    executions: list[str] = field(default_factory=list)  # the profile's NEFF per execution
    instructions: int = 0
    framed: int = 0  # instructions naming a stack frame (0: NEFFs compiled without debug info)


def is_library(file: str) -> bool:
    return any(part in file.replace("\\", "/") for part in LIBRARY_PARTS)


def user_frames(frames: dict[int, Frame], frame_id: int, is_user: Callable[[str], bool]) -> list[Place]:
    """The user frames of a stack, innermost first (walking parent ids outwards)."""

    def frame(frame_id: int) -> tuple[Place | None, int] | None:
        found = frames.get(frame_id)
        if found is None:
            return None
        return ((found.file, found.line) if is_user(found.file) else None), found.parent

    return user_places(frame_id, frame)


def user_frame(frames: dict[int, Frame], frame_id: int, is_user: Callable[[str], bool]) -> Place | None:
    """The first frame in user code, walking from the innermost frame outwards."""
    found = user_frames(frames, frame_id, is_user)
    return found[0] if found else None


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Nanoseconds covered by the intervals, overlaps once (engines run in parallel)."""
    return int(union_length(intervals))


def _spans(items: list[Instruction]) -> int:
    return union_ns([(i.start_ns, i.end_ns) for i in items])


def _per_engine(items: Iterable[Instruction]) -> dict[str, int]:
    engines: dict[str, list[tuple[int, int]]] = {}
    for ins in items:
        engines.setdefault(ins.engine, []).append((ins.start_ns, ins.end_ns))
    return {e: union_ns(v) for e, v in sorted(engines.items())}


def _per_name(items: Iterable[Instruction]) -> dict[str, int]:
    names: dict[str, list[tuple[int, int]]] = {}
    for ins in items:
        names.setdefault(ins.hlo_name, []).append((ins.start_ns, ins.end_ns))
    return {n: union_ns(v) for n, v in sorted(names.items())}


def _work(items: list[Instruction], fields: tuple[str, ...]) -> dict[str, int]:
    sums = [0] * len(fields)
    for ins in items:
        for k, value in enumerate(ins.work):
            sums[k] += value
    return dict(zip(fields, sums, strict=True))


def line_times(
    profile: Profile,
    hlo_lines: dict[str, Place] | None = None,
    is_user: Callable[[str], bool] | None = None,
    phases: dict[str, str] | None = None,
) -> LineReport:
    """Per user line: the instructions credited to it and those passing through it
    (the rules are in the module docstring)."""

    def default_user(f: str) -> bool:
        return not is_library(f)

    user = is_user or default_user
    phase = phases or {}
    fields = profile.work_fields
    credited: dict[Place, list[Instruction]] = {}
    # through the stack, per phase (False: forward, True: backward): the intervals,
    # and the work per *kind* of instruction (same frames, name, phase): instructions
    # of one kind pass through the same lines, so their work is added up once per kind
    through: dict[tuple[Place, bool], list[tuple[int, int]]] = {}
    kinds: dict[tuple, tuple[set[Place], bool, list[int]]] = {}
    covered: dict[Place, set[str]] = {}
    lost: list[Instruction] = []
    walked: dict[int, list[Place]] = {}  # per frame id: many instructions share a stack

    def stack_of(frame_id: int) -> list[Place]:
        found = walked.get(frame_id)
        if found is None:
            found = walked[frame_id] = user_frames(profile.frames, frame_id, user)
        return found

    for ins in profile.instructions:
        stacks = [s for s in map(stack_of, ins.frame_ids) if s]
        if not stacks and hlo_lines and ins.hlo_name in hlo_lines:
            stacks = [[hlo_lines[ins.hlo_name]]]
        if not stacks:
            lost.append(ins)
            continue
        firsts = [s[0] for s in stacks]
        place = max(firsts, key=lambda p: (firsts.count(p), -firsts.index(p)))
        credited.setdefault(place, []).append(ins)
        for other in set(firsts) - {place}:
            covered.setdefault(other, set()).add(ins.hlo_name)
        back = phase.get(ins.hlo_name) == "backward"
        key = (tuple(ins.frame_ids), "" if ins.frame_ids else ins.hlo_name, back)
        kind = kinds.get(key)
        if kind is None:
            kind = kinds[key] = ({p for s in stacks for p in s}, back, [0] * len(fields))
        span = (ins.start_ns, ins.end_ns)
        for where in kind[0]:
            through.setdefault((where, back), []).append(span)
        sums = kind[2]
        for k, value in enumerate(ins.work):
            sums[k] += value
    total_work: dict[tuple[Place, bool], list[int]] = {}
    for places, back, sums in kinds.values():
        for where in places:
            acc = total_work.setdefault((where, back), [0] * len(fields))
            for k, value in enumerate(sums):
                acc[k] += value

    def split(items: list[Instruction]) -> tuple[list[Instruction], list[Instruction]]:
        if not phase:
            return items, []
        back = [i for i in items if phase.get(i.hlo_name) == "backward"]
        return ([i for i in items if phase.get(i.hlo_name) != "backward"] if back else items), back

    out = []
    for place in set(credited) | set(covered) | {p for p, _b in through}:
        items = credited.get(place, [])
        forward, backward = split(items)
        out.append(
            LineTime(
                place[0],
                place[1],
                time_ns=_spans(forward),
                engines=_per_engine(items),
                instructions=len(items),
                hlo_names=sorted({i.hlo_name for i in items}),
                total_ns=union_ns(through.get((place, False), [])),
                covered=sorted(covered.get(place, set())),
                per_hlo=_per_name(items),
                backward_ns=_spans(backward),
                backward_total_ns=union_ns(through.get((place, True), [])),
                work=_work(forward, fields),
                total_work=dict(zip(fields, total_work.get((place, False), [0] * len(fields)), strict=True)),
                backward_work=_work(backward, fields),
            )
        )
    out.sort(key=lambda t: (-(t.time_ns + t.backward_ns), t.file, t.line))
    everything = profile.instructions
    return LineReport(
        out,
        _spans(everything),
        _per_engine(everything),
        _spans(lost),
        _per_engine(lost),
        {i.hlo_name: i.opcode for i in everything},
        profile.schema,
        fields,
        _work(everything, fields),
        _work(lost, fields),
        list(profile.executions),
        len(everything),
        sum(1 for i in everything if i.frame_ids),
    )


def repeats(executions: list[str], steps: int) -> bool:
    """Do the executions form ``steps`` equal steps (the same NEFFs in the same
    order, ``steps`` times)? How a session profile's step count is confirmed."""
    n = len(executions)
    if steps < 1 or n == 0 or n % steps:
        return False
    size = n // steps
    return all(executions[i] == executions[i % size] for i in range(n))
