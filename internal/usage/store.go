// Package usage keeps, in the manager's memory, what each sandbox of this
// manager uses as last measured: the access API serves it (sandboxusages),
// as metrics-server serves what Pods use from its own memory, and nothing
// writes it into an object.
package usage

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// MinPeriod is the least --usage-period the manager takes: each
// measurement asks the engine for the size of every writable layer and
// volume of the instance, which it computes one request at a time.
const MinPeriod = 30 * time.Second

// Sample is one sandbox's measurement.
type Sample struct {
	Namespace, Name string
	// UID is the Sandbox's, which the afe.sandbox-uid label of the
	// measured container (or of its claim record) matched.
	UID types.UID
	// Ticket is the Sandbox's spec.ticketRef: empty without one.
	Ticket string
	// Labels are the Sandbox's, at the measurement.
	Labels map[string]string
	Usage  accessv1.Usage
}

// Store is the latest measurement; its zero value holds none. It is safe
// for concurrent use.
type Store struct {
	mu      sync.RWMutex
	at      metav1.Time
	window  metav1.Duration
	samples map[types.NamespacedName]Sample
}

// Set replaces the measurement, taken at at every window: a sandbox it
// does not hold has no usage any more.
func (s *Store) Set(at time.Time, window time.Duration, samples []Sample) {
	byKey := make(map[types.NamespacedName]Sample, len(samples))
	for _, smp := range samples {
		byKey[types.NamespacedName{Namespace: smp.Namespace, Name: smp.Name}] = smp
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at, s.window, s.samples = metav1.NewTime(at), metav1.Duration{Duration: window}, byKey
}

// Get is the usage of the sandbox of that namespace and name, when it was
// measured as the Sandbox of that UID.
func (s *Store) Get(key types.NamespacedName, uid types.UID) (accessv1.SandboxUsage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	smp, ok := s.samples[key]
	if !ok || smp.UID != uid {
		return accessv1.SandboxUsage{}, false
	}
	return s.item(smp), true
}

// List is the usage of every sandbox measured in namespace (in every one
// when empty) whose labels sel matches (nil: all), in the order of
// namespace and name.
func (s *Store) List(namespace string, sel labels.Selector) []accessv1.SandboxUsage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []accessv1.SandboxUsage{}
	for _, smp := range s.samples {
		if namespace != "" && smp.Namespace != namespace || sel != nil && !sel.Matches(labels.Set(smp.Labels)) {
			continue
		}
		out = append(out, s.item(smp))
	}
	SortItems(out)
	return out
}

// SortItems sorts usages in the order of namespace and name.
func SortItems(items []accessv1.SandboxUsage) {
	slices.SortFunc(items, func(a, b accessv1.SandboxUsage) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// item is the answer of one sample.
func (s *Store) item(smp Sample) accessv1.SandboxUsage {
	return accessv1.SandboxUsage{
		TypeMeta: metav1.TypeMeta{Kind: accessv1.SandboxUsageKind, APIVersion: accessv1.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Namespace: smp.Namespace, Name: smp.Name, UID: smp.UID,
			Labels: maps.Clone(smp.Labels), CreationTimestamp: s.at},
		Ticket:    smp.Ticket,
		Timestamp: s.at,
		Window:    s.window,
		Usage:     smp.Usage,
	}
}
