"""``trainium-lens lsp``: the language server over stdio (the editor starts it)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "lsp",
        help="run the language server on stdio",
        description="Run the Trainium Lens language server (LSP over stdin/stdout). "
        "Editors start this; settings come from the client (trainiumLens.*).",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from trainium_lens.lsp.server import main

    main()
    return 0
