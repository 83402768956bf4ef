package access

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/runexec"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/telemetry"
)

// streamWait is how long the client has to open its streams after the
// upgrade; idleTimeout closes a connection on which nothing moved for that
// long (a shell left open).
const (
	streamWait  = 30 * time.Second
	idleTimeout = 4 * time.Hour
	// firstSizeWait is how long a terminal's command waits for its size.
	firstSizeWait = time.Second
	// statusLinger is how long an exec's connection stays open after its
	// exit status was sent, for a client behind on the output to read it.
	statusLinger = time.Minute
)

// execOptions are the query of an exec request, as client-go's
// PodExecOptions encode them: command (repeated), stdin, stdout, stderr, tty.
type execOptions struct {
	command                    []string
	stdin, stdout, stderr, tty bool
	// protocol is the streaming protocol the exec was opened with, once
	// it was.
	protocol string
}

func parseExecOptions(r *http.Request) (execOptions, error) {
	q := r.URL.Query()
	flag := func(name string) bool { v, _ := strconv.ParseBool(q.Get(name)); return v }
	o := execOptions{command: q["command"], stdin: flag("stdin"), stdout: flag("stdout"), stderr: flag("stderr"), tty: flag("tty")}
	if o.tty {
		// A terminal's output is all on stdout.
		o.stderr = false
	}
	if len(o.command) == 0 {
		return o, badRequest("exec needs a command")
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, badRequest("exec needs at least one of stdin, stdout and stderr")
	}
	return o, nil
}

// serveExec runs a command in the sandbox container as the sandbox's user,
// in /workspace, with the sandbox's declared env (resolved for this exec:
// a command-less sandbox's container holds none of it), over the
// Kubernetes streaming protocol that client-go's remotecommand and kubectl
// exec speak: SPDY (a POST upgraded to protocol v4: the client opens an
// error stream and one stream per attached stdio, plus resize with a
// terminal) or WebSocket (a GET upgraded to v5.channel.k8s.io or
// v4.channel.k8s.io, the same streams as numbered channels). The exit code
// comes back on the error stream as a Status.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, req *request) {
	ctx := r.Context()
	o, err := parseExecOptions(r)
	if err == nil && r.Method == http.MethodGet && !wsstream.IsWebSocketRequest(r) {
		err = badRequest("exec with GET needs a WebSocket upgrade (%s); SPDY takes a POST", strings.Join(webSocketProtocols, ", "))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := s.target(ctx, req.namespace, req.name)
	if err == nil {
		// Before the upgrade: a refusal is an answer the client shows.
		err = s.resolveEnv(ctx, t)
	}
	if err != nil {
		s.auditExec(ctx, req, t, o, -1, err)
		writeError(w, err)
		return
	}
	open := openSPDY
	if r.Method == http.MethodGet {
		open = openWebSocket
	}
	session, err := open(ctx, w, r, o)
	if session == nil {
		if err != nil {
			s.auditExec(ctx, req, t, o, -1, err)
		}
		return // answered
	}
	defer session.end()
	o.protocol = session.protocol
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-session.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	spec, measure := execSpec(ctx, t, o, session.streams)
	s.runExec(ctx, req, t, o, spec, measure, session)
}

// execStreams are an exec's attached streams, whichever protocol carries
// them; nil where the exec does not attach one. status carries the exit
// status at the end.
type execStreams struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	resize         io.Reader
	status         io.WriteCloser
}

// An execSession is the client's side of an exec: its streams, a channel
// closed when the client goes away, and how to end it once the exit
// status is sent.
type execSession struct {
	protocol string
	streams  execStreams
	gone     <-chan struct{}
	end      func()
}

// openSPDY upgrades the request to the SPDY streaming protocol v4 and
// waits for the streams the options call for. A nil session means the
// request was answered (no such protocol) or the streams did not come,
// which err says.
func openSPDY(ctx context.Context, w http.ResponseWriter, r *http.Request, o execOptions) (*execSession, error) {
	conn, opened := upgradeExec(w, r)
	if conn == nil {
		return nil, nil // answered
	}
	conn.SetIdleTimeout(idleTimeout)
	streams, err := awaitStreams(ctx, opened, o)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &execSession{
		protocol: "SPDY " + remotecommand.StreamProtocolV4Name,
		streams: execStreams{
			stdin: optional[io.Reader](streams[corev1.StreamTypeStdin]), stdout: optional[io.WriteCloser](streams[corev1.StreamTypeStdout]),
			stderr: optional[io.WriteCloser](streams[corev1.StreamTypeStderr]), resize: optional[io.Reader](streams[corev1.StreamTypeResize]),
			status: streams[corev1.StreamTypeError],
		},
		gone: closed(conn.CloseChan()),
		end: func() {
			awaitClientClose(conn)
			_ = conn.Close()
		},
	}, nil
}

// closed is a channel closed when c is.
func closed(c <-chan bool) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range c {
		}
	}()
	return done
}

// optional is the stream as T, or T's nil when there is none (not a T
// holding a nil stream).
func optional[T any](st httpstream.Stream) T {
	var zero T
	if st == nil {
		return zero
	}
	return any(st).(T)
}

// resolveEnv resolves the target sandbox's declared env for an exec into
// t.env. A declaration that cannot be honoured now (a Secret deleted since
// the sandbox was made) refuses the exec with the reason the Sandbox's
// and the Run's conditions give, and nothing is executed.
func (s *Server) resolveEnv(ctx context.Context, t *target) error {
	env, err := s.env.Resolve(ctx, t.sbx)
	if ie, ok := sandboxspec.AsInvalid(err); ok {
		return conflict(accessv1.ReasonEnvUnavailable, "the env of sandbox %s cannot be given to the command (%s): %s", t.sbx.Name, ie.Reason, ie.Message)
	}
	if err != nil {
		return fmt.Errorf("the env of sandbox %s: %w", t.sbx.Name, err)
	}
	t.env = env
	return nil
}

// upgradeExec upgrades the request to the SPDY streaming protocol v4 and
// returns the connection and the streams the client opens on it; a nil
// connection when the request was answered instead (no such protocol).
func upgradeExec(w http.ResponseWriter, r *http.Request) (httpstream.Connection, <-chan httpstream.Stream) {
	if _, err := httpstream.Handshake(r, w, []string{remotecommand.StreamProtocolV4Name}); err != nil {
		// Handshake has answered.
		return nil, nil
	}
	if r.Header.Get(httpstream.HeaderProtocolVersion) == "" {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, accessv1.ReasonInvalidRequest, "exec needs the streaming protocol "+remotecommand.StreamProtocolV4Name)
		return nil, nil
	}
	opened := make(chan httpstream.Stream, 8)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, _ <-chan struct{}) error {
		select {
		case opened <- st:
			return nil
		default:
			return fmt.Errorf("too many streams")
		}
	})
	if conn == nil {
		return nil, nil // the upgrader has answered
	}
	return conn, opened
}

// execSpec is the exec of o in the target, attached to the client's
// streams, and what measures its output for the telemetry. With a
// terminal, it waits a little for the client's first size.
func execSpec(ctx context.Context, t *target, o execOptions, streams execStreams) (docker.StreamSpec, *telemetry.Output) {
	cmd := o.command
	if t.userSpaceKernel && t.sbx.Spec.Resources.CPUSeconds > 0 {
		cmd = runexec.RearmCPULimit(cmd)
	}
	spec := docker.StreamSpec{
		Cmd:        cmd,
		User:       t.user,
		WorkingDir: sandboxspec.WorkspacePath,
		Env:        sandboxspec.ExecEnv(t.env, nil),
		TTY:        o.tty,
	}
	if streams.stdin != nil {
		spec.Stdin = streams.stdin
	}
	if streams.stdout != nil {
		spec.Stdout = streams.stdout
	}
	if streams.stderr != nil {
		spec.Stderr = streams.stderr
	}
	if streams.resize != nil {
		sizes := make(chan docker.TerminalSize, 4)
		spec.Resize = sizes
		go readSizes(ctx, streams.resize, sizes)
		// The client sends the terminal's size first: the command starts
		// at that size when it comes soon enough.
		select {
		case size, ok := <-sizes:
			if ok {
				spec.Size = &size
			}
		case <-time.After(firstSizeWait):
		}
	}
	// The output is measured on its way out, for the telemetry.
	measure := telemetry.NewOutput()
	if spec.Stdout != nil {
		spec.Stdout = io.MultiWriter(spec.Stdout, measure)
	}
	if spec.Stderr != nil {
		spec.Stderr = io.MultiWriter(spec.Stderr, measure)
	}
	return spec, measure
}

// runExec runs the exec, records and audits it, and sends its exit status
// on the error stream.
func (s *Server) runExec(ctx context.Context, req *request, t *target, o execOptions, spec docker.StreamSpec, measure *telemetry.Output, session *execSession) {
	started := time.Now()
	ended := s.opts.Executions.Start(string(t.sbx.UID), "exec/"+req.user.GetName()+"@"+started.UTC().Format("15:04:05.000"), started)
	defer func() { ended(time.Now()) }()
	// A line at the start too: a session the manager does not see end
	// (it was killed) is still on record.
	s.log.Info("Exec started", "user", req.user.GetName(), "groups", req.user.GetGroups(), "namespace", req.namespace,
		"sandbox", req.name, "command", o.command, "tty", o.tty, "stdin", o.stdin, "protocol", o.protocol)
	code, err := s.engine.ExecStream(ctx, t.containerID, spec)
	// A command that started is recorded however its stream ended, and
	// committed before the caller learns its exit status.
	if !errors.Is(err, docker.ErrExecNotCreated) {
		s.recordExec(ctx, req, t, o.command, started, code, measure)
	}
	for _, st := range []io.WriteCloser{session.streams.stdout, session.streams.stderr} {
		if st != nil {
			_ = st.Close()
		}
	}
	status := exitStatus(code, err)
	if b, mErr := json.Marshal(status); mErr == nil {
		_, _ = session.streams.status.Write(b)
	}
	_ = session.streams.status.Close()
	s.auditExec(ctx, req, t, o, code, err)
}

// awaitClientClose waits, at most statusLinger, for the client to close the
// connection, which it does once it has read the exit status. Closing it
// first loses the status when it is still on its way behind output the
// client has not read (the API server's proxy tears down both sides when one
// closes), and client-go takes a missing status for success: a command
// that exited 3 would look like it succeeded.
func awaitClientClose(conn httpstream.Connection) {
	select {
	case <-conn.CloseChan():
	case <-time.After(statusLinger):
	}
}

// awaitStreams collects the streams the options call for, by their
// streamType header, within streamWait.
func awaitStreams(ctx context.Context, opened <-chan httpstream.Stream, o execOptions) (map[string]httpstream.Stream, error) {
	want := map[string]bool{corev1.StreamTypeError: true, corev1.StreamTypeStdin: o.stdin, corev1.StreamTypeStdout: o.stdout,
		corev1.StreamTypeStderr: o.stderr, corev1.StreamTypeResize: o.tty}
	need := 0
	for _, w := range want {
		if w {
			need++
		}
	}
	got := map[string]httpstream.Stream{}
	timeout := time.NewTimer(streamWait)
	defer timeout.Stop()
	for len(got) < need {
		select {
		case st := <-opened:
			kind := st.Headers().Get(corev1.StreamType)
			if !want[kind] || got[kind] != nil {
				_ = st.Reset()
				return nil, fmt.Errorf("unexpected stream %q", kind)
			}
			got[kind] = st
		case <-timeout.C:
			return nil, fmt.Errorf("the client opened %d of %d streams within %s", len(got), need, streamWait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return got, nil
}

// readSizes passes on the terminal sizes the client sends, JSON objects
// {"Width": w, "Height": h} one after another.
func readSizes(ctx context.Context, st io.Reader, sizes chan<- docker.TerminalSize) {
	defer close(sizes)
	dec := json.NewDecoder(st)
	for {
		var size struct{ Width, Height uint16 }
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case sizes <- docker.TerminalSize{Width: size.Width, Height: size.Height}:
		case <-ctx.Done():
			return
		}
	}
}

// exitStatus is the Status of protocol v4's error stream: Success, a
// NonZeroExitCode with the code, or the error. Clients read the code as
// one byte (client-go fails with "invalid exit code value" otherwise): a
// code the engine reports outside 0-255 (-1 as 4294967295, for a command
// whose end it did not see) is an error that says so.
func exitStatus(code int, err error) metav1.Status {
	switch {
	case err != nil:
		return metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonInternalError}
	case code == 0:
		return metav1.Status{Status: metav1.StatusSuccess}
	case code < 0 || code > 255:
		return metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError,
			Message: fmt.Sprintf("the command ended without an exit code (the engine reported %d)", code)}
	default:
		return metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %d", code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type:    remotecommand.ExitCodeCauseType,
				Message: strconv.Itoa(code),
			}}},
		}
	}
}

// commandText is a command for a person to read: each word quoted, cut at
// a length an Event note holds.
func commandText(command []string) string {
	words := make([]string, len(command))
	for i, c := range command {
		words[i] = strconv.Quote(c)
	}
	text := strings.Join(words, " ")
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	return text
}
