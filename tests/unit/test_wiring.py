"""Every feature of the language server and every CLI command is wired in, and
a missing module fails loudly instead of leaving a silent gap."""

from __future__ import annotations

import importlib
import pkgutil

from trainium_lens import cli
from trainium_lens.lsp import server as lsp_server


def test_the_server_registers_every_feature():
    server = lsp_server.create_server()
    commands = set(server.protocol.fm.commands)
    assert {
        "trainiumLens.profile",
        "trainiumLens.compareWithPrevious",
        "trainiumLens.openExplorer",
    } <= commands
    features = set(server.protocol.fm.features)
    assert {
        "textDocument/inlayHint",
        "textDocument/hover",
        "textDocument/codeLens",
        "trainiumLens/runData",
        "trainiumLens/timeline",
    } <= features


def test_every_feature_module_is_wired():
    """A module under lsp/features/ with a ``register`` that server.py forgot is a
    feature that silently never runs."""
    import importlib
    import pkgutil

    from trainium_lens.lsp import features

    found = set()
    for info in pkgutil.iter_modules(features.__path__):
        module = importlib.import_module(f"{features.__name__}.{info.name}")
        if hasattr(module, "register"):
            found.add(module)
    assert found, "no feature modules found"
    assert found <= set(lsp_server.FEATURES), sorted(m.__name__ for m in found - set(lsp_server.FEATURES))


def test_the_cli_has_every_command_module_and_each_once():
    from trainium_lens.cli import commands

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = list(sub.choices or [])
    assert len(names) == len(set(names)) == len(cli.COMMANDS)
    found = set()
    for info in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "register"):
            found.add(module)
    assert found == set(cli.COMMANDS), sorted(m.__name__ for m in found ^ set(cli.COMMANDS))


def test_one_version_for_the_package_the_server_and_the_extension():
    import json
    from importlib import metadata

    from tests.conftest import ROOT
    from trainium_lens import __version__

    package = json.loads((ROOT / "package.json").read_text())
    assert package["version"] == __version__, (
        "raise server/trainium_lens/__init__.py and package.json together"
    )
    # pyproject.toml reads __version__: the installed distribution says the same.
    assert metadata.version("trainium-lens") == __version__, "reinstall: bash scripts/setup.sh"
    assert f"## {__version__} " in (ROOT / "CHANGELOG.md").read_text()
