#!/usr/bin/env bash
# Checks the Prometheus files with promtool (Debian's `prometheus` package, installed by
# scripts/install-deps.sh):
#
#   bash tests/ops/promtool_rules_test.sh [PATH/TO/pgjobd]      (the binary is not used)
#
# 1. docker/prometheus/alerts.yml is a valid rule file;
# 2. its unit tests (docker/prometheus/alerts_test.yml) pass: each alert fires when it
#    should, with the expected labels and text, and stays quiet when it should;
# 3. docker/prometheus/prometheus.yml is a valid configuration;
# 4. every PromQL query of the Grafana dashboard parses (checked as recording rules, with
#    the dashboard's variables replaced by sample values).
set -euo pipefail
cd "$(dirname "$0")/../.."

promtool=$(command -v promtool || true)
if [[ -z "$promtool" ]]; then
  # Not a skip: the package installs on every Debian 12 machine this project supports.
  echo "FAIL: promtool not found; install Debian's prometheus package (scripts/install-deps.sh does)" >&2
  exit 1
fi

workdir=$(mktemp -d /tmp/pgjobd-promtool.XXXXXX)
trap 'rm -rf "$workdir"' EXIT

python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null; then python=$candidate; break; fi
done
[[ -n "$python" ]] || { echo "FAIL: python3 not found" >&2; exit 1; }

failed=0
step() {
  local what=$1
  shift
  if "$@" >"$workdir/out" 2>&1; then
    echo "ok: $what"
  else
    echo "FAIL: $what"
    sed 's/^/    /' "$workdir/out"
    failed=$((failed + 1))
  fi
}

step "promtool check rules alerts.yml" "$promtool" check rules docker/prometheus/alerts.yml
step "promtool test rules alerts_test.yml" "$promtool" test rules docker/prometheus/alerts_test.yml
step "promtool check config prometheus.yml" "$promtool" check config docker/prometheus/prometheus.yml

# The dashboard's queries as one rule file (JSON is YAML). Grafana's variables become
# sample values first: an interval for the $__ ones, a regex for the selectors.
"$python" - "$workdir/dashboard_rules.yml" <<'PYTHON'
import json
import sys

with open("docker/grafana/dashboards/pgjobd.json", encoding="utf-8") as f:
    dashboard = json.load(f)


def panels_of(container):
    for panel in container.get("panels", []):
        yield panel
        yield from panels_of(panel)


rules = []
for panel in panels_of(dashboard):
    for target in panel.get("targets", []):
        expr = target.get("expr")
        if not expr:
            continue
        for variable, value in (("$__rate_interval", "1m"), ("$__interval", "1m"),
                                ("$__range", "1h"), ("$instance", ".*"), ("$queue", ".*"),
                                ("$type", ".*")):
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:panel{panel.get('id')}:{target.get('refId')}",
                      "expr": expr})
if not rules:
    sys.exit("no queries found in the dashboard")
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, indent=1)
print(f"{len(rules)} dashboard queries", file=sys.stderr)
PYTHON
step "dashboard queries parse" "$promtool" check rules "$workdir/dashboard_rules.yml"

if ((failed)); then
  echo "promtool: $failed check(s) failed"
  exit 1
fi
echo "promtool: all checks hold"
