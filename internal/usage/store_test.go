package usage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func sample(ns, name, uid, team string, cpu int64) Sample {
	return Sample{Namespace: ns, Name: name, UID: types.UID(uid), Ticket: "t-" + name,
		Labels: map[string]string{"team": team}, Usage: accessv1.Usage{CPUMilliseconds: cpu}}
}

// item is what the store answers for sample.
func item(smp Sample) accessv1.SandboxUsage {
	return accessv1.SandboxUsage{
		TypeMeta: metav1.TypeMeta{Kind: "SandboxUsage", APIVersion: "access.sandbox.afe.dev/v1alpha1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: smp.Namespace, Name: smp.Name, UID: smp.UID, Labels: smp.Labels,
			CreationTimestamp: metav1.NewTime(t0)},
		Ticket: smp.Ticket, Timestamp: metav1.NewTime(t0), Window: metav1.Duration{Duration: time.Minute}, Usage: smp.Usage,
	}
}

func TestStoreGet(t *testing.T) {
	a := sample("a", "box", "u1", "x", 10)
	s := &Store{}
	s.Set(t0, time.Minute, []Sample{a})
	tests := map[string]struct {
		key    types.NamespacedName
		uid    types.UID
		want   accessv1.SandboxUsage
		wantOK bool
	}{
		"measured":                         {types.NamespacedName{Namespace: "a", Name: "box"}, "u1", item(a), true},
		"another Sandbox of the same name": {types.NamespacedName{Namespace: "a", Name: "box"}, "u2", accessv1.SandboxUsage{}, false},
		"another namespace":                {types.NamespacedName{Namespace: "b", Name: "box"}, "u1", accessv1.SandboxUsage{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := s.Get(tc.key, tc.uid)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestStoreList(t *testing.T) {
	a1, a2, b := sample("a", "two", "u1", "x", 10), sample("a", "one", "u2", "y", 20), sample("b", "box", "u3", "x", 30)
	s := &Store{}
	s.Set(t0.Add(-time.Hour), time.Minute, []Sample{sample("a", "gone", "u0", "x", 1)})
	s.Set(t0, time.Minute, []Sample{a1, b, a2})
	tests := map[string]struct {
		namespace string
		selector  string
		want      []accessv1.SandboxUsage
	}{
		"a namespace, in the order of names": {namespace: "a", want: []accessv1.SandboxUsage{item(a2), item(a1)}},
		"every namespace":                    {want: []accessv1.SandboxUsage{item(a2), item(a1), item(b)}},
		"by label":                           {selector: "team=x", want: []accessv1.SandboxUsage{item(a1), item(b)}},
		"none":                               {namespace: "c", want: []accessv1.SandboxUsage{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sel, err := labels.Parse(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.List(tc.namespace, sel)); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

func TestStoreZero(t *testing.T) {
	var s Store
	if got := s.List("", nil); len(got) != 0 {
		t.Errorf("List of an empty store = %v", got)
	}
	if _, ok := s.Get(types.NamespacedName{Namespace: "a", Name: "b"}, ""); ok {
		t.Error("Get of an empty store answered")
	}
}
