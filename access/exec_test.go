package access_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/access"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/test/dockertest"
)

// execResult is what an exec gave back.
type execResult struct {
	stdout, stderr string
	code           int
	err            error
}

// execURL is the exec subresource of the sandbox, through the API server.
func execURL(cfg *rest.Config, ns, name string, command []string, stdin, tty bool) *url.URL {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	u := *base
	u.Path = path.Join("/apis", access.Group, access.Version, "namespaces", ns, "sandboxes", name, "exec")
	q := url.Values{"command": command, "stdout": {"true"}}
	if stdin {
		q.Set("stdin", "true")
	}
	if tty {
		q.Set("tty", "true")
	} else {
		q.Set("stderr", "true")
	}
	u.RawQuery = q.Encode()
	return &u
}

// execIn runs the command in the sandbox as the config's user, with
// client-go's remotecommand executor over SPDY.
func execIn(ctx context.Context, cfg *rest.Config, ns, name string, command []string, opts remotecommand.StreamOptions) execResult {
	return execOver(ctx, spdyProtocol, cfg, ns, name, command, opts)
}

// spdyProtocol stands for SPDY in execOver; the others are WebSocket's.
const spdyProtocol = "SPDY"

// execOver is execIn over the protocol: SPDY (a POST), or WebSocket (a
// GET) offering that one subprotocol.
func execOver(ctx context.Context, protocol string, cfg *rest.Config, ns, name string, command []string, opts remotecommand.StreamOptions) execResult {
	u := execURL(cfg, ns, name, command, opts.Stdin != nil, opts.Tty)
	executor, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if protocol != spdyProtocol {
		executor, err = remotecommand.NewWebSocketExecutorForProtocols(cfg, "GET", u.String(), protocol)
	}
	Expect(err).NotTo(HaveOccurred())
	var stdout, stderr bytes.Buffer
	if opts.Stdout == nil {
		opts.Stdout = &stdout
	}
	if !opts.Tty {
		opts.Stderr = &stderr
	}
	err = executor.StreamWithContext(ctx, opts)
	res := execResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		res.code, res.err = exit.Code, nil
	}
	return res
}

var _ = Describe("Exec through the access API", func() {
	forEachRuntime(func(runtime string) {
		box := "box-" + runtime
		var ctx context.Context
		var cancel context.CancelFunc

		BeforeAll(func() {
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
			DeferCleanup(func() { cancel() })
			readySandboxUnder(ctx, nsA, box, runtime, nil)
			readySandboxUnder(ctx, nsB, box, runtime, nil)
		})

		It("runs a command with stdin, stdout, stderr and its exit code, as the sandbox's user in /workspace", func() {
			res := execIn(ctx, alice, nsA, box, []string{"sh", "-c", "id -u; id -g; pwd; tr a-z A-Z; echo oops >&2; exit 7"},
				remotecommand.StreamOptions{Stdin: strings.NewReader("from stdin\n")})
			Expect(res.err).NotTo(HaveOccurred())
			Expect(res.stdout).To(Equal("1000\n1000\n/workspace\nFROM STDIN\n"))
			Expect(res.stderr).To(Equal("oops\n"))
			Expect(res.code).To(Equal(7))

			res = execIn(ctx, bob, nsB, box, []string{"true"}, remotecommand.StreamOptions{})
			Expect(res.err).NotTo(HaveOccurred())
			Expect(res.code).To(Equal(0))
		})

		It("refuses a user in the other's namespace (403), and an anonymous caller", func() {
			for _, tc := range []struct {
				cfg *rest.Config
				ns  string
			}{{bob, nsA}, {alice, nsB}} {
				res := execIn(ctx, tc.cfg, tc.ns, box, []string{"true"}, remotecommand.StreamOptions{})
				Expect(res.err).To(HaveOccurred())
				Expect(apierrors.IsForbidden(res.err) || strings.Contains(res.err.Error(), "forbidden")).To(BeTrue(), "%v", res.err)
			}
			res := execIn(ctx, anonymous(), nsA, box, []string{"true"}, remotecommand.StreamOptions{})
			Expect(res.err).To(HaveOccurred())
			Expect(res.err.Error()).To(Or(ContainSubstring("forbidden"), ContainSubstring("Unauthorized")))
		})

		It("refuses a caller reaching its port directly without the front proxy's certificate, whatever headers it sends", func() {
			u := url.URL{Scheme: "https", Host: accessServer.Addr().String(),
				Path: path.Join("/apis", access.Group, access.Version, "namespaces", nsA, "sandboxes", box, "exec"), RawQuery: "command=true&stdout=true"}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("X-Remote-User", "alice")
			req.Header.Set("X-Remote-Group", "system:masters")
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test reaches its own server
			resp, err := hc.Do(req)
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), string(body))
		})

		It("authorizes a caller reaching its port directly with its own identity: bob's client certificate gets 403 in alice's namespace", func() {
			cert, err := tls.X509KeyPair(bob.CertData, bob.KeyData)
			Expect(err).NotTo(HaveOccurred())
			roots := x509.NewCertPool()
			Expect(roots.AppendCertsFromPEM(accessServer.CABundle())).To(BeTrue())
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12,
			}}}
			for ns, want := range map[string]int{nsA: http.StatusForbidden, nsB: http.StatusBadRequest} {
				// A plain POST: authorized, it is refused for lacking the
				// streaming upgrade (400); unauthorized, 403 comes first.
				u := url.URL{Scheme: "https", Host: accessServer.Addr().String(),
					Path: path.Join("/apis", access.Group, access.Version, "namespaces", ns, "sandboxes", box, "exec"), RawQuery: "command=true&stdout=true"}
				resp, err := hc.Post(u.String(), "", nil)
				Expect(err).NotTo(HaveOccurred())
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				Expect(resp.StatusCode).To(Equal(want), "%s: %s", ns, body)
			}
		})

		It("gives a terminal that follows resizes", func() {
			terminalFollowsResizes(ctx, spdyProtocol, box)
		})

		It("applies a flood of terminal resizes as a bounded number of engine requests, the last size included", func() {
			const flood = 2000
			sizes := &sizeQueue{sizes: make(chan remotecommand.TerminalSize, flood+1)}
			for i := range flood {
				sizes.sizes <- remotecommand.TerminalSize{Width: uint16(40 + i%100), Height: uint16(10 + i%30)}
			}
			sizes.sizes <- remotecommand.TerminalSize{Width: 123, Height: 45}
			// Every engine request of the manager is counted by operation
			// (afe_docker_requests_total), the resizes too.
			resizes := func() float64 { return testutil.ToFloat64(docker.Requests.WithLabelValues("container_exec_resize")) }
			before, started := resizes(), time.Now()
			stdinR, stdinW := io.Pipe()
			out := &syncBuffer{}
			done := make(chan execResult, 1)
			go func() {
				defer GinkgoRecover()
				done <- execIn(ctx, alice, nsA, box, []string{"sh", "-c", "while read x; do stty size; done"},
					remotecommand.StreamOptions{Stdin: stdinR, Stdout: out, Tty: true, TerminalSizeQueue: sizes})
			}()
			// The last size is the terminal's, once the flood has passed.
			Eventually(func() string {
				_, _ = stdinW.Write([]byte("\n"))
				return out.String()
			}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(ContainSubstring("45 123"))
			Expect(sizes.sizes).To(BeEmpty())
			endShell(stdinW, sizes, done)
			elapsed := time.Since(started)
			calls := resizes() - before
			GinkgoWriter.Printf("%d sizes sent: %.0f engine resizes in %s\n", flood+1, calls, elapsed)
			Expect(calls).To(BeNumerically("<=", float64(elapsed/docker.ResizeInterval)+2))
		})

		It("ends an exec whose client stopped reading with a status the client can parse", func() {
			// The client takes the first piece of output, then reads nothing
			// for 10 s (its writer hangs), then refuses every write; the
			// command writes 20 MB, or 2 MB (which the connections' buffers
			// hold: it ends while the client is still stalled), and exits 3.
			for _, size := range []int{20000000, 2000000} {
				stalled := &stalledWriter{release: make(chan struct{})}
				time.AfterFunc(10*time.Second, func() { close(stalled.release) })
				res := execIn(ctx, alice, nsA, box, []string{"sh", "-c", fmt.Sprintf("yes | head -c %d; exit 3", size)}, remotecommand.StreamOptions{Stdout: stalled})
				if res.err != nil {
					Expect(res.err.Error()).NotTo(ContainSubstring("protocol error"), "%d bytes", size)
				} else {
					// Never a success: client-go takes a status that was lost
					// for one.
					Expect(res.code).To(Equal(3), "%d bytes", size)
				}
			}
		})

		It("kills an exec's busy loop at resources.cpuSeconds of CPU time", func() {
			// Under gVisor the limit the container starts with is not
			// enforced until a setrlimit: the access API re-arms it before
			// the command (runexec.RearmCPULimit), or this loop would spin
			// until the exec's context ends.
			burner := readySandboxUnder(ctx, nsA, "burner-"+runtime, runtime, func(sbx *afev1.Sandbox) {
				sbx.Spec.Resources.CPUSeconds = 2
			})
			DeferCleanup(func() { Expect(client.IgnoreNotFound(adminClient.Delete(context.Background(), burner))).To(Succeed()) })
			execCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
			defer stop()
			started := time.Now()
			res := execIn(execCtx, alice, nsA, burner.Name, []string{"sh", "-c", "echo $(ulimit -S -t) $(ulimit -H -t); while :; do :; done"}, remotecommand.StreamOptions{})
			elapsed := time.Since(started)
			GinkgoWriter.Printf("%s: the busy loop ended after %s of wall time: code %d, %q\n", runtime, elapsed, res.code, res.stdout)
			Expect(res.err).NotTo(HaveOccurred(), "the loop was not killed within %s", elapsed)
			// gVisor has no /proc/self/limits: the shell's own view.
			Expect(res.stdout).To(Equal("2 3\n"), "soft and hard limits")
			Expect(res.code).To(Equal(128+24), "SIGXCPU")
			Expect(elapsed).To(BeNumerically("<", time.Minute), "killed near 2 s of CPU time, not by the test's timeout")
		})

		It("records each exec as an Event on the Sandbox naming the user, the command and the outcome", func() {
			res := execIn(ctx, alice, nsA, box, []string{"sh", "-c", "exit 3"}, remotecommand.StreamOptions{})
			Expect(res.code).To(Equal(3))
			Eventually(func(g Gomega) {
				g.Expect(eventNotes(ctx, g, nsA, box)).To(ContainElement(`User "alice" ran "sh" "-c" "exit 3" (tty false): exit code 3, over SPDY v4.channel.k8s.io`))
			}).Should(Succeed())
		})
	}, Ordered)
})

// eventNotes are the notes of the access API's Events on the Sandbox.
func eventNotes(ctx context.Context, g Gomega, ns, sandbox string) []string {
	list := &eventsv1.EventList{}
	g.Expect(adminClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.ReportingController == "afe.dev/access" && ev.Regarding.Name == sandbox && ev.Regarding.Kind == "Sandbox" {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// sizeQueue hands remotecommand the sizes the test sends.
type sizeQueue struct {
	sizes chan remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.sizes
	if !ok {
		return nil
	}
	return &s
}

// stalledWriter takes one write, hangs on the next until release, then
// fails: a client that stopped reading.
type stalledWriter struct {
	writes  int
	release chan struct{}
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes == 1 {
		return len(p), nil
	}
	<-w.release
	return 0, errors.New("the client stopped reading")
}

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ = Describe("Exec in a sandbox its idle timeout suspended", func() {
	forEachRuntime(func(runtime string) {
		It("resumes it and runs the command", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			sbx := &afev1.Sandbox{
				ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "idle-" + runtime},
				Spec: afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{
					Image: dockertest.TestImage, User: "1000:1000", Runtime: runtime,
					Lifecycle: &afev1.SandboxLifecycle{IdleTimeoutSeconds: 3},
				}},
			}
			Expect(adminClient.Create(ctx, sbx)).To(Succeed())
			Eventually(func() afev1.SandboxPhase {
				Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(sbx), sbx)).To(Succeed())
				return sbx.Status.Phase
			}, 2*time.Minute).Should(Equal(afev1.SandboxSuspended))
			res := execIn(ctx, alice, nsA, "idle-"+runtime, []string{"echo", "back"}, remotecommand.StreamOptions{})
			Expect(res.err).NotTo(HaveOccurred())
			Expect(res.stdout).To(Equal("back\n"))
			Expect(adminClient.Delete(ctx, sbx)).To(Succeed())
		})
	})
})

var _ = Describe("Exec with the sandbox's declared env", func() {
	It("gives each exec the declared env, a Secret's value included, which the container's config does not hold, and refuses an exec once the Secret is gone", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "exec-creds"},
			Data: map[string][]byte{"token": []byte("s3cr3t-exec")}}
		Expect(adminClient.Create(ctx, secret)).To(Succeed())
		sbx := readySandboxUnder(ctx, nsA, "env-box", "", func(s *afev1.Sandbox) {
			s.Spec.Env = []afev1.EnvVar{{Name: "GREETING", Value: "hello"},
				{Name: "API_TOKEN", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: "exec-creds", Key: "token"}}}}
		})
		DeferCleanup(func() { _ = adminClient.Delete(context.Background(), sbx) })

		res := execIn(ctx, alice, nsA, "env-box", []string{"sh", "-c", `printf '%s %s' "$GREETING" "$API_TOKEN"`}, remotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.code).To(Equal(0))
		Expect(res.stdout).To(Equal("hello s3cr3t-exec"))

		By("holding none of it in the container's config")
		c, err := dockertest.Inspect(sbx.Status.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Join(c.Config.Env, "\n")).NotTo(Or(ContainSubstring("s3cr3t-exec"), ContainSubstring("GREETING")))

		By("refusing an exec, with the reason, once the Secret is gone; nothing is executed")
		Expect(adminClient.Delete(ctx, secret)).To(Succeed())
		res = execIn(ctx, alice, nsA, "env-box", []string{"sh", "-c", "touch /workspace/ran"}, remotecommand.StreamOptions{})
		Expect(res.err).To(HaveOccurred())
		Expect(res.err.Error()).To(And(ContainSubstring(afev1.SecretNotFoundReason), ContainSubstring("Secret exec-creds does not exist")))
		_, err = dockertest.Exec(sbx.Status.ContainerName, "test", "!", "-e", "/workspace/ran")
		Expect(err).NotTo(HaveOccurred(), "the refused command ran")
	})
})

// terminalFollowsResizes runs a shell on a terminal in the sandbox over
// the protocol, and checks that it sees the size the client gives first
// and then a new one.
func terminalFollowsResizes(ctx context.Context, protocol, box string) {
	sizes := &sizeQueue{sizes: make(chan remotecommand.TerminalSize, 2)}
	sizes.sizes <- remotecommand.TerminalSize{Width: 80, Height: 24}
	stdinR, stdinW := io.Pipe()
	out := &syncBuffer{}
	done := make(chan execResult, 1)
	go func() {
		defer GinkgoRecover()
		done <- execOver(ctx, protocol, alice, nsA, box, []string{"sh", "-c", "while read x; do stty size; done"},
			remotecommand.StreamOptions{Stdin: stdinR, Stdout: out, Tty: true, TerminalSizeQueue: sizes})
	}()
	// Each line typed prints the terminal's size.
	Eventually(func() string {
		_, _ = stdinW.Write([]byte("\n"))
		return out.String()
	}).WithPolling(200 * time.Millisecond).Should(ContainSubstring("24 80"))
	sizes.sizes <- remotecommand.TerminalSize{Width: 132, Height: 50}
	Eventually(func() string {
		_, _ = stdinW.Write([]byte("\n"))
		return out.String()
	}).WithPolling(200 * time.Millisecond).Should(ContainSubstring("50 132"))
	endShell(stdinW, sizes, done)
}

// endShell types ^D at the start of a line, which ends a shell's read
// loop and the shell, and waits for the exec to end well.
func endShell(stdinW *io.PipeWriter, sizes *sizeQueue, done <-chan execResult) {
	_, _ = stdinW.Write([]byte("\x04"))
	_ = stdinW.Close()
	close(sizes.sizes)
	var res execResult
	Eventually(done).WithTimeout(30 * time.Second).Should(Receive(&res))
	Expect(res.err).NotTo(HaveOccurred())
}
