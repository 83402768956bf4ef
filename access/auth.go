package access

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// The ConfigMap where the Kubernetes API server publishes how it
// authenticates itself to aggregated API servers, and its keys.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
)

// delegated is who the caller is and what it may do, as the Kubernetes API
// server says: a front proxy's client certificate (verified against the
// published request-header CA and allowed names) with the user in request
// headers, a client certificate of the API server's client CA, or a bearer
// token (a TokenReview); then a SubjectAccessReview per request.
type delegated struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	// run keeps the CAs and headers in step with the ConfigMap until ctx
	// ends; it returns once they have been read once.
	run func(ctx context.Context) error
}

// webhookBackoff is how TokenReviews and SubjectAccessReviews are retried.
var webhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

func newDelegated(kube kubernetes.Interface) (*delegated, error) {
	headers := headerrequest.NewRequestHeaderAuthRequestController(authConfigMapName, authConfigMapNamespace, kube,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	proxyCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("requestheader-client-ca",
		authConfigMapNamespace, authConfigMapName, "requestheader-client-ca-file", kube)
	if err != nil {
		return nil, err
	}
	clientCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca",
		authConfigMapNamespace, authConfigMapName, "client-ca-file", kube)
	if err != nil {
		return nil, err
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:            kube.AuthenticationV1(),
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                &webhookBackoff,
		CacheTTL:                           10 * time.Second,
		ClientCertificateCAContentProvider: clientCA,
		RequestHeaderConfig: &authenticatorfactory.RequestHeaderConfig{
			UsernameHeaders:     headerrequest.StringSliceProviderFunc(headers.UsernameHeaders),
			UIDHeaders:          headerrequest.StringSliceProviderFunc(headers.UIDHeaders),
			GroupHeaders:        headerrequest.StringSliceProviderFunc(headers.GroupHeaders),
			ExtraHeaderPrefixes: headerrequest.StringSliceProviderFunc(headers.ExtraHeaderPrefixes),
			CAContentProvider:   proxyCA,
			AllowedClientNames:  headerrequest.StringSliceProviderFunc(headers.AllowedClientNames),
		},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("delegating authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Second,
		DenyCacheTTL:              5 * time.Second,
		WebhookRetryBackoff:       &webhookBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("delegating authorizer: %w", err)
	}
	run := func(ctx context.Context) error {
		if err := headers.RunOnce(ctx); err != nil {
			return fmt.Errorf("read %s/%s: %w", authConfigMapNamespace, authConfigMapName, err)
		}
		for _, ca := range []*dynamiccertificates.ConfigMapCAController{proxyCA, clientCA} {
			if err := ca.RunOnce(ctx); err != nil {
				return fmt.Errorf("read %s/%s: %w", authConfigMapNamespace, authConfigMapName, err)
			}
			go ca.Run(ctx, 1)
		}
		go headers.Run(ctx, 1)
		return nil
	}
	return &delegated{authn: authn, authz: authz, run: run}, nil
}

// authenticate is the caller, or an error fit for the caller: an anonymous
// or unauthenticated caller is refused even if the API server let it
// through.
func (d *delegated) authenticate(r *http.Request) (user.Info, error) {
	resp, ok, err := d.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		return nil, errUnauthorized
	}
	u := resp.User
	if u.GetName() == "" || u.GetName() == user.Anonymous || slices.Contains(u.GetGroups(), user.AllUnauthenticated) {
		return nil, errUnauthorized
	}
	return u, nil
}
