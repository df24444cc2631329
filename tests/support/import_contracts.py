"""An import-linter contract type the built-in ones lack: an allow-list.

``only_imports`` (pyproject.toml, ``[tool.importlinter]``): every module under
``source_modules`` imports directly only the standard library, the external
packages in ``allowed_external`` and the project's modules under ``allowed_modules``.
The harness's rule (it runs alone on a target, with stdlib + torch) is one: the
built-in ``forbidden`` contract can only list what is out, and the list of what a
developer might import is open-ended. scripts/check.sh runs it with the others
(``lint-imports``, which puts the repository root on ``sys.path``).
"""

from __future__ import annotations

import sys
from typing import cast

import grimp
from importlinter import Contract, ContractCheck, fields, output


def _inside(module: str, packages: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


class OnlyImportsContract(Contract):
    type_name = "only_imports"

    source_modules = fields.ListField(subfield=fields.StringField())
    allowed_modules = fields.ListField(subfield=fields.StringField())
    allowed_external = fields.ListField(subfield=fields.StringField())
    allow_stdlib = fields.BooleanField(required=False, default=True)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        # Fields read back as the values the configuration gave (lists of names).
        sources = set(cast(list[str], self.source_modules))
        internal = set(cast(list[str], self.allowed_modules))
        external = set(cast(list[str], self.allowed_external))
        if self.allow_stdlib:
            external |= set(sys.stdlib_module_names)
        illegal = []
        for importer in sorted(m for m in graph.modules if _inside(m, sources)):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                allowed = (
                    imported.split(".")[0] in external
                    if graph.is_module_squashed(imported)  # an external package, as one module
                    else _inside(imported, internal)
                )
                if not allowed:
                    details = graph.get_import_details(importer=importer, imported=imported)
                    lines = sorted({d["line_number"] for d in details})
                    illegal.append({"importer": importer, "imported": imported, "lines": lines})
        return ContractCheck(kept=not illegal, metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for item in check.metadata["illegal"]:
            where = ", ".join(map(str, item["lines"]))
            output.print_error(f"{item['importer']} -> {item['imported']} (l.{where})", bold=False)
            output.new_line()
