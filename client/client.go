package client

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Client reaches the controller's objects and its access API in one
// namespace, with the identity of the rest.Config it was made from.
type Client struct {
	cfg       *rest.Config
	kube      ctrlclient.WithWatch
	access    *rest.RESTClient
	namespace string
	// unavailableWait bounds the retries of an exec whose context has no
	// deadline while the access API is not served.
	unavailableWait time.Duration
}

// An Option configures a Client.
type Option func(*Client)

// WithNamespace is the namespace the Client works in (default "default").
func WithNamespace(ns string) Option {
	return func(c *Client) { c.namespace = ns }
}

// Scheme is a runtime.Scheme with the Kubernetes types and the
// sandbox.afe.dev types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := afev1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// New is a Client with the identity and server of cfg.
func New(cfg *rest.Config, opts ...Option) (*Client, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	kube, err := ctrlclient.NewWithWatch(cfg, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	access, err := rest.RESTClientFor(accessConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("client: the access API: %w", err)
	}
	c := &Client{cfg: rest.CopyConfig(cfg), kube: kube, access: access, namespace: "default", unavailableWait: DefaultUnavailableWait}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// accessConfig is cfg for the access API's group and version, as
// kubectl's configuration of a pods/exec request is for core/v1.
func accessConfig(cfg *rest.Config) *rest.Config {
	ac := rest.CopyConfig(cfg)
	gv := accessv1.SchemeGroupVersion
	ac.GroupVersion = &gv
	ac.APIPath = "/apis"
	ac.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	if ac.UserAgent == "" {
		ac.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return ac
}

// Namespace is the namespace the Client works in.
func (c *Client) Namespace() string { return c.namespace }

// Kube is the controller-runtime client the Client reads and writes
// objects with, for what this package does not offer.
func (c *Client) Kube() ctrlclient.WithWatch { return c.kube }

// subresource is a request of the access API for the object's subresource,
// built as kubectl builds a pods/exec request.
func (c *Client) subresource(verb, resource, name, sub string) *rest.Request {
	return c.access.Verb(verb).Namespace(c.namespace).Resource(resource).Name(name).SubResource(sub)
}
