"""Start the Trainium Lens language server from the files the extension carries.

    python launch.py --server-path DIR --libs DIR            serve LSP on stdio
    python launch.py --server-path DIR --libs DIR --check    print one JSON line: can it start?

The server's sources (DIR/trainium_lens) and its pure-Python dependencies (pygls,
lsprotocol, ...) are put at the front of ``sys.path`` here, not through
PYTHONPATH, so the processes the server starts (the profiling harness, which
imports torch and typing_extensions from the user's environment) never see them.

This file must parse on old Pythons too (no f-strings, no annotations): it is
what tells the user that their interpreter is too old.
"""

import json
import os
import platform
import sys

MIN_VERSION = (3, 11)
REQUIRED = ("lsprotocol.types", "pygls.lsp.server", "trainium_lens.lsp.server")


def _arg(argv, name):
    if name in argv:
        i = argv.index(name)
        if i + 1 < len(argv):
            return argv[i + 1]
    return None


def _check():
    report = {
        "ok": True,
        "python": sys.executable,
        "version": platform.python_version(),
        "problem": None,
        "detail": None,
    }
    if sys.version_info < MIN_VERSION:
        report.update(ok=False, problem="version", detail="Python %s" % platform.python_version())
        return report
    import importlib

    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except Exception as exc:  # ImportError, or a broken dependency raising anything
            report.update(ok=False, problem="import", detail="%s: %s: %s" % (name, type(exc).__name__, exc))
            return report
    return report


def _debugger():
    """TRAINIUM_LENS_DEBUGPY=PORT: listen for a debugger on 127.0.0.1:PORT before
    serving (with TRAINIUM_LENS_DEBUGPY_WAIT=1, wait for it to attach). debugpy
    comes from the interpreter's own packages (CONTRIBUTING.md, .vscode/launch.json)."""
    port = os.environ.get("TRAINIUM_LENS_DEBUGPY")
    if not port:
        return
    import debugpy

    debugpy.listen(("127.0.0.1", int(port)))
    if os.environ.get("TRAINIUM_LENS_DEBUGPY_WAIT"):
        debugpy.wait_for_client()


def main(argv):
    for option in ("--libs", "--server-path"):  # server sources end up first
        path = _arg(argv, option)
        if path and os.path.isdir(path):
            sys.path.insert(0, path)
    if "--check" in argv:
        sys.stdout.write(json.dumps(_check()) + "\n")
        return 0
    import runpy

    _debugger()
    sys.argv = [sys.argv[0]]
    runpy.run_module("trainium_lens.lsp", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
