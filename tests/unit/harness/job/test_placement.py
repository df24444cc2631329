"""harness/job/placement.py: everything ``inputs=`` returns reaches the device. The
``meta`` device stands in for an accelerator (it exists on every torch build);
the real CUDA run is in integration/harness/test_projects.py and runs on a host with a GPU."""

from __future__ import annotations

import types
from collections import namedtuple
from dataclasses import dataclass, field

import pytest
import torch

from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.job.loader import UserCode, call_inputs
from trainium_lens.harness.job.placement import to_device

Pair = namedtuple("Pair", "left right")


@dataclass
class Batch:
    idx: torch.Tensor
    extras: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Frozen:
    x: torch.Tensor


class Trainer:
    def __init__(self):
        self.model = torch.nn.BatchNorm1d(4)
        self.batch = Batch(torch.ones(2, 4))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)


def tensors_of(value):
    out = []
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, torch.nn.Module):
        out += list(value.parameters()) + list(value.buffers())
    elif isinstance(value, dict):
        for v in value.values():
            out += tensors_of(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            out += tensors_of(v)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            out += tensors_of(getattr(value, name))
    return out


def test_nested_structures_move_to_meta():
    shared = torch.arange(3.0)
    value: dict = {
        "lists": [[torch.ones(2), torch.zeros(2)], (shared, 3, "text")],
        "batch": Batch(torch.ones(2, 2), {"mask": torch.ones(2, dtype=torch.bool), "n": 2}),
        "frozen": Frozen(torch.ones(1)),
        "pair": Pair(torch.ones(1), shared),
    }
    moved = to_device(value, "meta")
    found = tensors_of(moved)
    assert len(found) == 8
    assert all(t.device.type == "meta" for t in found)
    assert moved["pair"].right is moved["lists"][1][0]  # a shared tensor is moved once
    assert isinstance(moved["pair"], Pair) and isinstance(moved["batch"], Batch)
    assert moved["lists"][1][1:] == (3, "text")
    assert value["batch"].idx.device.type == "cpu"  # the user's objects are not mutated


def test_module_with_buffers_moves_in_place():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    params = list(model.parameters())
    moved = to_device((model, torch.ones(2, 4)), torch.device("meta"))
    assert moved[0] is model
    # meta (like XLA) cannot take a CPU tensor's storage in place: torch makes new
    # Parameter objects, so an optimizer built before the move would hold stale ones
    # (docs/profiling.md: build it inside inputs after the move, or take `device`)
    assert len(list(model.parameters())) == len(params)
    assert all(t.device.type == "meta" for t in tensors_of(model))
    assert len(list(model.buffers())) == 3  # running_mean, running_var, num_batches_tracked
    assert moved[1].device.type == "meta"


def test_plain_object_attributes_and_parameters():
    trainer = Trainer()
    loose = torch.nn.Parameter(torch.ones(3))
    moved_trainer, moved_param = to_device((trainer, loose), "meta")
    assert moved_trainer is trainer
    assert all(t.device.type == "meta" for t in tensors_of(trainer.model))
    assert trainer.batch.idx.device.type == "meta"
    assert isinstance(moved_param, torch.nn.Parameter) and moved_param.device.type == "meta"


def test_already_there_is_untouched():
    value = (torch.ones(2), {"a": [torch.zeros(1)]})
    assert to_device(value, "cpu") is value


class _Module(types.ModuleType):
    """A module object holding inputs functions, as ``load_module`` returns."""

    def __init__(self) -> None:
        super().__init__("inputs_module")


def test_inputs_function_receives_the_device(tmp_path):
    got = {}

    def make(device):
        got["device"] = device
        return (torch.ones(1, device=device),)

    mod = _Module()
    mod.make = make  # type: ignore[attr-defined]
    args, kwargs = call_inputs(mod, "make", "f.py", "f", UserCode(str(tmp_path)), device=torch.device("meta"))
    assert got["device"] == torch.device("meta") and args[0].device.type == "meta" and kwargs == {}


def test_inputs_function_with_another_parameter_is_an_error(tmp_path):
    def make(batch_size, device=None):
        return (torch.ones(batch_size),)

    mod = _Module()
    mod.make = make  # type: ignore[attr-defined]
    with pytest.raises(HarnessError) as info:
        call_inputs(mod, "make", "f.py", "f", UserCode(str(tmp_path)), device=torch.device("cpu"))
    assert info.value.kind == "inputs"
    assert "batch_size" in info.value.message and "\n" not in info.value.message
    assert info.value.line == make.__code__.co_firstlineno
