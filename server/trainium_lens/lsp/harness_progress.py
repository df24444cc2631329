"""The harness's events as a run's work-done progress (``long_run.LongRun``): each
stage a place on the bar (a multi-function run shares it out), warnings and the
program's output to the log. Called on the event loop thread."""

from __future__ import annotations

from lsprotocol import types

from trainium_lens.lsp.long_run import LongRun

# Where each stage sits in the progress bar of one function (percent).
STAGES = {
    "connect": 0,
    "sync": 3,
    "import": 6,
    "inputs": 10,
    "compile": 14,
    "profile": 30,
    "export": 82,
    "timing": 90,
    "done": 98,
}


class Reporter:
    """Harness events → work-done progress of ``run`` and the log."""

    def __init__(self, run: LongRun, functions: list[str]) -> None:
        self.run, self.ls, self.functions = run, run.ls, functions
        self.percent = 0
        self.warnings: list[str] = []

    def on_event(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "stage":
            self._stage(event)
        elif kind == "warning":
            message = str(event.get("message", ""))
            self.warnings.append(message)
            self.ls.log_line(f"warning: {message}", types.MessageType.Warning)
        elif kind == "output":
            self.ls.log_line(str(event.get("text", "")).rstrip("\n"))

    def _stage(self, event: dict) -> None:
        stage = str(event.get("stage", ""))
        function = event.get("function")
        message = str(event.get("message") or stage)
        if stage == "profile" and event.get("step") and event.get("of"):
            message = f"profile step {event['step']}/{event['of']}"
        label = f"{function}: {message}" if function else message
        self.ls.log_line(label)
        if self.run.token is None:
            return
        start = STAGES.get(stage, self.percent)
        if stage == "profile" and event.get("of"):
            start += (
                (STAGES["export"] - STAGES["profile"]) * int(event.get("step", 0)) // max(1, int(event["of"]))
            )
        n = max(1, len(self.functions))
        index = self.functions.index(function) if function in self.functions else 0
        overall = (index * 100 + start) // n if stage not in ("connect", "sync") else start // n
        self.percent = max(self.percent, min(99, overall))  # never goes backwards
        self.run.report(label, self.percent)
