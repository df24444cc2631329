"""Fixes written as edits of the user's source (``model.result.Edit``), built from
its AST and the run's recorded ops; ``engine/fixes.py`` measures them."""
