package sandboxenv

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/sandboxspec"
)

// Secrets are read from a real API server in the controllers' and the
// access API's suites; these cases need none.
func TestResolve(t *testing.T) {
	r := Resolver{DenyEnv: []string{"EXTRA_DENIED"}, Passthrough: map[string]*string{"INDEX_URL": ptr.To("https://pkg.example/simple"), "UNSET": nil}}
	tests := map[string]struct {
		env        []afev1.EnvVar
		want       []string
		wantReason string
	}{
		"none":   {want: []string{}},
		"values": {env: []afev1.EnvVar{{Name: "A", Value: "1"}, {Name: "EMPTY"}}, want: []string{"A=1", "EMPTY="}},
		"passed through": {env: []afev1.EnvVar{{Name: "INDEX", ValueFrom: &afev1.EnvVarSource{ControllerEnv: "INDEX_URL"}}},
			want: []string{"INDEX=https://pkg.example/simple"}},
		"passed through, unset": {env: []afev1.EnvVar{{Name: "X", ValueFrom: &afev1.EnvVarSource{ControllerEnv: "UNSET"}}},
			wantReason: afev1.ControllerEnvNotAllowedReason},
		"not passed through": {env: []afev1.EnvVar{{Name: "X", ValueFrom: &afev1.EnvVarSource{ControllerEnv: "HOME"}}},
			wantReason: afev1.ControllerEnvNotAllowedReason},
		"a denied name":      {env: []afev1.EnvVar{{Name: "DOCKER_HOST", Value: "x"}}, wantReason: afev1.DeniedEnvReason},
		"a name --deny-env":  {env: []afev1.EnvVar{{Name: "extra_denied", Value: "x"}}, wantReason: afev1.DeniedEnvReason},
		"a proxy variable":   {env: []afev1.EnvVar{{Name: "HTTPS_PROXY", Value: "x"}}, wantReason: afev1.InvalidSpecReason},
		"a Secret of a path": {env: secretEnv("../other/s", "k"), wantReason: afev1.InvalidSpecReason},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "box"}}
			sbx.Spec.Env = tc.env
			got, err := r.Resolve(context.Background(), sbx)
			if tc.wantReason != "" {
				ie, ok := sandboxspec.AsInvalid(err)
				if !ok || ie.Reason != tc.wantReason {
					t.Fatalf("got %v, %v; want reason %s", got, err, tc.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestCheckSecret(t *testing.T) {
	for typ, want := range map[corev1.SecretType]string{
		corev1.SecretTypeOpaque:              "",
		corev1.SecretTypeDockerConfigJson:    "",
		corev1.SecretTypeServiceAccountToken: afev1.SecretNotAllowedReason,
		corev1.SecretTypeBootstrapToken:      afev1.SecretNotAllowedReason,
	} {
		err := CheckSecret("T", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: typ})
		got := ""
		if ie, ok := sandboxspec.AsInvalid(err); ok {
			got = ie.Reason
		}
		if got != want {
			t.Errorf("%s: got %q (%v), want %q", typ, got, err, want)
		}
	}
}

func secretEnv(name, key string) []afev1.EnvVar {
	return []afev1.EnvVar{{Name: "T", ValueFrom: &afev1.EnvVarSource{SecretKeyRef: &afev1.SecretKeySelector{Name: name, Key: key}}}}
}
