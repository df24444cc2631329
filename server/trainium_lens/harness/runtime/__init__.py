"""What every protocol of the harness runs on: the process's life (``lifeline``:
dies with its starter), the warm fork server (``worker``), calling the user's
code (``call``), which backend a run gets (``choose``), what the host did to the
process while it was measured (``host``: ``HostWindow``; ``outside``: the job's own
processes told apart from outside load, PSI, steal) and torch.profiler
started without importing inductor (``lazy_inductor``), kineto's log lines kept
off the terminal (``quiet``). ``eager/``, ``work/``, ``xla/``, ``script/`` and
``torchrun/`` import ``call``, ``host`` (and through it ``outside``), ``lifeline``, ``lazy_inductor`` and
``quiet``, which import none of them; ``choose`` (it picks among the
backends) and ``worker`` (it runs whole jobs) sit above the protocols.
"""
