"""Under XLA: carry each forward line into the backward graph, and see which
lines synchronize with the host.

Backward IR is built by the autograd engine on its own thread, away from the
user's frames, so its HLO instructions carry no source metadata. While the
profiled function runs, ``StepTagger`` (a ``TorchFunctionMode``) sees every torch
call made from user code together with its frames. For each autograd node the
call created (the result's ``grad_fn`` and the new nodes behind it) it registers
a post-hook; when the node runs backward, the hook names a tag on the gradients
it produced through ``torch_xla._XLAC._set_xla_custom_op_name_prefix``. torch-xla
writes that prefix into the HLO ``op_name`` of the gradient's IR node and of every
node upstream of it that has no prefix yet (``SetUserMetadataForSubGraph``), so
each node's own backward instructions carry its tag: the engine runs nodes from
the loss backwards, and what a later node reads was tagged by an earlier one.
``xla/credit.py`` turns a tag back into the forward line (and the node's name).

What torch-xla 2.9 does with the prefix, and why the code below is as it is
(checked on the PJRT CPU device; docs/harness.md, "Backend xla"):

* ``max_call_stack_depth`` is how many *outermost* frames a tagged node keeps, and
  0 crashes the lowering (an empty frame list is walked). The recursion also
  reaches forward nodes the backward reads (saved activations); a large depth
  keeps their whole stack, and an instruction with a user frame stays forward:
  a source line wins over a tag.
* The call always overwrites the tag of the tensor's *own* node: a gradient a
  node passes through unchanged (``AddBackward0``) is skipped, or it would take
  the pass-through node's tag away from the node that computed it.
* A scope (torch-xla's C++ decompositions push one) replaces the prefix in
  ``op_name``: those few instructions take a line by data flow instead.
* The graph hash ignores metadata, so the executable compiled on the first call
  keeps the tags it was compiled with: the tagger is on from the first call.

The same mode has ``xla/syncs.py`` count, per user line, the calls that made
torch-xla execute a graph or copy to the host (``.item()``, ``print(tensor)``,
``if tensor:``) and those that ran an ATen op on the CPU, and notes the lines that
call an optimizer's ``step``/``zero_grad``.
"""

from __future__ import annotations

import os
import sys
from types import CodeType, FrameType
from typing import Any

from torch.overrides import TorchFunctionMode

from trainium_lens.harness.xla.syncs import SyncCounter

TAG_PREFIX = "trainium_lens_bwd"  # op_name = f"{TAG_PREFIX}{id}/{op_type}"
DEPTH = 1 << 20  # frames kept on a tagged node: all of them (see above)
META_KEY = "trainium_lens_tag"  # on Node.metadata: this node is hooked already
_OPTIM_DIR = f"{os.sep}torch{os.sep}optim{os.sep}"
# Calls that only read metadata (no op, no transfer): not worth a frame walk.
_SKIP = frozenset({"size", "dim", "numel", "stride", "__len__", "ndimension", "nelement", "element_size"})
_SKIP_PROPERTIES = frozenset(
    {"shape", "dtype", "device", "requires_grad", "ndim", "grad_fn", "layout", "is_leaf", "grad", "data"}
)
Place = tuple[str, int, str]  # (workspace-relative file, line, function)


def tag_of(op_name: str) -> int | None:
    """The tag id an HLO ``op_name`` carries, or None."""
    if not op_name.startswith(TAG_PREFIX):
        return None
    head = op_name[len(TAG_PREFIX) :].split("/", 1)[0]
    return int(head) if head.isdigit() else None


class TagTable:
    """Tag id -> (forward chain innermost first, autograd node), one per harness
    process: torch-xla reuses a compiled executable for an identical graph (its
    hash ignores metadata), so a graph first compiled while profiling another
    function of the batch carries that function's tags, which must still resolve."""

    def __init__(self) -> None:
        self.tags: list[tuple[list[Place], str]] = []
        self._ids: dict[tuple[tuple[Place, ...], str], int] = {}

    def tag(self, chain: list[Place], node: str) -> int:
        key = (tuple(chain), node)
        tag = self._ids.get(key)
        if tag is None:
            tag = self._ids[key] = len(self.tags)
            self.tags.append((list(chain), node))
        return tag

    def get(self, tag: int) -> tuple[list[Place], str] | None:
        return self.tags[tag] if 0 <= tag < len(self.tags) else None


class StepTagger(TorchFunctionMode):
    """Entered around each call of the profiled function (``with tagger:``)."""

    def __init__(
        self, relpath: Any, stop_code: CodeType | None, xla: Any = None, table: TagTable | None = None
    ):
        """``xla``: what is called of ``torch_xla._XLAC`` (``_set_xla_custom_op_name_prefix``,
        ``_xla_counter_value``, ``_get_executed_fallback_ops``); torch_xla's by default.
        ``table``: the process's tag ids (a new one if not given)."""
        super().__init__()
        if xla is None:
            import torch_xla

            xla = torch_xla._XLAC
            set_prefix = xla._set_xla_custom_op_name_prefix  # (a CPU tensor would raise)
            self._set_prefix = lambda t, tag, depth: t.device.type == "xla" and set_prefix(t, tag, depth)
        else:
            self._set_prefix = xla._set_xla_custom_op_name_prefix
        self.syncs = SyncCounter(xla._xla_counter_value, xla._get_executed_fallback_ops)
        self._relpath = relpath  # file name -> workspace-relative path, None outside user code
        self.stop_code = stop_code  # the harness frame that called the function
        self._code: dict[CodeType, tuple[str, str] | None] = {}
        self.table = table or TagTable()
        self.optimizer_places: dict[Place, str] = {}  # line calling optimizer.step() -> range name
        self.optimizer_calls: dict[str, int] = {}  # range name -> step() calls in the measured steps
        self._step_hook: Any = None
        self.counting = False  # syncs are counted in the measured steps only
        self.error: str | None = None  # the first failure of a hook (tags stop; the run goes on)

    def __enter__(self) -> StepTagger:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._step_hook = register_optimizer_step_pre_hook(self._count_step)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self._step_hook is not None:
            self._step_hook.remove()
            self._step_hook = None
        super().__exit__(*exc)

    def _count_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if self.counting:
            name = f"Optimizer.step#{type(optimizer).__name__}.step"
            self.optimizer_calls[name] = self.optimizer_calls.get(name, 0) + 1

    def tag(self, tag: int) -> tuple[list[Place], str] | None:
        """(forward chain, autograd node) of a tag id (``xla/credit.py`` asks)."""
        return self.table.get(tag)

    @property
    def tags(self) -> list[tuple[list[Place], str]]:
        return self.table.tags

    # -- frames -----------------------------------------------------------------------
    def _user(self, code: CodeType) -> tuple[str, str] | None:
        try:
            return self._code[code]
        except KeyError:
            rel = self._relpath(code.co_filename)
            # co_name, as torch-xla names a frame's function in the HLO stack index
            info = (rel, code.co_name) if rel is not None else None
            self._code[code] = info
            return info

    def _chain(self) -> tuple[list[Place], str | None]:
        """User frames of the current call, innermost first, and the optimizer range
        it runs under (``Optimizer.step#AdamW.step``) when torch.optim is on the way."""
        frame: FrameType | None = sys._getframe(2)
        chain: list[Place] = []
        optimizer: str | None = None
        while frame is not None and frame.f_code is not self.stop_code:
            code = frame.f_code
            info = self._user(code)
            if info is not None:
                place = (info[0], frame.f_lineno, info[1])
                if place not in chain:
                    chain.append(place)
            elif not chain and _OPTIM_DIR in code.co_filename and code.co_name in ("step", "zero_grad"):
                owner = frame.f_locals.get("self")
                if owner is not None:
                    kind = type(owner).__name__
                    optimizer = f"Optimizer.{code.co_name}#{kind}.{code.co_name}"
            frame = frame.f_back
        return chain, optimizer

    # -- the mode ---------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _SKIP or (
            name == "__get__" and getattr(getattr(func, "__self__", None), "__name__", "") in _SKIP_PROPERTIES
        ):
            return func(*args, **kwargs)
        chain, optimizer = self._chain()
        if not chain:
            return func(*args, **kwargs)
        before = self.syncs.counts() if self.counting else None
        result = func(*args, **kwargs)
        if before is not None:
            self.syncs.note(chain[0], name, before)
        if optimizer is not None:
            self.optimizer_places.setdefault(chain[0], optimizer)
        self._hook_new_nodes(result, chain)
        return result

    def _hook_new_nodes(self, result: Any, chain: list[Place]) -> None:
        """Every autograd node behind ``result`` not hooked yet was created by this
        call: its backward gets this call's line."""
        pending = [t.grad_fn for t in _tensors(result) if t.grad_fn is not None]
        while pending:
            node = pending.pop()
            if node is None:
                continue
            kind = type(node).__name__
            if kind == "AccumulateGrad":  # a leaf's: lives as long as the parameter
                continue
            meta = node.metadata
            if META_KEY in meta:
                continue
            tag = self.table.tag(chain, kind)
            meta[META_KEY] = tag
            node.register_hook(self._hook(tag))
            pending.extend(next_node for next_node, _ in node.next_functions)

    def _hook(self, tag: int):
        prefix = f"{TAG_PREFIX}{tag}/"
        set_prefix = self._set_prefix

        def post_hook(grad_inputs: tuple, grad_outputs: tuple) -> None:
            if self.error is not None:
                return
            passed = {id(g) for g in grad_outputs if g is not None}
            try:
                for g in grad_inputs:
                    if g is not None and id(g) not in passed:
                        set_prefix(g, prefix, DEPTH)
            except Exception as exc:  # a torch-xla without the API: no tags, figures stay
                self.error = f"{type(exc).__name__}: {exc}"

        return post_hook


def _tensors(value: Any):
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
