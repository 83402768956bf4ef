package dockertest

import (
	"context"
	"fmt"
	"time"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/test/testenv"
)

// GitImage is the test image with git that `make images` builds.
const GitImage = "afe/git:dev"

// ShellOnlyImage holds nothing but a shell (dash) and its C library: no
// sleep, kill or ps. `make images` builds it.
const ShellOnlyImage = "afe/sh:dev"

// RequireImage returns an error when the engine or the image is missing
// under CI, a reason to skip otherwise.
func RequireImage(image string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	engine, err := docker.New("")
	if err == nil {
		err = engine.EnsureImage(ctx, image)
	}
	if err == nil {
		return "", nil
	}
	err = fmt.Errorf("image %s: %w (run `make images`)", image, err)
	if testenv.DockerRequired() {
		return "", fmt.Errorf("the Docker engine is required here (CI or make test): %w", err)
	}
	return err.Error(), nil
}

// NftImage holds nft and the libraries it links, on the busybox base: the
// conntrack bound's helper (--sandbox-conn-image). `make images` builds it.
const NftImage = "afe/nft:dev"
