package docker

import (
	"archive/tar"
	"errors"
	"io"
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
		tr, tw := tar.NewReader(r), tar.NewWriter(pw)
		err := func() error {
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					return tw.Close()
				}
				if err != nil {
					return err
				}
				if h.Uid == ch.From.UID {
					h.Uid, h.Uname = ch.To.UID, ""
				}
				if h.Gid == ch.From.GID {
					h.Gid, h.Gname = ch.To.GID, ""
				}
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				if _, err := io.Copy(tw, tr); err != nil {
					return err
				}
			}
		}()
		pw.CloseWithError(err)
	}()
	return pr
}
