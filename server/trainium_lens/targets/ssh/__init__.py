"""The SSH target: its connection, the workspace sync, the remote script runner, and
the wrapper that runs on the host."""
