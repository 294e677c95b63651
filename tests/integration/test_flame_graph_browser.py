"""`fastunwind perf-script --format html` opened in a real browser: Debian's chromium driven by
chromedriver through selenium. The page renders (a screenshot with the flame graph's pixels), loads
nothing from the network, logs no console error, zooms on a click (the clicked frame then spans the
chart), highlights what a search matches with the share of samples report counts for it, switches
between the merged and per-thread views, turns into an icicle, and stays bounded on the suite's
biggest profile with its smallest stacks merged."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import SRC

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1200, 900


def run(*args: str) -> subprocess.CompletedProcess:
    env = {"NO_COLOR": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC),
           **{k: os.environ[k] for k in ("XDG_CACHE_HOME",) if k in os.environ}}
    return subprocess.run([sys.executable, "-m", "fastunwind", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless chromium; the tests are skipped, saying why, only if it cannot start here."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} missing: the Makefile's SYSTEM_PACKAGES install them")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    except Exception as error:  # selenium's errors for a browser that does not start are many
        pytest.skip(f"chromium cannot start here: {str(error).splitlines()[0]}")
    try:
        yield driver
    finally:
        driver.quit()


def open_page(browser: Any, page: Path) -> None:
    browser.get(page.as_uri())
    browser.get_log("browser")  # only this page's messages count from here on


def frames(browser: Any) -> list[dict[str, Any]]:
    """Every drawn frame: its node, name, box and classes."""
    return browser.execute_script("""
        return Array.from(document.querySelectorAll('.frame')).map(e => {
          const r = e.getBoundingClientRect();
          return {node: e.dataset.node, text: e.textContent, x: r.left, y: r.top, width: r.width,
                  match: e.classList.contains('match'), ancestor: e.classList.contains('ancestor')};
        });""")


def chart_width(browser: Any) -> float:
    return float(browser.execute_script("return document.getElementById('chart').clientWidth"))


def no_console_errors(browser: Any) -> None:
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def drawn_pixels(png: bytes) -> float:
    """The share of the screenshot's pixels that are not the page's white background."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colored = sum(count for count, pixel in image.getcolors(image.width * image.height) if pixel != (255, 255, 255))
    return colored / (image.width * image.height)


@pytest.fixture(scope="module")
def hackbench_page(perf_recordings, tmp_path_factory) -> tuple[Path, str]:
    data = str(perf_recordings.get("hackbench-threads").data_file)
    page = tmp_path_factory.mktemp("flame") / "hackbench.html"
    result = run("perf-script", "-i", data, "--format", "html", "-o", str(page))
    assert result.returncode == 0 and result.stdout == "", result.stderr
    return page, data


def test_the_page_loads_nothing_from_the_network(hackbench_page):
    page, _ = hackbench_page
    text = page.read_text()
    assert "<script src" not in text and "<link" not in text and "@import" not in text and "url(" not in text


def test_renders_zooms_on_click_and_resets(browser, hackbench_page):
    page, _ = hackbench_page
    open_page(browser, page)
    assert drawn_pixels(browser.get_screenshot_as_png()) > 0.02
    # nothing fetched: no resource besides the page itself
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    width = chart_width(browser)
    drawn = frames(browser)
    assert drawn and max(frame["width"] for frame in drawn) == pytest.approx(width, abs=1)
    # a frame narrower than the chart, wide enough to click
    target = max((f for f in drawn if 30 < f["width"] < 0.8 * width), key=lambda f: f["width"])
    element = browser.find_element("css selector", f'.frame[data-node="{target["node"]}"]')
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element(element).perform()
    tooltip = browser.find_element("id", "tooltip").text
    samples = int(re.search(r"(\d+) samples, ", tooltip).group(1))
    assert tooltip.startswith(target["text"]) and samples > 0
    assert f"of all, 100.00% of the zoomed view" not in tooltip and "% of all" in tooltip
    element.click()
    zoomed = {f["node"]: f for f in frames(browser)}
    assert zoomed[target["node"]]["width"] == pytest.approx(width, abs=1) and not zoomed[target["node"]]["ancestor"]
    # its ancestors stay, full width and marked as such; children are narrower
    assert any(f["ancestor"] for f in zoomed.values())
    browser.find_element("id", "reset").click()
    reset = {f["node"]: f for f in frames(browser)}
    assert reset[target["node"]]["width"] == pytest.approx(target["width"], abs=1)
    no_console_errors(browser)


def test_search_highlights_the_matches_with_reports_share(browser, hackbench_page):
    page, data = hackbench_page
    open_page(browser, page)
    report = json.loads(run("report", "-i", data, "--json").stdout)
    names = [function["name"] for function in report["functions"]]
    # a function of one module, on part of the stacks: its share is report's total for it
    function = next(f for f in sorted(report["functions"], key=lambda f: -f["total"])
                    if names.count(f["name"]) == 1 and 0 < f["total"] < report["samples"] and "/" not in f["name"])
    search = browser.find_element("id", "search")
    search.send_keys(f"/^{function['name']}$/")
    drawn = frames(browser)
    matched = [f for f in drawn if f["match"]]
    assert matched and all(f["text"] in ("", function["name"]) for f in matched)
    assert all(not f["match"] for f in drawn if f["text"] and f["text"] != function["name"])
    label = browser.find_element("id", "matched").text
    share = 100 * function["total"] / report["samples"]
    assert label == f"matched: {share:.2f}% ({function['total']} samples)"
    no_console_errors(browser)


def test_per_thread_views_and_icicle(browser, hackbench_page):
    page, _ = hackbench_page
    open_page(browser, page)
    from selenium.webdriver.support.ui import Select

    select = Select(browser.find_element("id", "thread"))
    options = [option.text for option in select.options]
    assert options[0].startswith("all threads, merged") and len(options) > 2
    select.select_by_index(1)  # the thread with the most samples
    samples = int(options[1].rsplit("(", 1)[1].split()[0])
    assert browser.find_element("id", "summary").text.startswith(f"{samples} samples")
    width = chart_width(browser)
    root = next(f for f in frames(browser) if f["text"] == "all")
    assert root["width"] == pytest.approx(width, abs=1)
    assert root["y"] > max(f["y"] for f in frames(browser) if f["text"] != "all") - 1  # flame: the root below
    browser.find_element("id", "icicle").click()
    root = next(f for f in frames(browser) if f["text"] == "all")
    assert root["y"] < min(f["y"] for f in frames(browser) if f["text"] != "all")     # icicle: the root on top
    no_console_errors(browser)


def test_the_biggest_profile_is_bounded_and_merges_its_smallest_stacks(browser, perf_recordings, tmp_path):
    from fastunwind import _core
    from fastunwind.perf.script import stream_recording, write_flame_graph

    data = str(perf_recordings.get("compiler").data_file)  # the suite's most distinct stacks
    profile = _core.Profile()
    stream_recording(data, None, mode="stats", consumers=[profile])
    whole, merged = tmp_path / "whole.html", tmp_path / "merged.html"
    with open(whole, "wb") as out:
        write_flame_graph(profile, out, "compiler")
    with open(merged, "wb") as out:
        write_flame_graph(profile, out, "compiler", max_nodes=200)
    for page, kept in ((whole, None), (merged, 200)):
        open_page(browser, page)
        summary = browser.find_element("id", "summary").text
        assert summary.startswith(f"{profile.samples} samples")  # every sample, merged or not
        drawn = frames(browser)
        assert 0 < len(drawn) <= 4000
        if kept:
            assert "(the smallest merged)" in summary and any(f["text"] == "[merged]" for f in drawn)
            tree = browser.execute_script("return JSON.parse(document.getElementById('profile-data').textContent)")
            merged_function = tree["names"].index("[merged]")
            merged_nodes = sum(1 for function in tree["function"] if function == merged_function)
            # the kept stacks, and at most one [merged] under each (and one root)
            assert 0 < len(tree["function"]) - merged_nodes <= kept and merged_nodes <= kept + 1
        assert drawn_pixels(browser.get_screenshot_as_png()) > 0.02
        no_console_errors(browser)
