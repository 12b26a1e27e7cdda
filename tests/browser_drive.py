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

ARM = (
    """([out, parts]) => {
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
}"""
    % SIGNATURE
)


class NothingDrawn(AssertionError):
    """A control was used and the drawn figure did not change."""


class Drawn:
    """The plots of one cell's output, as drawn; every interaction timed into `latencies`."""

    def __init__(self, page, output, latencies: dict[str, list[float]]):
        self.page, self.output, self.latencies = page, output, latencies

    def signature(self, part: str = "") -> str:
        return self.page.evaluate(f"([o, p]) => ({SIGNATURE})(o, p)", [self.output, part])

    def press(
        self, control: str, action, timeout: float = 30.0, part: str = "", also: dict[str, str] | None = None
    ) -> float:
        """Do `action()` (a key press or a click) and wait for the drawing (or its `part`, a CSS
        selector inside the plots) to change: the latency in ms, recorded under `control`.
        NothingDrawn when nothing changed within `timeout`. `also` {control: part} times more
        parts from the same event (e.g. the first feedback, then the first data drawn)."""
        parts = {control: part, **(also or {})}
        self.page.evaluate(ARM, [self.output, parts])
        action()
        for name in parts:
            try:
                self.page.wait_for_function(
                    f"window.__skWatches[{name!r}].changed !== null", timeout=timeout * 1000, polling="raf"
                )
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


# Problems a learner would see, in words: a table of figures wider than 1,000 px or with a row
# wrapped onto two lines (a table of prose, Markdown's, wraps as text does), a legend that hides
# entries behind a scrollbar, value labels drawn over each other, a widget label cut short
# ("look-ahead de...").
LAYOUT_PROBLEMS = """(root) => {
  const problems = [];
  const box = e => e.getBoundingClientRect();
  Array.from(root.querySelectorAll('.jp-OutputArea-output table')).filter(t => !t.closest('.jp-RenderedMarkdown'))
      .forEach((t, i) => {
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


# Problems of a figure as drawn, in words, per plot of `root` (plotly's SVG, in page pixels):
# - an axis much longer than its data: the marks of a subplot (lines, points, bars, heatmap
#   images, clipped to its plot area) span less than 1/FACTOR of the area's width or height (a
#   span under MARK_PX, a flat line or a single point, says nothing about the axis and is skipped);
# - two text labels whose ink overlaps (tick labels, titles, annotations, legend entries, cell
#   and bar texts), a label outside its figure or the cell's output, a label under MIN_TEXT_PX.
FIGURE_PROBLEMS = """(plot, [factor, markPx, minTextPx]) => {
  const problems = [];
  const box = e => e.getBoundingClientRect();
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  // a label's ink: its box less the spacing above and below its glyphs (a fifth of a line, 3 px at most)
  const ink = t => { const b = box(t), pad = Math.min(b.height / 5, 3);
    return {left: b.left, right: b.right, top: b.top + pad, bottom: b.bottom - pad}; };
  const inside = (a, b) => a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1 && a.bottom <= b.bottom + 1;
  const name = `"${((plot.querySelector('.gtitle') || {}).textContent || 'untitled plot').slice(0, 50)}"`;
  plot.querySelectorAll('.cartesianlayer > g.subplot').forEach(sub => {
    const area = plot.querySelector(`.draglayer > g.${sub.classList[1]} rect.nsewdrag`);
    if (!area) return;
    const a = box(area);
    sub.querySelectorAll('.overplot > g').forEach(layer => {      // a subplot and its overlays (y2)
      const marks = Array.from(layer.querySelectorAll('path.js-line, path.point, .bars path, image'))
        .map(box).filter(b => b.width > 0 || b.height > 0)
        .map(b => ({left: Math.max(b.left, a.left), right: Math.min(b.right, a.right),
                    top: Math.max(b.top, a.top), bottom: Math.min(b.bottom, a.bottom)}))
        .filter(b => b.right >= b.left && b.bottom >= b.top);
      if (!marks.length) return;
      const span = {x: Math.max(...marks.map(b => b.right)) - Math.min(...marks.map(b => b.left)),
                    y: Math.max(...marks.map(b => b.bottom)) - Math.min(...marks.map(b => b.top))};
      for (const [axis, length] of [['x', a.width], ['y', a.height]])
        if (span[axis] >= markPx && span[axis] * factor < length)
          problems.push(`${name}: subplot ${layer.getAttribute('class')}'s data spans ${Math.round(span[axis])} ` +
                        `of its ${axis} axis's ${Math.round(length)} px`);
    });
  });
  const figure = box(plot), output = box(plot.closest('.jp-OutputArea-output') || plot.parentElement);
  const texts = Array.from(plot.querySelectorAll('svg text')).filter(t => t.textContent.trim() &&
    !t.closest('.hoverlayer') && box(t).width > 0 && box(t).height > 0);
  const label = t => `"${t.textContent.trim().slice(0, 30)}"`;
  texts.forEach(t => {
    const b = box(t);
    if (!inside(b, figure) || !inside(b, output)) problems.push(`${name}: label ${label(t)} is outside the figure`);
    const m = t.getCTM();
    const px = parseFloat(getComputedStyle(t).fontSize) * (m ? Math.hypot(m.a, m.b) : 1);
    if (px < minTextPx) problems.push(`${name}: label ${label(t)} is ${px.toFixed(1)} px`);
  });
  for (let a = 0; a < texts.length; a++) for (let b = a + 1; b < texts.length; b++)
    if (overlap(ink(texts[a]), ink(texts[b])))
      problems.push(`${name}: labels ${label(texts[a])} and ${label(texts[b])} overlap`);
  return problems;
}"""
FACTOR, MARK_PX, MIN_TEXT_PX = 2.5, 20, 9


def figure_problems(page, root) -> list[str]:
    """FIGURE_PROBLEMS of every plot in `root` (a locator: a notebook, a cell's output), each one
    scrolled into view first: JupyterLab need not lay out what is off screen."""
    problems = []
    plots = root.locator(".js-plotly-plot")
    for i in range(plots.count()):
        plots.nth(i).scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        problems += plots.nth(i).evaluate(FIGURE_PROBLEMS, [FACTOR, MARK_PX, MIN_TEXT_PX])
    return problems


# A rerun of notebook 04's visualizer, watched in the page: the timeline's bar trace is marked
# (plotly.js keeps a trace's element across an update in place and drops it when it redraws the
# trace anew); when the busy control (`busy`, a selector) goes disabled and comes back; the page's
# long tasks (PerformanceObserver), from the action on.
WATCH_RERUN = """([out, busy]) => {
  out.querySelector('.js-plotly-plot .barlayer g.trace').setAttribute('data-sk-kept', '1');
  const button = out.querySelector(busy);
  const watch = {disabled: null, enabled: null, tasks: [], trained: false};
  window.__skRerun = watch;
  // every change of the button, not only those a frame shows: a run trained ahead may be drawn
  // and the button given back between two frames; "training..." is said only while training
  const seen = () => {
    if (button.disabled && watch.disabled === null) watch.disabled = performance.now();
    if (/training/.test(button.textContent)) watch.trained = true;
  };
  new MutationObserver(seen).observe(button, {attributes: true, childList: true, subtree: true,
                                              characterData: true});
  if (!window.__skLongTasks) {
    window.__skLongTasks = true;
    new PerformanceObserver(list => { for (const e of list.getEntries())
      if (window.__skRerun) window.__skRerun.tasks.push(e.duration); }).observe({type: 'longtask'});
  }
  const tick = () => {
    seen();
    if (watch.disabled !== null && !button.disabled) { watch.enabled = performance.now(); return; }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}"""


DRAW_FRAMES_MS = 100  # a few frames at 60 Hz: how long plotly may take to draw an update it was sent


def rerun_drawn(page, drawn: Drawn, control: str, action, busy: str, timeout: float = 60.0) -> dict:
    """Do `action` (a switch or the rerun button of notebook 04) and wait until the new run is
    drawn (the timeline's bars change) and the `busy` control is back. Records under `control`
    the latency to the drawn run, and under `control + ', longest task'` the page's longest task.
    Returns {kept: the bar trace's element survived (updated in place), busy_until_drawn: the
    control came back no earlier than the frame that drew the run, trained: the button said it was
    training (the run was not trained ahead), longest: ms}."""
    page.evaluate(WATCH_RERUN, [drawn.output, busy])
    drawn.press(control, action, timeout=timeout, part=".barlayer path")
    wait_until(lambda: page.evaluate("window.__skRerun.enabled !== null"), timeout, f"{busy} to come back")
    page.wait_for_timeout(300)  # a long task ends before the observer hears of it
    seen = page.evaluate(
        """([out, name]) => ({kept: !!out.querySelector('.barlayer g.trace[data-sk-kept]'),
        enabled: window.__skRerun.enabled, drawn: window.__skWatches[name].changed,
        trained: window.__skRerun.trained, longest: Math.max(0, ...window.__skRerun.tasks)})""",
        [drawn.output, control],
    )
    drawn.latencies.setdefault(f"{control}, longest task", []).append(seen["longest"])
    return {
        "kept": seen["kept"],
        # plotly draws a figure update asynchronously, in the frames after the page applied the
        # message (Plotly.react's promise), so the control's message, sent after it, may land a
        # frame or two before the bars: more than DRAW_FRAMES_MS early is a control given back early
        "busy_until_drawn": seen["enabled"] >= seen["drawn"] - DRAW_FRAMES_MS,
        "trained": seen["trained"],
        "longest": seen["longest"],
    }


# A live widget at the page's width, as drawn: its figure's width against its output's, and every
# box of text in it (the figure's labels, the controls' labels, buttons, readouts and texts) that
# overlaps another or is cut short ("s..." for a button's "step").
WIDGET_TEXT = """(out) => {
  const box = e => e.getBoundingClientRect();
  const plot = out.querySelector('.js-plotly-plot .main-svg');
  const texts = Array.from(out.querySelectorAll(
      'button, .widget-label, .widget-readout, .widget-html-content, select, .widget-play, .progress'))
    .filter(e => box(e).width > 0 && e.textContent.trim());
  const problems = [];
  const name = e => `"${e.textContent.trim().slice(0, 30)}"`;
  const edge = box(out);
  texts.forEach(e => {
    if (e.scrollWidth > e.clientWidth + 1 && e.tagName === 'BUTTON')
      problems.push(`button ${name(e)} is cut short (${e.clientWidth} of ${e.scrollWidth} px)`);
    if (box(e).right > edge.right + 1) problems.push(`${name(e)} runs past the output's right edge`);
  });
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  for (let a = 0; a < texts.length; a++) for (let b = a + 1; b < texts.length; b++) {
    const x = texts[a], y = texts[b];
    if (x.contains(y) || y.contains(x)) continue;
    if (overlap(box(x), box(y))) problems.push(`${name(x)} and ${name(y)} overlap`);
  }
  return {output: box(out).width, figure: plot ? box(plot).width : 0, problems};
}"""


def widget_at_width(page, output) -> dict:
    """{output: px, figure: px, problems: [...]} of a live widget's output (a locator), as drawn."""
    return output.evaluate(WIDGET_TEXT)
