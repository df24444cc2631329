"""Work per line: FLOPs, bytes moved and memory, from one extra labelled call.

``formulas``: FLOPs of an op from its input shapes; ``step``: the extra call
(shapes, allocator events, saved tensors); ``figures``: its events → per-line
figures; ``memory``: allocations → the step's peak and what is live there;
``calibrate``: this host's CPU peak (measured once, cached).
"""
