"""Headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by selenium, for the
HTML viewer's tests, its benchmark and the README screenshot.

Selenium Manager cannot download drivers here, so the system chromedriver is given explicitly.
``.ci/run`` installs both packages; under CI (``CI`` set) a missing browser is an error, not a
skip, so the browser tests cannot silently stop running.
"""

from __future__ import annotations

import os
import shutil
import time

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver",)


def _which(names) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


def browser_missing() -> str | None:
    """Why no browser can start (None when it can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if _which(CHROMIUM_NAMES) is None or _which(DRIVER_NAMES) is None:
        return "chromium / chromedriver not found (apt-get install chromium chromium-driver)"
    return None


def start_chromium(width: int = 1280, height: int = 900):
    """A headless Chromium WebDriver with the browser console log enabled."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _which(CHROMIUM_NAMES)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking",
                "--disable-extensions", f"--window-size={width},{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(_which(DRIVER_NAMES)), options=options)


def open_page(driver, path: str, timeout: float = 20.0) -> float:
    """Load a local page and wait for the viewer to be ready; returns the page's own load time
    in ms (navigation start to the first render done)."""
    driver.get("file://" + os.path.abspath(path))
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if driver.execute_script("return !!(window.mscView && window.mscView.ready)"):
            return driver.execute_script("return window.mscView.readyAt")
        time.sleep(0.02)
    raise TimeoutError(f"viewer not ready after {timeout} s: {path}")
