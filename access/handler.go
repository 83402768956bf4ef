package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// errUnauthorized is a request without an identity the server accepts.
var errUnauthorized = errors.New("Unauthorized")

// A route is a subresource of the API and the method that reaches it.
type route struct {
	resource, subresource, method string
}

// routes are what the API serves; each is authorized as the verb the
// Kubernetes API server derives from the method (POST is create, GET get),
// except where authorizeAs says otherwise.
var routes = map[route]func(s *Server, w http.ResponseWriter, r *http.Request, req *request){
	{accessv1.ResourceSandboxes, accessv1.SubresourceExec, http.MethodPost}:     (*Server).serveExec,
	{accessv1.ResourceSandboxes, accessv1.SubresourceExec, http.MethodGet}:      (*Server).serveExec,
	{accessv1.ResourceSandboxes, accessv1.SubresourceFiles, http.MethodGet}:     (*Server).serveDownload,
	{accessv1.ResourceSandboxes, accessv1.SubresourceFiles, http.MethodPost}:    (*Server).serveUpload,
	{accessv1.ResourceRuns, accessv1.SubresourceLog, http.MethodGet}:            (*Server).serveLog,
	{accessv1.ResourceSandboxes, accessv1.SubresourceTelemetry, http.MethodGet}: (*Server).serveSandboxTelemetry,
	{accessv1.ResourceTickets, accessv1.SubresourceTelemetry, http.MethodGet}:   (*Server).serveTicketTelemetry,
	{accessv1.ResourceSandboxUsages, "", http.MethodGet}:                        (*Server).serveUsage,
}

// discovered are the resources and subresources as discovery lists them,
// in its order, with the kind each answers.
var discovered = []struct{ resource, subresource, kind string }{
	{accessv1.ResourceSandboxes, accessv1.SubresourceExec, "SandboxExec"},
	{accessv1.ResourceSandboxes, accessv1.SubresourceFiles, "SandboxFiles"},
	{accessv1.ResourceRuns, accessv1.SubresourceLog, "RunLog"},
	{accessv1.ResourceSandboxes, accessv1.SubresourceTelemetry, TelemetryKind},
	{accessv1.ResourceTickets, accessv1.SubresourceTelemetry, TelemetryKind},
	{accessv1.ResourceSandboxUsages, "", accessv1.SandboxUsageKind},
}

// collections are the routes that are also served without a name, as a
// list of a namespace or of every namespace (verb list).
var collections = map[route]bool{
	{accessv1.ResourceSandboxUsages, "", http.MethodGet}: true,
}

// authorizeAs are the routes authorized as another verb than their
// method's. An exec over WebSocket is a GET (the WebSocket handshake
// is one), which the API server lets through with get on sandboxes/exec;
// it runs a command all the same, so it is authorized as create, as a
// POST is: get alone never executes anything.
var authorizeAs = map[route]string{
	{accessv1.ResourceSandboxes, accessv1.SubresourceExec, http.MethodGet}: "create",
}

// request is an authorized request: who asks, for which object.
type request struct {
	user            user.Info
	namespace, name string
	// hop is, for a request another manager forwarded (per-node mode),
	// that manager's node.
	hop string
}

// ServeHTTP authenticates, serves discovery, and authorizes every other
// request with a SubjectAccessReview before serving it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, err := s.auth.authenticate(r)
	if err != nil {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "", "Unauthorized")
		return
	}
	s.handle(w, r, u, "")
}

// handle serves the request of an authenticated caller: discovery, or,
// once a SubjectAccessReview allows it, the route; in per-node mode a
// request about another node's sandbox is forwarded there (hop names the
// node of a manager that forwarded this one).
func (s *Server) handle(w http.ResponseWriter, r *http.Request, u user.Info, hop string) {
	info, err := s.info.NewRequestInfo(r)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, accessv1.ReasonInvalidRequest, err.Error())
		return
	}
	if !info.IsResourceRequest {
		s.serveDiscovery(w, r)
		return
	}
	rt := route{info.Resource, info.Subresource, r.Method}
	serve, ok := routes[rt]
	// A route is asked of one object of a namespace or, for a collection,
	// of all of a namespace or of every one.
	asked := info.Namespace != "" && info.Name != "" || collections[rt] && info.Name == ""
	if !ok || info.APIGroup != Group || info.APIVersion != Version || !asked {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "", "the server could not find the requested resource")
		return
	}
	if info.Verb == "watch" {
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, accessv1.ReasonInvalidRequest, info.Resource+" cannot be watched")
		return
	}
	if verb, ok := authorizeAs[rt]; ok {
		info.Verb = verb
	}
	decision, reason, err := s.auth.authz.Authorize(r.Context(), attributes(u, info))
	if decision != authorizer.DecisionAllow {
		s.log.Info("Refused", "user", u.GetName(), "verb", info.Verb, "resource", resourceOf(info),
			"namespace", info.Namespace, "name", info.Name, "forwardedBy", hop)
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, accessv1.ReasonForbidden, forbidden(u, info, reason, err))
		return
	}
	req := &request{user: u, namespace: info.Namespace, name: info.Name, hop: hop}
	// A request about one sandbox is served by its node's manager; a list
	// and the telemetry are gathered from every node's.
	if s.peer != nil && info.Subresource != accessv1.SubresourceTelemetry && info.Name != "" && s.route(w, r, req, info.Resource) {
		return
	}
	serve(s, w, r, req)
}

// resourceOf is the resource of a request, with its subresource after a
// slash.
func resourceOf(info *apirequest.RequestInfo) string {
	return resourceName(info.Resource, info.Subresource)
}

// resourceName is a resource with its subresource after a slash, as
// discovery and RBAC name it.
func resourceName(resource, subresource string) string {
	if subresource == "" {
		return resource
	}
	return resource + "/" + subresource
}

// forbidden is the message of a refusal, in the words of the Kubernetes
// API server's.
func forbidden(u user.Info, info *apirequest.RequestInfo, reason string, err error) string {
	what := info.Resource + "." + Group
	if info.Name != "" {
		what += fmt.Sprintf(" %q", info.Name)
	}
	where := fmt.Sprintf("in the namespace %q", info.Namespace)
	if info.Namespace == "" {
		where = "at the cluster scope"
	}
	msg := fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q in API group %q %s",
		what, u.GetName(), info.Verb, resourceOf(info), Group, where)
	if reason != "" {
		msg += ": " + reason
	}
	if err != nil {
		msg += ": " + err.Error()
	}
	return msg
}

// attributes are what the SubjectAccessReview asks about.
func attributes(u user.Info, info *apirequest.RequestInfo) authorizer.Attributes {
	return authorizer.AttributesRecord{
		User:            u,
		Verb:            info.Verb,
		Namespace:       info.Namespace,
		APIGroup:        info.APIGroup,
		APIVersion:      info.APIVersion,
		Resource:        info.Resource,
		Subresource:     info.Subresource,
		Name:            info.Name,
		ResourceRequest: true,
		Path:            info.Path,
	}
}

// serveDiscovery answers the discovery requests the aggregator and kubectl
// make; any authenticated caller may read them (as with the API server's
// system:discovery role).
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: Group + "/" + Version, Version: Version}
	group := metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             Group,
		Versions:         []metav1.GroupVersionForDiscovery{gv},
		PreferredVersion: gv,
	}
	switch r.URL.Path {
	case "/apis", "/apis/":
		writeJSON(w, http.StatusOK, metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{group}})
	case "/apis/" + Group, "/apis/" + Group + "/":
		writeJSON(w, http.StatusOK, group)
	case "/apis/" + Group + "/" + Version, "/apis/" + Group + "/" + Version + "/":
		writeJSON(w, http.StatusOK, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv.GroupVersion,
			APIResources: apiResources(),
		})
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "", "the server could not find the requested resource")
	}
}

// apiResources lists the resources and subresources, with their verbs.
func apiResources() []metav1.APIResource {
	verbs := map[string][]string{}
	for rt := range routes {
		name := resourceName(rt.resource, rt.subresource)
		verb := "create"
		if rt.method == http.MethodGet {
			verb = "get"
		}
		verbs[name] = append(verbs[name], verb)
		if collections[rt] {
			verbs[name] = append(verbs[name], "list")
		}
	}
	var out []metav1.APIResource
	for _, d := range discovered {
		name := resourceName(d.resource, d.subresource)
		if v, ok := verbs[name]; ok {
			slices.Sort(v)
			out = append(out, metav1.APIResource{Name: name, Namespaced: true, Kind: d.kind, Verbs: v})
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeStatus answers with a Status, as the Kubernetes API does.
// A refusal with a cause carries it in its Details (api/access/v1alpha1):
// clients act on that, never on the message.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, cause accessv1.Reason, message string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     int32(code),
	}
	if cause != "" {
		st.Details = accessv1.Details(cause, "", "")
	}
	writeJSON(w, code, st)
}
