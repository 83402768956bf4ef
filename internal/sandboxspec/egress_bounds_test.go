package sandboxspec

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// egressSchemas are the schemas of every property named egress in the
// CRD's versions.
func egressSchemas(props map[string]apiextensionsv1.JSONSchemaProps) []apiextensionsv1.JSONSchemaProps {
	var out []apiextensionsv1.JSONSchemaProps
	for name, p := range props {
		if name == "egress" && p.Type == "array" {
			out = append(out, p)
		}
		out = append(out, egressSchemas(p.Properties)...)
		if p.Items != nil && p.Items.Schema != nil {
			out = append(out, egressSchemas(p.Items.Schema.Properties)...)
		}
	}
	return out
}

// orNone is a bound, -1 for none.
func orNone(bound *int64) int64 {
	if bound == nil {
		return -1
	}
	return *bound
}

// Admission's bounds of an allowlist are the CRD's and the controller's
// alike (MaxEgressHosts, MaxEgressHostLength), in every kind that holds
// one: the largest allowlist the proxy is tested with
// (docker/egress-proxy) is the largest the API server admits.
func TestCRDEgressBoundsAreTheControllers(t *testing.T) {
	for _, crd := range []string{"sandboxes", "tickets", "sandboxpools"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "sandbox.afe.dev_"+crd+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, v := range def.Spec.Versions {
			for _, p := range egressSchemas(v.Schema.OpenAPIV3Schema.Properties) {
				found++
				if got := orNone(p.MaxItems); got != MaxEgressHosts {
					t.Errorf("%s: egress maxItems %d, the controller's %d", crd, got, MaxEgressHosts)
				}
				if p.Items == nil || p.Items.Schema == nil {
					t.Fatalf("%s: egress has no item schema", crd)
				}
				if got := orNone(p.Items.Schema.MaxLength); got != MaxEgressHostLength {
					t.Errorf("%s: an egress entry's maxLength %d, the controller's %d", crd, got, MaxEgressHostLength)
				}
			}
		}
		if found == 0 {
			t.Errorf("%s: no egress list in the CRD", crd)
		}
	}
}
