"""What an xla run warns about, beside its figures (each a one-line warning event
and an entry in ``signals.warnings``)."""

from __future__ import annotations

from typing import Any

# which function's measured steps first ran each compiled graph, per harness process
_FIRST_RAN: dict[str, str] = {}


def stale_optimizers(values: list, device: str) -> list[str]:
    """An optimizer among the inputs (or in containers inside them) whose parameters
    are not on the xla device: it was built before the harness moved the model
    (moving to xla makes new parameter objects), so its step updates nothing."""
    import torch

    found, seen = [], set()
    pending, level = list(values), list(values)
    for _depth in range(3):  # containers of containers (a dict of optimizers in a tuple)
        inner = [v for c in level if isinstance(c, (tuple, list)) for v in c]
        inner += [v for c in level if isinstance(c, dict) for v in c.values()]
        pending += inner
        level = inner
    for value in pending:
        if not isinstance(value, torch.optim.Optimizer) or id(value) in seen:
            continue
        seen.add(id(value))
        params = [p for group in value.param_groups for p in group["params"]]
        if params and not any(p.device.type == "xla" for p in params):
            found.append(
                f"{type(value).__name__} holds parameters on {params[0].device}, not on {device}: it "
                f"was created before the model moved to the device, so its step updates nothing here "
                f"(create it in the inputs function after model.to(device))"
            )
    return found


def reused_graphs(graphs: set[str], function: str) -> list[str]:
    """A graph identical to one an earlier function of the batch ran is that
    function's compiled program (torch-xla caches by a hash that ignores metadata):
    its HLO names the earlier function's lines. Say so; remember this one's."""
    earlier = sorted({_FIRST_RAN[g] for g in graphs if _FIRST_RAN.get(g, function) != function})
    for g in graphs:
        _FIRST_RAN.setdefault(g, function)
    if not earlier:
        return []
    return [
        f"part of this step ran graphs first compiled while profiling {', '.join(earlier)} (identical "
        f"graphs: torch-xla reuses the compiled program, whose HLO names that function's lines): "
        f"those instructions stand on its lines; profile {function} alone for its own"
    ]


def after_capture(
    views: list[dict], att: Any, cap: Any, device_type: str, tag_error: str | None
) -> list[str]:
    """What the capture and the device views leave unsaid in the figures."""
    warnings = []
    if any(v["error"] for v in views):
        failed = next(v for v in views if v["error"])
        warnings.append(
            f"{sum(1 for v in views if v['error'])} of {len(views)} device trace(s) not "
            f"processed: {failed['error']}"
        )
    if att.unknown:
        warnings.append(
            f"{len(att.unknown)} executed instruction(s) matched no compiled module "
            f"({', '.join(sorted(att.unknown)[:3])}): their time is not attributed"
        )
    if not cap.executed:
        warnings.append(
            f"the torch_xla profiler recorded no HLO instruction on PJRT "
            f"{device_type}: no per-line time on this device"
        )
    if tag_error:
        warnings.append(
            f"backward instructions could not be tagged with their forward lines ({tag_error}): "
            f"they take lines by data flow only"
        )
    return warnings
