"""Project-level checks of a job before anything is imported: markers that
cannot be profiled, and the packages ``--include`` / ``include=`` name."""

from __future__ import annotations

from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.job.loader import resolve_include
from trainium_lens.harness.markers import Marked, misplaced_markers
from trainium_lens.harness.spec import Spec, marker_includes


def check_misplaced(source: str, spec: Spec, rel_file: str) -> None:
    """A marker above a nested function (or a method of a nested class) is an
    error when the job would profile it: every marked function, or the line
    asked for lies inside it."""
    if spec.functions:
        return
    for marker_line, name, end_line in misplaced_markers(source):
        if spec.line is None or marker_line <= spec.line <= end_line:
            raise HarnessError(
                "parse",
                f"{rel_file}:{marker_line}: the marker is above {name}(), a nested "
                f"function: only module-level functions and methods of module-level classes "
                f"can be profiled (move it to module level)",
                rel_file,
                marker_line,
            )


def resolve_includes(spec: Spec, chosen: list[Marked], rel_file: str) -> list[tuple[str, str]]:
    """(location, root) of every included package: the job's, then the markers'.
    A name that is not installed is an error naming where it came from."""
    wanted: list[tuple[str, Marked | None]] = [(name, None) for name in spec.include]
    for m in chosen:
        wanted += [(name, m) for name in marker_includes(m, rel_file)]
    out: list[tuple[str, str]] = []
    for name, source in wanted:
        found = resolve_include(name)
        if found is None:
            if source is None:
                raise HarnessError(
                    "spec", f"--include {name}: no installed package or module of that name for this Python"
                )
            raise HarnessError(
                "parse",
                f"{rel_file}:{source.marker_line}: include={name} names no installed package or module",
                rel_file,
                source.marker_line,
            )
        if found not in out:
            out.append(found)
    return out
