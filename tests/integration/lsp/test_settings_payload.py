"""Every setting the editor declares reaches the server: package.json's settings,
each set to a value other than its default, go through the client's own code
(extension/src/settings.ts, bundled and run by node) into the payload, and the
server's parse of that payload is the parse of the settings themselves."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.conftest import ROOT
from trainium_lens.lsp import settings, settings_schema

ESBUILD = ROOT / "node_modules" / ".bin" / "esbuild"

# The client as the extension runs it: VS Code's getConfiguration("trainiumLens").get(key)
# walks dotted keys; the resolved interpreter is trainiumLens.python when it is set.
# (node -e: process.argv[1] is the first argument.)
DRIVER = """
const { serverSettings, settingsPayload } = require(process.argv[1]);
const { config, python } = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const get = (key) => key.split(".").reduce((node, part) => (node == null ? undefined : node[part]), config);
process.stdout.write(JSON.stringify(settingsPayload(serverSettings(get, python))));
"""


def other_than_default(name: str, schema: dict[str, Any]) -> Any:
    """A valid value of the setting that is not its default."""
    default = schema.get("default")
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if "enum" in schema:
        return next(v for v in reversed(schema["enum"]) if v != default)
    if "boolean" in types:
        return not default
    if "integer" in types or "number" in types:
        value = (default if isinstance(default, (int, float)) else schema.get("minimum", 0)) + 1
        return value if value <= schema.get("maximum", value) else value - 2
    if "array" in types:
        return ["torch.nn.functional"]
    return f"{default}-x" if default else f"/opt/x/{name}"


def client_payload(tmp_path, config: dict[str, Any], python: str) -> dict[str, Any]:
    if not ESBUILD.exists():
        pytest.fail("run 'npm ci' first: the client's code is bundled with esbuild")
    bundle = tmp_path / "settings.cjs"
    built = subprocess.run(
        [ESBUILD, ROOT / "extension/src/settings.ts", "--bundle", "--platform=node", f"--outfile={bundle}"],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    done = subprocess.run(
        ["node", "-e", DRIVER, bundle],
        input=json.dumps({"config": config, "python": python}),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# The two ways across nodes exclude each other (set together, both are refused): each
# goes through the client in a payload of its own.
@pytest.mark.parametrize("left_out", ["slurm.login", "hosts"])
def test_every_declared_setting_reaches_the_server_through_the_client(tmp_path, left_out):
    prefix = settings.SECTION + "."
    client_only = {prefix + key for key in settings.CLIENT_ONLY}
    values = {
        name[len(prefix) :]: other_than_default(name[len(prefix) :], schema)
        for name, schema in settings_schema.package_properties().items()
        if name not in client_only and name != prefix + left_out
    }
    payload = client_payload(tmp_path, settings_schema.nest(values), python=values["python"])

    received, warnings = settings.parse(payload)
    meant, meant_warnings = settings.parse({settings.SECTION: settings_schema.nest(values)})
    assert warnings == [] and meant_warnings == []
    assert received == meant
    assert received.nproc == values["nproc"] == 1  # the setting the client once dropped
    # Each value counts: the same settings with that one at its default parse differently,
    # so a setting the client dropped could not pass unnoticed.
    for key in values:
        default = settings_schema.package_properties()[prefix + key].get("default")
        alone = settings.parse({settings.SECTION: settings_schema.nest({**values, key: default})})[0]
        assert alone != meant, key


def test_out_of_range_values_reach_the_server_which_warns_about_each(tmp_path):
    # Values the client once clamped into range (so the server's warnings could not fire).
    bad = {"historySize": 0, "nproc": -1, "active": 0, "warmWorker": {"idleSeconds": -5}, "backend": "tpu"}
    payload = client_payload(tmp_path, bad, python="python3")
    assert {k: payload["settings"]["trainiumLens"][k] for k in bad} == bad  # sent as set

    received, warnings = settings.parse(payload)
    named = sorted(w.split("invalid setting trainiumLens.")[1].split(":")[0] for w in warnings)
    assert named == ["backend", "historySize", "nproc", "protocol", "warmWorker"], warnings
    assert any("active must be at least 1" in w for w in warnings)
    # each falls back to its default, said in the same line
    assert (received.history_size, received.nproc, received.backend) == (20, None, "auto")
    assert received == settings.parse({settings.SECTION: {"python": "python3"}})[0]
