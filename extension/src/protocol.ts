// The names on the wire between this client and the language server, in one
// place (the contract: docs/protocol.md, "LSP surface"). The server's side
// names them in server/trainium_lens/lsp/*.py (COMMAND, REQUEST, NOTIFICATION).

/** `workspace/executeCommand` commands the server implements. */
export const ServerCommand = {
  profile: "trainiumLens.profile",
  runScript: "trainiumLens.runScript",
  compareWithPrevious: "trainiumLens.compareWithPrevious",
  openExplorer: "trainiumLens.openExplorer",
  releaseWorker: "trainiumLens.releaseWorker",
  // a finding's quick fix ("Measure and apply"): measures the edit, applies it on accept
  fix: "trainiumLens.fix",
} as const;

/** Requests, client → server. */
export const Request = {
  runData: "trainiumLens/runData",
  timeline: "trainiumLens/timeline",
  history: "trainiumLens/history",
} as const;

/** Notifications, server → client. */
export const Notification = {
  heat: "trainiumLens/heat",
  runState: "trainiumLens/runState",
  worker: "trainiumLens/worker",
} as const;

/** Commands the client implements that the server's hovers and code lenses name. */
export const ClientCommand = {
  openTimeline: "trainiumLens.openTimeline",
  showResults: "trainiumLens.showResults",
  profileScript: "trainiumLens.profileScript",
  profileCell: "trainiumLens.profileCell",
} as const;
