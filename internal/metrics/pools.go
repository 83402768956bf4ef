package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// PoolMembers is the unclaimed members of each SandboxPool on this
// manager's engine, by state: ready (a Sandbox may take it) and creating.
var PoolMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "afe_pool_members", Help: "Unclaimed members of each SandboxPool on the engine, by state (ready, creating).",
}, []string{"namespace", "pool", "state"})

// PoolClaims is the sandboxes a pool concerned, by result: warm (a member
// served it), cold_empty (the pool had no ready member), cold_mismatch (it
// named a pool that cannot serve it).
var PoolClaims = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "afe_pool_claims_total", Help: "Sandboxes a SandboxPool concerned, by result (warm, cold_empty, cold_mismatch).",
}, []string{"namespace", "pool", "result"})

// PoolClaimSeconds is the time a warm claim took, from the choice of the
// member to its rename to the Sandbox's name.
var PoolClaimSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name: "afe_pool_claim_seconds", Help: "Time of a warm claim, from the choice of a member to its binding.",
	Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
})

// Member states of afe_pool_members.
const (
	PoolMemberReady    = "ready"
	PoolMemberCreating = "creating"
)

// SetPoolMembers sets the pool's member counts.
func SetPoolMembers(namespace, pool string, ready, creating int) {
	PoolMembers.WithLabelValues(namespace, pool, PoolMemberReady).Set(float64(ready))
	PoolMembers.WithLabelValues(namespace, pool, PoolMemberCreating).Set(float64(creating))
}

// ForgetPool drops the series of a pool that is gone.
func ForgetPool(namespace, pool string) {
	PoolMembers.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "pool": pool})
	PoolClaims.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "pool": pool})
}

func init() {
	crmetrics.Registry.MustRegister(PoolMembers, PoolClaims, PoolClaimSeconds)
}
