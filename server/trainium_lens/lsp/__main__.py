"""``python -m trainium_lens.lsp``: the language server on stdio."""

from .server import main

main()
