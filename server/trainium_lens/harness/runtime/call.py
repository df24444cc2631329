"""Calling the user's marked function, for every protocol (eager and xla): the one
frame user code is called from, its inputs and outputs, the variant it belongs
to. Imports no protocol, so both build on it."""

from __future__ import annotations

import copy
import os
from typing import Any, Protocol

import torch

from trainium_lens.harness.events import EventStream, HarnessError
from trainium_lens.harness.job.loader import UserCode, call_inputs, required_params, resolve
from trainium_lens.harness.job.placement import to_device
from trainium_lens.harness.markers import Marked, variant_group
from trainium_lens.harness.spec import Spec


class CallSession(Protocol):
    """What calling needs of a batch's session (``eager/run.Session`` is one)."""

    spec: Spec
    events: EventStream
    backend: Any
    module: Any
    user: UserCode
    rel_file: str
    inputs: dict[str, tuple[tuple, dict]]
    pristine: dict[str, Any]  # inputs name -> a copy made before any variant ran
    references: dict[str, tuple[str, Any]]


def invoke(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The one place the harness calls user code: line labels stop at this frame."""
    return fn(*args, **kwargs)


def variant_key(marked: Marked) -> str:
    """Functions compared as variants share this (``markers.variant_group``)."""
    return variant_group(marked.options.get("compare"), marked.options.get("inputs"))


def marked_function(s: CallSession, marked: Marked) -> Any:
    """The marked function, looked up in the imported module (both backends)."""
    fn = resolve(s.module, marked.name)
    if not callable(fn):
        raise HarnessError(
            "unknown_function",
            f"{marked.name} is marked but is not a function at import time",
            s.rel_file,
            marked.def_line,
        )
    code = _code_of(fn)
    module_file = getattr(s.module, "__file__", None)
    # Another object under the marked name: refused when the source rebinds it
    # (a decorator without functools.wraps also hides the def, and is fine).
    where = None
    if module_file and (code is None or not _is_marked_def(code, module_file, marked)):
        where = _rebinding_line(module_file, marked)
    if where is not None:
        raise HarnessError(
            "parse",
            f"{s.rel_file}:{where}: {marked.name} is bound again after its marked def (line "
            f"{marked.def_line}): the name would run another function; rename one of them",
            s.rel_file,
            where,
        )
    return fn


def _code_of(fn: Any) -> Any:
    """The code object behind ``fn``: through ``__wrapped__`` (decorators that use
    functools.wraps, torch.compile) and bound methods; None when there is none."""
    seen = 0
    while hasattr(fn, "__wrapped__") and seen < 100:
        fn, seen = fn.__wrapped__, seen + 1
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


def _is_marked_def(code: Any, module_file: str, marked: Marked) -> bool:
    try:
        same_file = os.path.samefile(code.co_filename, module_file)
    except OSError:
        same_file = False
    # a decorated def's code starts at its first decorator, between marker and def
    return same_file and marked.marker_line < code.co_firstlineno <= marked.def_line


def _rebinding_line(module_file: str, marked: Marked) -> int | None:
    """The first line after the marked def that binds its name again at module
    level (a def, a class, an assignment, an import), if the source shows one."""
    import ast

    from trainium_lens.harness.markers import read_source

    name = marked.name.split(".")[0]
    try:
        tree = ast.parse(read_source(module_file))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in tree.body:
        if node.lineno <= marked.def_line:
            continue
        bound: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = [(a.asname or a.name).split(".")[0] for a in node.names]
        if name in bound:
            return node.lineno
    return None


def function_record(s: CallSession, marked: Marked, protocol: dict) -> dict:
    """The result's ``function`` block (both backends)."""
    return {
        "file": s.rel_file,
        "name": marked.name,
        "line": marked.def_line,
        "marker_line": marked.marker_line,
        "protocol": dict(protocol),
        "inputs": marked.options.get("inputs") or None,
        "compare": marked.options.get("compare") or None,
    }


def inputs(s: CallSession, marked: Marked, fn: Any) -> tuple[tuple, dict]:
    name = marked.options.get("inputs")
    if not name:
        missing = required_params(fn)
        if missing:
            raise HarnessError(
                "inputs",
                f"{marked.name} needs arguments ({', '.join(missing)}): "
                f"add inputs=NAME to its marker, naming a function that returns "
                f"them as a tuple or dict",
                s.rel_file,
                marked.marker_line,
            )
        return (), {}
    if name not in s.inputs:  # one call per inputs function: variants share their inputs
        torch.manual_seed(0)
        dev = torch.device(s.backend.device)
        args, kwargs = call_inputs(s.module, name, s.rel_file, marked.name, s.user, device=dev)
        s.inputs[name] = (to_device(args, dev), to_device(kwargs, dev))  # placement.py
        if marked.options.get("compare"):
            _snapshot(s, name)
        return s.inputs[name]
    if name in s.pristine:
        # A later variant of a compared group starts from the state the first one
        # started from: a training step's first call updates the model and optimizer
        # it is given, so on shared inputs the second variant's outputs would be those
        # of a model trained further, never equal (``fix`` compares before and after).
        return copy.deepcopy(s.pristine[name])
    return s.inputs[name]


def _snapshot(s: CallSession, name: str) -> None:
    """Keep a copy of the inputs (one ``deepcopy``: a model and the optimizer holding
    its parameters stay linked); without one, the variants share the inputs and say so."""
    try:
        s.pristine[name] = copy.deepcopy(s.inputs[name])
    except Exception as exc:  # an object that cannot be copied (a handle, a generator)
        s.events.warning(
            f"inputs={name} cannot be copied ({type(exc).__name__}): the variants share them, so "
            "each starts from the state the one before left (outputs of a training step differ)"
        )


def tensors_of(value: Any) -> list:
    """Every tensor in what a function returned, in order (a dict's values, a
    list's or tuple's items, nested)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_of(item)]
    return []


def output(s: CallSession, name: str, value: Any, group: str = "") -> dict:
    """What ``value`` is, and how far it is from the group's first variant: every
    tensor it holds is compared (a fix that changed the second output, a loss
    beside logits, must not pass on the first one alone). ``dtype``/``shape`` are
    the first tensor's (variants are grouped by them)."""
    found = [t.detach() for t in tensors_of(value)]
    if not found:
        return {}
    first = found[0]
    out: dict[str, Any] = {"dtype": str(first.dtype).replace("torch.", ""), "shape": list(first.shape)}
    if len(found) > 1:
        out["tensors"] = len(found)
    sizes = [
        float(t.abs().max().to("cpu").double().item()) for t in found if t.numel() and t.dtype != torch.bool
    ]
    if sizes:
        out["max_abs"] = max(sizes)
    if group not in s.references:
        s.references[group] = (name, [t.to("cpu", copy=True) for t in found])
        out.update(reference=name, max_abs_diff=0.0)
        return out
    ref_name, refs = s.references[group]
    out["reference"] = ref_name
    if len(refs) != len(found):
        out["mismatch"] = f"returned {len(found)} tensors where {ref_name} returned {len(refs)}"
        return out
    worst = 0.0
    for i, (tensor, ref) in enumerate(zip(found, refs, strict=True)):
        if list(ref.shape) != list(tensor.shape):
            if i:  # the first tensor's shape is said by ``shape`` itself
                shapes = f"{list(tensor.shape)} where {ref_name}'s is {list(ref.shape)}"
                out["mismatch"] = f"tensor {i + 1} is {shapes}"
            return out
        if tensor.numel():
            worst = max(worst, float((tensor.to("cpu").double() - ref.double()).abs().max().item()))
    out["max_abs_diff"] = worst
    return out
