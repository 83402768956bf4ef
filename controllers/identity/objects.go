package identity

import (
	"context"
	"slices"
	"strings"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/naming"
)

// StatusNamesForeign is true when the Sandbox's status names a container,
// volume, network or proxy other than those derived from its namespace and
// name.
func StatusNamesForeign(sbx *afev1.Sandbox) bool {
	st, key := &sbx.Status, naming.Key(sbx.Namespace, sbx.Name)
	return !oneOf(st.ContainerName, naming.Container(key)) ||
		!oneOf(st.VolumeName, naming.Volume(key), naming.LegacyVolume(key)) && !memberObjectOfPool(st.VolumeName, naming.MemberVolume, sbx.Namespace, st.Pool) ||
		!oneOf(st.NetworkName, naming.Network(key)) && !memberObjectOfPool(st.NetworkName, naming.MemberNetwork, sbx.Namespace, st.Pool) ||
		!oneOf(st.ProxyName, naming.Proxy(key))
}

// memberObjectOfPool is true when name is named as the object (of, a
// naming function: naming.MemberVolume, naming.MemberNetwork) of a member
// of the namespace's pool: the workspace and the network that a sandbox
// served from it uses (which member, its claim record says).
func memberObjectOfPool(name string, of func(member string) string, namespace, pool string) bool {
	member, ok := strings.CutSuffix(name, of(""))
	if pool == "" || !ok {
		return false
	}
	_, ok = naming.MemberID(naming.Key(namespace, pool), member)
	return ok
}

// oneOf is true when v is empty or one of the names.
func oneOf(v string, names ...string) bool {
	return v == "" || slices.Contains(names, v)
}

// RemoveContainers removes every container carrying all the labels.
func RemoveContainers(ctx context.Context, engine ContainerRemover, labels map[string]string) error {
	containers, err := engine.ListContainers(ctx, labels)
	if err != nil {
		return err
	}
	for _, c := range containers {
		if err := engine.RemoveContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// RemoveVolumes removes every volume carrying all the labels.
func RemoveVolumes(ctx context.Context, engine VolumeRemover, labels map[string]string) error {
	volumes, err := engine.ListVolumes(ctx, labels)
	if err != nil {
		return err
	}
	for _, v := range volumes {
		if err := engine.RemoveVolume(ctx, v.Name); err != nil {
			return err
		}
	}
	return nil
}
