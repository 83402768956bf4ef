package controllers

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"afe.dev/sandbox/access"
	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	afeclient "afe.dev/sandbox/client"
	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/internal/usage"
)

// The suite's API server aggregates the manager's access API, so that the
// specs read what sandboxes use where kubectl afe top and the clients read
// it (sandboxusages), and writes an audit log of every write to a
// sandbox.afe.dev object, so that a spec counts them.
var (
	// testUsage is what the manager's usage collector measured.
	testUsage = &usage.Store{}
	// auditLog is the API server's audit log.
	auditLog string
	// testConfig is the suite's API server, as its admin.
	testConfig *rest.Config
)

// auditPolicy logs every write to a sandbox.afe.dev object, status
// included, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
    resources: [{group: sandbox.afe.dev}]
  - level: None
`

// configureAPIServer makes the suite's API server an aggregator with an
// audit log of the writes to sandbox.afe.dev objects, under dir.
func configureAPIServer(api *envtest.APIServer, dir string) error {
	if err := controlplane.EnableAggregation(api, filepath.Join(dir, "front-proxy")); err != nil {
		return err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	auditLog = filepath.Join(dir, "audit.log")
	api.Configure().Set("audit-policy-file", policy).Set("audit-log-path", auditLog)
	return nil
}

// addAccessAPI adds the access API to the manager, serving the usage the
// collector keeps in testUsage.
func addAccessAPI(mgr ctrl.Manager, engine access.Engine) error {
	server, err := access.New(mgr, engine, access.Options{
		BindAddress: "127.0.0.1:0", Service: types.NamespacedName{Namespace: "afe-system", Name: "afe-access"},
		Register: true, ExternalName: "localhost", Instance: instance, Telemetry: testTelemetry, Usage: testUsage,
	})
	if err != nil {
		return err
	}
	return mgr.Add(server)
}

// afeClients are the Go clients of the suite's admin, by namespace.
var afeClients sync.Map

// afeClient is the Go client (package client) of the suite's admin in ns.
func afeClient(ns string) *afeclient.Client {
	if c, ok := afeClients.Load(ns); ok {
		return c.(*afeclient.Client)
	}
	c, err := afeclient.New(testConfig, afeclient.WithNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	afeClients.Store(ns, c)
	return c
}

// servedUsage is what the sandbox uses as the access API serves it
// (sandboxusages/NAME), measured as this very Sandbox; it fails g until
// there is a measurement.
func servedUsage(ctx context.Context, g Gomega, sbx *afev1.Sandbox) accessv1.SandboxUsage {
	u, err := afeClient(sbx.Namespace).Usage(ctx, sbx.Name)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	if sbx.UID != "" {
		g.ExpectWithOffset(1, u.UID).To(Equal(sbx.UID), "measured as this Sandbox")
	}
	return *u
}

// auditEvent is what a spec reads of an audit event.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// what is the event as a line of a failure's message.
func (e auditEvent) what() string {
	res := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		res += "/" + e.ObjectRef.Subresource
	}
	return e.RequestReceivedTimestamp.Format(time.RFC3339Nano) + " " + e.Verb + " " + res + " " + e.ObjectRef.Name
}

// auditedWrites are the writes to sandbox.afe.dev objects of ns the API
// server received from since on, by anyone, as its audit log says.
func auditedWrites(ns string, since time.Time) []string {
	f, err := os.Open(auditLog)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		ExpectWithOffset(1, json.Unmarshal(sc.Bytes(), &e)).To(Succeed())
		if e.Stage == "ResponseComplete" && e.ObjectRef.Namespace == ns && !e.RequestReceivedTimestamp.Before(since) {
			out = append(out, e.what())
		}
	}
	ExpectWithOffset(1, sc.Err()).NotTo(HaveOccurred())
	return out
}
