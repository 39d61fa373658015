"""The documentation site as a browser shows it: built as `make docs` builds it, opened from
disk as the README says (``site/index.html``), in Debian's Chromium (``make chromium``).

Every page is loaded with :data:`tests.browser.SITE_REPORT`, its collapsed blocks opened: no
code line and no table may be wider than its box (the reader would have to find the hidden part
by scrolling sideways; only a block marked ``wide-by-design`` holds raw data to scroll through,
the benchmark's 15-column tables on the performance page), no key name in a table may break
between two letters, every image must load, and the search box must find pages; the performance
page's charts must load. The key pages are also saved as
screenshots under the test's temporary folder (``<tmp>/screenshots``), for a person to look at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import SITE_REPORT, chromium_available, probe, screenshot

ROOT = Path(__file__).resolve().parents[2]
KEY_PAGES = (
    "index.html",
    "getting-started.html",
    "configuration.html",
    "mirrormaker2.html",
    "operations/failover.html",
    "operations/migration.html",
    "operations/outages.html",
    "performance.html",
)

pytestmark = pytest.mark.skipif(not chromium_available(), reason="needs chromium: make chromium")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strict into a folder of the test's own."""
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    return out


def pages(site: Path) -> list[str]:
    return sorted(
        str(p.relative_to(site))
        for p in site.rglob("*.html")
        if not p.name.startswith("probed-") and p.name != "404.html"
    )


def look(site: Path, page: str, workdir: Path, search: str = "") -> dict:
    """The probe's report of ``page``; with ``search``, what the search box found for it."""
    path = site / page
    script = f"<script>window.__probeSearch = {search!r};</script>" if search else ""
    return probe(path, workdir, script + SITE_REPORT, path.with_name(f"probed-{path.name}"))


def test_no_code_line_or_table_is_clipped_no_key_breaks_mid_word_every_image_loads(site, tmp_path):
    found = {}
    for page in pages(site):
        report = look(site, page, tmp_path)
        unloaded = [i["src"] for i in report["images"] if not i["loaded"]]
        problems = {k: v for k, v in (("code", report["code"]), ("tables", report["tables"]),
                    ("midword", report["midword"]), ("errors", report["errors"]),
                    ("images", unloaded)) if v}  # fmt: skip
        if problems:
            found[page] = problems
    assert not found, found
    assert set(KEY_PAGES) <= set(pages(site))


def test_search_works_from_disk(site, tmp_path):
    """mkdocs-material's search runs in a Web Worker, which a page opened from disk cannot
    start; the offline plugin and the vendored iframe-worker shim make it work (mkdocs.yml)."""
    search = look(site, "index.html", tmp_path, search="failover")["search"]
    assert search["items"] > 0, search
    assert any(h.endswith("/operations/failover.html") for h in search["hrefs"]), search
    assert "matching document" in search["meta"], search


def test_the_performance_page_shows_the_bench_charts(site, tmp_path):
    images = look(site, "performance.html", tmp_path)["images"]
    charts = [i for i in images if "bench-" in i["src"]]
    assert len(charts) >= 2, images
    assert all(i["loaded"] and i["width"] > 400 for i in charts), charts


def test_screenshots_of_the_key_pages(site, tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    for page in KEY_PAGES:
        out = screenshot(site / page, shots / (page.replace("/", "_") + ".png"), tmp_path)
        assert out.stat().st_size > 20_000, out  # a drawn page, not a blank one


def test_the_probe_sees_clipped_code_wide_tables_and_broken_keys(tmp_path):
    """What the site's CSS prevents, on a page without it: the checks above can fail."""
    long = "mirror failover my.properties --group orders-app --source A --target B  # dry run"
    page = tmp_path / "bare.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>t</title></head><body>"
        '<div class="md-content" style="width:300px">'
        f"<pre><code>{long}</code></pre>"
        '<div class="md-typeset__scrollwrap" style="overflow:auto"><table><tr>'
        + "<td>a_very_long_unbreakable_cell_text</td>"
        * 4
        + '</tr></table></div><div class="md-typeset__scrollwrap" style="overflow:auto">'
        '<table style="width:120px;table-layout:fixed"><tr><td>'
        '<code style="word-break:break-all">checkpoints.topic.replication.factor</code>'
        "</td></tr></table></div>"
        # a collapsed block is opened; a wide table in it counts unless it is wide by design
        + "".join(
            f'<details class="{cls}"><summary>s</summary>'
            '<div class="md-typeset__scrollwrap" style="overflow:auto"><table><tr>'
            + f"<td>{cls}_unbreakable_cell_text_that_is_long</td>" * 4
            + "</tr></table></div></details>"
            for cls in ("note", "wide-by-design")
        )
        + "</div></body></html>"
    )
    report = probe(page, tmp_path, SITE_REPORT, tmp_path / "probed-bare.html")
    assert report["code"] == [long], report
    assert [t["head"][:4] for t in report["tables"]] == ["a_ve", "note"], report
    (broken,) = report["midword"]
    assert broken.replace("|", "") == "checkpoints.topic.replication.factor", report
