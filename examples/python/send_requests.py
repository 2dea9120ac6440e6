# Python requests through hookpace: requests reads HTTP_PROXY (and
# http_proxy) from the environment, for loopback targets too.
#
#   HTTP_PROXY=http://127.0.0.1:8080 python3 send_requests.py http://127.0.0.1:9999/hooks
import sys

import requests

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:9999/hooks"
r = requests.post(url, json={"type": "invoice.paid", "id": "evt_1"}, timeout=10)
# 202 and an id: hookpace has the webhook.
print(r.status_code, r.headers.get("X-Hookpace-Id"))
