"""Open a static HTML page in a real headless Chromium and report what it drew (test helper).

The page is copied with two probe scripts: one first in ``<head>`` that records JavaScript errors
(uncaught exceptions, rejected promises, console.error), one at the end of ``<body>`` that, after
the load event, writes a JSON report into the DOM: of every plotly figure (:func:`render`, the
dashboard) or of a documentation page (:data:`SITE_REPORT`). Chromium's ``--dump-dom`` prints
that DOM once virtual time has run the page's timers; :func:`screenshot` takes a picture.

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
    "--virtual-time-budget=15000",  # run the page's timers, then act
)
WIDTH = 1400  # px: the window's width, a laptop's

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


#: A documentation page's report: code blocks and tables whose content is wider than their box
#: (clipped: the reader must scroll sideways to find it), code in table cells broken between
#: two letters or digits, the images with whether they loaded, and, when the page sets
#: ``window.__probeSearch``, what the search box found for it.
SITE_REPORT = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  function clipped(el) { return el.scrollWidth > el.clientWidth + 1; }
  var content = document.querySelector(".md-content") || document.body;
  var code = [], tables = [], midword = [];
  // what a collapsed block holds is checked as a reader who opens it sees it
  content.querySelectorAll("details").forEach(function (d) { d.open = true; });
  content.querySelectorAll("pre > code").forEach(function (c) {
    if (clipped(c) || clipped(c.parentElement)) { code.push(c.textContent.slice(0, 100)); }
  });
  content.querySelectorAll("table").forEach(function (t) {
    if (t.closest(".wide-by-design")) { return; }  // raw data to scroll through (the bench's)
    var wrap = t.closest(".md-typeset__scrollwrap") || t.parentElement;
    if (clipped(wrap) || clipped(t) || clipped(t.parentElement)) {
      tables.push({head: (t.querySelector("tr") || t).textContent.trim().slice(0, 100),
                   scroll: wrap.scrollWidth, client: wrap.clientWidth});
    }
  });
  content.querySelectorAll("td code").forEach(function (c) {
    var text = c.textContent, range = document.createRange(), tops = [];
    var walker = document.createTreeWalker(c, NodeFilter.SHOW_TEXT), node, i = 0, last = null;
    var chars = [];
    while ((node = walker.nextNode())) {
      for (var k = 0; k < node.length; k++) {
        range.setStart(node, k); range.setEnd(node, k + 1);
        var r = range.getBoundingClientRect();
        chars.push({ch: node.data[k], top: Math.round(r.top)});
      }
    }
    for (var j = 1; j < chars.length; j++) {
      if (chars[j].top > chars[j - 1].top + 2 && /[A-Za-z0-9]/.test(chars[j - 1].ch) &&
          /[A-Za-z0-9]/.test(chars[j].ch)) {
        midword.push(text.slice(0, j) + "|" + text.slice(j));
        break;
      }
    }
  });
  var images = Array.prototype.map.call(content.querySelectorAll("img"), function (img) {
    return {src: img.getAttribute("src"), loaded: img.complete && img.naturalWidth > 0,
            width: img.getBoundingClientRect().width};
  });
  var report = {code: code, tables: tables, midword: midword, images: images,
                errors: window.__probeErrors, width: document.documentElement.clientWidth};
  function done() {
    var pre = document.createElement("pre");
    pre.id = "probe-report";
    pre.textContent = JSON.stringify(report);
    document.body.appendChild(pre);
  }
  var input = document.querySelector(".md-search__input");
  if (!window.__probeSearch || !input) { done(); return; }
  input.focus();
  input.value = window.__probeSearch;
  ["focus", "input", "keyup", "change"].forEach(function (type) {
    input.dispatchEvent(new Event(type, {bubbles: true}));
  });
  setTimeout(function () {
    var items = document.querySelectorAll(".md-search-result__item");
    report.search = {items: items.length,
                     meta: (document.querySelector(".md-search-result__meta") || {}).textContent,
                     first: items.length ? items[0].textContent.trim().slice(0, 80) : null,
                     hrefs: Array.prototype.map.call(items, function (item) {
                       return ((item.querySelector("a") || {}).href || "").split("#")[0]; })};
    done();
  }, 3000);
}, 500); });
</script>"""


def chromium_available() -> bool:
    return shutil.which(CHROMIUM) is not None or Path(CHROMIUM).is_file()


def render(page: Path, workdir: Path, timeout_s: float = 120) -> dict[str, Any]:
    """Load ``page`` in headless Chromium; {"errors": [...], "figures": [...], "stderr": ...}."""
    return probe(page, workdir, _REPORT, workdir / f"probed-{page.name}", timeout_s)


def probe(
    page: Path, workdir: Path, script: str, probed: Path, timeout_s: float = 120
) -> dict[str, Any]:
    """Load a copy of ``page`` (written to ``probed``) with the error recorder in its head and
    ``script`` at the end of its body, which writes ``<pre id="probe-report">`` JSON; that
    report, with Chromium's stderr."""
    html = page.read_text(encoding="utf-8")
    assert "<head>" in html and "</body>" in html, "not a full HTML page"
    probed.write_text(
        html.replace("<head>", "<head>" + _ERRORS, 1).replace("</body>", script + "</body>", 1),
        encoding="utf-8",
    )
    run = _chromium(workdir, probed, "--dump-dom", timeout_s=timeout_s)
    match = re.search(r'<pre id="probe-report">(.*?)</pre>', run.stdout, re.S)
    assert match, f"no report from chromium (exit {run.returncode}): {run.stderr[-3000:]}"
    report = json.loads(_unescape(match.group(1)))
    report["stderr"] = run.stderr
    return report


def screenshot(page: Path, out: Path, workdir: Path, height: int = 2400) -> Path:
    """A PNG of ``page`` as a window :data:`WIDTH` wide and ``height`` high shows it, for a
    person to look at (the checks are :func:`probe`'s)."""
    run = _chromium(workdir, page, "--hide-scrollbars", f"--screenshot={out}", height=height)
    assert out.is_file(), f"no screenshot of {page} (exit {run.returncode}): {run.stderr[-2000:]}"
    return out


def _chromium(
    workdir: Path, page: Path, *flags: str, height: int = 1000, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    profile = workdir / "chromium-profile"
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--window-size={WIDTH},{height}",
            f"--user-data-dir={profile}",
            *flags,
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def _unescape(text: str) -> str:
    return (
        text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    )
