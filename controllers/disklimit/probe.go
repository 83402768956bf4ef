package disklimit

import (
	"context"
	"sync"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// QuotaEngine says whether the engine's storage driver may limit a
// container's writable layer.
type QuotaEngine interface {
	StorageQuota(ctx context.Context) (bool, error)
}

// Probe decides once per process how resources.disk is enforced on the
// engine: by the engine's storage quota where its driver may have one, and
// by a read-only root otherwise or after the engine refused a quota.
type Probe struct {
	mu    sync.Mutex
	known bool
	mode  afev1.DiskEnforcement
}

// Enforcement is how resources.disk is enforced on the engine.
func (p *Probe) Enforcement(ctx context.Context, engine QuotaEngine) (afev1.DiskEnforcement, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.mode, nil
	}
	quota, err := engine.StorageQuota(ctx)
	if err != nil {
		return "", err
	}
	p.known, p.mode = true, afev1.DiskReadOnlyRoot
	if quota {
		p.mode = afev1.DiskStorageQuota
	}
	logf.FromContext(ctx).Info("Disk limits are enforced", "enforcement", p.mode)
	return p.mode, nil
}

// Refused records that the engine cannot limit a writable layer after all
// (xfs without project quotas).
func (p *Probe) Refused(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != afev1.DiskReadOnlyRoot {
		logf.FromContext(ctx).Info("The engine refused a storage quota; disk limits are enforced with a read-only root")
	}
	p.known, p.mode = true, afev1.DiskReadOnlyRoot
}
