// A webhook receiver that verifies hookpace's Standard Webhooks signatures
// with the official `standardwebhooks` package and de-duplicates on
// webhook-id (the same on every retry and replay of one webhook).
//
//   WEBHOOK_SECRET=whsec_... node receiver.mjs [port]
//
// It prints "listening on http://127.0.0.1:PORT", then one JSON line per
// request: {"webhook_id", "status", "verified", "duplicate", "error"}.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.WEBHOOK_SECRET); // "whsec_..." as hookpace's sign.secret_file holds it
const seen = new Set(); // use a table with a unique key in production

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8"); // verify the raw body, not re-serialised JSON
    const id = req.headers["webhook-id"];
    let status, error, duplicate = false;
    try {
      wh.verify(body, req.headers); // checks webhook-signature and that webhook-timestamp is recent
      duplicate = seen.has(id);
      if (!duplicate) {
        seen.add(id);
        // handle the event here: JSON.parse(body) ...
      }
      status = 204; // a duplicate is acknowledged too, so that it is not sent again
    } catch (e) {
      status = 400;
      error = String(e.message || e);
    }
    res.writeHead(status).end();
    console.log(JSON.stringify({ webhook_id: id, status, verified: status === 204, duplicate, error }));
  });
});

server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
