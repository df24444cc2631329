"""``data_wait``: the step waited for its input on the loop's ``for … in loader:`` line.

In a ``trainium-lens run`` of an unmodified script the harness times every
DataLoader ``__next__`` of the script's process, summed per step, in the
unprofiled reference steps (``ScriptRun.data_wait_us``, the median, and the
line that asked: the loop's ``for``), the same steps ``Totals.wall_us_median``
is the median of. When that wait is ``DATA_WAIT_SHARE`` or more of the step the
finding says so, with both figures, and names the loader's knobs that move the
work off the step: ``num_workers`` (batches made in worker processes while the
step runs), ``pin_memory`` (page-locked batches for the copy to a device) and
``prefetch_factor``. It is an observation: what the knobs gain was not
measured here, so no speed-up is claimed.
"""

from __future__ import annotations

from trainium_lens.model import figures
from trainium_lens.model.result import Finding, Result

KIND = "data_wait"
DATA_WAIT_SHARE = 0.10  # of the step's wall time


def data_wait_findings(result: Result) -> list[Finding]:
    s = result.script
    step = result.totals.wall_us_median
    if s is None or not s.data_wait_us or not s.data_file or not s.data_line or not step or step <= 0:
        return []
    share = s.data_wait_us / step
    if share < DATA_WAIT_SHARE:
        return []
    return [
        Finding(
            kind=KIND,
            severity="info",
            file=s.data_file,
            line=s.data_line,
            message=(
                f"the step waited {figures.time_us(s.data_wait_us)} for its next batch here, "
                f"{figures.pct(100 * share)} of the "
                f"{figures.time_us(step)} step (DataLoader time in the unprofiled steps around the window)"
            ),
            fix=(
                "DataLoader(num_workers=N) makes batches in worker processes while the step runs; "
                "pin_memory=True page-locks them for the copy to the device; prefetch_factor sets "
                "how many each worker keeps ready. Profile again to see what they change"
            ),
        )
    ]
