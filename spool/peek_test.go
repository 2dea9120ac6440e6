package spool

import (
	"context"
	"testing"
	"time"
)

func TestOldestAndDeadByHost(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := context.Background()
	if _, ok, err := s.Oldest("a.example"); ok || err != nil {
		t.Fatalf("Oldest of an empty spool: ok=%v err=%v, want false, nil", ok, err)
	}
	var ms []*Message
	for i := range 6 {
		for _, h := range []string{"a.example", "b.example:8443"} {
			m := newMsg(h, i)
			m.Enqueued = time.Unix(1700000000+int64(i), 0)
			if h == "b.example:8443" {
				m.Enqueued = m.Enqueued.Add(time.Hour)
			}
			if err := s.Append(ctx, m, 0); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
	}
	// a.example's first two go: one delivered, one buried. b's first is
	// buried. The oldest left are a's third and b's second.
	if err := s.Delete(ms[0]); err != nil {
		t.Fatal(err)
	}
	s.Bury(ms[2], "permanent status 410", time.Now())
	s.Bury(ms[1], "permanent status 410", time.Now())
	waitUsage(t, s, 9)
	for host, want := range map[string]time.Time{
		"a.example":      time.Unix(1700000002, 0),
		"b.example:8443": time.Unix(1700000001, 0).Add(time.Hour),
	} {
		got, ok, err := s.Oldest(host)
		if err != nil || !ok || !got.Equal(want) {
			t.Errorf("Oldest(%s) = %v, %v, %v; want %v", host, got, ok, err, want)
		}
	}
	dead, err := s.DeadByHost()
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead["a.example"] != 1 || dead["b.example:8443"] != 1 {
		t.Errorf("DeadByHost = %v, want one each for a.example and b.example:8443", dead)
	}
}
