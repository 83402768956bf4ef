package sandbox

import (
	"context"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// removeImageVolumes removes the volumes made for the VOLUME paths of the
// sandbox's image, and those of an earlier Sandbox of its name, in one
// list. They live as long as one container, like the anonymous volumes the
// engine would have made: they are removed before a container is made
// (those of one removed by hand among them) and when it is stopped for
// good. One of the name that is neither is not removed, and the engine
// client refuses to mount it (ErrConflict).
func (r *Reconciler) removeImageVolumes(ctx context.Context, s *sandboxScope) error {
	volumes, err := r.Engine.ListVolumes(ctx, s.id.NameSelector(afev1.RoleImageVolume))
	if err != nil {
		return err
	}
	for _, v := range volumes {
		if s.id.OwnsAs(v.Labels, afev1.RoleImageVolume) || s.id.Stale(v.Labels, afev1.RoleImageVolume) {
			if err := r.Engine.RemoveVolume(ctx, v.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
