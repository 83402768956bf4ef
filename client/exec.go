package client

import (
	"context"
	"errors"
	"io"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// ExecOptions are a command to exec in a sandbox and its streams.
type ExecOptions struct {
	// Command is the command and its arguments (exec form).
	Command []string
	// Stdin, when set, is passed to the command.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output apart (with TTY,
	// everything comes on Stdout).
	Stdout, Stderr io.Writer
	// TTY runs the command on a terminal.
	TTY bool
	// Sizes, with TTY, gives the terminal's size as it changes; nil
	// leaves the engine's default.
	Sizes remotecommand.TerminalSizeQueue
}

// Exec runs the command in the sandbox through the access API, as the
// sandbox's user, in /workspace, with the sandbox's env, and returns its
// exit code: a non-zero exit is no error. It speaks the Kubernetes
// streaming protocols as kubectl exec does (WebSocket, then SPDY when the
// upgrade fails) and ends with ctx. While the access API is not served
// (the API server answers 503 for it until its aggregator reaches a
// starting manager) the exec is tried again, with backoff, until ctx's
// deadline (or the client's unavailable wait); only an exec that opened
// no stream is, so a command is never run twice.
func (c *Client) Exec(ctx context.Context, sandbox string, o ExecOptions) (int, error) {
	if len(o.Command) == 0 {
		return -1, &Error{Kind: KindInvalid, Reason: string(accessv1.ReasonInvalidRequest), Message: "exec needs a command"}
	}
	req := c.subresource("POST", accessv1.ResourceSandboxes, sandbox, accessv1.SubresourceExec).
		SpecificallyVersionedParams(&corev1.PodExecOptions{
			Command: o.Command,
			Stdin:   o.Stdin != nil,
			Stdout:  o.Stdout != nil || o.TTY,
			Stderr:  o.Stderr != nil && !o.TTY,
			TTY:     o.TTY,
		}, clientgoscheme.ParameterCodec, corev1.SchemeGroupVersion)
	stdout := o.Stdout
	if stdout == nil && o.TTY {
		stdout = io.Discard
	}
	opts := remotecommand.StreamOptions{Stdin: o.Stdin, Stdout: stdout, Tty: o.TTY, TerminalSizeQueue: o.Sizes}
	if !o.TTY {
		opts.Stderr = o.Stderr
	}
	code := -1
	err := c.untilServed(ctx, func() (bool, error) {
		var retry bool
		var err error
		code, retry, err = c.execOnce(ctx, req, opts)
		return retry, err
	})
	return code, wrap(err, "exec in sandbox %s", sandbox)
}

// execOnce is one attempt of an exec: its exit code, or its error and
// whether the access API certainly did not get it because it is not
// served now (try again).
func (c *Client) execOnce(ctx context.Context, req *rest.Request, opts remotecommand.StreamOptions) (int, bool, error) {
	executor, h, err := c.executor(req.URL())
	if err != nil {
		return -1, false, err
	}
	err = executor.StreamWithContext(ctx, opts)
	var exit utilexec.CodeExitError
	switch {
	case err == nil:
		return 0, false, nil
	case errors.As(err, &exit):
		return exit.Code, false, nil
	}
	refusal := c.refusal(ctx, req, err)
	return -1, ctx.Err() == nil && notServed(err, h) && !answered(refusal), refusal
}

// executor is kubectl exec's: WebSocket (a GET, v5.channel.k8s.io), and
// SPDY (a POST) when the WebSocket upgrade fails, as it does through a
// proxy that cannot upgrade to it or for a caller RBAC grants only create
// on sandboxes/exec. The handshake records what SPDY's upgrade was
// answered.
func (c *Client) executor(u *url.URL) (remotecommand.Executor, *handshake, error) {
	transport, upgrader, err := spdy.RoundTripperFor(c.cfg)
	if err != nil {
		return nil, nil, err
	}
	h := &handshake{Upgrader: upgrader}
	spdyExec, err := remotecommand.NewSPDYExecutorForTransports(transport, h, "POST", u)
	if err != nil {
		return nil, nil, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", u.String())
	if err != nil {
		return nil, nil, err
	}
	executor, err := remotecommand.NewFallbackExecutor(ws, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	return executor, h, err
}

// refusal is the Status the access API refused the exec with: an upgrade
// the server answered with a Status reaches the SPDY executor as text
// only, so the same request is asked again without the upgrade. The
// server checks the caller, the sandbox and its env first and executes
// nothing without the streaming protocol; when it finds nothing to
// refuse (it asks for the protocol), err stands.
func (c *Client) refusal(ctx context.Context, req *rest.Request, err error) error {
	if ctx.Err() != nil {
		return err
	}
	st := req.Do(ctx).Error()
	var se apierrors.APIStatus
	if !errors.As(st, &se) {
		return err
	}
	status := se.Status()
	if accessv1.ReasonOf(&status) == accessv1.ReasonInvalidRequest {
		return err
	}
	return st
}
