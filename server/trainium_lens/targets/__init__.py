"""Where the harness runs: this machine (``local``), an SSH host (``ssh/``), several
nodes (``nodes/``); a ``Where`` names it and ``make.make_target`` builds the target."""
