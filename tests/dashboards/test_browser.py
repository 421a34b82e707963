"""A real browser on the real app over a real training run's stores.

A short offline training run fills a review queue and an MLflow store; `streamlit run
dashboards/app.py` serves them on 127.0.0.1; Debian's Chromium, driven by Playwright, claims the
top item and approves it. The test then checks the store: the decision is there under the
development identity and the item has left the queue. Screenshots of the review page and the
dashboard are saved as test artifacts (`PGT_TEST_ARTIFACTS`, else the test's temporary folder)
and, with `PGT_UPDATE_SCREENSHOTS=1`, to docs/screenshots for the README.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from compliance.review_queue import ReviewQueue
from environments.config import load_app_config
from environments.training import train
from simulacra.clock import SystemClock
from tests.dashboards.browser import (
    ROOT,
    app_server,
    approve,
    chromium,
    claim_next,
    open_page,
    run_settings,
    show_dashboard,
)

REVIEWER = "dev-reviewer@example.com"


@pytest.fixture(scope="module")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("training-run")
    overrides = [
        f"paths.root={root}",
        "embedder=hashing",
        "environment.consultations=4",
        "environment.consultations_per_day=2",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        app = load_app_config(compose("config", overrides=overrides))
    asyncio.run(train(app, progress=False))
    return root


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PGT_TEST_ARTIFACTS", tmp_path)) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_a_reviewer_claims_and_approves_an_item_in_a_real_browser(run_root: Path, artifacts: Path) -> None:
    queue = ReviewQueue(f"sqlite:///{run_root / 'review_queue.db'}", SystemClock())
    waiting_before = queue.stats().waiting
    assert waiting_before > 0, "the training run escalated nothing, so there is nothing to review"
    top = queue.list_open(limit=1)[0].item.id

    with (
        app_server(run_settings(run_root, REVIEWER), artifacts / "streamlit.log") as base,
        chromium() as browser,
    ):
        page = open_page(browser, base)
        claim_next(page)
        assert queue.state(top).lease_holder == REVIEWER
        page.screenshot(path=str(artifacts / "review.png"), full_page=True)
        approve(page)

        outcome = queue.outcome(top)
        assert outcome is not None and outcome.decision == "approve"
        assert outcome.reviewers == [REVIEWER]
        assert top not in [e.item.id for e in queue.list_open(limit=500)]
        assert queue.stats().waiting == waiting_before - 1

        page = open_page(browser, f"{base}/experiments")
        show_dashboard(page)
        page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)
    queue.close()

    assert (artifacts / "review.png").stat().st_size > 10_000
    assert (artifacts / "dashboard.png").stat().st_size > 10_000
    if os.environ.get("PGT_UPDATE_SCREENSHOTS") == "1":
        docs = ROOT / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        for name in ("review.png", "dashboard.png"):
            shutil.copy(artifacts / name, docs / name)
