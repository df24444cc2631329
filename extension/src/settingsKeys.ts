// Generated from the server's settings table (server/trainium_lens/lsp/settings.py) by
// `python -m trainium_lens.lsp.settings_schema --write`: do not edit by hand.
// tests/unit/lsp/test_settings_schema.py fails while it differs from the table.

/** The keys of the `trainiumLens` payload the server reads (`ServerSettings`). */
export const PAYLOAD_KEYS = [
  "active",
  "backend",
  "explorer",
  "hintThreshold",
  "historySize",
  "host",
  "hosts",
  "ifname",
  "include",
  "nproc",
  "python",
  "remotePython",
  "script",
  "slurm",
  "sshConfig",
  "timeoutSeconds",
  "trusted",
  "wait",
  "warmWorker",
  "warmup",
  "workDir",
] as const;
