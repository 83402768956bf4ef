package enginespec

import "time"

// VolumeSpec is a named volume.
type VolumeSpec struct {
	Name   string
	Labels map[string]string
}

// Volume is what the engine reports of a volume.
type Volume struct {
	Name   string
	Labels map[string]string
	// Created is when the engine made it (zero when it does not say).
	Created time.Time
}
