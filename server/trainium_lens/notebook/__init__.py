"""The notebook: ``%load_ext trainium_lens`` in a Jupyter kernel, then ``%%trainium_lens``
above a cell (docs/notebooks.md). Runs in the user's kernel, on the user's variables."""
