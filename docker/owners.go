package docker

import (
	"archive/tar"
	"io"

	"afe.dev/sandbox/internal/tarbound"
)

// OwnerChange gives the files of one owner to another in a copy: an entry
// whose uid is From.UID gets To.UID, and one whose gid is From.GID gets
// To.GID; other owners are kept.
type OwnerChange struct {
	From, To Owner
}

// changeOwners streams the tar of r with the owners changed: what a
// workspace copied from a sandbox whose user was From needs to be the own
// of a sandbox whose user is To.
func changeOwners(r io.Reader, ch OwnerChange) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		// The bound is the copy's own (tarbound.Pass before this): here
		// only the owners change.
		_, err := tarbound.Copy(pw, r, &tarbound.Bound{}, func(h *tar.Header) (*tar.Header, error) {
			if h.Uid == ch.From.UID {
				h.Uid, h.Uname = ch.To.UID, ""
			}
			if h.Gid == ch.From.GID {
				h.Gid, h.Gname = ch.To.GID, ""
			}
			return h, nil
		})
		pw.CloseWithError(err)
	}()
	return pr
}
