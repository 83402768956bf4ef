package docker

import (
	"context"
	"errors"
	"strings"
)

// ErrStorageQuotaUnsupported is returned when a container asks for a
// writable layer size (ContainerSpec.StorageSizeBytes) that the engine's
// storage driver cannot enforce.
var ErrStorageQuotaUnsupported = errors.New("the engine's storage driver cannot limit a container's writable layer")

// StorageQuota is true when the engine's storage driver may limit the size
// of a container's writable layer: overlay2 on xfs, which needs the pquota
// mount option the engine does not report. A container that asks for a size
// on an engine without it fails with ErrStorageQuotaUnsupported: try, and
// fall back.
func (c *Client) StorageQuota(ctx context.Context) (bool, error) {
	c.count("info")
	info, err := c.api.Info(ctx)
	if err != nil {
		return false, wrap(err, "engine info")
	}
	return storageQuotaDriver(info.Driver, info.DriverStatus), nil
}

// storageQuotaDriver is true for overlay2 on xfs.
func storageQuotaDriver(driver string, status [][2]string) bool {
	if driver != "overlay2" {
		return false
	}
	for _, kv := range status {
		if kv[0] == "Backing Filesystem" {
			return kv[1] == "xfs"
		}
	}
	return false
}

// storageQuotaRefused is true for the engine's refusal of a storage size:
// "--storage-opt is supported only for overlay over xfs with 'pquota' mount
// option", or a driver that knows no storage options.
func storageQuotaRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "storage-opt") || strings.Contains(msg, "pquota") ||
		strings.Contains(msg, "Storage Option")
}
