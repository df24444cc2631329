"""The warm worker: the policy a target holds (``slot.py``) and the process protocol (``worker.py``)."""
