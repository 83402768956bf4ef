package dockertest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Event is a container event as the engine reports it, with its time to
// the nanosecond.
type Event struct {
	// Action is "create", "start", "exec_start: sh -c …", "destroy", ….
	Action string
	// Container is the container's ID.
	Container string
	Labels    map[string]string
	Time      time.Time
}

// Acts reports whether the event is an act on the container (it was made,
// removed, started, resumed or executed in) rather than a report of one
// (a process list, a death, an exec's end), which the engine may log after
// the removal it raced with.
func Acts(e Event) bool {
	action, _, _ := strings.Cut(e.Action, ":")
	switch action {
	case "create", "destroy", "start", "restart", "unpause", "exec_create", "exec_start":
		return true
	}
	return false
}

// Recorder records the engine's container events of the objects carrying a
// label, with the docker CLI: an independent witness of what the
// controller did and when.
type Recorder struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []Event
	done   chan struct{}
	stop   sync.Once
}

// RecordEvents starts recording the container events of the label
// ("key=value"). Stop ends it.
func RecordEvents(label string) (*Recorder, error) {
	cmd := exec.Command("docker", "events", "--filter", "type=container", "--filter", "label="+label, "--format", "{{json .}}")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("docker events: %w", err)
	}
	r := &Recorder{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var e struct {
				Action string
				Actor  struct {
					ID         string
					Attributes map[string]string
				}
				TimeNano int64 `json:"timeNano"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			r.mu.Lock()
			r.events = append(r.events, Event{Action: strings.TrimSpace(e.Action), Container: e.Actor.ID,
				Labels: e.Actor.Attributes, Time: time.Unix(0, e.TimeNano)})
			r.mu.Unlock()
		}
	}()
	// The engine sends events from the moment the stream is open; give it
	// that moment before the caller acts.
	time.Sleep(200 * time.Millisecond)
	return r, nil
}

// Stop ends the recording, once the events up to now have arrived, and
// returns them in the engine's order. It may be called again.
func (r *Recorder) Stop() []Event {
	r.stop.Do(func() {
		time.Sleep(500 * time.Millisecond)
		_ = r.cmd.Process.Kill()
		<-r.done
		_ = r.cmd.Wait()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}
