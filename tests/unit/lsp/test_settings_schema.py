"""The server's settings table is the one source: package.json declares exactly its
settings with the server's defaults, and the client's payload keys are generated
from it (lsp/settings_schema.py)."""

from __future__ import annotations

import copy

from trainium_lens.lsp import settings, settings_schema


def test_package_json_declares_exactly_the_servers_settings_with_its_defaults():
    assert settings_schema.mismatches(settings_schema.package_properties()) == []


def test_a_setting_declared_on_one_side_only_fails_naming_it():
    properties = copy.deepcopy(settings_schema.package_properties())
    del properties["trainiumLens.nproc"]
    properties["trainiumLens.fastMode"] = {"type": "boolean", "default": False}
    properties["trainiumLens.historySize"]["default"] = 50
    assert settings_schema.mismatches(properties) == [
        "trainiumLens.nproc: the server reads it (lsp/settings.py) but package.json does not declare it",
        "trainiumLens.fastMode: package.json declares it but the server's table (lsp/settings.py) "
        "does not list it",
        "trainiumLens.historySize: package.json's default 50 is not the server's default",
    ]


def test_a_server_key_missing_from_package_json_is_named(monkeypatch):
    monkeypatch.setitem(settings._PARSERS, "profileMemory", ("extra", lambda value: value))
    problems = settings_schema.mismatches(settings_schema.package_properties())
    assert problems == [
        "trainiumLens.profileMemory: the server reads it (lsp/settings.py) "
        "but package.json does not declare it"
    ]
    assert '"profileMemory"' in settings_schema.client_keys_ts()


def test_the_clients_payload_keys_are_generated_from_the_table():
    # extension/src/settings.ts checks ServerSettings against this file at compile time (tsc).
    assert settings_schema.CLIENT_KEYS.read_text() == settings_schema.client_keys_ts(), (
        "run: .venv/bin/python -m trainium_lens.lsp.settings_schema --write"
    )
    assert "nproc" in settings.payload_keys() and "protocol" not in settings.payload_keys()


def test_nest_is_vscodes_view_of_dotted_settings():
    assert settings_schema.nest({"host": "h", "explorer.uiPort": 1, "explorer.path": "p"}) == {
        "host": "h",
        "explorer": {"uiPort": 1, "path": "p"},
    }
