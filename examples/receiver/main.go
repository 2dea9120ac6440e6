// Command receiver is a stand-in partner for trying hookpace locally: it
// prints every webhook it gets with the time since the previous one, and
// can answer 429 to show hookpace's holding pattern.
//
//	go run ./examples/receiver -addr 127.0.0.1:9999 [-limit 5]
//
// With -tls NAME it serves HTTPS with a self-signed certificate for NAME,
// written to -cert (for hookpace's tls.ca_file), as a partner would:
//
//	go run ./examples/receiver -addr 127.0.0.1:9443 -tls localhost -cert partner.pem
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"os"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9999", "listen address")
	limit := flag.Int("limit", 0, "answer 429 (Retry-After: 2) beyond this many requests per second; 0 = never")
	tlsName := flag.String("tls", "", "serve HTTPS with a self-signed certificate for this name")
	certOut := flag.String("cert", "partner.pem", "with -tls: where to write the certificate (PEM)")
	flag.Parse()
	var mu sync.Mutex
	var last, window time.Time
	var n, inWindow int
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		now := time.Now()
		n++
		gap := time.Duration(0)
		if !last.IsZero() {
			gap = now.Sub(last)
		}
		last = now
		if now.Sub(window) >= time.Second {
			window, inWindow = now, 0
		}
		inWindow++
		throttled := *limit > 0 && inWindow > *limit
		mu.Unlock()
		status := http.StatusOK
		if throttled {
			w.Header().Set("Retry-After", "2")
			status = http.StatusTooManyRequests
		}
		w.WriteHeader(status)
		fmt.Printf("#%-4d %s  +%-8v %d %s %s %s\n", n, now.Format("15:04:05.000"), gap.Round(time.Millisecond), status, r.Method, r.URL.Path, body)
	})
	if *tlsName == "" {
		log.Printf("receiver on http://%s", *addr)
		log.Fatal(http.ListenAndServe(*addr, nil))
	}
	cert, err := selfSigned(*tlsName, *certOut)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *addr, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	log.Printf("receiver on https://%s (certificate for %s in %s)", *addr, *tlsName, *certOut)
	log.Fatal(srv.ListenAndServeTLS("", ""))
}

// selfSigned makes a certificate for name, valid for a day, and writes it
// to path.
func selfSigned(name, path string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
