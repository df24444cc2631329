"""Options from the workspace's ``pyproject.toml``, table ``[tool.trainium-lens]``.

So that CI and a developer run the same gate with the same words::

    [tool.trainium-lens]
    baseline = "perf/baseline.json"     # check: RUN_ID or RESULT.json
    max-regression = "10%"              # check
    min-effect = "3%"                   # check: of the baseline's step
    alpha = 0.01                        # check: the rank test's level
    junit = "reports/trainium-lens.xml" # check
    backend = "cpu"                     # profile-like commands
    active = 20                         # measured steps

A command-line option wins over the file. Unknown keys are an error that names
them (a typo must not silently drop the threshold a team agreed on).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from trainium_lens.errors import UsageError

TABLE = "trainium-lens"
# key -> (type, what it is)
KEYS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "baseline": (str, "RUN_ID or RESULT.json"),
    "max-regression": ((str, int, float), "a percentage such as '10%'"),
    "min-effect": ((str, int, float), "a percentage such as '1%'"),
    "alpha": ((int, float), "a number in (0, 0.5)"),
    "confirm": (int, "0 or more re-measurements"),
    "junit": (str, "a path"),
    "backend": (str, "auto, neuron, cuda, cpu or xla"),
    "active": (int, "a number of steps"),
    "include": (list, "a list of package names"),
}


def load(workspace: Path) -> dict[str, Any]:
    """``[tool.trainium-lens]`` of ``<workspace>/pyproject.toml`` (empty without one)."""
    path = workspace / "pyproject.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    table = data.get("tool", {}).get(TABLE, {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.{TABLE}] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise UsageError(
            f"{path}: unknown key(s) in [tool.{TABLE}]: {', '.join(unknown)} (known: {', '.join(KEYS)})"
        )
    for key, value in table.items():
        kind, words = KEYS[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise UsageError(f"{path}: [tool.{TABLE}] {key} = {value!r}: expected {words}")
    return table


def percentage(value: Any, name: str) -> float:
    """``"10%"``, ``"10"``, ``10`` → 0.10; a clear error otherwise."""
    text = str(value).strip()
    number = text[:-1].strip() if text.endswith("%") else text
    try:
        pct = float(number)
    except ValueError:
        raise UsageError(f"{name} {value!r}: expected a percentage such as 10%") from None
    if not 0 <= pct < 1000:
        raise UsageError(f"{name} {value!r}: expected a percentage from 0% to 1000%")
    return pct / 100.0
