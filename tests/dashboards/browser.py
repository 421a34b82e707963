"""Running the app for a real browser: a Streamlit server on 127.0.0.1 and Debian's Chromium.

Used by the browser test, and runnable to refresh the README's screenshots from any run folder:
`python -m tests.dashboards.browser --root runs --out docs/screenshots` (claims and approves the
highest-priority item of that run's queue under a development identity).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_TIMEOUT_S = 90.0
UI_TIMEOUT_MS = 60_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_settings(root: Path, reviewer: str) -> dict[str, str]:
    """`PGT_*` variables pointing the app at a training run folder's stores."""
    root = root.resolve()
    return {
        "PGT_REVIEW_QUEUE_URL": f"sqlite:///{root / 'review_queue.db'}",
        "PGT_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}",
        "PGT_CASEBASE_PATH": str(root / "library"),
        "PGT_EMBEDDER": "hashing",
        "PGT_FAILURES_PATH": str(root / "review_failures.jsonl"),
        "PGT_FEEDBACK_CURSOR_PATH": str(root / "review_feedback_cursor.json"),
        "PGT_DEV_REVIEWER": reviewer,
    }


@contextmanager
def app_server(settings: Mapping[str, str], log: Path) -> Iterator[str]:
    """`streamlit run dashboards/app.py` on a free loopback port; yields its base URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGT_")} | dict(settings)
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ROOT / "dashboards" / "app.py"),
        "--server.address=127.0.0.1",
        f"--server.port={port}",
        "--server.headless=true",
        "--server.fileWatcherType=none",
        "--browser.gatherUsageStats=false",
    ]
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"streamlit exited with {process.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass  # not listening yet: poll again
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"streamlit did not answer within {START_TIMEOUT_S:.0f} s: {log.read_text()[-2000:]}"
                )
            time.sleep(0.3)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: Browser, url: str) -> Page:
    # Streamlit scrolls inside its main block, not the document: a tall window shows a whole page.
    page = browser.new_page(viewport={"width": 1440, "height": 2400})
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(url)
    return page


def settle(page: Page) -> None:
    """Wait until Streamlit has finished the script run (its status widget leaves the page)."""
    page.wait_for_timeout(300)
    expect(page.get_by_test_id("stStatusWidget")).to_have_count(0, timeout=UI_TIMEOUT_MS)


def claim_next(page: Page) -> None:
    button = page.get_by_role("button", name="Claim next")
    expect(button).to_be_enabled(timeout=UI_TIMEOUT_MS)  # the first run of a fresh server imports a lot
    settle(page)
    button.click()
    expect(page.get_by_text("You hold this item until")).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(page.get_by_role("button", name="Submit decision")).to_be_enabled(timeout=UI_TIMEOUT_MS)
    expect(page.get_by_text("Reason codes (required to reject)")).to_be_visible(timeout=UI_TIMEOUT_MS)
    settle(page)


def approve(page: Page) -> None:
    page.get_by_role("button", name="Submit decision").click()
    expect(page.get_by_text("decided approve").first).to_be_visible(timeout=UI_TIMEOUT_MS)
    settle(page)


def show_dashboard(page: Page) -> None:
    expect(page.get_by_text("Is it learning, and at what cost?")).to_be_visible(timeout=UI_TIMEOUT_MS)
    charts = page.get_by_test_id("stVegaLiteChart")
    expect(charts.first).to_be_visible(timeout=UI_TIMEOUT_MS)  # the learning curve
    expect(charts.nth(1)).to_be_visible(timeout=UI_TIMEOUT_MS)  # violations by code
    expect(page.get_by_text("Drill down: the consultations behind a point")).to_be_visible(
        timeout=UI_TIMEOUT_MS
    )
    settle(page)
    page.wait_for_timeout(1000)  # Vega draws after the element appears


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="a training run's paths.root")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--reviewer", default="reviewer@example.com")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        app_server(run_settings(args.root, args.reviewer), args.out / "streamlit.log") as base,
        chromium() as browser,
    ):
        page = open_page(browser, base)
        claim_next(page)
        page.screenshot(path=str(args.out / "review.png"), full_page=True)
        approve(page)
        page = open_page(browser, f"{base}/experiments")
        show_dashboard(page)
        page.screenshot(path=str(args.out / "dashboard.png"), full_page=True)
    (args.out / "streamlit.log").unlink()
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
