# Python's urllib through hookpace: urlopen reads http_proxy (and
# HTTP_PROXY) from the environment, for loopback targets too.
#
#   http_proxy=http://127.0.0.1:8080 python3 send_urllib.py http://127.0.0.1:9999/hooks
import json
import sys
import urllib.request

url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:9999/hooks"
body = json.dumps({"type": "invoice.paid", "id": "evt_1"}).encode()
req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
with urllib.request.urlopen(req, timeout=10) as r:
    # 202 and an id: hookpace has the webhook.
    print(r.status, r.headers["X-Hookpace-Id"])
