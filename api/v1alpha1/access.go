package v1alpha1

// The access API is the aggregated API the manager serves beside the objects
// of this group (package access): exec, files, Run logs and telemetry for
// kubectl afe, reached through the Kubernetes API server. Its group and
// version are written here once, for the server and the plugin alike (the
// plugin does not link the server, which links the Docker SDK).
const (
	// AccessGroup is the access API's group.
	AccessGroup = "access.sandbox.afe.dev"
	// AccessVersion is the access API's version.
	AccessVersion = "v1alpha1"
)
