"""Targets across nodes: several SSH hosts (``--hosts``) or a SLURM login host (``--slurm``)."""
