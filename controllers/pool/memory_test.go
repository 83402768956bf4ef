package pool

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestMakingCountsAndBacksOff(t *testing.T) {
	var m making
	t0 := time.Unix(1000, 0)
	m.start("a", "m1", t0)
	m.start("a", "m2", t0)
	m.start("b", "m3", t0)
	if st := m.state("a"); st.creating != 2 || st.engine != 3 || !st.last.Equal(t0) {
		t.Fatalf("state(a) = %+v, want 2 of the pool's, 3 of the engine's", st)
	}
	if !m.isMaking("m1") || m.isMaking("m9") {
		t.Fatal("isMaking does not follow the names in flight")
	}
	boom := errors.New("boom")
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		name := []string{"m1", "m2", "m4"}[i]
		if i == 2 {
			m.start("a", name, t0)
		}
		m.end("a", name, boom, t0)
		if got := m.backoff("a", t0); got != want {
			t.Fatalf("after %d failures backoff = %v, want %v", i+1, got, want)
		}
	}
	if got := m.backoff("a", t0.Add(3*time.Second)); got != time.Second {
		t.Fatalf("backoff once 3s passed = %v, want the 1s left", got)
	}
	if m.failure("a") == nil {
		t.Fatal("the last failure is not remembered")
	}
	m.start("a", "m5", t0)
	m.end("a", "m5", nil, t0)
	if m.backoff("a", t0) != 0 || m.failure("a") != nil {
		t.Fatal("a success does not end the back-off")
	}
	for i := 0; i < 20; i++ {
		m.start("c", "x", t0)
		m.end("c", "x", boom, t0)
	}
	if got := m.backoff(types.UID("c"), t0); got != maxBackoff {
		t.Fatalf("backoff after 20 failures = %v, want the cap %v", got, maxBackoff)
	}
}
