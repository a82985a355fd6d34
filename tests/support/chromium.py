"""Open a report page in headless Chromium with no network, and check what it rendered.

Used by the report tests and the end-to-end test: the HTML report must open offline
(every chart inline, nothing fetched), which a string search alone cannot prove. The
page is loaded from ``file://`` with every host name unresolvable and an unreachable
proxy, its DOM dumped (``--dump-dom``) and a screenshot taken (``--screenshot``); the
screenshot's pixels in matplotlib's first series colours show that charts were drawn.
Debian's ``chromium`` package provides the browser (``ci/setup.sh`` installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PageCheck", "check_page", "external_urls", "find_chromium", "require_chromium",
           "series_pixels"]

#: matplotlib's default colours of the first four series (tab10: C0..C3).
SERIES_COLOURS: tuple[tuple[int, int, int], ...] = (
    (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28))
#: src/href (and CSS url()/@import) pointing at a network location.
_EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|xlink:href|srcset|poster|data|action)\s*=\s*["']?\s*"""
    r"""(?:https?:)?//)|(?:url\(\s*["']?\s*(?:https?:)?//)|(?:@import\s+["']?(?:https?:)?//)""",
    re.IGNORECASE)
_OFFLINE_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--no-first-run", "--disable-extensions",
    "--hide-scrollbars",
    # no network: every name unresolvable, every connection sent to a closed port
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
)


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian: ``chromium``), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def external_urls(page: str) -> list[str]:
    """Network references in a page (``src=``/``href=`` to http(s) or ``//``, CSS url())."""
    return [page[max(0, m.start() - 20):m.end() + 40] for m in _EXTERNAL.finditer(page)]


@dataclass
class PageCheck:
    """What headless Chromium made of a page."""

    dom: str  # the DOM after load (--dump-dom)
    screenshot: Path
    svgs_in_dom: int
    figures_in_dom: int
    stderr: str


def _run(binary: str, args: list[str], profile: str,
         timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, *_OFFLINE_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def check_page(html: Path, screenshot: Path, *, width: int = 1400, height: int = 3000,
               binary: str | None = None, timeout: float = 120.0) -> PageCheck:
    """Load ``html`` offline in headless Chromium: its DOM, and a screenshot at ``screenshot``.

    Raises ``RuntimeError`` (with Chromium's stderr) when Chromium fails or writes no
    screenshot; ``FileNotFoundError`` when no Chromium is installed.
    """
    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium on PATH; install Debian's chromium package "
                                "(ci/setup.sh does)")
    url = html.resolve().as_uri()
    screenshot = screenshot.resolve()
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="brokerperf-chromium-") as profile:
        dom = _run(binary, ["--dump-dom", url], profile, timeout)
        if dom.returncode != 0 or "<html" not in dom.stdout.lower():
            raise RuntimeError(f"chromium --dump-dom {url} exited {dom.returncode}: "
                               f"{dom.stderr[-2000:]}")
        shot = _run(binary, [f"--screenshot={screenshot}", f"--window-size={width},{height}",
                             url], profile, timeout)
    if shot.returncode != 0 or not screenshot.is_file():
        raise RuntimeError(f"chromium --screenshot of {url} exited {shot.returncode}, wrote "
                           f"no {screenshot}: {shot.stderr[-2000:]}")
    return PageCheck(dom=dom.stdout, screenshot=screenshot,
                     svgs_in_dom=len(re.findall(r"<svg\b", dom.stdout)),
                     figures_in_dom=len(re.findall(r"<figure\b", dom.stdout)),
                     stderr=dom.stderr + shot.stderr)


def series_pixels(png: Path, tolerance: int = 40) -> list[int]:
    """Pixels of the screenshot near each of matplotlib's first series colours (C0..C3)."""
    import numpy as np
    from PIL import Image

    with Image.open(png) as im:
        rgb = np.asarray(im.convert("RGB"), dtype=np.int16)
    return [int((np.abs(rgb - np.array(c, dtype=np.int16)).max(axis=2) <= tolerance).sum())
            for c in SERIES_COLOURS]


def require_chromium() -> str:
    """The Chromium binary for a test; skips (saying why) without one — except in CI
    (``CI=true``), where ``ci/setup.sh`` installs it, so a missing browser fails."""
    import os

    import pytest

    binary = find_chromium()
    if binary is not None:
        return binary
    why = ("no chromium on PATH: install Debian's chromium package (ci/setup.sh does) to "
           "check the HTML report in a real browser")
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; CI=true, where ci/setup.sh should have installed it")
    pytest.skip(why)
