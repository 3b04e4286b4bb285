"""A headless Chromium page for the browser tests (the dashboard, Temporal's UI), and the
screenshot a failed walk leaves in $TEST_ARTIFACTS (default tmp/artifacts)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Page, async_playwright

from tests.helpers import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Headless as root, and nothing reaching out to the network this machine does not have.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "tmp" / "artifacts"))


async def failure_shot(page: Page, name: str) -> None:
    """The whole page as it was when a test failed: $TEST_ARTIFACTS/<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)


@asynccontextmanager
async def browser_page(base_url: str, shot_name: str, height: int = 900) -> AsyncIterator[Page]:
    """A page at `base_url` in UTC, 1400 by `height` pixels; when the block raises, its
    `failure_shot` named `shot_name` is taken first. The browser is closed after."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True
        )
        context = await browser.new_context(
            base_url=base_url, timezone_id="UTC", viewport={"width": 1400, "height": height}
        )
        page = await context.new_page()
        try:
            yield page
        except BaseException:
            await failure_shot(page, shot_name)
            raise
        finally:
            await browser.close()
