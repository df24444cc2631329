"""The ids of the commands the editor runs, named where a lens, an action or a
link offers one: features name each other's commands through these, never by
importing the feature (extension/src/protocol.ts holds the client's side)."""

from __future__ import annotations

# Registered by the server (features/*.py).
PROFILE = "trainiumLens.profile"
RUN_SCRIPT = "trainiumLens.runScript"
COMPARE = "trainiumLens.compareWithPrevious"
FIX = "trainiumLens.fix"
OPEN_EXPLORER = "trainiumLens.openExplorer"

# The extension's own (a lens needs a command): its results panel, its Profile
# Script… (which reads launch.json), its timeline panel, its Profile Cell (which
# edits the notebook and runs the cell in the user's own kernel: VS Code's).
SHOW_RESULTS = "trainiumLens.showResults"
PROFILE_SCRIPT = "trainiumLens.profileScript"
OPEN_TIMELINE = "trainiumLens.openTimeline"
PROFILE_CELL = "trainiumLens.profileCell"
