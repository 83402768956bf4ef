package move

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"

	"afe.dev/sandbox/docker"
)

// The headers of a workspace sent: the owner of its files there, and, as
// trailers, the size and SHA-256 of the tar as it was sent.
const (
	workspaceUserHeader    = "Afe-Workspace-User"
	workspaceSizeTrailer   = "Afe-Workspace-Size"
	workspaceSHA256Trailer = "Afe-Workspace-Sha256"
)

// sendTree streams the tree of the volume, read through a helper of that
// name and labels, with the owner of its files there (user, empty when
// not known) and, as trailers, the tar's size and SHA-256.
func (h *Handler) sendTree(w http.ResponseWriter, r *http.Request, helper string, labels map[string]string, volume, user string) {
	tree, err := h.Engine.ExportWorkspace(r.Context(), helper, labels, docker.Mount{Type: docker.MountVolume, Source: volume})
	if err != nil {
		writeError(w, err)
		return
	}
	defer func() { _ = tree.Close() }()
	w.Header().Set("Content-Type", "application/x-tar")
	if user != "" {
		w.Header().Set(workspaceUserHeader, user)
	}
	w.Header().Set("Trailer", workspaceSizeTrailer+", "+workspaceSHA256Trailer)
	w.WriteHeader(http.StatusOK)
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), tree)
	if err != nil {
		// No trailers: the receiver refuses what it read.
		h.Log.Info("A volume's tree was not sent whole", "volume", volume, "error", err.Error())
		return
	}
	w.Header().Set(workspaceSizeTrailer, strconv.FormatInt(n, 10))
	w.Header().Set(workspaceSHA256Trailer, hex.EncodeToString(sum.Sum(nil)))
}

// treeOf reads a tree sent by sendTree.
func treeOf(resp *http.Response, node string) *Workspace {
	counted := &countingReader{r: resp.Body, sum: sha256.New()}
	return &Workspace{
		Tree: struct {
			io.Reader
			io.Closer
		}{counted, resp.Body},
		User: resp.Header.Get(workspaceUserHeader),
		Verify: func() error {
			size, sum := resp.Trailer.Get(workspaceSizeTrailer), resp.Trailer.Get(workspaceSHA256Trailer)
			got := hex.EncodeToString(counted.sum.Sum(nil))
			if size == "" || sum == "" {
				return fmt.Errorf("the workspace from node %s ended before its manager had sent it whole", node)
			}
			if size != strconv.FormatInt(counted.n, 10) || sum != got {
				return fmt.Errorf("the workspace from node %s arrived as %d bytes of SHA-256 %s, sent as %s bytes of SHA-256 %s", node, counted.n, got, size, sum)
			}
			return nil
		},
	}
}

// countingReader counts and hashes what is read through it.
type countingReader struct {
	r   io.Reader
	n   int64
	sum hash.Hash
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.sum.Write(p[:n])
	return n, err
}
