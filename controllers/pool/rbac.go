// Package pool holds the SandboxPool reconciler: it keeps each pool's
// ready members on the engine, refills them as Sandboxes claim them, and
// removes the unclaimed ones of a changed or deleted pool. The decisions it
// takes are the pure functions of internal/pool; the claim of a member is
// the Sandbox reconciler's, which shares the pool's turn (poolsync.Turns).
//
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=sandboxpools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=sandboxpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.afe.dev,resources=sandboxpools/finalizers,verbs=update
package pool
