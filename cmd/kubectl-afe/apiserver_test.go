package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
	"afe.dev/sandbox/test/kubetest"
	"afe.dev/sandbox/test/testenv"
)

// apiServer starts a test control plane with the project's CRDs (no
// manager: what is tested here reads objects through the Kubernetes API
// alone) and returns a client and a kubeconfig of an administrator.
func apiServer(t *testing.T) (ctrlclient.Client, string) {
	t.Helper()
	testenv.RequireAssets(t, "kube-apiserver", "etcd")
	env, err := kubetest.Environment()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, afev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := ctrlclient.New(admin.Config(), ctrlclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, path
}

// The plugin against a real API server: completion of names, and top.
func TestAgainstAnAPIServer(t *testing.T) {
	c, kubeconfig := apiServer(t)
	ctx := context.Background()
	create := func(objs ...ctrlclient.Object) {
		t.Helper()
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	sandbox := func(ns, name, ticket string) *afev1.Sandbox {
		sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{Image: "busybox"}}}
		if ticket != "" {
			sbx.Spec.TicketRef = &afev1.TicketReference{Name: ticket}
		}
		return sbx
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}},
		sandbox("work", "box-a", ""), sandbox("work", "box-b", "t1"), sandbox("work", "web", ""), sandbox("elsewhere", "box-c", ""),
		&afev1.Ticket{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: "t1"},
			Spec: afev1.TicketSpec{Sandbox: afev1.SandboxTemplateSpec{Image: "busybox"}}},
		&afev1.Run{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: "build-1"},
			Spec: afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: "box-a"}, Script: "make"}})

	t.Run("completion", func(t *testing.T) { testCompletion(t, kubeconfig) })
	t.Run("top", func(t *testing.T) { testTopTicket(t, c, kubeconfig) })
}

// testCompletion: the commands that take a SANDBOX complete the names of
// the namespace's Sandboxes, logs those of its Runs, telemetry --ticket
// those of its Tickets, and cp a sandbox's name with a ":" after it.
func testCompletion(t *testing.T, kubeconfig string) {
	const (
		noFile        = ":4" // cobra.ShellCompDirectiveNoFileComp
		noSpaceNoFile = ":6" // and ShellCompDirectiveNoSpace
		files         = ":0" // cobra.ShellCompDirectiveDefault: the shell's, files
	)
	tests := map[string]struct {
		args []string
		want []string
	}{
		"exec SANDBOX":                   {args: []string{"exec", ""}, want: []string{"box-a", "box-b", "web", noFile}},
		"exec, by what is typed":         {args: []string{"exec", "bo"}, want: []string{"box-a", "box-b", noFile}},
		"-n: that namespace's":           {args: []string{"-n", "elsewhere", "exec", ""}, want: []string{"box-c", noFile}},
		"exec, nothing after SANDBOX":    {args: []string{"exec", "box-a", ""}, want: []string{noFile}},
		"exec, nothing after --":         {args: []string{"exec", "box-a", "--", ""}, want: []string{noFile}},
		"exec -i, flags before":          {args: []string{"exec", "-i", "w"}, want: []string{"web", noFile}},
		"run SANDBOX":                    {args: []string{"run", "--timeout", "5m", "w"}, want: []string{"web", noFile}},
		"shell SANDBOX":                  {args: []string{"shell", "box-"}, want: []string{"box-a", "box-b", noFile}},
		"suspend SANDBOX":                {args: []string{"suspend", ""}, want: []string{"box-a", "box-b", "web", noFile}},
		"resume SANDBOX":                 {args: []string{"resume", "we"}, want: []string{"web", noFile}},
		"telemetry SANDBOX":              {args: []string{"telemetry", "box-b"}, want: []string{"box-b", noFile}},
		"telemetry --ticket TICKET":      {args: []string{"telemetry", "--ticket", ""}, want: []string{"t1", noFile}},
		"telemetry --ticket, no SANDBOX": {args: []string{"telemetry", "--ticket", "t1", ""}, want: []string{noFile}},
		"logs RUN":                       {args: []string{"logs", ""}, want: []string{"build-1", noFile}},
		"cp LOCAL SANDBOX:":              {args: []string{"cp", "notes.txt", "box"}, want: []string{"box-a:", "box-b:", noSpaceNoFile}},
		"cp SANDBOX: or LOCAL first":     {args: []string{"cp", "w"}, want: []string{"web:", "webdir/", "webnotes.txt", noSpaceNoFile}},
		"cp, nothing typed: the hints":   {args: []string{"cp", ""}, want: []string{"box-a:", "box-b:", "web:", "./", "/", noSpaceNoFile}},
		"cp, no sandbox: files":          {args: []string{"cp", "notes"}, want: []string{files}},
		"cp SANDBOX:PATH LOCAL: files":   {args: []string{"cp", "web:/workspace/a", ""}, want: []string{files}},
		"cp ./LOCAL: files":              {args: []string{"cp", "./no"}, want: []string{files}},
		"top: nothing":                   {args: []string{"top", ""}, want: []string{noFile}},
	}
	// cp offers the current folder's paths beside the sandboxes.
	t.Chdir(t.TempDir())
	if err := os.WriteFile("webnotes.txt", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("webdir", 0o700); err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := newRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			root.SetOut(&out)
			root.SetArgs(append([]string{"__complete", "--kubeconfig", kubeconfig, "-n", "work"}, tc.args...))
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(out.String()), "\n")
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("-want +got:\n%s\nstderr: %s", d, errOut.String())
			}
		})
	}
}

// testTopTicket: a sandbox without a ticket has an empty TICKET in kubectl
// afe top, as in kubectl get sandboxes. This API server serves no access
// API, so top itself refuses (as kubectl top without a metrics API); its
// table is printed from the Sandboxes as read, none of them measured.
func testTopTicket(t *testing.T, c ctrlclient.Client, kubeconfig string) {
	if _, err := execute("--kubeconfig", kubeconfig, "-n", "work", "top"); err == nil {
		t.Error("kubectl afe top answered without an access API to read the figures from")
	}
	list := &afev1.SandboxList{}
	if err := c.List(context.Background(), list, ctrlclient.InNamespace("work")); err != nil {
		t.Fatal(err)
	}
	var rows []client.UsageRow
	for i := range list.Items {
		rows = append(rows, client.UsageRowOf(&list.Items[i], nil))
	}
	f := &topFlags{by: string(client.BySandbox), output: parseOutput(t)}
	out, _ := printed(t, func(streams genericiooptions.IOStreams) error { return writeTop(streams, rows, f, time.Now(), "none") })
	if d := cmp.Diff([][]string{
		{"NAME", "TICKET", "CPU-TIME", "MEMORY", "DISK", "NET-RX", "NET-TX", "MEASURED"},
		{"box-a", "", "-", "-", "-", "-", "-", "-"},
		{"box-b", "t1", "-", "-", "-", "-", "-", "-"},
		{"web", "", "-", "-", "-", "-", "-", "-"},
	}, cells(out)); d != "" {
		t.Errorf("kubectl afe top: -want +got:\n%s\n%s", d, out)
	}
	get, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", "work", "get", "sandboxes").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get sandboxes: %v\n%s", err, get)
	}
	got := cells(string(get))
	if len(got) != 4 || got[0][1] != "TICKET" || got[1][0] != "box-a" || got[1][1] != "" || got[2][1] != "t1" {
		t.Errorf("kubectl get sandboxes shows a sandbox without a ticket otherwise:\n%s", get)
	}
}

// cells splits a table into its cells at the columns of its header (whose
// names hold no run of two spaces), a cell empty where its column holds
// only spaces.
func cells(table string) [][]string {
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	var starts []int
	for i := range lines[0] {
		if lines[0][i] != ' ' && (i == 0 || strings.HasSuffix(lines[0][:i], "  ")) {
			starts = append(starts, i)
		}
	}
	rows := make([][]string, len(lines))
	for r, line := range lines {
		for c, start := range starts {
			end := len(line)
			if c+1 < len(starts) {
				end = min(starts[c+1], len(line))
			}
			rows[r] = append(rows[r], strings.TrimSpace(line[min(start, len(line)):end]))
		}
	}
	return rows
}
