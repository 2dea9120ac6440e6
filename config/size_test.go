package config

import (
	"strings"
	"testing"
)

// A 50 MB config took 29.5 s and 4.5 GB to check. One over
// MaxFileSize is refused at once, saying so.
func TestParseRefusesAnOversizedFile(t *testing.T) {
	big := "# " + strings.Repeat("x", MaxFileSize) + "\n"
	_, err := Parse("big.yaml", []byte(big))
	if err == nil || !strings.Contains(err.Error(), "more than the 1048576 (1 MiB) a config file may have") {
		t.Fatalf("a %d-byte config: %v", len(big), err)
	}
	if _, err := Parse("ok.yaml", []byte("# "+strings.Repeat("x", MaxFileSize-100)+"\n")); err != nil {
		t.Fatalf("a config just under the bound: %v", err)
	}
}

// At a default of 1,000 host labels, half of 2,000 partners read as
// host="other"; at 10,000, a scrape of /metrics took seconds. The default
// fits a couple of thousand partners.
func TestDefaultHostLabelsFitThousandsOfPartners(t *testing.T) {
	if n := Default().Telemetry.MaxHostLabels; n < 2000 || n > 5000 {
		t.Errorf("telemetry.max_host_labels defaults to %d, want 2000 to 5000", n)
	}
}
