"""The browser for the page tests: Debian's chromium driven by playwright, one per module."""
import os

import pytest

CHROMIUM = os.environ.get("CAFFEPY_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install playwright)")
    if not os.path.exists(CHROMIUM):
        pytest.skip("needs chromium at %s (apt-get install chromium)" % CHROMIUM)
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Page(object):
    """A page opened in the browser, with what went wrong in it: console errors, page errors,
    dialogs (a dialog means script from the data ran)."""

    def __init__(self, browser, url):
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.errors, self.dialogs = [], []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def dialog(d):
            self.dialogs.append(d.message)
            d.dismiss()
        self.page.on("dialog", dialog)
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=30000)

    def close(self):
        self.page.close()


@pytest.fixture
def open_page(browser):
    pages = []

    def _open(target):
        url = target if "://" in str(target) else "file://" + os.path.abspath(str(target))
        pg = Page(browser, url)
        pages.append(pg)
        return pg
    yield _open
    for pg in pages:
        pg.close()
