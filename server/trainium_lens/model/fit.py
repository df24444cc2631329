"""What the figures shown took from the unprofiled wall (schema 3, cpu clock).

On the cpu clock the harness fits two things to the unprofiled wall
(``harness/attribution/build.py``): the calibration's subtraction (bounded when
the calibrated sum fell below the wall, raised when the ops alone read above
it) and the host time between ops (bounded by what the wall leaves beside the
ops). The per-line figures shown are the fitted ones; ``Fit`` keeps the figure
the fit did not touch — the ops with the calibration as read and the host time
as its gaps read it — which ``analysis/reconcile.py`` compares with the wall,
so that check can fail (docs/harness.md, "Fitted to the wall").

``MOSTLY_FIT``: a figure the fit moved by more than the reconciliation's own
tolerance (±25 %) could have been taken from outside that tolerance onto the
wall by the fit alone: at the check's resolution it is more fit than
measurement, and every surface says so (``mostly_fit_text``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainium_lens.model import figures

MOSTLY_FIT = 0.25  # = analysis/reconcile.TOLERANCE (a test keeps the two equal)

#: what each kind of fit did, in words
KINDS = {
    "calibration_raised": "calibration raised to the wall",
    "calibration_bounded": "calibration bounded by the wall",
    "host_bounded": "host time between ops bounded by the wall",
}


@dataclass
class FitPart:
    kind: str  # a key of KINDS
    us: float  # per call: what it changed the figure by (negative: it took time off)


@dataclass
class Fit:
    """The per-call figure before and after the fit to the unprofiled wall."""

    ops_us: float  # op self time with the calibration as read (not bounded, not raised)
    host_us: float  # host time between ops as its gaps read it (gap_factor applied, not bounded)
    unfitted_us: float  # ops_us + host_us: what the reconciliation compares with the wall
    fitted_us: float  # the figure shown: ops + host after the fit
    added_us: float  # fitted_us - unfitted_us (negative: the fit took time off)
    share: float  # Σ |part| / fitted_us: how much of the figure shown the fit supplied
    parts: list[FitPart] = field(default_factory=list)

    @property
    def mostly(self) -> bool:
        return self.share > MOSTLY_FIT


def mostly_fit_text(fit: Fit | None, unit: str = "call") -> str | None:
    """``mostly fitted to the wall: 44% of the 21.3 µs per call (host time between ops
    bounded by the wall −9.3 µs); unfitted 30.6 µs``: the one wording of a figure the
    fit supplied most of, for the CLI's header, the hover and the notebook."""
    if fit is None or not fit.mostly:
        return None
    said = ", ".join(
        f"{KINDS.get(p.kind, p.kind)} {'+' if p.us > 0 else ''}{figures.time_us(p.us)}"
        for p in fit.parts
        if p.us
    )
    return (
        f"mostly fitted to the wall: {figures.pct(100 * fit.share)} of the {figures.time_us(fit.fitted_us)} "
        f"per {unit} ({said}); unfitted {figures.time_us(fit.unfitted_us)}"
    )
