package fakeengine

import (
	"context"

	"afe.dev/sandbox/docker"
)

// IsLocal is false: the fake is no engine on a local socket, and sees none
// of the controller's folders.
func (e *Engine) IsLocal() bool { return false }

// NetworkEvents reports no network events: both channels are nil, so the
// host address watch reads the list on its period only.
func (e *Engine) NetworkEvents(context.Context) (<-chan docker.Event, <-chan error) {
	return nil, nil
}
