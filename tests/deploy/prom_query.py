#!/usr/bin/env python3
"""Queries a Prometheus server's HTTP API; prints one line per result.

usage: prom_query.py BASE_URL QUERY          instant query: "labels value" lines
       prom_query.py BASE_URL --rules         rule health: "name health lastError"
Exits 2 when the API answers with an error (e.g. a bad expression) and 3 when
it cannot be reached, so callers can tell "no data yet" (exit 0, no output)
from failures.
"""
import json
import sys
import urllib.error
import urllib.parse
import urllib.request


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        body = json.load(e)
        print(f"error: {body.get('errorType')}: {body.get('error')}", file=sys.stderr)
        sys.exit(2)
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        print(f"unreachable: {e}", file=sys.stderr)
        sys.exit(3)


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    base = argv[1].rstrip("/")
    if argv[2] == "--rules":
        body = get(f"{base}/api/v1/rules")
        for group in body["data"]["groups"]:
            for rule in group["rules"]:
                print(rule["name"], rule.get("health", "unknown"), rule.get("lastError", "") or "-")
        return 0
    body = get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": argv[2]}))
    if body.get("status") != "success":
        print(f"error: {body}", file=sys.stderr)
        return 2
    data = body["data"]
    if data["resultType"] in ("scalar", "string"):
        print(data["result"][1])
        return 0
    for series in data["result"]:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(series["metric"].items()))
        print(f"{{{labels}}} {series['value'][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
