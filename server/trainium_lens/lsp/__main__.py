"""``python -m trainium_lens.lsp``: the language server on stdio."""

from trainium_lens.lsp.server import main

main()
