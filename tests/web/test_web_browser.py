"""`phasetop web` in a real browser: Debian's chromium, headless, driven by playwright with the system executable.

chromium is required (make test installs it: scripts/test_tools.sh); a missing one fails this test, it never skips. The browser may
reach 127.0.0.1 only: its resolver maps every other name nowhere, and the page's requests are checked.
"""

from __future__ import annotations

import io
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
from PIL import Image
from playwright.sync_api import sync_playwright

from tests.loopback import free_port
from tests.processes import children, command_line

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
API_KEY = "sk-web-test-4f1c9a"
"""Set in the server's environment: it must reach neither a command line nor the page."""
LONG = re.compile(r"long 2000 ([\d,]+(?:\.\d)?) ms")
SHORT = re.compile(r"short 200 ([\d,]+(?:\.\d)?) ms")
VIEWPORT = {"width": 1440, "height": 900}
STARTING = "starting phasetop…"
"""What the page says from its first byte until the app paints."""


# textual.js keeps its xterm.js Terminal to itself; this catches it as it is assigned (`this.terminal = …`), so
# the test reads what the page draws (its canvas has no DOM text) from the terminal's own buffer.
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  get() { return undefined; },
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer && value.buffer.active) window.phasetopTerminal = value;
  },
});
"""
SCREEN_TEXT = """() => {
  const terminal = window.phasetopTerminal;
  if (!terminal) return "";
  const buffer = terminal.buffer.active, lines = [];
  for (let y = 0; y < buffer.length; y++) lines.push(buffer.getLine(y).translateToString(true));
  return lines.join("\\n");
}"""


def start_web(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """`phasetop web` on a free port in its own dir (no .env, no user config); returns it and the URL it printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHASETOP_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), PHASETOP_RUNS_DIR=str(tmp_path / "runs"), PHASETOP_API_KEY=API_KEY)
    server = subprocess.Popen([sys.executable, "-m", "tui", "web", "--port", str(free_port()), *args], cwd=tmp_path,
                              env=env, stdout=subprocess.PIPE, stderr=(tmp_path / "web.log").open("wb"), text=True)
    ready, _, _ = select.select([server.stdout], [], [], 60)
    line = server.stdout.readline().strip() if ready else ""
    if not line.startswith("http://127.0.0.1:"):
        server.kill()
        raise AssertionError(f"phasetop web printed no URL: {line!r}; its log:\n{(tmp_path / 'web.log').read_text()}")
    return server, line


def open_tab(browser, url: str, others: list[str], wait_until: str = "load", errors: list[str] | None = None):
    """A new page at `url` whose terminal the test can read; any request to another host is refused and noted, and
    the page's uncaught errors too where `errors` is given."""
    page = browser.new_page(viewport=VIEWPORT)
    if errors is not None:
        page.on("pageerror", lambda error: errors.append(str(error)))
    page.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname == "127.0.0.1"
               else (others.append(route.request.url), route.abort()))
    page.add_init_script(CATCH_TERMINAL)
    page.goto(url, wait_until=wait_until)
    return page


def wait_for_text(page, condition, what: str, timeout_s: float) -> str:
    """Poll the page's terminal text until `condition(text)` holds; a deadline, never a fixed sleep."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = page.evaluate(SCREEN_TEXT)
        if condition(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout_s:.0f} s; the page shows:\n{text}")


def ended(label: str) -> re.Pattern:
    """The figures under the timeline once the selected lane's answer has ended (its decode rate; "–" while it streams)."""
    return re.compile(rf"{label}: TTFT .* decode [\d,.]+ tok/s")


def ms(match: re.Match) -> float:
    return float(match[1].replace(",", ""))


def check_not_blank(png: bytes) -> None:
    """Many colours, and much of the page not the theme's black: the app's panes, text and marks were drawn."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (VIEWPORT["width"], VIEWPORT["height"])
    colours = image.getcolors(maxcolors=1 << 24)
    drawn = sum(count for count, rgb in colours if rgb != (0, 0, 0)) / (image.width * image.height)
    assert len(colours) > 50, f"{len(colours)} colours: a blank or barely drawn page"
    assert 0.03 < drawn < 0.9, f"{drawn:.0%} of the page is not the projector theme's black"


def test_the_ui_in_a_browser_tab_runs_prompts_and_stops_with_the_tab_or_the_server(tmp_path):
    assert CHROMIUM, "chromium is not installed (make test installs it: scripts/test_tools.sh)"
    server, url = start_web(tmp_path, "--theme", "phasetop-projector")
    others: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"])
            try:
                page = open_tab(browser, url, others)
                assert API_KEY not in page.content()
                wait_for_text(page, lambda text: " · up · " in text, "header saying the simulator is up", 90)

                ui = children(server.pid)
                assert any(is_simulator(p) for p in ui), f"no simulator under the tab's UI: {[command_line(p) for p in ui]}"
                assert not any(API_KEY in " ".join(command_line(p)) for p in ui), "the API key is on a command line"

                page.locator(".xterm-helper-textarea").focus()  # the keys go to the terminal, as a click would
                page.keyboard.press("2")
                wait_for_text(page, ended("long 2000").search, "the long answer's end", 90)
                page.keyboard.press("1")  # after the long one: the aligned view, each lane from its own send
                text = wait_for_text(page, lambda t: LONG.search(t) and SHORT.search(t), "both prompts' TTFT", 90)
                assert API_KEY not in text
                long_ms, short_ms = ms(LONG.search(text)), ms(SHORT.search(text))
                assert long_ms > short_ms, f"long TTFT {long_ms} ms not above short {short_ms} ms:\n{text}"

                wait_for_text(page, ended("short 200").search, "the short answer's end", 60)  # the shot: both ended
                wait_for_text(page, lambda t: "palette" in t, "the footer's keys", 30)
                png = page.screenshot(path=tmp_path / "web.png")
                check_not_blank(png)
                if os.environ.get("SCREENSHOT_WEB"):  # make screenshot-web: the README's copy
                    shutil.copyfile(tmp_path / "web.png", os.environ["SCREENSHOT_WEB"])

                page.close()
                gone, alive = psutil.wait_procs(ui, timeout=30)
                assert not alive, f"still running after the tab closed: {[command_line(p) for p in alive]}"
                assert server.poll() is None, "the server stopped with the tab"

                second = open_tab(browser, url, others)  # a new tab: a new UI and simulator; then SIGTERM with it open
                wait_for_text(second, lambda text: " · up · " in text, "the second tab's header", 90)
                again = children(server.pid)
                assert any(is_simulator(p) for p in again) and not set(again) & set(ui)
                server.send_signal(signal.SIGTERM)
                assert server.wait(15) == 0, "the server did not stop on SIGTERM with a tab open"
                gone, alive = psutil.wait_procs(again, timeout=15)
                assert not alive, f"still running after the server stopped: {[command_line(p) for p in alive]}"
            finally:
                browser.close()
        assert others == [], f"the page asked another host: {others}"
    finally:
        for process in children(server.pid):
            process.kill()
        server.kill()


def test_the_page_says_it_is_starting_until_the_app_paints_and_takes_keys_without_a_click(tmp_path):
    """A tab's UI takes seconds to start: meanwhile the page says so, white on its black (it was a black page), and
    once the app has painted the terminal has the keyboard (keys did nothing until the page was clicked)."""
    assert CHROMIUM, "chromium is not installed (make test installs it: scripts/test_tools.sh)"
    server, url = start_web(tmp_path, "--theme", "phasetop-projector")
    others: list[str] = []
    try:
        html = httpx.get(url, timeout=10).text  # the page as served, before any UI: no websocket yet, no process
        assert STARTING in html and children(server.pid) == []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"])
            try:
                errors: list[str] = []
                page = open_tab(browser, url, others, wait_until="domcontentloaded", errors=errors)
                starting = page.locator(".starting")
                assert starting.inner_text() == STARTING and starting.is_visible()
                style = starting.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]")
                assert style == ["rgb(255, 255, 255)", "rgb(0, 0, 0)"], style
                assert "-painted" not in page.evaluate("document.body.className"), "painted before a UI could start"
                check_has_text(page.screenshot())

                wait_for_text(page, lambda text: " · up · " in text, "header saying the simulator is up", 90)
                assert "-painted" in page.evaluate("document.body.className") and not starting.is_visible()
                focused = page.evaluate("document.activeElement.className")
                assert "xterm-helper-textarea" in focused, f"the terminal does not have the keyboard: {focused!r}"
                page.keyboard.press("2")  # no click and no focus(): the page gave the terminal the keyboard
                wait_for_text(page, ended("long 2000").search, "the long answer's end (key 2 without a click)", 90)
                assert errors == [], f"the page's script failed: {errors}"
            finally:
                browser.close()
        assert others == [], f"the page asked another host: {others}"
    finally:
        for process in children(server.pid):
            process.kill()
        server.kill()


def check_has_text(png: bytes) -> None:
    """Bright pixels on the page's black: the starting line is drawn, and readable."""
    image = Image.open(io.BytesIO(png)).convert("L")
    bright = sum(image.histogram()[201:])
    assert 100 < bright < 0.05 * image.width * image.height, f"{bright} bright pixels: no starting line on the page"


def is_simulator(process: psutil.Process) -> bool:
    return command_line(process)[1:4] == ["-m", "tui", "sim"]
