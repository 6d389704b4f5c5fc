#!/usr/bin/env python3
"""Checks the Grafana dashboard and the alert rules against the server's metrics.

The metric families and label names are read from server/server_metrics.cc,
so a renamed or removed metric breaks this check instead of leaving an empty
panel or an alert that can never fire. Checks:
  * the dashboard is valid JSON with the fields Grafana needs (unique panel
    ids, grid positions inside 24 columns, a PromQL expression per target);
  * every metric name in a panel, template variable or alert expression is
    one the server exports (histograms: _bucket/_sum/_count), and every label
    matcher names a label the server or Prometheus sets;
  * every metric family the server exports is shown by some panel;
  * every alert has severity critical or warning and a runbook_url naming a
    section (heading) of a document in this repository.
With --print-exprs it prints the dashboard's expressions, template variables
replaced by concrete values, one per line, for prometheus_scrape_test.sh to
run against a real Prometheus.

usage: check_observability.py SERVER_METRICS_CC DASHBOARD_JSON [ALERTS_YML]
                              [--print-exprs]
"""
import json
import os
import re
import sys

# PromQL words that are not metric names.
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
    "unless", "bool", "offset", "inf", "nan",
}
# Labels Prometheus adds to every scraped series, and the histogram bucket label.
SCRAPE_LABELS = {"job", "instance", "le", "__name__"}
# Series Prometheus itself generates per target; alerts may use them.
SCRAPE_SERIES = {"up"}
SEVERITIES = {"critical", "warning"}


def heading_anchors(markdown):
    """The anchors GitHub-style renderers give a document's headings."""
    anchors = set()
    for title in re.findall(r"^#+\s+(.*?)\s*$", markdown, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def check_alert_conventions(rule, repo_root):
    """Errors in one alert's severity label and runbook_url annotation."""
    where = f"alert {rule.get('alert')}"
    errors = []
    severity = rule.get("labels", {}).get("severity")
    if severity not in SEVERITIES:
        errors.append(f"{where}: severity '{severity}' is not one of {sorted(SEVERITIES)}")
    runbook = rule.get("annotations", {}).get("runbook_url", "")
    doc, _, anchor = runbook.partition("#")
    path = os.path.join(repo_root, doc)
    if not doc or not anchor or not os.path.isfile(path):
        errors.append(f"{where}: runbook_url '{runbook}' is not DOC.md#SECTION of this repository")
        return errors
    with open(path, encoding="utf-8") as f:
        if anchor not in heading_anchors(f.read()):
            errors.append(f"{where}: {doc} has no heading with the anchor '#{anchor}'")
    return errors


def exported_families(source):
    """(counters_and_gauges, histograms, labels) declared in server_metrics.cc."""
    families, histograms = set(), set()
    for kind, name in re.findall(
            r'Build(Counter|Gauge|Histogram)\(\)\s*\.Name\("([a-zA-Z_:][a-zA-Z0-9_:]*)"\)', source):
        (histograms if kind == "Histogram" else families).add(name)
    labels = set(re.findall(r'\{\s*"([a-zA-Z_][a-zA-Z0-9_]*)"\s*,', source))
    if not families or not histograms:
        raise SystemExit("no metric families found in the server source: did its shape change?")
    return families, histograms, labels


def names_and_labels(expr):
    """Metric names and matcher label names used in a PromQL expression."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # string literals
    text = re.sub(r"\[[^\]]*\]", "", text)                    # range selectors
    labels = set()
    for body in re.findall(r"\{([^}]*)\}", text):
        labels.update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", body))
    text = re.sub(r"\{[^}]*\}", " ", text)
    # Grouping clauses list labels, not metrics.
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$[a-zA-Z_]\w*", " ", text)                # Grafana variables
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        word = match.group(0)
        following = text[match.end():].lstrip()
        before = text[:match.start()]
        if following.startswith("("):                          # a function call
            continue
        if word.lower() in KEYWORDS:
            continue
        if before and (before[-1].isdigit() or before[-1] == "."):  # 1e3, 0.5
            continue
        names.add(word)
    return names, labels


def main(argv):
    print_exprs = "--print-exprs" in argv
    args = [a for a in argv[1:] if a != "--print-exprs"]
    if len(args) not in (2, 3):
        raise SystemExit(__doc__)
    with open(args[0], encoding="utf-8") as f:
        families, histograms, server_labels = exported_families(f.read())
    allowed = set(families)
    for h in histograms:
        allowed.update({h + "_bucket", h + "_sum", h + "_count"})
    known_labels = server_labels | SCRAPE_LABELS
    errors = []

    with open(args[1], encoding="utf-8") as f:
        try:
            dashboard = json.load(f)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{args[1]}: not valid JSON: {e}")
    for key in ("uid", "title", "schemaVersion", "panels", "templating"):
        if key not in dashboard:
            errors.append(f"dashboard: missing top-level field '{key}'")

    exprs = []      # (where, expr)
    ids = set()
    for panel in dashboard.get("panels", []):
        where = f"panel {panel.get('id')} '{panel.get('title')}'"
        if panel.get("id") in ids:
            errors.append(f"{where}: duplicate panel id")
        ids.add(panel.get("id"))
        grid = panel.get("gridPos", {})
        if not all(isinstance(grid.get(k), int) for k in "xywh") or grid["x"] + grid["w"] > 24:
            errors.append(f"{where}: gridPos {grid} missing or wider than 24 columns")
        targets = panel.get("targets", [])
        if not targets:
            errors.append(f"{where}: no targets")
        ref_ids = [t.get("refId") for t in targets]
        if len(set(ref_ids)) != len(ref_ids):
            errors.append(f"{where}: duplicate refId")
        for target in targets:
            if not target.get("expr", "").strip():
                errors.append(f"{where}: target {target.get('refId')} has no expr")
            else:
                exprs.append((where, target["expr"]))
    variables = {}
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var.get("query")
            query = query.get("query", "") if isinstance(query, dict) else query
            inner = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*", query or "")
            if not inner:
                errors.append(f"variable {var.get('name')}: expected label_values(...), got '{query}'")
                continue
            exprs.append((f"variable {var.get('name')}", inner.group(1)))
            if inner.group(2) not in known_labels:
                errors.append(f"variable {var.get('name')}: unknown label '{inner.group(2)}'")
        variables[var.get("name")] = var.get("type")

    if len(args) == 3:
        import yaml  # PyYAML, in the test's virtual environment
        with open(args[2], encoding="utf-8") as f:
            rules = yaml.safe_load(f)
        repo_root = os.path.join(os.path.dirname(os.path.abspath(args[2])), "..", "..")
        for group in rules.get("groups", []):
            for rule in group.get("rules", []):
                exprs.append((f"alert {rule.get('alert')}", rule["expr"]))
                errors.extend(check_alert_conventions(rule, repo_root))

    used = set()
    for where, expr in exprs:
        for var in re.findall(r"\$\{?([a-zA-Z_]\w*)", expr):
            if not var.startswith("__") and var not in variables:
                errors.append(f"{where}: uses undefined variable ${var}")
        names, labels = names_and_labels(expr)
        extra = SCRAPE_SERIES if where.startswith("alert") else set()
        for name in sorted(names - allowed - extra):
            errors.append(f"{where}: metric '{name}' is not exported by habitat-server")
        for label in sorted(labels - known_labels):
            errors.append(f"{where}: label '{label}' is not set by habitat-server or Prometheus")
        if where.startswith("panel"):
            used |= names
    for family in sorted(families):
        if family not in used:
            errors.append(f"dashboard: no panel shows '{family}'")
    for h in sorted(histograms):
        if not used & {h + "_bucket", h + "_sum", h + "_count"}:
            errors.append(f"dashboard: no panel shows the histogram '{h}'")

    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    if print_exprs:
        for where, expr in exprs:
            if where.startswith("panel"):
                concrete = (expr.replace("$__rate_interval", "1m").replace('"$job"', '"habitat-server"')
                            .replace('"$instance"', '".*"').replace('"$rpc"', '".*"'))
                print(" ".join(concrete.split()))
    else:
        print(f"{len(exprs)} expressions checked against {len(allowed)} exported series names")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
