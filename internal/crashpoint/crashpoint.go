//go:build !crashpoints

// Package crashpoint marks the points between two writes of the controller
// where a crash leaves the engine in a state of its own, which the next
// manager must converge from. In the manager as shipped, Here does nothing.
// Built with the tag crashpoints (the crash tests' manager only), Here
// kills the process with SIGKILL at the point the environment variable
// AFE_CRASHPOINT names, as a crash or an OOM kill would: no deferred
// function runs, nothing is flushed.
package crashpoint

// Here is a point a crash test may kill the manager at.
func Here(string) {}
