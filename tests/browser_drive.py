"""Drive a widget in JupyterLab as a learner would, and time what the page draws.

`Drawn(page, output)` watches one cell's output in the page. `press(action, control)` arms an
in-page watcher, does the action (a key press, a click) and waits until what is *drawn* changes:
a signature of the plots' SVG (every path's geometry, every text, every raster image of a heatmap)
taken on each animation frame. The latency is from the key or pointer event (or, for a choice in a
list, its input event), as the page saw it, to the first frame whose drawing differs. A control that changes nothing fails, naming it. The
plot data plotly holds is not looked at: a trace can hold data and draw nothing (the cache
explorer's lines once did). Latencies are kept per control; `latency_table` lays them out.
"""
from __future__ import annotations

import statistics
import time

# What a plot looks like, as text: its paths, texts and images (ordered as in the page).
SIGNATURE = """(out, part) => {
  const plots = Array.from(out.querySelectorAll('.js-plotly-plot'));
  return plots.map(p => Array.from(p.querySelectorAll(part || 'path, text, image')).map(e =>
      e.tagName === 'path' ? e.getAttribute('d') : e.tagName === 'image' ? e.getAttribute('href')
      : e.textContent).join('\\u0001')).join('\\u0002');
}"""

ARM = """([out, parts]) => {
  const signature = %s;
  window.__skWatches = {};
  for (const [name, part] of Object.entries(parts)) {
    const watch = {before: signature(out, part), t0: null, changed: null};
    window.__skWatches[name] = watch;
    const tick = () => {
      if (window.__skWatches[name] !== watch || watch.changed !== null) return;
      if (watch.t0 !== null && signature(out, part) !== watch.before) { watch.changed = performance.now(); return; }
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }
  if (!window.__skListening) {                 // the event's own time: when the learner pressed
    for (const kind of ['keydown', 'pointerdown', 'input', 'change']) {   // the first that comes
      document.addEventListener(kind, () => { for (const w of Object.values(window.__skWatches || {}))
        if (w.t0 === null) w.t0 = performance.now(); }, true);
    }
    window.__skListening = true;
  }
}""" % SIGNATURE


class NothingDrawn(AssertionError):
    """A control was used and the drawn figure did not change."""


class Drawn:
    """The plots of one cell's output, as drawn; every interaction timed into `latencies`."""

    def __init__(self, page, output, latencies: dict[str, list[float]]):
        self.page, self.output, self.latencies = page, output, latencies

    def signature(self, part: str = "") -> str:
        return self.page.evaluate(f"([o, p]) => ({SIGNATURE})(o, p)", [self.output, part])

    def press(self, control: str, action, timeout: float = 30.0, part: str = "",
              also: dict[str, str] | None = None) -> float:
        """Do `action()` (a key press or a click) and wait for the drawing (or its `part`, a CSS
        selector inside the plots) to change: the latency in ms, recorded under `control`.
        NothingDrawn when nothing changed within `timeout`. `also` {control: part} times more
        parts from the same event (e.g. the first feedback, then the first data drawn)."""
        parts = {control: part, **(also or {})}
        self.page.evaluate(ARM, [self.output, parts])
        action()
        for name in parts:
            try:
                self.page.wait_for_function(f"window.__skWatches[{name!r}].changed !== null",
                                            timeout=timeout * 1000, polling="raf")
            except Exception as error:
                if type(error).__name__ != "TimeoutError":
                    raise
                raise NothingDrawn(f"{name}: the drawn figure did not change within {timeout:.0f} s") from None
            ms = self.page.evaluate(f"window.__skWatches[{name!r}].changed - window.__skWatches[{name!r}].t0")
            self.latencies.setdefault(name, []).append(ms)
        return self.latencies[control][-1]

    def height(self) -> float:
        return self.output.bounding_box()["height"]


def settle(page, wait_idle, quiet: float = 0.3) -> None:
    """Until the kernel is idle again (a control's work may draw in several steps)."""
    wait_idle(page, settle=quiet)


def latency_table(latencies: dict[str, list[float]]) -> str:
    """Median and max per control, in ms, one line each (plain text for the test's log)."""
    lines = ["control                                     presses   median ms    max ms"]
    for control, values in latencies.items():
        lines.append(f"{control:<44}{len(values):>7}{statistics.median(values):>12.0f}{max(values):>10.0f}")
    return "\n".join(lines)


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# Problems a learner would see, in words: a table wider than 1,000 px or with a row wrapped onto
# two lines, a legend that hides entries behind a scrollbar, value labels drawn over each other,
# a widget label cut short ("look-ahead de...").
LAYOUT_PROBLEMS = """(root) => {
  const problems = [];
  const box = e => e.getBoundingClientRect();
  root.querySelectorAll('.jp-OutputArea-output table').forEach((t, i) => {
    if (box(t).width > 1000) problems.push(`table ${i} is ${Math.round(box(t).width)} px wide`);
    const heights = Array.from(t.querySelectorAll('tbody tr')).map(r => box(r).height);
    const line = Math.min(...heights);
    heights.forEach((h, r) => { if (h > 1.6 * line) problems.push(`table ${i} row ${r} wraps (${Math.round(h)} px)`); });
  });
  root.querySelectorAll('.js-plotly-plot').forEach((p, i) => {
    const title = (p.querySelector('.gtitle') || {}).textContent || `plot ${i}`;
    p.querySelectorAll('g.legend').forEach(legend => {
      const bg = legend.querySelector('rect.bg');
      if (!bg) return;
      const frame = box(bg);
      legend.querySelectorAll('g.traces').forEach(entry => {
        const b = box(entry);
        if (b.height > 0 && (b.bottom > frame.bottom + 1 || b.top < frame.top - 1))
          problems.push(`"${title}": legend entry "${entry.textContent}" is outside the legend's box`);
      });
    });
    const labels = Array.from(p.querySelectorAll('.bartext')).map(box).filter(b => b.width > 0);
    for (let a = 0; a < labels.length; a++) for (let b = a + 1; b < labels.length; b++) {
      const x = labels[a], y = labels[b];
      if (x.left < y.right - 1 && y.left < x.right - 1 && x.top < y.bottom - 1 && y.top < x.bottom - 1)
        problems.push(`"${title}": value labels ${a} and ${b} overlap`);
    }
  });
  root.querySelectorAll('.widget-label').forEach(l => {
    if (l.scrollWidth > l.clientWidth + 1) problems.push(`widget label "${l.textContent}" is cut short`);
  });
  return problems;
}"""


def layout_problems(page, root) -> list[str]:
    """LAYOUT_PROBLEMS in `root` (an element handle: a cell's output, or the notebook)."""
    return page.evaluate(LAYOUT_PROBLEMS, root)
