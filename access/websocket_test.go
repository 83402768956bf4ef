package access_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/rest"
	clientremotecommand "k8s.io/client-go/tools/remotecommand"
)

var _ = Describe("Exec over WebSocket", Ordered, func() {
	const box = "ws"
	var ctx context.Context
	var cancel context.CancelFunc

	BeforeAll(func() {
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		DeferCleanup(func() { cancel() })
		readySandbox(ctx, nsA, box)
	})

	It("runs a command over v5.channel.k8s.io with stdin, stdout and stderr apart and its exit code", func() {
		res := execOver(ctx, remotecommand.StreamProtocolV5Name, alice, nsA, box, []string{"sh", "-c", "id -u; pwd; tr a-z A-Z; echo oops >&2; exit 7"},
			clientremotecommand.StreamOptions{Stdin: strings.NewReader("from stdin\n")})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.stdout).To(Equal("1000\n/workspace\nFROM STDIN\n"))
		Expect(res.stderr).To(Equal("oops\n"))
		Expect(res.code).To(Equal(7))
	})

	It("speaks v4.channel.k8s.io, the protocol of Python's Kubernetes client, its exit status on channel 3", func() {
		res := execOver(ctx, remotecommand.StreamProtocolV4Name, alice, nsA, box, []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			clientremotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.stdout).To(Equal("out\n"))
		Expect(res.stderr).To(Equal("err\n"))
		Expect(res.code).To(Equal(3))
	})

	It("gives a terminal that follows resizes", func() {
		terminalFollowsResizes(ctx, remotecommand.StreamProtocolV5Name, box)
	})

	It("ends the exec when its client goes away, not when its command does", func() {
		// The client is gone 2 s into a command of 301 s: the exec's
		// record (its Event, written when the server ends the session)
		// comes long before the command would have ended.
		cctx, stop := context.WithCancel(ctx)
		time.AfterFunc(2*time.Second, stop)
		started := time.Now()
		res := execOver(cctx, remotecommand.StreamProtocolV5Name, alice, nsA, box, []string{"sleep", "301"}, clientremotecommand.StreamOptions{})
		Expect(res.err).To(HaveOccurred(), "the client stopped")
		Eventually(func(g Gomega) []string {
			var ended []string
			for _, note := range eventNotes(ctx, g, nsA, box) {
				if strings.Contains(note, `ran "sleep" "301"`) {
					ended = append(ended, note)
				}
			}
			return ended
		}).WithTimeout(60 * time.Second).Should(ContainElement(ContainSubstring("over WebSocket " + remotecommand.StreamProtocolV5Name)))
		Expect(time.Since(started)).To(BeNumerically("<", 90*time.Second), "the session outlived its client")
	})

	It("authorizes an exec over WebSocket as create: a role granting only get on sandboxes/exec runs nothing", func() {
		Expect(adminClient.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "exec-get-only"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"sandbox.afe.dev"}, Resources: []string{"sandboxes"}, Verbs: []string{"get"}},
				{APIGroups: []string{"access.sandbox.afe.dev"}, Resources: []string{"sandboxes/exec"}, Verbs: []string{"get"}},
			},
		})).To(Succeed())
		dave := addUserWithRole("dave", nsA, "exec-get-only")
		// The API server lets the GET through (dave may get sandboxes/exec);
		// the access API refuses it as a create.
		code, status := webSocketHandshake(ctx, dave, execURL(dave, nsA, box, []string{"touch", "ran-by-dave"}, false, false).String())
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(status.Message).To(ContainSubstring(`cannot create resource "sandboxes/exec"`))
		res := execOver(ctx, remotecommand.StreamProtocolV5Name, dave, nsA, box, []string{"touch", "ran-by-dave"}, clientremotecommand.StreamOptions{})
		Expect(res.err).To(HaveOccurred())
		res = execIn(ctx, dave, nsA, box, []string{"touch", "ran-by-dave"}, clientremotecommand.StreamOptions{})
		Expect(res.err).To(MatchError(ContainSubstring("forbidden")))
		// Nothing ran.
		res = execIn(ctx, alice, nsA, box, []string{"test", "-e", "ran-by-dave"}, clientremotecommand.StreamOptions{})
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.code).To(Equal(1), "a command ran for a user granted only get on sandboxes/exec")
	})

	It("refuses an exec over GET without a WebSocket upgrade, and a WebSocket without a protocol it speaks", func() {
		u := execURL(alice, nsA, box, []string{"true"}, false, false)
		hc, err := rest.HTTPClientFor(alice)
		Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		Expect(err).NotTo(HaveOccurred())
		resp, err := hc.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), string(body))
		Expect(string(body)).To(ContainSubstring("WebSocket upgrade"))

		code, status := webSocketHandshakeWith(ctx, alice, u.String(), "v3.channel.k8s.io")
		Expect(code).To(Equal(http.StatusBadRequest))
		Expect(status.Message).To(ContainSubstring(remotecommand.StreamProtocolV5Name))
	})
})

// webSocketHandshake asks for a WebSocket upgrade of the URL as the
// config's user, offering v5.channel.k8s.io, and returns the answer's code
// and, when it is a refusal, its Status.
func webSocketHandshake(ctx context.Context, cfg *rest.Config, url string) (int, metav1.Status) {
	return webSocketHandshakeWith(ctx, cfg, url, remotecommand.StreamProtocolV5Name)
}

func webSocketHandshakeWith(ctx context.Context, cfg *rest.Config, url, protocol string) (int, metav1.Status) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	tlsConfig = tlsConfig.Clone()
	// An upgrade needs HTTP/1.1.
	tlsConfig.NextProtos = []string{"http/1.1"}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", protocol)
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var status metav1.Status
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		Expect(json.Unmarshal(body, &status)).To(Succeed(), string(body))
	}
	return resp.StatusCode, status
}
