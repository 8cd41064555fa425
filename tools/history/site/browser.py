"""Debian's Chromium, headless, driven by selenium through Debian's chromedriver: what the site's
browser test and its benchmark open the site in. Nothing is downloaded: selenium is pointed at
the two installed programs (.ci/install-launchers.sh installs them), and a host without them is
told so in one line.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

BROWSER, DRIVER = "chromium", "chromedriver"
WAIT_S = 30


def browser_problem() -> str | None:
    """Why the site cannot be opened in a browser here, or None."""
    missing = [name for name in (BROWSER, DRIVER) if shutil.which(name) is None]
    if missing:
        return (f"{' and '.join(missing)} not found: apt-get install chromium chromium-driver "
                "(bash .ci/install-launchers.sh)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium does not import: pip install -r requirements-test.txt"
    return None


def start_browser(width: int = 1280, height: int = 1000):
    """A headless Chromium under selenium's control, `width` x `height` pixels."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which(BROWSER)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--window-size={width},{height}",
                     "--allow-file-access-from-files"):
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=Service(executable_path=shutil.which(DRIVER)))


def drawn(driver) -> int:
    """How many times the page has drawn a view (site.js counts them)."""
    return int(driver.execute_script("return Number(document.body && document.body.dataset.drawn"
                                     " || 0)"))


def wait_until(driver, condition, what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition(driver)
        if value:
            return value
        time.sleep(0.02)
    raise TimeoutError(f"the page did not {what} within {timeout:.0f} s")


def open_page(driver, index: Path, view: str = "") -> tuple[float, float]:
    """Loads the site afresh at `view` (a hash such as `#view=case&...`); returns the
    milliseconds from the start of navigation until its text was drawn, and until its charts
    were too."""
    driver.get("about:blank")
    driver.get(index.resolve().as_uri() + view)
    wait_until(driver, drawn, "draw its view")
    return tuple(driver.execute_script("return [window.RN50.textAt, window.RN50.drawnAt]"))


def page_errors(driver) -> list[str]:
    """The browser console's errors since the last call (a script that failed)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE"]
