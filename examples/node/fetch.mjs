// Node's fetch through hookpace: fetch ignores HTTP_PROXY by itself (on
// Node 20, even with NODE_USE_ENV_PROXY=1), so give it undici's
// EnvHttpProxyAgent, which reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY.
// It tunnels (CONNECT) even to http:// URLs; hookpace spools the POSTs
// inside such a tunnel like any other.
//
//   npm install undici
//   HTTP_PROXY=http://127.0.0.1:8080 node fetch.mjs http://127.0.0.1:9999/hooks [COUNT]
// For https:// URLs, also HTTPS_PROXY and NODE_EXTRA_CA_CERTS (the path
// `hookpace ca bundle` prints), so that Node trusts hookpace's CA.
import { EnvHttpProxyAgent, setGlobalDispatcher } from 'undici';

setGlobalDispatcher(new EnvHttpProxyAgent());

const url = process.argv[2] ?? 'http://127.0.0.1:9999/hooks';
const count = Number(process.argv[3] ?? 1);
for (let i = 1; i <= count; i++) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'invoice.paid', id: `evt_${i}`, via: 'undici' }),
  });
  // 202 and an id: hookpace has the webhook. The partner's own answer
  // (200, no id) means the request went around hookpace.
  console.log(res.status, res.headers.get('x-hookpace-id'));
}
