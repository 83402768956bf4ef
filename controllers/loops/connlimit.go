package loops

import (
	"context"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// syncConnLimits makes the host's conntrack bound hold exactly this
// instance's sandbox and member networks and its proxies' egress
// addresses: what a removed network or proxy left goes, what a failed
// addition (or a flushed table) lacks is added. The engine is listed
// after the mark, so an addition made meanwhile is kept. Another
// instance's table is never read.
func (s *Sweeper) syncConnLimits(ctx context.Context) error {
	if s.ConnLimits == nil {
		return nil
	}
	mark := s.ConnLimits.Mark()
	networks, err := s.Engine.ListNetworks(ctx, map[string]string{afev1.LabelController: s.Instance, afev1.LabelRole: afev1.RoleNetwork})
	if err != nil {
		return err
	}
	var nets, proxies []string
	for _, n := range networks {
		nets = append(nets, n.Subnets...)
	}
	list, err := s.Engine.ListContainers(ctx, map[string]string{afev1.LabelController: s.Instance, afev1.LabelRole: afev1.RoleProxy})
	if err != nil {
		return err
	}
	for _, c := range list {
		if addr := c.IPs[s.EgressNetwork]; addr != "" {
			proxies = append(proxies, addr)
		}
	}
	return s.ConnLimits.Sync(ctx, mark, nets, proxies)
}
