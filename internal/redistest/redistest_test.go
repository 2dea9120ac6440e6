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

func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Addrs()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
}

func TestSentinel(t *testing.T) {
	st := StartSentinel(t)
	st.KillMaster()
}
