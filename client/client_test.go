package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"afe.dev/sandbox/access"
	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
	"afe.dev/sandbox/test/dockertest"
)

var _ = Describe("The Go client, as alice in her namespace", Ordered, func() {
	var (
		c   *client.Client
		ctx context.Context
	)
	const box = "box"

	BeforeAll(func() {
		ctx = context.Background()
		var err error
		c, err = client.New(alice, client.WithNamespace(nsA))
		Expect(err).NotTo(HaveOccurred())
		By("creating a Sandbox and waiting for Ready from a watch")
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		sbx, err := c.CreateSandbox(wctx, box, client.Image(dockertest.TestImage), client.User("1000:1000"))
		Expect(err).NotTo(HaveOccurred())
		Expect(sbx.Status.Phase).To(Equal(afev1.SandboxReady))
	})

	It("runs a script and reads its outcome: exit code, output, JSON result, attempts", func() {
		o, err := c.Run(ctx, box, client.Script(`echo hello; echo oops >&2; echo '{"answer": 42, "ok": true}'; exit 3`))
		Expect(err).NotTo(HaveOccurred())
		Expect(o.OK).To(BeFalse())
		Expect(o.ExitCode).To(BeEquivalentTo(3))
		Expect(o.TimedOut).To(BeFalse())
		Expect(o.Output).To(ContainSubstring("hello\n"))
		Expect(o.Output).To(ContainSubstring("oops\n"))
		Expect(o.Result).To(Equal(map[string]any{"answer": float64(42), "ok": true}))
		Expect(o.Attempts).To(BeEquivalentTo(1))

		By("reading the Run's log")
		rc, err := c.Logs(ctx, o.Run, client.LogOptions{Follow: true})
		Expect(err).NotTo(HaveOccurred())
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data)).To(ContainSubstring("hello\n"))

		By("answering an attempt with no log with reason LogNotFound, never by its message")
		_, err = c.Logs(ctx, o.Run, client.LogOptions{Attempt: 5})
		Expect(client.IsNotFound(err)).To(BeTrue(), "%v", err)
		Expect(client.ReasonOf(err)).To(Equal(string(accessv1.ReasonLogNotFound)))
	})

	It("runs a command (exec form) that succeeds", func() {
		o, err := c.Run(ctx, box, client.Cmd("echo", "a b"))
		Expect(err).NotTo(HaveOccurred())
		Expect(o.OK).To(BeTrue())
		Expect(o.ExitCode).To(BeEquivalentTo(0))
		Expect(o.Output).To(Equal("a b\n"))
	})

	It("ends a Run that outlives its timeout as TimedOut, with nothing of it left", func() {
		start := time.Now()
		o, err := c.Run(ctx, box, client.Script("sleep 300").Timeout(2*time.Second))
		Expect(client.IsTimedOut(err)).To(BeTrue(), "%v", err)
		Expect(client.ReasonOf(err)).To(Equal(afev1.TimedOutReason))
		Expect(o).NotTo(BeNil())
		Expect(o.TimedOut).To(BeTrue())
		Expect(o.OK).To(BeFalse())
		Expect(time.Since(start)).To(BeNumerically("<", 60*time.Second))
	})

	It("bounds a Run by the context's deadline", func() {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := c.Run(rctx, box, client.Script("sleep 300"))
		Expect(client.IsTimedOut(err)).To(BeTrue(), "%v", err)
	})

	It("execs with stdin, and stdout and stderr apart", func() {
		var stdout, stderr bytes.Buffer
		code, err := c.Exec(ctx, box, client.ExecOptions{
			Command: []string{"sh", "-c", "cat; echo err >&2; exit 3"},
			Stdin:   strings.NewReader("from stdin\n"), Stdout: &stdout, Stderr: &stderr,
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(3))
		Expect(stdout.String()).To(Equal("from stdin\n"))
		Expect(stderr.String()).To(Equal("err\n"))
	})

	It("execs on a terminal, with stdin, over WebSocket", func() {
		execOnATerminal(ctx, c, box, "alice-tty")
		Eventually(execNotes(ctx, nsA, box)).Should(ContainElement(
			`User "alice" ran "sh" "-c" "test -t 0 && echo on-a-tty; read x; echo got:$x" "alice-tty" (tty true): exit code 0, over WebSocket v5.channel.k8s.io`))
	})

	It("execs on a terminal, with stdin, over SPDY for a caller RBAC grants only create on sandboxes/exec", func() {
		Expect(adminClient.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "exec-create-only"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"sandbox.afe.dev"}, Resources: []string{"sandboxes"}, Verbs: []string{"get"}},
				{APIGroups: []string{"access.sandbox.afe.dev"}, Resources: []string{"sandboxes/exec"}, Verbs: []string{"create"}},
			},
		})).To(Succeed())
		carol, err := client.New(addUserWithRole("carol", nsA, "exec-create-only"), client.WithNamespace(nsA))
		Expect(err).NotTo(HaveOccurred())
		// The API server refuses carol's WebSocket (a GET, and she may not
		// get sandboxes/exec): the client falls back to SPDY.
		execOnATerminal(ctx, carol, box, "carol-tty")
		Eventually(execNotes(ctx, nsA, box)).Should(ContainElement(
			`User "carol" ran "sh" "-c" "test -t 0 && echo on-a-tty; read x; echo got:$x" "carol-tty" (tty true): exit code 0, over SPDY v4.channel.k8s.io`))
	})

	It("copies a 50 MiB file in and out, whole", func() {
		dir := GinkgoT().TempDir()
		local := filepath.Join(dir, "big.bin")
		data := make([]byte, 50<<20)
		_, _ = rand.Read(data)
		Expect(os.WriteFile(local, data, 0o644)).To(Succeed())
		sum := sha256.Sum256(data)

		Expect(c.Files(box).Put(ctx, local, "/workspace/")).To(Succeed())
		var out bytes.Buffer
		code, err := c.Exec(ctx, box, client.ExecOptions{Command: []string{"sha256sum", "/workspace/big.bin"}, Stdout: &out})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(0))
		Expect(out.String()).To(HavePrefix(hex.EncodeToString(sum[:])))

		back := filepath.Join(dir, "back.bin")
		Expect(c.Files(box).Get(ctx, "/workspace/big.bin", back)).To(Succeed())
		got, err := os.ReadFile(back)
		Expect(err).NotTo(HaveOccurred())
		Expect(sha256.Sum256(got)).To(Equal(sum))

		By("putting a reader and opening a file")
		Expect(c.Files(box).PutReader(ctx, "/workspace/note.txt", strings.NewReader("a note\n"), 0o600)).To(Succeed())
		rc, err := c.Files(box).Open(ctx, "/workspace/note.txt")
		Expect(err).NotTo(HaveOccurred())
		note, err := io.ReadAll(rc)
		_ = rc.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(note)).To(Equal("a note\n"))

		By("answering a missing path with reason PathNotFound")
		err = c.Files(box).Get(ctx, "/workspace/nothing-here", filepath.Join(dir, "x"))
		Expect(client.IsNotFound(err)).To(BeTrue(), "%v", err)
		Expect(client.ReasonOf(err)).To(Equal(string(accessv1.ReasonPathNotFound)))
	})

	It("copies a tree in and out", func() {
		dir := GinkgoT().TempDir()
		tree := filepath.Join(dir, "tree")
		Expect(os.MkdirAll(filepath.Join(tree, "sub"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(tree, "sub", "f.txt"), []byte("leaf\n"), 0o644)).To(Succeed())
		Expect(c.Files(box).Put(ctx, tree, "/workspace/")).To(Succeed())
		Expect(c.Files(box).Get(ctx, "/workspace/tree", filepath.Join(dir, "copy"))).To(Succeed())
		Expect(os.ReadFile(filepath.Join(dir, "copy", "sub", "f.txt"))).To(Equal([]byte("leaf\n")))
	})

	It("reads the command telemetry of the sandbox", func() {
		list, err := c.Telemetry(ctx, client.TelemetryQuery{Sandbox: box})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).NotTo(BeEmpty())
		var commands []string
		for _, r := range list.Items {
			commands = append(commands, strings.Join(r.Command, " "))
		}
		Expect(commands).To(ContainElement("sha256sum /workspace/big.bin"))
	})

	It("is Forbidden to bob, who works in another namespace", func() {
		cb, err := client.New(bob, client.WithNamespace(nsA))
		Expect(err).NotTo(HaveOccurred())
		_, err = cb.Exec(ctx, box, client.ExecOptions{Command: []string{"true"}, Stdout: io.Discard})
		Expect(client.IsForbidden(err)).To(BeTrue(), "%v", err)
		_, err = cb.Run(ctx, box, client.Cmd("true"))
		Expect(client.IsForbidden(err)).To(BeTrue(), "%v", err)
		err = cb.Files(box).Get(ctx, "/workspace/note.txt", filepath.Join(GinkgoT().TempDir(), "n"))
		Expect(client.IsForbidden(err)).To(BeTrue(), "%v", err)
		_, err = cb.Telemetry(ctx, client.TelemetryQuery{Sandbox: box})
		Expect(client.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(client.IsForbidden(cb.DestroySandbox(ctx, box))).To(BeTrue())
	})

	It("answers an exec in a sandbox that does not exist with NotFound and its reason", func() {
		_, err := c.Exec(ctx, "no-such-box", client.ExecOptions{Command: []string{"true"}, Stdout: io.Discard})
		Expect(client.IsNotFound(err)).To(BeTrue(), "%v", err)
		Expect(client.ReasonOf(err)).To(Equal(string(accessv1.ReasonSandboxNotFound)))
	})

	It("suspends and resumes the sandbox, its workspace kept", func() {
		Expect(c.Suspend(ctx, box)).To(Succeed())
		Eventually(func(g Gomega) {
			sbx := &afev1.Sandbox{}
			g.Expect(c.Kube().Get(ctx, keyOf(nsA, box), sbx)).To(Succeed())
			g.Expect(sbx.Status.Phase).To(Equal(afev1.SandboxSuspended))
		}).Should(Succeed())
		_, err := c.Exec(ctx, box, client.ExecOptions{Command: []string{"true"}, Stdout: io.Discard})
		Expect(client.IsNotReady(err)).To(BeTrue(), "%v", err)
		Expect(client.ReasonOf(err)).To(Equal(string(accessv1.ReasonSandboxNotReady)))

		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		Expect(c.Resume(rctx, box)).To(Succeed())
		_, err = c.WaitSandboxReady(rctx, box)
		Expect(err).NotTo(HaveOccurred())
		o, err := c.Run(ctx, box, client.Cmd("cat", "/workspace/note.txt"))
		Expect(err).NotTo(HaveOccurred())
		Expect(o.Output).To(Equal("a note\n"))
	})

	It("snapshots the workspace and restores it into a new sandbox", func() {
		snap, err := c.Snapshot(ctx, box)
		Expect(err).NotTo(HaveOccurred())
		Expect(snap).NotTo(BeEmpty())
		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		_, err = c.Restore(rctx, "restored", snap, client.Image(dockertest.TestImage), client.User("1000:1000"))
		Expect(err).NotTo(HaveOccurred())
		o, err := c.Run(ctx, "restored", client.Cmd("cat", "/workspace/note.txt"))
		Expect(err).NotTo(HaveOccurred())
		Expect(o.Output).To(Equal("a note\n"))
		Expect(c.DestroySandbox(rctx, "restored")).To(Succeed())
	})

	It("destroys the sandbox, and again without an error", func() {
		dctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		Expect(c.DestroySandbox(dctx, box)).To(Succeed())
		Expect(c.DestroySandbox(dctx, box)).To(Succeed())
		Expect(dockertest.Objects(afev1.LabelSandbox + "=" + box + "," + afev1.LabelNamespace + "=" + nsA)).To(BeEmpty())
	})

	It("creates a Ticket, runs in its sandbox and destroys it twice", func() {
		tctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		tk, err := c.CreateTicket(tctx, "tk", client.Image(dockertest.TestImage), client.User("1000:1000"), client.Env("GREETING", "hi"))
		Expect(err).NotTo(HaveOccurred())
		Expect(tk.Status.Phase).To(Equal(afev1.TicketReady))
		o, err := c.Run(tctx, "tk", client.Script(`echo "{\"greeting\": \"$GREETING\"}"`))
		Expect(err).NotTo(HaveOccurred())
		Expect(o.Result).To(HaveKeyWithValue("greeting", "hi"))
		Expect(c.DestroyTicket(tctx, "tk")).To(Succeed())
		Expect(c.DestroyTicket(tctx, "tk")).To(Succeed())
	})

	It("merges lanes and runs CI with MergeAndCI, the report as a struct", func() {
		mctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		defer cancel()
		_, err := c.CreateSandbox(mctx, "lanes", client.Image(dockertest.GitImage), client.User("1000:1000"))
		Expect(err).NotTo(HaveOccurred())
		var out bytes.Buffer
		code, err := c.Exec(mctx, "lanes", client.ExecOptions{Stdout: &out, Stderr: &out, Command: []string{"sh", "-c", `set -e
cd /workspace && git init -q -b main repo && cd repo && echo base > base.txt
git add -A && git -c user.name=t -c user.email=t@t commit -qm base
git worktree add -q -b a ../lanes/a && git worktree add -q -b b ../lanes/b
echo a > ../lanes/a/a.txt && echo b > ../lanes/b/b.txt`}})
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(0), out.String())

		report, err := c.MergeAndCI(mctx, "lanes", client.MergeOptions{
			Lanes: []string{"a", "b"}, BaseRef: "main", CIScript: "test -f a.txt && test -f b.txt && echo ci-ok",
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(report.OK).To(BeTrue())
		Expect(report.Merged).To(BeTrue())
		Expect(report.CIPassed).To(BeTrue())
		Expect(report.CIOutput).To(ContainSubstring("ci-ok"))
		Expect(report.Conflicts).To(BeEmpty())
		Expect(report.IntegrationBranch).To(Equal("integration"))
		Expect(report.Lanes).To(HaveLen(2))
		Expect(c.DestroySandbox(mctx, "lanes")).To(Succeed())
	})

	It("reports a sandbox that cannot become Ready with its condition's reason", func() {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_, err := c.CreateSandbox(wctx, "bad", client.Image(dockertest.TestImage), client.Runtime("no-such-runtime"))
		Expect(err).To(HaveOccurred())
		Expect(client.ReasonOf(err)).To(Equal(afev1.RuntimeNotAllowedReason), "%v", err)
		Expect(c.DestroySandbox(ctx, "bad")).To(Succeed())
	})
})

// syncBuffer is a bytes.Buffer for one writer and readers elsewhere.
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

// execOnATerminal execs a command on a terminal in the box, with stdin
// that stays open as a person's would: what is typed comes after the
// command's first output.
func execOnATerminal(ctx context.Context, c *client.Client, box, marker string) {
	stdinR, stdinW := io.Pipe()
	defer func() { _ = stdinW.Close() }()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		code, err := c.Exec(ctx, box, client.ExecOptions{
			Command: []string{"sh", "-c", "test -t 0 && echo on-a-tty; read x; echo got:$x", marker},
			Stdin:   stdinR, Stdout: out, TTY: true,
		})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		done <- err
	}()
	Eventually(out.String).Should(ContainSubstring("on-a-tty"))
	_, _ = stdinW.Write([]byte("typed\n"))
	Eventually(out.String).Should(ContainSubstring("got:typed"))
	Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
}

// execNotes reads the notes of the Events the access API wrote about the
// sandbox's execs, for Eventually.
func execNotes(ctx context.Context, ns, sandbox string) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(adminClient.List(ctx, list, ctrlclient.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, ev := range list.Items {
			if ev.Reason == access.ExecReason && ev.Regarding.Name == sandbox && ev.Regarding.Kind == "Sandbox" {
				notes = append(notes, ev.Note)
			}
		}
		return notes
	}
}
