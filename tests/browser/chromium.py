"""Where the browser tests find Chromium and the demo, and where their screenshots go."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TICKETS = ROOT / "examples" / "tickets"
ARTIFACTS = ROOT / "test-artifacts"
# Debian's build of Chromium's headless shell (the old headless mode, which Playwright
# itself runs for headless Chromium): the same Blink, network stack and security checks as
# `chromium`, without the desktop browser's processes; a context and its page cost about a
# fifth of the CPU of `chromium --headless` (docs/performance.md, the suite's section).
CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1100, "height": 900}
