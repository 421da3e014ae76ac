"""docs/operations.md's Prometheus scrape configuration and alert rules are valid as written
(Prometheus's own promtool checks them)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool comes with Debian's prometheus (scripts/test "
                                                         "installs it)")


def _block(after: str) -> str:
    return re.search(r"```yaml\n(.*?)```", DOC.read_text().split(after, 1)[1], re.S).group(1)


def test_the_alert_rules_are_valid(tmp_path):
    rules = tmp_path / "rules.yml"
    rules.write_text(_block("### Alert rules"))
    result = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "SUCCESS: 6 rules found" in result.stdout, result.stdout + result.stderr


def test_the_scrape_configuration_is_valid(tmp_path):
    token = tmp_path / "token"
    token.write_text("monitor-token\n")
    config = tmp_path / "prometheus.yml"
    config.write_text(_block("### Scrape configuration").replace("/etc/prometheus/engram-monitor-token", str(token)))
    result = subprocess.run([PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
