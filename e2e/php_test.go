package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// phpSender POSTs n webhooks to its first argument with PHP's curl
// extension (what Guzzle and Symfony's HttpClient use), through the proxy
// https_proxy names, and prints "STATUS ID" per answer, or "ERR reason".
const phpSender = `<?php
for ($i = 0; $i < (int)$argv[2]; $i++) {
    $h = [];
    $c = curl_init($argv[1]);
    curl_setopt_array($c, [
        CURLOPT_POST => true,
        CURLOPT_POSTFIELDS => json_encode(["via" => "php-curl", "n" => $i]),
        CURLOPT_HTTPHEADER => ["Content-Type: application/json"],
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_HEADERFUNCTION => function ($c, $line) use (&$h) {
            $p = explode(":", $line, 2);
            if (count($p) == 2) { $h[strtolower(trim($p[0]))] = trim($p[1]); }
            return strlen($line);
        },
    ]);
    if (curl_exec($c) === false) {
        echo "ERR ", curl_error($c), "\n";
        continue;
    }
    echo curl_getinfo($c, CURLINFO_RESPONSE_CODE), " ", $h["x-hookpace-id"] ?? "", "\n";
}
`

// TestPHPTrust: PHP's curl extension reads neither CURL_CA_BUNDLE nor
// SSL_CERT_FILE, so an https:// webhook through hookpace fails to verify
// with them alone; with the trust directory's php/ in PHP_INI_SCAN_DIR
// (what inject sets, and docs/runtime-php.md says), the same script gets
// 202 with an id for each webhook, and the partner gets each once, over
// TLS.
func TestPHPTrust(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("php"); err != nil {
		t.Fatal("php is needed (apt-get install php-cli php-curl; scripts/test installs them)")
	}
	if out, err := exec.Command("php", "-r", `exit(function_exists("curl_init") ? 0 : 1);`).CombinedOutput(); err != nil {
		t.Fatalf("php's curl extension is needed (apt-get install php-curl): %v\n%s", err, out)
	}
	partner, partnerCA := tlsPartner(t, "partner.test")
	port := partner.URL[strings.LastIndex(partner.URL, ":")+1:]
	hp := StartResolving(t, fmt.Sprintf(`
egress: {allow: ["127.0.0.1"]}
tls: {ca_file: %s}
hosts:
  "partner.test:%s": {rate: 20/s, burst: 5}
`, partnerCA, port), "partner.test")
	target := "https://partner.test:" + port + "/hooks"
	bundle := hookpaceCA(t, hp, "bundle")
	script := filepath.Join(t.TempDir(), "send.php")
	if err := os.WriteFile(script, []byte(phpSender), 0o644); err != nil {
		t.Fatal(err)
	}
	send := func(n int, env ...string) string {
		t.Helper()
		c := exec.Command("php", script, target, fmt.Sprint(n))
		c.Env = appEnv(append([]string{"https_proxy=http://" + hp.Proxy}, env...)...)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("php: %v\n%s", err, out)
		}
		return string(out)
	}
	// Without the ini file: the CA variables alone verify nothing.
	out := send(3, "SSL_CERT_FILE="+bundle, "CURL_CA_BUNDLE="+bundle)
	if strings.Contains(out, "202") || strings.Count(out, "ERR ") != 3 {
		t.Fatalf("PHP with SSL_CERT_FILE and CURL_CA_BUNDLE alone: want 3 verification errors, got\n%s", out)
	}
	// With it: every webhook accepted.
	phpDir := filepath.Join(filepath.Dir(bundle), "php")
	out = send(5, "SSL_CERT_FILE="+bundle, "PHP_INI_SCAN_DIR=:"+phpDir)
	ids := sent(t, "PHP curl (PHP_INI_SCAN_DIR)", []byte(out), nil, 5)
	partner.WaitFor(t, 60*time.Second, "5 webhooks at the partner", func(as []Arrival) bool { return len(as) >= 5 })
	got := map[string]int{}
	for _, a := range partner.Arrivals() {
		if !a.TLS {
			t.Errorf("webhook %s arrived without TLS", a.Header.Get("X-Hookpace-Id"))
		}
		got[a.Header.Get("X-Hookpace-Id")]++
	}
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("webhook %s arrived %d times, want once", id, got[id])
		}
	}
}
