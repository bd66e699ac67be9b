"""Headless Debian chromium driven by Selenium (chromium-driver's /usr/bin/chromedriver; nothing is
downloaded), for the console's browser tests and `make screenshots`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"


def available() -> str | None:
    """None when the browser can run here, else why not."""
    if shutil.which(CHROMEDRIVER) is None or shutil.which(CHROMIUM) is None:
        return "Debian's chromium and chromium-driver are not installed (.ci/run installs them)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def chromium(width: int = 1360, height: int = 900) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def wait_for(driver: Any, condition: Callable[[Any], Any], seconds: float = 15.0, message: str = "") -> Any:
    """Polls `condition(driver)` until it is truthy (Selenium's WebDriverWait); its value."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, poll_frequency=0.1).until(condition, message)
