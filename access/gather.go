package access

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// peerAskTimeout bounds how long a gathering waits for one node's
// manager; maxPeerAnswer how much of its answer it reads.
const (
	peerAskTimeout = 15 * time.Second
	maxPeerAnswer  = 256 << 20
)

// gather adds to this manager's records those of every other node's
// manager (per-node mode), each asked the same question as the caller and
// authorizing them again: a sandbox or a ticket may have run on several
// nodes. The lists are merged by time, each keeping its own order (a
// sandbox's records stay in its order), and the newest limit are kept.
// The nodes whose manager is gone or did not answer are named, never left
// out in silence. The notes of records pruned are every node's.
func gather[T any](s *Server, r *http.Request, req *request, local nodeRecords[T], at func(T) time.Time, limit int) (nodeRecords[T], []accessv1.UnansweredNode, error) {
	answers, missing, err := askEveryPeer[T](s, r, req)
	if err != nil {
		return nodeRecords[T]{}, nil, err
	}
	lists := [][]T{local.Items}
	pruned := local.Pruned
	for _, a := range answers {
		lists = append(lists, a.Items)
		pruned = append(pruned, a.Pruned...)
	}
	return nodeRecords[T]{Items: mergeNewest(lists, at, limit), Pruned: pruned}, missing, nil
}

// askEveryPeer asks every other node's manager the request's question, as
// the caller, at once: their answers, and the nodes whose manager is gone
// or did not answer, by name.
func askEveryPeer[T any](s *Server, r *http.Request, req *request) ([]nodeRecords[T], []accessv1.UnansweredNode, error) {
	ctx := r.Context()
	others, err := s.peer.peers.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	type answer struct {
		node string
		recs nodeRecords[T]
		err  error
	}
	answers := make(chan answer, len(others))
	for _, p := range others {
		if !p.live {
			answers <- answer{node: p.node, err: fmt.Errorf("%s", p.gone())}
			continue
		}
		go func() {
			recs, err := askPeer[T](ctx, s, r, req, p)
			answers <- answer{p.node, recs, err}
		}()
	}
	var got []nodeRecords[T]
	var missing []accessv1.UnansweredNode
	for range others {
		a := <-answers
		if a.err != nil {
			missing = append(missing, accessv1.UnansweredNode{Node: a.node, Message: a.err.Error()})
			continue
		}
		got = append(got, a.recs)
	}
	slices.SortFunc(missing, func(a, b accessv1.UnansweredNode) int { return strings.Compare(a.Node, b.Node) })
	return got, missing, nil
}

// nodeRecords is one manager's answer: its records and its notes of
// records pruned.
type nodeRecords[T any] struct {
	Items  []T                      `json:"items"`
	Pruned []accessv1.PrunedRecords `json:"pruned,omitempty"`
}

// askPeer asks node p's manager the request's question, for its own
// records only (a forwarded request is never forwarded again).
func askPeer[T any](ctx context.Context, s *Server, r *http.Request, req *request, p peer) (nodeRecords[T], error) {
	var list nodeRecords[T]
	ctx, cancel := context.WithTimeout(ctx, peerAskTimeout)
	defer cancel()
	u := url.URL{Scheme: "https", Host: p.address, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	out, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return list, err
	}
	setForwardedUser(out.Header, req.user)
	resp, err := (&http.Client{Transport: s.peer.transport(p.node)}).Do(out)
	if err != nil {
		return list, fmt.Errorf("the manager of node %s does not answer: %w", p.node, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body := io.LimitReader(resp.Body, maxPeerAnswer)
	if resp.StatusCode != http.StatusOK {
		st := metav1.Status{}
		_ = json.NewDecoder(body).Decode(&st)
		return list, fmt.Errorf("the manager of node %s answered %d: %s", p.node, resp.StatusCode, st.Message)
	}
	if err := json.NewDecoder(body).Decode(&list); err != nil {
		return list, fmt.Errorf("the answer of node %s's manager: %w", p.node, err)
	}
	return list, nil
}

// mergeNewest merges lists, each in its own order, by time (at the heads'
// earliest first, ties to the earlier list), and keeps the newest limit.
func mergeNewest[T any](lists [][]T, at func(T) time.Time, limit int) []T {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]T, 0, n)
	for {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || at(l[0]).Before(at(lists[best][0]))) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out = append(out, lists[best][0])
		lists[best] = lists[best][1:]
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}
