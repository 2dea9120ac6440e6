"""A webhook receiver that verifies hookpace's Standard Webhooks signatures
with the official standardwebhooks package (pip install standardwebhooks),
and handles each webhook once: a single webhook by its webhook-id, the
events of a batch (batch.format: envelope) by each event's id.

    WEBHOOK_SECRET=whsec_... python3 receiver.py [port]

It prints "listening on http://127.0.0.1:PORT", then one JSON line per
request: {"webhook_id", "status", "verified", "handled", "duplicates", "error"}.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

wh = Webhook(os.environ["WEBHOOK_SECRET"])  # "whsec_..." as hookpace's sign.secret_file holds it
seen = set()  # use a table with a unique key in production


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # the raw body, as signed
        msg_id = self.headers.get("webhook-id")
        handled, duplicates, error = [], 0, None
        try:
            payload = wh.verify(body, dict(self.headers))  # checks the signature and that the timestamp is recent
            if isinstance(payload, dict) and "events" in payload:  # a batch: each event has its own id
                events = [(ev["id"], ev["body"]) for ev in payload["events"]]
            else:
                events = [(msg_id, payload)]
            for event_id, event in events:
                if event_id in seen:
                    duplicates += 1  # delivered before (a retry): acknowledge, don't handle again
                    continue
                seen.add(event_id)
                handled.append(event_id)  # handle the event here
            status = 204
        except WebhookVerificationError as e:
            status, error = 400, str(e)
        self.send_response(status)
        self.end_headers()
        print(json.dumps({"webhook_id": msg_id, "status": status, "verified": status == 204,
                          "handled": handled, "duplicates": duplicates, "error": error}), flush=True)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Receiver)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
