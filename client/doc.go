// Package client is the Go client of the afe sandbox controller, for
// workflow engines: it creates a Ticket or a Sandbox and waits until it is
// Ready, runs scripts and commands in it and reads their outcome (the exit
// code, the output, the JSON result), execs with stdin, stdout and stderr
// apart, copies files in and out, follows a Run's log, snapshots, restores,
// suspends and resumes a sandbox, merges lanes and runs CI, reads the
// command telemetry and what sandboxes use (Usage, Usages, and Top per
// sandbox, ticket or namespace), and destroys what it made.
//
// Objects (Tickets, Sandboxes, Runs) are read and written with
// controller-runtime's client; exec, files, logs, telemetry and usage go
// through the manager's access API (api/access/v1alpha1), an aggregated API
// reached through the Kubernetes API server with the caller's own
// identity, so a client needs no access to the Docker engine.
//
// Waiting is done from watches, never by polling, and is bounded by the
// context. Errors are typed: IsNotReady, IsTimedOut, IsForbidden,
// IsNotFound, IsInvalid and IsFailed tell what happened, and ReasonOf the
// reason a condition or the access API gave.
package client
