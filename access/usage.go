package access

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/usage"
)

// serveUsage answers GET sandboxusages/NAME with the SandboxUsage of the
// Sandbox of that name, and GET sandboxusages, of a namespace or of every
// one, with a SandboxUsageList: the figures the manager keeps in memory
// (Options.Usage), never read from an object.
func (s *Server) serveUsage(w http.ResponseWriter, r *http.Request, req *request) {
	if s.opts.Usage == nil {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonUsageNotMeasured,
			"this manager measures no usage (--usage-period is negative)")
		return
	}
	if req.name == "" {
		s.serveUsageList(w, r, req)
		return
	}
	key := types.NamespacedName{Namespace: req.namespace, Name: req.name}
	sbx := &afev1.Sandbox{}
	if err := s.reader.Get(r.Context(), key, sbx); err != nil {
		if apierrors.IsNotFound(err) {
			err = &statusError{http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonSandboxNotFound,
				fmt.Sprintf("sandboxes.sandbox.afe.dev %q not found", req.name)}
		}
		writeError(w, err)
		return
	}
	// Figures measured as another Sandbox of the same name are not this
	// one's.
	item, ok := s.opts.Usage.Get(key, sbx.UID)
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonUsageNotMeasured,
			fmt.Sprintf("sandbox %s has no usage measured: its container is not running, or started since the last measurement", req.name))
		return
	}
	writeJSON(w, http.StatusOK, item)
}

// serveUsageList answers with the usage this manager measured in the
// namespace (every namespace without one) and, in per-node mode (unless
// another manager asked), every other node's, gathered as the caller.
func (s *Server) serveUsageList(w http.ResponseWriter, r *http.Request, req *request) {
	sel, err := labels.Parse(r.URL.Query().Get(accessv1.ParamLabelSelector))
	if err != nil {
		writeError(w, badRequest("labelSelector: %v", err))
		return
	}
	list := accessv1.SandboxUsageList{
		TypeMeta: metav1.TypeMeta{Kind: accessv1.SandboxUsageListKind, APIVersion: accessv1.SchemeGroupVersion.String()},
		Items:    s.opts.Usage.List(req.namespace, sel),
	}
	if s.peer != nil && req.hop == "" {
		answers, missing, err := askEveryPeer[accessv1.SandboxUsage](s, r, req)
		if err != nil {
			writeError(w, err)
			return
		}
		for _, a := range answers {
			list.Items = append(list.Items, a.Items...)
		}
		list.Items, list.Unanswered = newestOfEach(list.Items), missing
	}
	// Said in the list, and as API warnings, which kubectl and client-go
	// show whatever they make of the list.
	for _, n := range list.Unanswered {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", fmt.Sprintf("node %s did not answer, its sandboxes are missing: %s", n.Node, n.Message)))
	}
	writeJSON(w, http.StatusOK, list)
}

// newestOfEach keeps one usage per sandbox, the newest (a sandbox whose
// ticket just moved may have been measured by two nodes), in the order of
// namespace and name.
func newestOfEach(items []accessv1.SandboxUsage) []accessv1.SandboxUsage {
	newest := map[types.NamespacedName]int{}
	out := make([]accessv1.SandboxUsage, 0, len(items))
	for _, it := range items {
		k := types.NamespacedName{Namespace: it.Namespace, Name: it.Name}
		if i, ok := newest[k]; ok {
			if it.Timestamp.After(out[i].Timestamp.Time) {
				out[i] = it
			}
			continue
		}
		newest[k] = len(out)
		out = append(out, it)
	}
	usage.SortItems(out)
	return out
}
