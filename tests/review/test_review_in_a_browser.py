"""The review page in a real browser: headless Chromium reviews three items with the
keyboard, reloads, and finds all three saved."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from builder.review.sample import load_or_draw
from builder.review.server import make_server
from tests.mteb_export.conftest import built_quickstart, quickstart  # noqa: F401 - fixtures

INSTALL = "apt-get install -y chromium chromium-driver && pip install selenium"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--window-size=1200,800",
]


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason=f"needs selenium: {INSTALL}")
    if not (CHROMIUM and DRIVER):
        pytest.skip(f"needs Chromium and its driver: {INSTALL}")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    yield driver
    driver.quit()


def test_a_reviewer_judges_three_items_reloads_and_finds_them_saved(quickstart, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    items = load_or_draw(quickstart, 0.3, 0)
    server = make_server(quickstart, "ada", items, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    wait = WebDriverWait(browser, 10)
    try:
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/")
        wait.until(lambda d: d.find_element(By.ID, "position").text == f"1/{len(items)}")
        mark = browser.find_element(By.TAG_NAME, "mark")
        assert mark.text == items[0]["document"][items[0]["spans"][0][0] : items[0]["spans"][0][1]].strip()
        assert browser.execute_script(  # the span is scrolled into view
            "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight;", mark
        )
        if os.environ.get("REVIEW_SCREENSHOT"):
            browser.save_screenshot(os.environ["REVIEW_SCREENSHOT"])
        body = browser.find_element(By.TAG_NAME, "body")
        for keys, position in (("1qs", 2), ("2wa", 3), ("3qs", 4)):
            body.send_keys(*keys)
            wait.until(lambda d, p=position: d.find_element(By.ID, "position").text == f"{p}/{len(items)}")
        browser.refresh()
        wait.until(lambda d: d.find_element(By.ID, "done").text == "3")
        assert browser.find_element(By.ID, "position").text == f"4/{len(items)}"  # resumes at the first unjudged
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("k")
        wait.until(lambda d: d.find_element(By.ID, "position").text == f"3/{len(items)}")
        checked = browser.execute_script(
            "return ['span_answers','understandable','better_elsewhere'].map("
            "q => document.querySelector(`input[name=${q}]:checked`).value);"
        )
        assert checked == ["no", "yes", "no"]
    finally:
        server.shutdown()
        server.server_close()
    saved = [json.loads(line) for line in (quickstart / "review" / "judgments-ada.jsonl").read_text().splitlines()]
    assert [(j["query_id"], j["span_answers"], j["understandable"], j["better_elsewhere"]) for j in saved] == [
        (items[0]["query_id"], "yes", "yes", "no"),
        (items[1]["query_id"], "partly", "no", "yes"),
        (items[2]["query_id"], "no", "yes", "no"),
    ]
