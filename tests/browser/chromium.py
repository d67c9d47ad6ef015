"""Where the browser tests find Chromium and the demo, and where their screenshots go."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TICKETS = ROOT / "examples" / "tickets"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
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
