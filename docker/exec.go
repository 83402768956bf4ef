package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// ExecSpec is a command to run in a running container.
type ExecSpec struct {
	Cmd        []string
	User       string
	WorkingDir string
	Env        []string
	// Stdout and Stderr receive the command's output; nil discards it.
	Stdout io.Writer
	Stderr io.Writer
}

// Exec runs a command in the container and returns its exit code once its
// output ends. Ending ctx stops waiting at once, even while a process the
// command started holds its output open, but does not stop the command: the
// engine has no way to kill an exec, so callers that need a deadline must
// arrange the kill themselves.
func (c *Client) Exec(ctx context.Context, containerName string, spec ExecSpec) (int, error) {
	c.count("container_exec_create")
	created, err := c.api.ContainerExecCreate(ctx, containerName, container.ExecOptions{
		Cmd:          spec.Cmd,
		User:         spec.User,
		WorkingDir:   spec.WorkingDir,
		Env:          spec.Env,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return -1, wrap(err, "exec in "+containerName)
	}
	c.own.Store(created.ID, struct{}{})
	c.count("container_exec_attach")
	attach, err := c.api.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, wrap(err, "attach to exec in "+containerName)
	}
	defer attach.Close()
	stdout, stderr := orDiscard(spec.Stdout), orDiscard(spec.Stderr)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, attach.Reader)
		copied <- err
	}()
	watch, unwatch := context.WithCancel(ctx)
	defer unwatch()
	stopped := c.watchStop(watch, containerName)
	select {
	case <-ctx.Done():
		return -1, abandon(&attach, copied, ctx.Err())
	case err := <-stopped:
		return -1, abandon(&attach, copied, err)
	case err := <-copied:
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("read exec output: %w", err)
		}
	}
	// The stream ends a little before the engine records the exit code.
	return c.execExitCode(ctx, created.ID, containerName)
}

// abandon closes the stream of an exec no longer waited for (a process may
// hold it open for ever), and nothing is written to Stdout or Stderr once
// Exec has returned; it returns why.
func abandon(attach interface {
	CloseWrite() error
	Close()
}, copied <-chan error, why error) error {
	_ = attach.CloseWrite()
	attach.Close()
	if err := <-copied; err != nil && !errors.Is(err, io.EOF) {
		// A read cut short by the close: expected here.
		return errors.Join(why, err)
	}
	return why
}

// Under gVisor (seen with runsc 20221219) the engine may never end the output of an
// exec whose container stopped under it (its shell had a child: seen with
// `sh -c 'sleep 120'`, not with `sleep 120`): an exec still streaming after
// execStopGrace is abandoned once its container no longer runs, looked at
// every execStopPoll when it runs under a user-space kernel. Under runc the
// stream ends with the container: one inspect for an exec that lasts, none
// for the others.
const (
	execStopGrace = 2 * time.Second
	execStopPoll  = 2 * time.Second
)

// watchStop reports, once, that the container of a lasting exec stopped or
// went away: looked at once after execStopGrace whatever the runtime, then
// every execStopPoll under a user-space kernel only. It stops watching with
// ctx (Exec ends it as it returns).
func (c *Client) watchStop(ctx context.Context, container string) <-chan error {
	stopped := make(chan error, 1)
	go func() {
		wait := time.NewTimer(execStopGrace)
		defer wait.Stop()
		userSpace := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-wait.C:
			}
			have, err := c.InspectContainer(ctx, container)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrNotFound) || (err == nil && !have.Running) {
				// Nothing of the exec can run any more, whatever the
				// runtime (a gVisor sandbox that died may be gone, and
				// made again, before the first look).
				stopped <- fmt.Errorf("exec in %s: the container stopped under it, and the engine left the output open", container)
				return
			}
			if !userSpace {
				if err != nil || have.Runtime == "" {
					return
				}
				if rt, err := c.Runtime(ctx, have.Runtime); err != nil || !rt.UserSpaceKernel() {
					return
				}
				userSpace = true
			}
			wait.Reset(execStopPoll)
		}
	}()
	return stopped
}

func errNotFoundf(format string, args ...any) error {
	return cerrdefs.ErrNotFound.WithMessage(fmt.Sprintf(format, args...))
}

// ExecInfo is what the engine tells of an exec.
type ExecInfo struct {
	ID          string
	ContainerID string
	// Cmd is the command: its entrypoint and arguments.
	Cmd      []string
	User     string
	Running  bool
	ExitCode int
}

// InspectExec tells of an exec by its ID; ErrNotFound when the engine no
// longer has it.
func (c *Client) InspectExec(ctx context.Context, id string) (ExecInfo, error) {
	c.count("container_exec_inspect")
	e, err := c.api.ContainerExecInspect(ctx, id)
	if err != nil {
		return ExecInfo{}, wrap(err, "inspect exec "+id)
	}
	info := ExecInfo{ID: e.ExecID, ContainerID: e.ContainerID, Running: e.Running, ExitCode: e.ExitCode}
	// The engine's inspect of an exec does not give its user or command
	// in the typed answer of every client version: read the raw fields.
	info.Cmd, info.User = c.execProcess(ctx, id)
	return info, nil
}

// OwnExec tells whether this client created the exec.
func (c *Client) OwnExec(id string) bool {
	_, ok := c.own.Load(id)
	return ok
}

// ForgetExec drops an exec of this client from its memory, once its end
// was seen.
func (c *Client) ForgetExec(id string) { c.own.Delete(id) }

// execProcess reads an exec's command and user from the engine's raw
// answer (the typed one leaves them out); empty when it cannot.
func (c *Client) execProcess(ctx context.Context, id string) ([]string, string) {
	u, err := client.ParseHostURL(c.api.DaemonHost())
	if err != nil {
		return nil, ""
	}
	scheme, host := "http", u.Host
	if u.Scheme == "unix" || u.Scheme == "npipe" {
		host = "api.moby.localhost" // the socket is dialled; the name is a placeholder
	}
	hc := c.api.HTTPClient()
	if tr, ok := hc.Transport.(*http.Transport); ok && tr.TLSClientConfig != nil {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		scheme+"://"+host+"/v"+c.api.ClientVersion()+"/exec/"+url.PathEscape(id)+"/json", nil)
	if err != nil {
		return nil, ""
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, ""
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		ProcessConfig struct {
			Entrypoint string   `json:"entrypoint"`
			Arguments  []string `json:"arguments"`
			User       string   `json:"user"`
		}
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) != nil {
		return nil, ""
	}
	return append([]string{body.ProcessConfig.Entrypoint}, body.ProcessConfig.Arguments...), body.ProcessConfig.User
}
