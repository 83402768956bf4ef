package enginespec

// VolumeSpec is a named volume.
type VolumeSpec struct {
	Name   string
	Labels map[string]string
}

// Volume is what the engine reports of a volume.
type Volume struct {
	Name   string
	Labels map[string]string
}
