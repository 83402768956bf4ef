package access_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// attemptLogRequest reads one attempt's log (not followed) as the
// config's user.
func attemptLogRequest(ctx context.Context, cfg *rest.Config, ns, name string, attempt int) *http.Response {
	return accessGet(ctx, cfg, url.Values{"attempt": {strconv.Itoa(attempt)}}.Encode(), "namespaces", ns, "runs", name, "log")
}

// Each user follows logs and moves files in the namespace of its own, and
// nowhere else; nobody without credentials does anything.
var _ = Describe("Logs and files per namespace", Ordered, func() {
	var ctx context.Context
	var cancel context.CancelFunc
	var run *afev1.Run

	BeforeAll(func() {
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		DeferCleanup(func() { cancel() })
		readySandbox(ctx, nsB, "bobs")
		run = &afev1.Run{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "bobs-run"},
			Spec:       afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: "bobs"}, Script: "for i in 1 2 3; do echo bob $i; sleep 1; done"},
		}
		Expect(adminClient.Create(ctx, run)).To(Succeed())
	})

	It("lets bob follow a Run's log in his namespace to its end", func() {
		resp := openLog(ctx, bob, nsB, run.Name)
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data)).To(Equal("bob 1\nbob 2\nbob 3\n"))
		Expect(resp.Header.Get(accessv1.AttemptHeader)).To(Equal("1"))

		By("answering 404 for an attempt the Run never had")
		code, body := status(attemptLogRequest(ctx, bob, nsB, run.Name, 2))
		Expect(code).To(Equal(http.StatusNotFound), body)
		Expect(body).To(ContainSubstring("has no log of attempt 2"))
		var st metav1.Status
		Expect(json.Unmarshal([]byte(body), &st)).To(Succeed())
		Expect(accessv1.ReasonOf(&st)).To(Equal(accessv1.ReasonLogNotFound), "the reason a client acts on is in the Status's details")
		code, body = status(attemptLogRequest(ctx, bob, nsB, run.Name, 1))
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(Equal("bob 1\nbob 2\nbob 3\n"))
	})

	It("lets bob copy files up and down in his namespace", func() {
		data := bytes.Repeat([]byte("bob's bytes\x00\xff\n"), 10_000)
		code, body := status(filesRequest(ctx, bob, http.MethodPost, nsB, "bobs", "/workspace", bytes.NewReader(tarOf("bob.bin", data))))
		Expect(code).To(Equal(http.StatusOK), body)
		resp := filesRequest(ctx, bob, http.MethodGet, nsB, "bobs", "/workspace/bob.bin", nil)
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		name, got := untarOne(resp.Body)
		_ = resp.Body.Close()
		Expect(name).To(Equal("bob.bin"))
		Expect(bytes.Equal(got, data)).To(BeTrue(), "the file came back different")
		res := execIn(ctx, bob, nsB, "bobs", []string{"stat", "-c", "%u:%g", "/workspace/bob.bin"}, remotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.stdout).To(Equal("1000:1000\n"))
	})

	It("answers 403 to alice in bob's namespace, for logs and files", func() {
		for _, follow := range []bool{false, true} {
			code, body := status(logRequest(ctx, alice, nsB, run.Name, follow))
			Expect(code).To(Equal(http.StatusForbidden), "log (follow %t): %s", follow, body)
		}
		code, body := status(filesRequest(ctx, alice, http.MethodGet, nsB, "bobs", "/workspace/bob.bin", nil))
		Expect(code).To(Equal(http.StatusForbidden), body)
		code, body = status(filesRequest(ctx, alice, http.MethodPost, nsB, "bobs", "/workspace", bytes.NewReader(tarOf("alice-was-here", []byte("x")))))
		Expect(code).To(Equal(http.StatusForbidden), body)
		res := execIn(ctx, bob, nsB, "bobs", []string{"ls", "/workspace"}, remotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.stdout).NotTo(ContainSubstring("alice-was-here"))
	})

	It("refuses an anonymous caller logs and files, in either namespace", func() {
		refused := Or(Equal(http.StatusUnauthorized), Equal(http.StatusForbidden))
		for _, ns := range []string{nsA, nsB} {
			for _, follow := range []bool{false, true} {
				code, body := status(logRequest(ctx, anonymous(), ns, run.Name, follow))
				Expect(code).To(refused, "log in %s (follow %t): %s", ns, follow, body)
			}
			code, body := status(filesRequest(ctx, anonymous(), http.MethodGet, ns, "bobs", "/workspace/bob.bin", nil))
			Expect(code).To(refused, "download in %s: %s", ns, body)
			code, body = status(filesRequest(ctx, anonymous(), http.MethodPost, ns, "bobs", "/workspace", bytes.NewReader(tarOf("anonymous-was-here", []byte("x")))))
			Expect(code).To(refused, "upload in %s: %s", ns, body)
		}
		res := execIn(ctx, bob, nsB, "bobs", []string{"ls", "/workspace"}, remotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.stdout).NotTo(ContainSubstring("anonymous-was-here"))
	})

	It("refuses a download larger than --access-max-file-bytes, with nothing of it sent", func() {
		// A file as large as the bound: its tar (with its header) is not.
		res := execIn(ctx, bob, nsB, "bobs", []string{"sh", "-c", "head -c " + strconv.Itoa(maxFileBytes) + " /dev/zero > /workspace/huge.bin"}, remotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.code).To(Equal(0), res.stderr)
		resp := filesRequest(ctx, bob, http.MethodGet, nsB, "bobs", "/workspace/huge.bin", nil)
		code, body := status(resp)
		Expect(code).To(Equal(http.StatusRequestEntityTooLarge), "%.200s", body)
		Expect(resp.Header.Get("Content-Type")).NotTo(Equal("application/x-tar"))
		Expect(body).To(ContainSubstring("--access-max-file-bytes"))
		Expect(len(body)).To(BeNumerically("<", 4096), "part of the tar was sent")

		By("recording the refusal on the Sandbox")
		Eventually(func(g Gomega) {
			g.Expect(eventNotes(ctx, g, nsB, "bobs")).To(ContainElement(And(
				HavePrefix(`User "bob" downloaded "/workspace/huge.bin" (`), ContainSubstring("nothing sent): failed: "),
				ContainSubstring("the transfer is larger than the manager's bound"))))
		}).Should(Succeed())

		By("still serving a smaller file")
		Expect(execIn(ctx, bob, nsB, "bobs", []string{"rm", "/workspace/huge.bin"}, remotecommand.StreamOptions{}).code).To(Equal(0))
		resp = filesRequest(ctx, bob, http.MethodGet, nsB, "bobs", "/workspace/bob.bin", nil)
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		_ = resp.Body.Close()
	})
})
