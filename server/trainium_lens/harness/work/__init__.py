"""Work per line: FLOPs, bytes moved and memory, from one extra labelled call.

``step``: the extra call (shapes, allocator events, saved tensors); ``events``:
its op events read from the profiler's C++ tree; ``formulas``: FLOPs of an op
from its input shapes; ``figures``: events → per-line figures; ``memory``:
allocations → the step's peak and what is live there; ``calibrate``: this
host's CPU roof (measured once, cached); ``attach``: all of it into the result.
"""
