package access_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/telemetry"
)

// telemetryRequest reads the records of the sandbox (or the ticket) of
// that name through the API server as the config's user.
func telemetryRequest(ctx context.Context, cfg *rest.Config, ns, resource, name string) (*telemetry.RecordList, int) {
	return telemetryGet[telemetry.RecordList](ctx, cfg, ns, resource, name, "")
}

// telemetryGet reads the telemetry subresource of the sandbox (or the
// ticket) of that name, with the query, through the API server as the
// config's user: the list when it answered 200, and its status code.
func telemetryGet[L any](ctx context.Context, cfg *rest.Config, ns, resource, name, query string) (*L, int) {
	resp := accessGet(ctx, cfg, query, "namespaces", ns, resource, name, "telemetry")
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	list := new(L)
	Expect(json.NewDecoder(resp.Body).Decode(list)).To(Succeed())
	return list, resp.StatusCode
}

var _ = Describe("Command telemetry through the access API", func() {
	forEachRuntime(func(runtime string) {
		box := "tele-" + runtime
		var ctx context.Context
		var cancel context.CancelFunc
		BeforeAll(func() {
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
			DeferCleanup(func() { cancel() })
			readySandboxUnder(ctx, nsA, box, runtime, nil)
			readySandboxUnder(ctx, nsB, box, runtime, nil)
		})

		It("records an exec through the API with the caller's name, and serves a sandbox's records to its own namespace only", func() {
			res := execIn(ctx, alice, nsA, box, []string{"sh", "-c", "echo hello; exit 3"}, remotecommand.StreamOptions{})
			Expect(res.err).NotTo(HaveOccurred())
			Expect(res.code).To(Equal(3))
			var recs []telemetry.Record
			Eventually(func() []telemetry.Record {
				list, code := telemetryRequest(ctx, alice, nsA, "sandboxes", box)
				Expect(code).To(Equal(http.StatusOK))
				recs = list.Items
				return recs
			}).Should(HaveLen(1))
			// Once: the engine's exec events of the API's own exec are not
			// recorded again as an engine exec.
			Consistently(func() int {
				list, _ := telemetryRequest(ctx, alice, nsA, "sandboxes", box)
				return len(list.Items)
			}, "3s", "500ms").Should(Equal(1))
			r := recs[0]
			Expect(r.Source).To(Equal(telemetry.SourceAPI))
			Expect(r.StartedBy).To(Equal("user alice"))
			Expect(r.Command).To(Equal([]string{"sh", "-c", "echo hello; exit 3"}))
			Expect(r.ExitCode).To(Equal(3))
			Expect(r.User).To(Equal("1000:1000"))
			Expect(r.Seq).To(BeEquivalentTo(1))
			Expect(r.OutputBytes).To(BeEquivalentTo(len("hello\n")))
			Expect(r.Namespace).To(Equal(nsA))

			By("the ticket's records: a sandbox without ticket is its own")
			list, code := telemetryRequest(ctx, alice, nsA, "tickets", box)
			Expect(code).To(Equal(http.StatusOK))
			Expect(list.Items).To(HaveLen(1))

			By("refusing the other namespace and anonymous callers")
			_, code = telemetryRequest(ctx, bob, nsA, "sandboxes", box)
			Expect(code).To(Equal(http.StatusForbidden))
			_, code = telemetryRequest(ctx, alice, nsB, "tickets", box)
			Expect(code).To(Equal(http.StatusForbidden))
			_, code = telemetryRequest(ctx, anonymous(), nsA, "sandboxes", box)
			Expect(code).To(BeElementOf(http.StatusForbidden, http.StatusUnauthorized))
		})

		It("records 200 commands of 4 sandboxes at once, Runs, API execs and raw engine execs, each sequence without gaps", func() {
			const sandboxes, runs, apiExecs, engineExecs = 4, 15, 15, 20 // 50 per sandbox
			var sbxs []*afev1.Sandbox
			for i := 0; i < sandboxes; i++ {
				sbxs = append(sbxs, readySandboxUnder(ctx, nsA, fmt.Sprintf("many-%s-%d", runtime, i), runtime, nil))
			}
			var wg sync.WaitGroup
			for _, sbx := range sbxs {
				wg.Add(3)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					var created []*afev1.Run
					for j := 0; j < runs; j++ {
						run := &afev1.Run{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: fmt.Sprintf("%s-%d", sbx.Name, j)},
							Spec: afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: sbx.Name}, Command: []string{"true"}}}
						Expect(adminClient.Create(ctx, run)).To(Succeed())
						created = append(created, run)
					}
					for _, run := range created {
						Eventually(func(g Gomega) {
							g.Expect(adminClient.Get(ctx, client.ObjectKeyFromObject(run), run)).To(Succeed())
							g.Expect(run.Status.Phase).To(Equal(afev1.RunCompleted))
						}, "2m").Should(Succeed())
					}
				}()
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					for j := 0; j < apiExecs; j++ {
						res := execIn(ctx, alice, nsA, sbx.Name, []string{"sh", "-c", fmt.Sprintf("exit %d", j%3)}, remotecommand.StreamOptions{})
						Expect(res.err).NotTo(HaveOccurred())
						Expect(res.code).To(Equal(j % 3))
					}
				}()
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					for j := 0; j < engineExecs; j++ {
						out, err := exec.Command("docker", "exec", sbx.Status.ContainerName, "true").CombinedOutput()
						Expect(err).NotTo(HaveOccurred(), string(out))
					}
				}()
			}
			wg.Wait()
			total := 0
			for _, sbx := range sbxs {
				var recs []telemetry.Record
				Eventually(func(g Gomega) {
					var err error
					recs, err = store.List(ctx, telemetry.Filter{Namespace: nsA, Sandbox: sbx.Name})
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(recs).To(HaveLen(runs+apiExecs+engineExecs), "the records of %s: %s", sbx.Name, recordsLacking(recs, sbx.Name, runs))
				}, "2m").Should(Succeed()) // generous: on a busy engine an engine exec's record waits for its inspect
				sources := map[string]int{}
				for k, r := range recs {
					Expect(r.Seq).To(BeEquivalentTo(k+1), "the sequence of %s has no gap", sbx.Name)
					Expect(r.SandboxUID).To(Equal(string(sbx.UID)))
					sources[r.Source]++
				}
				Expect(sources).To(Equal(map[string]int{telemetry.SourceRun: runs, telemetry.SourceAPI: apiExecs, telemetry.SourceEngine: engineExecs}))
				total += len(recs)
			}
			Expect(total).To(Equal(200))
			Expect(store.Dropped()).To(BeZero())
		})
	}, Ordered)
})

// recordsLacking says what the records of a sandbox of the spec above
// hold of each source, and which of its Runs (<sandbox>-<j>) have none.
func recordsLacking(recs []telemetry.Record, sandbox string, runs int) string {
	sources, recorded := map[string]int{}, map[string]bool{}
	for _, r := range recs {
		sources[r.Source]++
		recorded[r.Run] = true
	}
	var missing []string
	for j := 0; j < runs; j++ {
		if name := fmt.Sprintf("%s-%d", sandbox, j); !recorded[name] {
			missing = append(missing, name)
		}
	}
	return fmt.Sprintf("by source %v; Runs without a record %v; records dropped %d", sources, missing, store.Dropped())
}
