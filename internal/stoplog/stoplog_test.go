package stoplog

import (
	"testing"
	"time"
)

func TestStopLog(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l Log
	if l.Stopped("a", t0) || l.StoppedSince("a", t0) {
		t.Fatal("a container never stopped is not stopped")
	}
	l.Stopping("a", t0)
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"stopped at once", l.Stopped("a", t0), true},
		{"stopped within the memory", l.Stopped("a", t0.Add(stopMemory)), true},
		{"forgotten after the memory", l.Stopped("a", t0.Add(stopMemory+time.Second)), false},
		{"an attempt started before the stop was cut short", l.StoppedSince("a", t0.Add(-time.Second)), true},
		{"an attempt started after the stop was not", l.StoppedSince("a", t0.Add(time.Second)), false},
		{"another container is not stopped", l.Stopped("b", t0), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	l.Started("a")
	if l.Stopped("a", t0) || l.StoppedSince("a", t0.Add(-time.Second)) {
		t.Error("a container started again is no longer stopped")
	}
	l.Stopping("b", t0)
	l.Stopping("c", t0.Add(stopMemory+time.Second))
	if _, kept := l.began["b"]; kept {
		t.Error("old stops are dropped as new ones are recorded")
	}
	var none *Log
	none.Stopping("a", t0)
	none.Started("a")
	if none.Stopped("a", t0) || none.StoppedSince("a", t0) {
		t.Error("a nil Log remembers nothing")
	}
}
