"""Open a static HTML page in a real headless Chromium and report what it drew (test helper).

The page is copied with two probe scripts: one first in ``<head>`` that records JavaScript errors
(uncaught exceptions, rejected promises, console.error), one at the end of ``<body>`` that, after
the load event, writes a JSON report of every plotly figure into the DOM. Chromium's
``--dump-dom`` prints that DOM once virtual time has run the page's timers.

Chromium comes from Debian's ``chromium`` package (``make chromium``, run by ``make test``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("MIRROR_TEST_CHROMIUM", "/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",  # we run as root in CI containers
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--window-size=1400,1000",
)

_ERRORS = """<script>
window.__probeErrors = [];
window.addEventListener("error", function (e) {
  window.__probeErrors.push("error: " + (e.message || e.type) + " at " + (e.filename || "") +
                            ":" + (e.lineno || 0));
}, true);
window.addEventListener("unhandledrejection", function (e) {
  window.__probeErrors.push("unhandled rejection: " + e.reason);
});
(function () {
  var original = console.error;
  console.error = function () {
    window.__probeErrors.push("console.error: " + Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
})();
</script>"""

_REPORT = """<script>
// How far a table's rows reach below the table's visible area (px; null: no table): plotly
// clips a table at the figure's plot area, so a positive value is a row cut, or rows to scroll.
function tableOverflow(gd) {
  var cells = gd.querySelectorAll(".table .y-column .column-cells .column-cell");
  if (!cells.length || !gd._fullLayout) { return null; }
  var layout = gd._fullLayout;
  var visible = gd.getBoundingClientRect().top + layout.height - layout.margin.b;
  var bottom = Math.max.apply(null, Array.prototype.map.call(cells, function (c) {
    return c.getBoundingClientRect().bottom; }));
  return Math.round(bottom - visible);
}
window.addEventListener("load", function () { setTimeout(function () {
  var figures = Array.prototype.map.call(document.querySelectorAll(".plotly-graph-div"),
    function (gd) {
      var box = gd.getBoundingClientRect();
      var scatter = Array.prototype.map.call(gd.querySelectorAll(".scatterlayer .trace"),
        function (t) { return t.querySelectorAll(".points .point").length; });
      return {
        id: gd.id,
        title: ((gd._fullLayout || {}).title || {}).text || "",
        drawn: !!gd.querySelector(".main-svg"),
        width: box.width,
        height: box.height,
        traces: (gd._fullData || []).map(function (t) {
          return {name: t.name, type: t.type,
                  points: t.type === "table" ? (t.cells.values[0] || []).length
                                             : (t.x || []).length};
        }),
        markers: scatter,
        bars: gd.querySelectorAll(".barlayer .point").length,
        table_cells: gd.querySelectorAll(".table .cell-text").length,
        annotations: Array.prototype.map.call(gd.querySelectorAll(".annotation-text"),
          function (a) { return a.textContent; }),
        xaxis_title: Array.prototype.map.call(gd.querySelectorAll("[class^=g-x][class$=title]"),
          function (a) { return a.textContent; }).join(""),
        yaxis_types: Object.keys(gd._fullLayout || {}).filter(function (k) {
          return /^yaxis[0-9]*$/.test(k); }).sort().map(function (k) {
          return gd._fullLayout[k].type; }),
        table_overflow_px: tableOverflow(gd)
      };
    });
  var pre = document.createElement("pre");
  pre.id = "probe-report";
  pre.textContent = JSON.stringify({errors: window.__probeErrors, figures: figures});
  document.body.appendChild(pre);
}, 200); });
</script>"""


def chromium_available() -> bool:
    return shutil.which(CHROMIUM) is not None or Path(CHROMIUM).is_file()


def render(page: Path, workdir: Path, timeout_s: float = 120) -> dict[str, Any]:
    """Load ``page`` in headless Chromium; {"errors": [...], "figures": [...], "stderr": ...}."""
    html = page.read_text(encoding="utf-8")
    assert "<head>" in html and "</body>" in html, "not a full HTML page"
    probed = workdir / f"probed-{page.name}"
    probed.write_text(
        html.replace("<head>", "<head>" + _ERRORS, 1).replace("</body>", _REPORT + "</body>", 1),
        encoding="utf-8",
    )
    profile = workdir / "chromium-profile"  # a fresh profile per page
    profile.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=15000",  # run the page's timers, then dump
            "--dump-dom",
            probed.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    match = re.search(r'<pre id="probe-report">(.*?)</pre>', run.stdout, re.S)
    assert match, f"no report from chromium (exit {run.returncode}): {run.stderr[-3000:]}"
    report = json.loads(_unescape(match.group(1)))
    report["stderr"] = run.stderr
    return report


def _unescape(text: str) -> str:
    return (
        text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    )
