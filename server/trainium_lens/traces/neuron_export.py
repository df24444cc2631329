"""A Neuron Explorer Parquet export, read through the schema it describes itself.

``neuron-explorer view --output-file DIR`` writes one Parquet file per table.
The export is self-describing (docs/neuron.md, "The processed profile"):
``SchemaFields`` has one row per (table, field) with its type and unit, and
``Metadata.profile_schema_version`` names the schema (MAJOR.MINOR.PATCH; a MAJOR
bump renames, removes or retypes a field). So nothing here gates on a list of
known versions: ``Export.columns`` reads the columns a caller asks for, converts
each through the unit the export declares for it, and refuses only when a
column the caller needs is missing, naming it, the schema version and whether
the export's own ``SchemaFields`` lists it. An export without ``SchemaFields``
(hand-made, or from an SDK that did not write one) is read by column name with
the units the schema reference documents.

Large tables may be split across numbered files (``Instruction_0.parquet``,
``Instruction_1.parquet``): they are read as one table, in file order.
pyarrow is imported only here, and only when an export is opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Units a column may declare in SchemaFields.field_unit, as factors to the unit
# the reader works in (nanoseconds for time, bytes for sizes). A blank unit is
# what the reference gives count columns (flops, Instruction's byte counts).
TIME_UNITS = {"nanoseconds": 1, "microseconds": 1_000, "milliseconds": 1_000_000, "seconds": 1_000_000_000}
SIZE_UNITS = {"": 1, "bytes": 1}
_NUMBERED = re.compile(r"^(?P<table>.+)_(?P<n>\d+)\.parquet$")


class NeuronProfileError(ValueError):
    """A device profile this reader cannot use; the message says why in one line."""


@dataclass(frozen=True)
class Field:
    """One row of ``SchemaFields``: what the export says a column holds."""

    type: str = ""
    format: str = ""
    unit: str = ""


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise NeuronProfileError(
            "reading a Neuron Parquet profile needs pyarrow where trainium-lens runs: pip install pyarrow"
        ) from None
    return pq


def has_tables(folder: Path) -> bool:
    """Does ``folder`` hold a device profile's ``Instruction`` table (whole or split)?"""
    return bool(_files(folder, "Instruction"))


def _files(folder: Path, table: str) -> list[Path]:
    whole = folder / f"{table}.parquet"
    if whole.is_file():
        return [whole]
    numbered = []
    for path in folder.glob(f"{table}_*.parquet"):
        m = _NUMBERED.match(path.name)
        if m and m.group("table") == table:
            numbered.append((int(m.group("n")), path))
    return [p for _n, p in sorted(numbered)]


class Export:
    """One processed device profile (a folder of Parquet tables)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._pq = _pyarrow()
        self.version: str | None = None
        self.fields: dict[tuple[str, str], Field] = {}
        self.version = self._version()  # first: the errors below name it
        self.fields = self._schema_fields()

    @property
    def where(self) -> str:
        return f"{self.folder} (profile schema {self.version or 'not stated'})"

    def has(self, table: str) -> bool:
        return bool(_files(self.folder, table))

    def field(self, table: str, name: str) -> Field | None:
        return self.fields.get((table, name))

    def columns(
        self, table: str, needed: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> dict[str, list[Any]]:
        """``needed`` and whichever of ``optional`` the table has, as Python lists
        (all of one length). A missing table or needed column is one-line error."""
        paths = _files(self.folder, table)
        if not paths:
            raise NeuronProfileError(
                f"{self.where}: no {table} table ({table}.parquet): not a neuron-explorer "
                f"Parquet export, or one without the table this reader needs"
            )
        present: set[str] | None = None
        for path in paths:
            names = set(self._pq.read_schema(path).names)
            present = names if present is None else present & names
        present = present or set()
        missing = [c for c in needed if c not in present]
        if missing:
            raise NeuronProfileError(self.missing(table, missing[0]))
        wanted = list(needed) + [c for c in optional if c in present and c not in needed]
        out: dict[str, list[Any]] = {c: [] for c in wanted}
        for path in paths:
            part = self._pq.read_table(path, columns=wanted)
            for c in wanted:
                out[c].extend(part.column(c).to_pylist())
        return out

    def missing(self, table: str, column: str) -> str:
        """The one-line reason a needed column is missing."""
        listed = (
            "its SchemaFields lists it, the table lacks it"
            if (table, column) in self.fields
            else "its SchemaFields does not list it either"
            if self.fields
            else "the export has no SchemaFields to say more"
        )
        return (
            f"{self.where}: the device profile has no column {table}.{column}, which this reader "
            f"needs ({listed}); compare `neuron-explorer view --show-profile-schema` with docs/neuron.md"
        )

    def scale(self, table: str, column: str, units: dict[str, int], default: str) -> int:
        """The factor that turns the column's declared unit into the reader's."""
        declared = self.fields.get((table, column))
        unit = (declared.unit if declared else default).strip().lower()
        if unit not in units:
            raise NeuronProfileError(
                f"{self.where}: column {table}.{column} is in {unit!r}, a unit this reader "
                f"does not convert ({', '.join(u or 'blank' for u in units)})"
            )
        return units[unit]

    # -- the export's description of itself --------------------------------------

    def _schema_fields(self) -> dict[tuple[str, str], Field]:
        if not self.has("SchemaFields"):
            return {}
        cols = self.columns(
            "SchemaFields", ("table_name", "field_name"), ("field_type", "field_format", "field_unit")
        )
        rows = len(cols["table_name"])
        get = lambda c, i: str(cols[c][i] or "") if c in cols else ""  # noqa: E731
        return {
            (get("table_name", i), get("field_name", i)): Field(
                get("field_type", i), get("field_format", i), get("field_unit", i)
            )
            for i in range(rows)
        }

    def _version(self) -> str | None:
        if not self.has("Metadata"):
            return None
        cols = self.columns("Metadata", (), ("profile_schema_version",))
        found = [str(v) for v in cols.get("profile_schema_version", []) if v not in (None, "")]
        return found[0] if found else None
