package docker

import (
	"strconv"

	"github.com/docker/docker/api/types/container"
)

// logDriver is the engine's "local" log driver. Its options are never
// merged with the engine's defaults unless those name the same driver, and
// every option that decides what is kept on disk is set here anyway.
const logDriver = "local"

// logConfig is the engine's form of the bound.
func logConfig(l LogConfig) container.LogConfig {
	return container.LogConfig{Type: logDriver, Config: map[string]string{
		"max-size": strconv.FormatInt(l.MaxFileBytes, 10),
		"max-file": strconv.Itoa(l.Files),
		"compress": "false",
	}}
}
