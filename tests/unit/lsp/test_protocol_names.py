"""The wire names the client uses (extension/src/protocol.ts) are the ones the
server registers: a rename on one side fails here, not silently in the editor."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from trainium_lens.lsp import long_run
from trainium_lens.lsp import server as lsp_server
from trainium_lens.lsp.features import (
    codelens,
    compare,
    explorer,
    fixes,
    heat,
    history,
    panel,
    profile,
    script,
    timeline,
    warm,
)


def client_names() -> dict[str, dict[str, str]]:
    text = (ROOT / "extension/src/protocol.ts").read_text()
    groups = {}
    for name, body in re.findall(r"export const (\w+) = \{(.*?)\} as const;", text, re.S):
        groups[name] = dict(re.findall(r'(\w+): "([^"]+)"', body))
    return groups


def test_client_and_server_name_the_same_methods():
    names = client_names()
    assert names["ServerCommand"] == {
        "profile": profile.COMMAND,
        "runScript": script.COMMAND,
        "compareWithPrevious": compare.COMMAND,
        "openExplorer": explorer.COMMAND,
        "releaseWorker": warm.RELEASE,
        "fix": fixes.COMMAND,
    }
    assert names["Request"] == {
        "runData": panel.REQUEST,
        "timeline": timeline.REQUEST,
        "history": history.REQUEST,
    }
    assert names["Notification"] == {
        "heat": heat.NOTIFICATION,
        "runState": long_run.RUN_STATE,
        "worker": warm.NOTIFICATION,
    }
    assert names["ClientCommand"]["showResults"] == codelens.SHOW
    assert names["ClientCommand"]["profileScript"] == codelens.PROFILE_SCRIPT
    server = lsp_server.create_server()
    assert set(names["ServerCommand"].values()) <= set(server.protocol.fm.commands)
    assert set(names["Request"].values()) <= set(server.protocol.fm.features)


def test_no_method_name_is_written_inline_in_the_client():
    inline = []
    for path in sorted((ROOT / "extension/src").rglob("*.ts")):
        if path.name == "protocol.ts":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            if re.search(r'"trainiumLens/\w+"', code) or any(
                f'"{name}"' in code for name in client_names()["ServerCommand"].values()
            ):
                inline.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not inline, "use extension/src/protocol.ts:\n" + "\n".join(inline)
