package access

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"
)

func TestDecide(t *testing.T) {
	tests := map[string]struct {
		node      string
		hop, live bool
		want      action
	}{
		"this node's sandbox":                             {node: "n1", want: serveHere},
		"this node's sandbox, forwarded here":             {node: "n1", hop: true, want: serveHere},
		"nothing known of it: this manager answers":       {node: "", want: serveHere},
		"another node's, its manager runs":                {node: "n2", live: true, want: forwardTo},
		"another node's, its manager is gone":             {node: "n2", want: nodeGone},
		"another node's, forwarded here: never again":     {node: "n2", hop: true, live: true, want: refuseHop},
		"another node's, forwarded here, its peer gone":   {node: "n2", hop: true, want: refuseHop},
		"nothing known of it, forwarded here":             {node: "", hop: true, want: serveHere},
		"a node of a similar name is another node":        {node: "n1x", live: true, want: forwardTo},
		"a node whose name holds this one's is another's": {node: "xn1", live: false, want: nodeGone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := decide("n1", tc.node, tc.hop, tc.live); got != tc.want {
				t.Errorf("decide(n1, %q, hop=%v, live=%v) = %v, want %v", tc.node, tc.hop, tc.live, got, tc.want)
			}
		})
	}
}

func TestForwardedUser(t *testing.T) {
	u := &user.DefaultInfo{Name: "alice", UID: "u-1", Groups: []string{"team", "system:authenticated"},
		Extra: map[string][]string{"scopes.example/x y": {"a", "b"}}}
	h := http.Header{}
	// What a request arrives with: its front proxy's identity, a token,
	// impersonation, and a forged peer identity.
	h.Set("X-Remote-User", "system:kube-aggregator")
	h.Set("X-Remote-Group", "system:masters")
	h.Set("Authorization", "Bearer t")
	h.Set("Impersonate-User", "admin")
	h.Set(peerUserHeader, "admin")
	h.Add(peerGroupHeader, "system:masters")
	h.Set(peerExtraPrefix+"forged", "1")
	h.Set("Accept", "application/json")
	setForwardedUser(h, u)
	for _, k := range []string{"X-Remote-User", "X-Remote-Group", "Authorization", "Impersonate-User", peerExtraPrefix + "forged"} {
		if h.Get(k) != "" {
			t.Errorf("%s was forwarded: %q", k, h.Get(k))
		}
	}
	if h.Get("Accept") == "" {
		t.Error("the request's own headers were dropped")
	}
	got, ok := forwardedUser(h)
	if !ok {
		t.Fatal("no forwarded user")
	}
	if !reflect.DeepEqual(got, user.Info(u)) {
		t.Errorf("forwarded user = %#v, want %#v", got, u)
	}
	if _, ok := forwardedUser(http.Header{peerGroupHeader: {"system:masters"}}); ok {
		t.Error("a request with groups and no user name names a user")
	}
}

func TestMergeNewest(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	type rec struct {
		name string
		t    int
	}
	when := func(r rec) time.Time { return at(r.t) }
	names := func(rs []rec) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.name)
		}
		return out
	}
	tests := map[string]struct {
		lists [][]rec
		limit int
		want  []string
	}{
		"one list":    {lists: [][]rec{{{"a1", 1}, {"a2", 2}}}, want: []string{"a1", "a2"}},
		"interleaved": {lists: [][]rec{{{"a1", 1}, {"a3", 3}}, {{"b2", 2}, {"b4", 4}}}, want: []string{"a1", "b2", "a3", "b4"}},
		// A list's own order is kept even when its times are not (a long
		// command recorded after a short one that started later).
		"a list's order kept": {lists: [][]rec{{{"a5", 5}, {"a1", 1}}, {{"b3", 3}}}, want: []string{"b3", "a5", "a1"}},
		"ties to the first":   {lists: [][]rec{{{"a", 1}}, {{"b", 1}}}, want: []string{"a", "b"}},
		"newest kept":         {lists: [][]rec{{{"a1", 1}, {"a3", 3}}, {{"b2", 2}}}, limit: 2, want: []string{"b2", "a3"}},
		"empty lists":         {lists: [][]rec{nil, {}, {{"b", 1}}}, want: []string{"b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := names(mergeNewest(tc.lists, when, tc.limit)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("mergeNewest = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPeerOfLease(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	p := &peers{self: "n1", now: func() time.Time { return now }}
	lease := func(name, holder, addr string, renewed time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{PeerAddressAnnotation: addr}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To(int32(20))}}
		if renewed != 0 {
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewed)}
		}
		return l
	}
	tests := map[string]struct {
		lease *coordinationv1.Lease
		want  peer
	}{
		"renewed a moment ago": {lease("afe-peer-n2", "n2", "10.0.0.2:8445", time.Second),
			peer{node: "n2", address: "10.0.0.2:8445", live: true, renewed: now.Add(-time.Second)}},
		"expired": {lease("afe-peer-n2", "n2", "10.0.0.2:8445", 21*time.Second),
			peer{node: "n2", address: "10.0.0.2:8445", renewed: now.Add(-21 * time.Second)}},
		"never renewed":           {lease("afe-peer-n2", "n2", "10.0.0.2:8445", 0), peer{node: "n2", address: "10.0.0.2:8445"}},
		"no address":              {lease("afe-peer-n2", "n2", "", time.Second), peer{node: "n2", renewed: now.Add(-time.Second)}},
		"named for another node":  {lease("afe-peer-n3", "n2", "10.0.0.2:8445", time.Second), peer{}},
		"no holder":               {lease("afe-peer-", "", "10.0.0.2:8445", time.Second), peer{}},
		"not a peer lease's name": {lease("n2", "n2", "10.0.0.2:8445", time.Second), peer{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := p.of(tc.lease); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("of() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
