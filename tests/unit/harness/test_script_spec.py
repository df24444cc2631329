"""The script spec (``harness/spec.py``, ``ScriptSpec``): what ``trainium-lens run``
hands the harness armed in the user's process, round-tripped through its JSON and
refused, in one line naming the key, when it is not what the harness reads."""

from __future__ import annotations

import dataclasses
import json

import pytest

from trainium_lens.harness.events import HarnessError
from trainium_lens.harness.spec import SCRIPT_SPEC_VERSION, ScriptSpec, parse_script_spec

FULL = ScriptSpec(
    batch_id="20261129-101500-3f2a",
    workspace_root="/w",
    run_dir="/cache/ws/runs/20261129-101500-3f2a",
    command=("srun", "-N", "2", "torchrun", "--nproc-per-node", "2", "train.py"),
    launcher="torchrun",
    wrapper="srun",
    script_rel="train.py",
    main_line=40,
    steps=(4, 6),
    exit_after=True,
    backend="cuda",
    include=("transformers.models.llama",),
    step_on="train.py:31",
    host="trn",
)


def wire(**changes: object) -> str:
    data = FULL.to_dict()
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not ...})


def refused(text: str) -> str:
    with pytest.raises(HarnessError) as info:
        parse_script_spec(text)
    assert info.value.kind == "spec"
    return info.value.message


def test_round_trip_through_json() -> None:
    assert parse_script_spec(json.dumps(FULL.to_dict())) == FULL
    least = ScriptSpec(batch_id="b", workspace_root="/w", run_dir="/r", command=("python", "t.py"))
    data = {
        "spec_version": 1,
        "batch_id": "b",
        "workspace_root": "/w",
        "run_dir": "/r",
        "command": ["python", "t.py"],
    }
    assert parse_script_spec(json.dumps(data)) == least  # the optional keys take their defaults
    assert parse_script_spec(json.dumps(least.to_dict())) == least


def test_a_target_moves_it_with_replace() -> None:
    moved = dataclasses.replace(FULL, workspace_root="/home/u/src", run_dir="/home/u/runs/b", host="trn2")
    assert parse_script_spec(json.dumps(moved.to_dict())) == moved
    with pytest.raises(dataclasses.FrozenInstanceError):
        FULL.run_dir = "/elsewhere"  # type: ignore[misc]


@pytest.mark.parametrize("version", [0, 2, "1", True, None, ...])
def test_another_version_is_refused(version: object) -> None:
    assert f"version {None if version is ... else version!r} is not supported ({SCRIPT_SPEC_VERSION} is)" in (
        refused(wire(spec_version=version))
    )


@pytest.mark.parametrize("key", ["batch_id", "workspace_root", "run_dir", "command"])
def test_a_missing_required_key_is_named(key: str) -> None:
    assert refused(wire(**{key: ...})) == f"run spec: missing key {key!r}"


def test_an_unknown_key_is_named() -> None:
    message = refused(wire(script="train.py"))
    assert message.startswith("run spec: unknown key 'script' (known: spec_version, batch_id,")


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("batch_id", "", "a non-empty string"),
        ("command", [], "a non-empty list of strings"),
        ("command", "python t.py", "a non-empty list of strings"),
        ("launcher", "mpirun", "one of python, torchrun, accelerate"),
        ("wrapper", "salloc", "null or one of srun"),
        ("script_rel", 3, "null or a non-empty string"),
        ("main_line", 0, "a 1-based line number"),
        ("main_line", True, "a 1-based line number"),
        ("steps", [1, 3], "[N, M] with 2 <= N <= M"),
        ("steps", [5, 4], "[N, M] with 2 <= N <= M"),
        ("steps", [3], "[N, M] with 2 <= N <= M"),
        ("exit_after", "yes", "true or false"),
        ("backend", "tpu", "one of auto, neuron, cuda, cpu, xla"),
        ("include", "transformers", "a list of names"),
        ("step_on", "", "null or a non-empty string"),
        ("host", None, "a non-empty string"),
    ],
)
def test_a_wrong_type_is_named_with_what_it_must_be(key: str, value: object, says: str) -> None:
    assert refused(wire(**{key: value})) == f"run spec: {key!r} must be {says}, got {value!r}"


def test_not_json_or_not_an_object() -> None:
    assert refused("{").startswith("run spec: is not valid JSON")
    assert refused("[]") == "run spec: must be a JSON object"
    assert refused(wire(workspace_root="relative")) == "run spec: 'workspace_root' must be an absolute path"
