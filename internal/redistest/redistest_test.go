package redistest

import "testing"

func TestStartKillRestart(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("ping after start: %v", err)
	}
	s.Kill()
	if err := ping(s.Addr()); err == nil {
		t.Fatal("ping answered after kill")
	}
	s.Restart()
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("ping after restart: %v", err)
	}
}
