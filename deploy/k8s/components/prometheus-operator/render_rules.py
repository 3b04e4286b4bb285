"""Writes prometheusrule.yaml: deploy/prometheus/alerts.yml as a Prometheus Operator rule.

alerts.yml stays the one file anyone edits (promtool and the compose stack load it as it
is); this copies it, comments and all, under a PrometheusRule's `spec`. Run it after
changing alerts.yml; tests/unit/test_k8s.py fails while the two differ:

    .venv/bin/python deploy/k8s/components/prometheus-operator/render_rules.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALERTS = HERE.parents[2] / "prometheus" / "alerts.yml"
OUTPUT = HERE / "prometheusrule.yaml"

HEADER = """\
# GENERATED from deploy/prometheus/alerts.yml by render_rules.py beside this file: edit
# alerts.yml and run it again (tests/unit/test_k8s.py checks the two are the same rules).
# Prometheus Operator picks the rule up when its labels match the Prometheus' ruleSelector;
# kube-prometheus-stack wants `release: <its release name>` (docs/deploy.md).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: scheduled-jobs
spec:
"""


def render(alerts: str) -> str:
    """The PrometheusRule text for the rule file `alerts` (`groups:` at its top level)."""
    lines = alerts.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups:"))
    body = "\n".join(("  " + line) if line.strip() else "" for line in lines[start:])
    return HEADER + body + "\n"


def main() -> int:
    OUTPUT.write_text(render(ALERTS.read_text()))
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
