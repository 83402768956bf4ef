package access_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// logRequest reads the Run's log through the API server as the config's
// user.
func logRequest(ctx context.Context, cfg *rest.Config, ns, name string, follow bool) *http.Response {
	query := ""
	if follow {
		query = url.Values{"follow": {"true"}}.Encode()
	}
	return accessGet(ctx, cfg, query, "namespaces", ns, "runs", name, "log")
}

func newRun(ctx context.Context, ns, name, script string) *afev1.Run {
	run := &afev1.Run{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: "logs"}, Script: script},
	}
	Expect(adminClient.Create(ctx, run)).To(Succeed())
	return run
}

// openLog follows the Run's log once the Run has started.
func openLog(ctx context.Context, cfg *rest.Config, ns, name string) *http.Response {
	var resp *http.Response
	Eventually(func() int {
		resp = logRequest(ctx, cfg, ns, name, true)
		if resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
		}
		return resp.StatusCode
	}).Should(Equal(http.StatusOK))
	return resp
}

var _ = Describe("Live Run logs through the access API", Ordered, func() {
	var ctx context.Context
	var cancel context.CancelFunc

	BeforeAll(func() {
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		DeferCleanup(func() { cancel() })
		readySandbox(ctx, nsA, "logs")
	})

	It("shows a Run's lines while it runs, and its end", func() {
		run := newRun(ctx, nsA, "ticker", "for i in 1 2 3 4 5 6; do echo line $i; sleep 1; done")
		resp := openLog(ctx, alice, nsA, run.Name)
		defer func() { _ = resp.Body.Close() }()
		lines := bufio.NewReader(resp.Body)
		first, err := lines.ReadString('\n')
		Expect(err).NotTo(HaveOccurred())
		Expect(first).To(Equal("line 1\n"))
		// The line came while the Run was running.
		Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(run), run)).To(Succeed())
		Expect(run.Status.Phase.Terminal()).To(BeFalse(), "the Run had ended before its first line was shown")
		rest, err := io.ReadAll(lines)
		Expect(err).NotTo(HaveOccurred())
		Expect(first + string(rest)).To(Equal("line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n"))
		Eventually(func() bool {
			Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(run), run)).To(Succeed())
			return run.Status.Phase.Terminal()
		}).Should(BeTrue())
	})

	It("gives the whole output of a Run that prints 5 MiB, beyond status.output's 32 KiB", func() {
		const line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"
		run := newRun(ctx, nsA, "big", "yes 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde | head -c 5242880")
		resp := openLog(ctx, alice, nsA, run.Name)
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(len(data)).To(Equal(5 << 20))
		Expect(string(data) == strings.Repeat(line, (5<<20)/len(line))).To(BeTrue(), "the log differs from what the Run printed")
	})

	It("lets afe-sandbox-viewer read Run logs, and neither exec nor move files", func() {
		carol := addUserWithRole("carol", nsA, "afe-sandbox-viewer")
		resp := logRequest(ctx, carol, nsA, "ticker", false)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
		Expect(string(body)).To(HavePrefix("line 1\n"))
		res := execIn(ctx, carol, nsA, "logs", []string{"true"}, remotecommand.StreamOptions{})
		Expect(res.err).To(MatchError(ContainSubstring("forbidden")))
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			code, _ := status(filesRequest(ctx, carol, method, nsA, "logs", "/workspace", nil))
			Expect(code).To(Equal(http.StatusForbidden), method)
		}
	})

	It("answers 403 to a user of another namespace", func() {
		resp := logRequest(ctx, bob, nsA, "ticker", false)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
	})
})
