#!/usr/bin/env python3
"""Redraw the README's screenshots of ``caffepy view`` (docs/images/view_*.png).

    tools/view_screenshots.py [--chromium /usr/bin/chromium]

Needs playwright and a chromium; runs a small distributed training run in a temporary folder for
the third picture.
"""
import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from caffepy.view import data, page  # noqa: E402
from caffepy.view.curves import read_curves  # noqa: E402
from tests.view.netgen import make_workspace  # noqa: E402

OUT = os.path.join(ROOT, "docs", "images")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def _shoot(browser, doc, folder, name, actions):
    path = os.path.join(folder, name + ".html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page.render_page(doc))
    pg = browser.new_page(viewport={"width": 1200, "height": 680})
    pg.goto("file://" + path)
    pg.wait_for_selector("body[data-ready='1']")
    actions(pg)
    out = os.path.join(OUT, name + ".png")
    pg.screenshot(path=out)
    pg.close()
    print("wrote %s (%d KB)" % (out, os.path.getsize(out) // 1024))


def _click_layer(pg, name):
    pg.fill("#search", name)
    pg.locator(".node.layer", has_text=name).first.click()
    pg.fill("#search", "")
    pg.evaluate("document.activeElement.blur()")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=ARGS)
        lenet = data.from_prototxt(os.path.join(ROOT, "models", "lenet", "lenet_train_test.prototxt"))
        _shoot(browser, lenet, tmp, "view_lenet", lambda pg: _click_layer(pg, "conv2"))
        google = data.from_prototxt(os.path.join(ROOT, "models", "googlenet", "googlenet_deploy.prototxt"))

        def collapsed(pg):
            pg.click("#collapse")
            pg.locator(".node.block", has_text="inception_4a").click()
            pg.click("#tab-table")
        _shoot(browser, google, tmp, "view_googlenet_blocks", collapsed)
        ws = make_workspace(os.path.join(tmp, "ws"))
        dist = data.from_workspace(ws)
        dist["curves"] = read_curves(data.workspace_logs(ws))
        _shoot(browser, dist, tmp, "view_distributed", lambda pg: pg.click("#tab-cluster"))
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
