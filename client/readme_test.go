package client_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
)

// readmeGo is the README's Go example as written, between the README
// markers (the spec below checks the README holds exactly these lines).
func readmeGo(ctx context.Context, cfg *rest.Config) error {
	// README begin
	c, err := client.New(cfg, client.WithNamespace("team-a"))
	if err != nil {
		return err
	}
	if _, err := c.CreateTicket(ctx, "ticket-42", client.Image("afe/busybox:dev"), client.Egress("allowed.test")); err != nil {
		return err
	}
	defer func() { _ = c.DestroyTicket(ctx, "ticket-42") }()
	out, err := c.Run(ctx, "ticket-42", client.Script(`echo '{"tests": 12, "failed": 0}'`))
	if err != nil {
		return err
	}
	fmt.Println(out.OK, out.Result["tests"]) // true 12
	return nil
	// README end
}

var _ = Describe("The README's Go example", func() {
	It("is the README's own, and runs as written: a ticket with egress, a script, its JSON result, the end", func() {
		source, err := os.ReadFile("readme_test.go")
		Expect(err).NotTo(HaveOccurred())
		readme, err := os.ReadFile(filepath.Join("..", "README.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(goBlock(string(readme))).To(Equal(between(string(source), "\t// README begin\n", "\t// README end\n")),
			"the README's ```go block differs from readmeGo in client/readme_test.go")

		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		Expect(adminClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})).To(Succeed())
		engine := addUser("workflow-engine", "team-a")
		printed := captureStdout(func() { Expect(readmeGo(ctx, engine)).To(Succeed()) })
		Expect(printed).To(Equal("true 12\n"))
		// Destroyed at the end, with everything it made.
		err = adminClient.Get(ctx, keyOf("team-a", "ticket-42"), &afev1.Ticket{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ticket is still there: %v", err)
	})
})

// goBlock is the README's one ```go block, each line as the function
// body holds it (one tab deeper).
func goBlock(readme string) string {
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(readme, -1)
	Expect(blocks).To(HaveLen(1), "README.md holds one ```go block")
	var b strings.Builder
	for _, line := range strings.SplitAfter(blocks[0][1], "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("\t")
		}
		b.WriteString(line)
	}
	return b.String()
}

// between is the text of s from the line after begin to the line before end.
func between(s, begin, end string) string {
	_, rest, ok := strings.Cut(s, begin)
	Expect(ok).To(BeTrue(), "no %q", begin)
	body, _, ok := strings.Cut(rest, end)
	Expect(ok).To(BeTrue(), "no %q", end)
	return body
}

// captureStdout is what f prints on the process's stdout.
func captureStdout(f func()) string {
	r, w, err := os.Pipe()
	Expect(err).NotTo(HaveOccurred())
	stdout := os.Stdout
	os.Stdout = w
	read := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	defer func() { os.Stdout = stdout }()
	f()
	_ = w.Close()
	return <-read
}
