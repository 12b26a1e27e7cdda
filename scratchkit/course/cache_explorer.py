"""The cache explorer: sliders for cache size, locality and look-ahead depth, and a policy picker,
over one figure of hit rate vs cache size, redrawn in a fraction of a second.

An `ipywidgets.VBox`: display it by leaving it last in a cell, or drive it from Python (set a
slider's `.value`), as the tests do. The curves are hit_curves.py's; this class only wires the
controls to the figure. A new locality's curves take about a second the first time: its controls
are disabled meanwhile, it says it is working, and each curve is drawn as soon as it is computed.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from scratchkit.course.fit_width import FitWidth, live, row
from scratchkit.course.dashboard import LABEL, wide
from scratchkit.course.hit_curves import POLICIES, HitCurves
from scratchkit.course.viz import hit_rate_curves, trace_named
from scratchkit.profiles import get_profile

# cheapest first, so a new locality shows its fast curves at once (opt ~15 ms, lfu ~0.5 s on small)
DRAW_ORDER = ("lookahead", "lru", "static", "opt", "lfu")


class CacheExplorer(widgets.VBox):
    """Hit rate vs cache size for several policies; sliders for load factor, Zipf exponent, depth."""

    def __init__(
        self,
        curves: HitCurves | None = None,
        policies=("static", "lru", "lfu", "lookahead"),
        load_factor: float = 0.05,
        zipf: float = 1.05,
        depth: int = 2,
    ):
        self.curves = curves or HitCurves(get_profile("small").data)
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise ValueError(f"unknown policies {unknown}; choose from {', '.join(POLICIES)}")
        self.load_factor = widgets.FloatSlider(
            value=load_factor,
            min=0.005,
            max=0.5,
            step=0.005,
            readout_format=".3f",
            description="load factor",
            style=LABEL,
            layout=wide(),
        )
        self.zipf = widgets.FloatSlider(
            value=zipf,
            min=0.0,
            max=1.4,
            step=0.05,
            description="locality (zipf)",
            continuous_update=False,
            style=LABEL,
            layout=wide(),
        )
        self.depth = widgets.IntSlider(
            value=depth, min=1, max=8, description="look-ahead depth", style=LABEL, layout=wide()
        )
        self.policies = widgets.SelectMultiple(
            options=POLICIES, value=tuple(policies), rows=len(POLICIES), description="policies", style=LABEL
        )
        self.readout = widgets.HTML()
        x = 100 * self.curves.load_factors
        empty = {p: np.full(x.shape, np.nan) for p in POLICIES}
        # the two vertical lines get their y (0 to 1) now: a line with x values only is never drawn
        self.figure = live(
            hit_rate_curves(
                x,
                empty,
                marker=0.0,
                needed=0.0,
                x_title="load factor (% of the table's rows)",
                title="Hit rate vs cache size",
            )
        )
        for name, slot in (
            (self.load_factor, self._on_size),
            (self.depth, self._on_size),
            (self.zipf, self._on_curves),
            (self.policies, self._on_curves),
        ):
            name.observe(slot, names="value")
        super().__init__(
            [
                row(widgets.VBox([self.load_factor, self.zipf, self.depth]), self.policies),
                self.readout,
                self.figure,
                FitWidth(),
            ]
        )
        self._on_curves()

    @property
    def capacity(self) -> int:
        return max(1, min(self.curves.num_rows, int(round(self.load_factor.value * self.curves.num_rows))))

    def _on_curves(self, change=None) -> None:
        """A new locality or policy choice: each curve drawn as soon as it is computed, cheapest
        first, with the controls that would start another computation disabled meanwhile."""
        zipf, depth = self.zipf.value, self.depth.value
        slow = not self.curves.has_trace(zipf) or any(
            (round(zipf, 6), p) not in self.curves.computed() for p in self.policies.value if p in ("lfu", "opt")
        )
        if slow:
            self.zipf.disabled = self.policies.disabled = True
            self.readout.value = (
                f"<i>computing the curves for locality {zipf:.2f} (about a second the first time) ...</i>"
            )
        try:
            for policy in POLICIES:
                if policy not in self.policies.value:
                    trace_named(self.figure, policy).visible = False
            for policy in (p for p in DRAW_ORDER if p in self.policies.value):
                with self.figure.batch_update():
                    trace_named(self.figure, policy).visible = True
                    self._draw_curve(policy, zipf, depth)
            for d in range(self.depth.min, self.depth.max + 1):
                self.curves.needed(zipf, d)  # the depth slider then only reads a number
        finally:
            self.zipf.disabled = self.policies.disabled = False
        self._on_size()

    def _draw_curve(self, policy: str, zipf: float, depth: int) -> None:
        rates = self.curves.curve(zipf, policy, depth)
        runs = ~np.isnan(rates)  # NaN: cannot run at that size; leave the point out
        trace = trace_named(self.figure, policy)
        trace.x, trace.y = 100 * self.curves.load_factors[runs], rates[runs]

    def _on_size(self, change=None) -> None:
        zipf, depth, capacity = self.zipf.value, self.depth.value, self.capacity
        needed = self.curves.needed(zipf, depth)
        x_needed = 100 * needed / self.curves.num_rows
        with self.figure.batch_update():
            chosen = trace_named(self.figure, "chosen size")
            chosen.x, chosen.y = [100 * capacity / self.curves.num_rows] * 2, [0, 1]
            window = trace_named(self.figure, "look-ahead window fits")
            window.x, window.y = [x_needed] * 2, [0, 1]
            if "lookahead" in self.policies.value:
                self._draw_curve("lookahead", zipf, depth)
        rates = []
        for policy in self.policies.value:
            rate = self.curves.hit_rate(zipf, policy, capacity, depth)
            rates.append(f"{policy} {'cannot run' if np.isnan(rate) else f'{100 * rate:.1f}%'}")
        fits = (
            "it fits: every lookup hits" if capacity >= needed else "too small for look-forward caching at this depth"
        )
        self.readout.value = (
            f"<b>{capacity:,} rows</b> of {self.curves.num_rows:,} "
            f"(load factor {self.load_factor.value:.3f}). Hit rates: {', '.join(rates) or '-'}.<br>"
            f"The {depth + 1} batches in flight at depth {depth} touch up to "
            f"<b>{needed:,}</b> distinct rows: {fits}."
        )
