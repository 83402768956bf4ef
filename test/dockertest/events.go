package dockertest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
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
	label  string
	mu     sync.Mutex
	events []Event
	done   chan struct{}
	stop   sync.Once
}

// sentinelLabel marks the container Stop makes to know that the stream
// caught up; its events are not returned.
const sentinelLabel = "afe.test.events-sentinel"

// RecordEvents starts recording the container events of the label
// ("key=value"). Stop ends it. The stream starts a second before the call
// (the engine replays what it has kept since), so that nothing done after
// it returns is missed while the stream opens: events of the label from
// that second may be in the record too, which a label of the caller's own,
// or a look at the namespace's, leaves out.
func RecordEvents(label string) (*Recorder, error) {
	since := time.Now().Add(-time.Second)
	cmd := exec.Command("docker", "events", "--filter", "type=container", "--filter", "label="+label,
		"--since", fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()), "--format", "{{json .}}")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("docker events: %w", err)
	}
	r := &Recorder{cmd: cmd, label: label, done: make(chan struct{})}
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
	return r, nil
}

// Stop ends the recording, once the events up to now have arrived, and
// returns them in the engine's order. It may be called again.
func (r *Recorder) Stop() []Event {
	r.stop.Do(func() {
		r.catchUp()
		_ = r.cmd.Process.Kill()
		<-r.done
		_ = r.cmd.Wait()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	var events []Event
	for _, e := range r.events {
		if _, sentinel := e.Labels[sentinelLabel]; !sentinel {
			events = append(events, e)
		}
	}
	return events
}

// catchUp waits until the stream brought the events up to now: it creates
// a container (never started) carrying the recorded label and waits, 30 s
// at most, for its creation's event, which comes after every earlier one;
// then removes it. When it cannot create one, it waits a moment.
func (r *Recorder) catchUp() {
	mark := fmt.Sprint(time.Now().UnixNano())
	out, err := exec.Command("docker", "create", "--label", r.label, "--label", sentinelLabel+"="+mark,
		"--network", "none", TestImage, "/afe-never-started").CombinedOutput()
	if err != nil {
		time.Sleep(time.Second)
		return
	}
	defer func() { _ = exec.Command("docker", "rm", "-f", strings.TrimSpace(string(out))).Run() }()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-r.done:
			return // the stream ended
		default:
		}
		r.mu.Lock()
		arrived := slices.ContainsFunc(r.events, func(e Event) bool { return e.Labels[sentinelLabel] == mark })
		r.mu.Unlock()
		if arrived {
			return
		}
	}
}
