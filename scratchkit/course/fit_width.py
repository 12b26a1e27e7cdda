"""The live widgets as wide as the cell's output: figures follow its width, controls wrap.

A plotly `FigureWidget` is laid out once, at the width its output had when it was first drawn:
700 px (plotly's default) where the output was not on the page yet (JupyterLab lays out only the
cells it shows), and never again when the window is resized. So the course's widgets (02's cache
explorer, 04's pipeline visualizer, 05's dashboard) are drawn with `live(figure)`, plotly's
`responsive` mode, and carry a `FitWidth()`: a widget with nothing to show whose code in the page
watches the box it sits in (`ResizeObserver`) and has each plot of that box laid out again, at
the box's width, whenever the two differ: once it is on the page, when the window or the
sidebar changes its width, when a plot is drawn anew.

    figure = live(make_figure())
    widgets.VBox([row(button, slider), figure, FitWidth()])

A `row` of controls wraps onto a second line where the output is narrower than the row, each
control at its own width: squeezed into one line, a button's text was cut to "s...".
"""

from __future__ import annotations

import anywidget
import ipywidgets as widgets
import plotly.graph_objects as go

# In the page: every plot of the widget's box refitted when its width differs from the box's.
# `_responsiveChartHandler` is plotly's own (set on a plot drawn with config.responsive): a
# relayout with autosize on, at the plot's container's size, the layout's height kept.
FIT_ESM = r"""
function fit(box) {
  for (const plot of box.querySelectorAll('.js-plotly-plot')) {
    const laid = plot._fullLayout, room = plot.parentElement && plot.parentElement.clientWidth;
    if (laid && room && plot._responsiveChartHandler && Math.abs(laid.width - room) > 1)
      plot._responsiveChartHandler();
  }
}
function render({ el }) {
  el.style.display = 'none';
  let resized = null, drawn = null, frame = 0, stopped = false;
  const soon = box => { if (!frame) frame = requestAnimationFrame(() => { frame = 0; fit(box); }); };
  const attach = () => {
    if (stopped) return;
    const box = el.parentElement;
    if (!box || !el.isConnected) { requestAnimationFrame(attach); return; }  // not on the page yet
    resized = new ResizeObserver(() => soon(box));
    resized.observe(box);
    drawn = new MutationObserver(() => soon(box));   // a plot drawn (anew) inside the box
    drawn.observe(box, { childList: true, subtree: true });
    soon(box);
  };
  attach();
  return () => { stopped = true; resized && resized.disconnect(); drawn && drawn.disconnect(); };
}
export default { render };
"""


class FitWidth(anywidget.AnyWidget):
    """Nothing to see: keeps every `live` figure of the box it is put in as wide as the box."""

    _esm = FIT_ESM


def live(figure: go.Figure) -> go.FigureWidget:
    """`figure` as a FigureWidget laid out at its container's width (no fixed width, plotly's
    responsive mode), which a `FitWidth` beside it keeps up to date."""
    widget = go.FigureWidget(figure)
    widget.layout.width = None
    widget.layout.autosize = True
    widget._config = {**widget._config, "responsive": True}
    return widget


def row(*controls) -> widgets.HBox:
    """`controls` side by side, wrapping onto more lines rather than shrinking any of them."""
    for control in controls:
        control.layout.flex = "0 0 auto"
    return widgets.HBox(list(controls), layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
