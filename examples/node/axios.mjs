// axios through hookpace: axios reads HTTP_PROXY, HTTPS_PROXY and
// NO_PROXY by itself; for an https:// URL it tunnels (CONNECT), and Node
// trusts hookpace's CA through NODE_EXTRA_CA_CERTS (the path `hookpace ca
// bundle` prints).
//
//   npm install axios
//   HTTPS_PROXY=http://127.0.0.1:8080 NODE_EXTRA_CA_CERTS=/path/to/bundle.pem \
//     node axios.mjs https://partner.example/hooks [COUNT]
import axios from 'axios';

const url = process.argv[2] ?? 'http://127.0.0.1:9999/hooks';
const count = Number(process.argv[3] ?? 1);
for (let i = 1; i <= count; i++) {
  const res = await axios.post(url, { type: 'invoice.paid', id: `evt_${i}`, via: 'axios' });
  // 202 and an id: hookpace has the webhook.
  console.log(res.status, res.headers['x-hookpace-id']);
}
