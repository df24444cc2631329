"""The part of Trainium Lens that runs on the target (stdlib + torch only).

Copied to a host as ``lens/trainium_lens/__init__.py`` + ``lens/trainium_lens/harness/*``
and started as ``python -m trainium_lens.harness`` with ``PYTHONPATH=<lens>``.
Every module here imports only the standard library, torch (lazily) and its
siblings (absolute imports): nothing else from the package exists on a target.
An import-linter contract holds it (pyproject.toml, run by scripts/check.sh).
"""
