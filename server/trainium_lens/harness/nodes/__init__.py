"""One job across nodes, the part that runs on the nodes: one node's torchrun
command line and environment (``launch``), SLURM's driver on the login host
(``slurm``) and its task on each node (``slurm_task``). docs/nodes.md.
"""
