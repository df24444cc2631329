"""The settings table's other sides, checked against it (rust-analyzer keeps its
editor schema the same way: the server's config is the source, a test the guard).

- package.json's ``contributes.configuration`` must declare exactly ``settings.names()``,
  each with a default the server parses to its own default (``mismatches``);
- the client's payload type (``ServerSettings`` in extension/src/settings.ts) must name
  exactly ``settings.payload_keys()``: they are generated into extension/src/settingsKeys.ts
  and ``tsc`` fails when the interface differs (``client_keys_ts``).

``python -m trainium_lens.lsp.settings_schema --write`` regenerates settingsKeys.ts;
tests/unit/lsp/test_settings_schema.py fails while anything here disagrees.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trainium_lens.lsp import settings

REPO = Path(__file__).resolve().parents[3]
CLIENT_KEYS = REPO / "extension" / "src" / "settingsKeys.ts"


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """Dotted setting names (``warmWorker.idleSeconds``) as VS Code hands them to the
    client's ``get(section)``: ``{"warmWorker": {"idleSeconds": ...}}``."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, last = name.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def mismatches(properties: dict[str, Any]) -> list[str]:
    """What package.json's configuration ``properties`` and the server's table disagree
    on, one line each (empty: they agree)."""
    declared = set(properties)
    read = set(settings.names())
    out = [
        f"{name}: the server reads it (lsp/settings.py) but package.json does not declare it"
        for name in sorted(read - declared)
    ]
    out += [
        f"{name}: package.json declares it but the server's table (lsp/settings.py) does not list it"
        for name in sorted(declared - read)
    ]
    prefix = settings.SECTION + "."
    client_only = {prefix + key for key in settings.CLIENT_ONLY}
    for name in sorted((declared & read) - client_only):
        if "default" not in properties[name]:
            out.append(f"{name}: package.json gives no default")
            continue
        default = properties[name]["default"]
        parsed, warnings = settings.parse({settings.SECTION: nest({name[len(prefix) :]: default})})
        if warnings or parsed != settings.Settings():
            out.append(
                f"{name}: package.json's default {default!r} is not the server's default"
                + (f" ({warnings[0]})" if warnings else "")
            )
    return out


def client_keys_ts() -> str:
    """extension/src/settingsKeys.ts, generated from the server's table."""
    keys = ",\n".join(f'  "{key}"' for key in settings.payload_keys())
    return (
        "// Generated from the server's settings table (server/trainium_lens/lsp/settings.py) by\n"
        "// `python -m trainium_lens.lsp.settings_schema --write`: do not edit by hand.\n"
        "// tests/unit/lsp/test_settings_schema.py fails while it differs from the table.\n\n"
        "/** The keys of the `trainiumLens` payload the server reads (`ServerSettings`). */\n"
        f"export const PAYLOAD_KEYS = [\n{keys},\n] as const;\n"
    )


def package_properties(root: Path = REPO) -> dict[str, Any]:
    package = json.loads((root / "package.json").read_text())
    return package["contributes"]["configuration"]["properties"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--write", action="store_true", help="regenerate extension/src/settingsKeys.ts")
    args = parser.parse_args(argv)
    if args.write:
        CLIENT_KEYS.write_text(client_keys_ts())
    problems = mismatches(package_properties())
    if CLIENT_KEYS.read_text() != client_keys_ts():
        problems.append(f"{CLIENT_KEYS.relative_to(REPO)} is stale: run with --write")
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
