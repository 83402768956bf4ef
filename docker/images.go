package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
)

// PullError says why an image could not be pulled.
type PullError struct {
	Ref    string
	Reason string
}

func (e *PullError) Error() string { return fmt.Sprintf("pull image %s: %s", e.Ref, e.Reason) }

// ValidateImageRef checks that ref is a well-formed image reference.
func ValidateImageRef(ref string) error {
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return fmt.Errorf("image %q is not a valid reference: %w", ref, err)
	}
	return nil
}

// EnsureImage makes the image present: used when it is there, pulled otherwise.
func (c *Client) EnsureImage(ctx context.Context, ref string) error {
	if err := ValidateImageRef(ref); err != nil {
		return &PullError{Ref: ref, Reason: err.Error()}
	}
	c.count("image_inspect")
	_, err := c.api.ImageInspect(ctx, ref)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return wrap(err, "inspect image "+ref)
	}
	c.count("image_pull")
	rc, err := c.api.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		if e := wrap(err, "pull"); errors.Is(e, ErrUnavailable) {
			return e
		}
		return &PullError{Ref: ref, Reason: err.Error()}
	}
	defer func() { _ = rc.Close() }()
	// The pull reports failures inside its progress stream.
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return &PullError{Ref: ref, Reason: err.Error()}
		}
		if msg.Error != "" {
			return &PullError{Ref: ref, Reason: msg.Error}
		}
	}
	c.count("image_inspect")
	if _, err := c.api.ImageInspect(ctx, ref); err != nil {
		return &PullError{Ref: ref, Reason: "image missing after pull: " + err.Error()}
	}
	return nil
}
