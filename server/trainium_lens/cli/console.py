"""The command line's console: the progress line on stderr (``Progress``) and the
text style a stream can take (``style_for``), for every command that prints."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TextIO

from trainium_lens.cli.render.text import Style


class Progress:
    """Harness events on stderr: one live line on a terminal (its clock ticking
    through long stages such as a compile), plain lines otherwise."""

    TICK_S = 0.5

    def __init__(self, stream: TextIO = sys.stderr, live: bool | None = None) -> None:
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self.started = time.monotonic()
        self._text = ""
        self._shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if self.live:
            threading.Thread(target=self._tick, daemon=True).start()

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "stage":
            self.status(_stage_text(event))
        elif kind == "warning":
            self._line(f"  warning: {event.get('message', '')}")
        elif kind == "output":
            self._line(f"  | {event.get('text', '')}")

    def status(self, text: str) -> None:
        with self._lock:
            self._text = text
            if self.live:
                self._draw()
            else:
                self.stream.write(f"  {text}\n")
                self.stream.flush()

    def _draw(self) -> None:
        elapsed = time.monotonic() - self.started
        width = max(20, shutil.get_terminal_size().columns - 1)
        line = f"{elapsed:5.1f}s  {self._text}"
        self.stream.write("\r\x1b[K" + line[:width])
        self.stream.flush()
        self._shown = True

    def _tick(self) -> None:
        while not self._stop.wait(self.TICK_S):
            with self._lock:
                if self._shown:
                    self._draw()

    def _line(self, text: str) -> None:
        with self._lock:
            self._clear()
            self.stream.write(text + "\n")
            if self.live and self._text:
                self._draw()
            else:
                self.stream.flush()

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self._clear()


def _stage_text(event: dict) -> str:
    stage = str(event.get("stage", ""))
    function = event.get("function")
    message = event.get("message")
    text = f"[{stage}]" + (f" {function}" if function else "")
    if event.get("step") is not None and event.get("of") is not None:
        text += f" step {event['step']}/{event['of']}"
        if message and str(message).startswith("step "):
            message = None  # says the same again
    if message:
        text += f": {message}" if function or event.get("step") is not None else f" {message}"
    return text


def style_for(stream: TextIO, verbose: bool = False) -> Style:
    """Unicode where the stream can take it; on a terminal, its width (a pipe or
    a file gets the full table, the same every time)."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    width = shutil.get_terminal_size().columns if stream.isatty() else None
    return Style(unicode=encoding.startswith("utf"), width=width, verbose=verbose)
