package access_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"afe.dev/sandbox/access"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/tartest"
)

// filesRequest is a request to the files subresource, through the API
// server, as the config's user.
func filesRequest(ctx context.Context, cfg *rest.Config, method, ns, name, p string, body io.Reader) *http.Response {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	u := *base
	u.Path = path.Join("/apis", access.Group, access.Version, "namespaces", ns, "sandboxes", name, "files")
	u.RawQuery = url.Values{"path": {p}}.Encode()
	hc, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	Expect(err).NotTo(HaveOccurred())
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	return resp
}

// tarOf is a tar of one file.
func tarOf(name string, data []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	Expect(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o6755, Size: int64(len(data)), Typeflag: tar.TypeReg, Uid: 0, Gid: 0})).To(Succeed())
	_, err := tw.Write(data)
	Expect(err).NotTo(HaveOccurred())
	Expect(tw.Close()).To(Succeed())
	return buf.Bytes()
}

// untarOne is the name and content of the tar's only file.
func untarOne(r io.Reader) (string, []byte) {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	Expect(err).NotTo(HaveOccurred())
	data, err := io.ReadAll(tr)
	Expect(err).NotTo(HaveOccurred())
	_, err = tr.Next()
	Expect(err).To(MatchError(io.EOF))
	return hdr.Name, data
}

func status(resp *http.Response) (int, string) {
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(body)
}

var _ = Describe("Files through the access API", func() {
	forEachRuntime(func(runtime string) {
		box := "files-" + runtime
		var ctx context.Context
		var cancel context.CancelFunc
		var container string

		BeforeAll(func() {
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
			DeferCleanup(func() { cancel() })
			sbx := readySandboxUnder(ctx, nsA, box, runtime, nil)
			container = sbx.Status.ContainerName // only to look from outside, with the docker CLI
		})

		It("moves a 50 MiB file up and down byte for byte, owned by the sandbox's user", func() {
			data := make([]byte, 50<<20)
			rng := rand.NewChaCha8([32]byte{1, 2, 3})
			_, _ = rng.Read(data)
			want := sha256.Sum256(data)

			code, body := status(filesRequest(ctx, alice, http.MethodPost, nsA, box, "/workspace", bytes.NewReader(tarOf("big.bin", data))))
			Expect(code).To(Equal(http.StatusOK), body)

			res := execIn(ctx, alice, nsA, box, []string{"sh", "-c", "stat -c '%u:%g %a %s' /workspace/big.bin; sha256sum /workspace/big.bin"}, remotecommand.StreamOptions{})
			Expect(res.err).NotTo(HaveOccurred())
			lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
			Expect(lines).To(HaveLen(2))
			// Owner the sandbox's user; setuid and setgid dropped.
			Expect(lines[0]).To(Equal("1000:1000 755 52428800"))
			Expect(strings.Fields(lines[1])[0]).To(Equal(strings.ToLower(hexOf(want[:]))))

			resp := filesRequest(ctx, alice, http.MethodGet, nsA, box, "/workspace/big.bin", nil)
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			name, got := untarOne(resp.Body)
			_ = resp.Body.Close()
			Expect(name).To(Equal("big.bin"))
			Expect(sha256.Sum256(got)).To(Equal(want))
		})

		It("cannot be led outside /workspace by a symlink the workload planted, either way", func() {
			res := execIn(ctx, alice, nsA, box, []string{"sh", "-c", "ln -s /etc /workspace/etc-link && mkdir -p /workspace/d && ln -s /etc/passwd /workspace/d/passwd"}, remotecommand.StreamOptions{})
			Expect(res.err).NotTo(HaveOccurred())
			Expect(res.code).To(Equal(0), res.stderr)

			for _, p := range []string{"/workspace/etc-link/passwd", "/workspace/etc-link", "/workspace/d/passwd", "/workspace/../etc/passwd", "/etc/passwd"} {
				code, body := status(filesRequest(ctx, alice, http.MethodGet, nsA, box, p, nil))
				Expect(code).To(BeNumerically(">=", 400), "download of %s: %s", p, body)
				Expect(body).NotTo(ContainSubstring("root:x:0:0"))
			}
			for _, p := range []string{"/workspace/etc-link", "/workspace/etc-link/", "/etc"} {
				code, body := status(filesRequest(ctx, alice, http.MethodPost, nsA, box, p, bytes.NewReader(tarOf("planted", []byte("x")))))
				Expect(code).To(BeNumerically(">=", 400), "upload into %s: %s", p, body)
			}
			// Looking from outside: nothing was written in the container's /etc.
			out, err := dockertest.Exec(container, "ls", "/etc")
			Expect(err).NotTo(HaveOccurred())
			Expect(out).NotTo(ContainSubstring("planted"))
		})

		It("refuses a transfer larger than --access-max-file-bytes before writing anything", func() {
			big := make([]byte, maxFileBytes+1)
			code, body := status(filesRequest(ctx, alice, http.MethodPost, nsA, box, "/workspace", bytes.NewReader(tarOf("too-big.bin", big))))
			Expect(code).To(Equal(http.StatusRequestEntityTooLarge), body)
			res := execIn(ctx, alice, nsA, box, []string{"ls", "/workspace"}, remotecommand.StreamOptions{})
			Expect(res.stdout).NotTo(ContainSubstring("too-big.bin"))
		})

		It("refuses a sparse tar that would expand past --access-max-file-bytes, writing nothing in /workspace or the spool", func() {
			// 10 KiB of tar whose one entry archive/tar reads as a 1.5 GiB
			// file of zeros (GNU's PAX sparse format 1.0).
			crafted := tartest.SparsePAX("big-sparse.bin", 1610612736, bytes.Repeat([]byte{'a'}, 7000))
			Expect(len(crafted)).To(BeNumerically("<=", 10<<10))
			// The spool is watched while the upload runs: its largest file.
			watch, stop := context.WithCancel(ctx)
			largest := make(chan int64, 1)
			go func() {
				var most int64
				defer func() { largest <- most }()
				for watch.Err() == nil {
					entries, _ := os.ReadDir(spoolDir)
					for _, e := range entries {
						if info, err := e.Info(); err == nil && info.Size() > most {
							most = info.Size()
						}
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			code, body := status(filesRequest(ctx, alice, http.MethodPost, nsA, box, "/workspace", bytes.NewReader(crafted)))
			stop()
			Expect(code).To(Equal(http.StatusBadRequest), body)
			Expect(body).To(ContainSubstring("sparse"))
			Expect(<-largest).To(BeNumerically("<=", len(crafted)), "the spool grew past the upload's own size")
			Expect(os.ReadDir(spoolDir)).To(BeEmpty())
			res := execIn(ctx, alice, nsA, box, []string{"sh", "-c", "ls -a /workspace; du -s /workspace"}, remotecommand.StreamOptions{})
			Expect(res.err).NotTo(HaveOccurred())
			Expect(res.stdout).NotTo(ContainSubstring("big-sparse.bin"))
			Expect(res.stdout).NotTo(ContainSubstring("GNUSparseFile"))
			Eventually(func(g Gomega) {
				// Refused at its header: what was read of the tar until then.
				g.Expect(eventNotes(ctx, g, nsA, box)).To(ContainElement(MatchRegexp(
					`^User "alice" uploaded into "/workspace" \(\d+ bytes of tar, nothing written\): failed: tar entry "big-sparse.bin" is sparse`)))
			}).Should(Succeed())

			// The same in GNU's old format.
			code, body = status(filesRequest(ctx, alice, http.MethodPost, nsA, box, "/workspace",
				bytes.NewReader(tartest.SparseGNU("big-sparse.bin", 1610612736, []byte("a")))))
			Expect(code).To(Equal(http.StatusBadRequest), body)
			Expect(os.ReadDir(spoolDir)).To(BeEmpty())
		})

		It("answers 403 to a user of another namespace, both ways, and records each transfer", func() {
			code, _ := status(filesRequest(ctx, bob, http.MethodGet, nsA, box, "/workspace/big.bin", nil))
			Expect(code).To(Equal(http.StatusForbidden))
			code, _ = status(filesRequest(ctx, bob, http.MethodPost, nsA, box, "/workspace", bytes.NewReader(tarOf("x", nil))))
			Expect(code).To(Equal(http.StatusForbidden))
			Eventually(func(g Gomega) {
				g.Expect(eventNotes(ctx, g, nsA, box)).To(ContainElements(
					`User "alice" uploaded into "/workspace" (52430336 bytes of tar, 52428800 bytes of files written): done`,
					`User "alice" downloaded "/workspace/big.bin" (52430336 bytes of tar, 52428800 bytes of files sent): done`,
				))
			}).Should(Succeed())
		})
	}, Ordered)
})

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
