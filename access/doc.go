// Package access is the manager's access API: exec in a sandbox, its files
// and the logs of its Runs, for a caller known only by its Kubernetes
// identity. It is an aggregated API (group access.sandbox.afe.dev, version
// v1alpha1): the Kubernetes API server authenticates the caller, authorizes
// the request with RBAC and proxies it here with the caller's identity in
// request headers, over a connection made with its front-proxy client
// certificate. This server verifies that certificate against the CA the API
// server publishes in kube-system/extension-apiserver-authentication, and
// authorizes the request again with a SubjectAccessReview (k8s.io/apiserver's
// delegating authenticator and authorizer), so a caller reaching the port
// directly gets no further than through the API server.
//
// The paths are subresources of a namespaced object:
//
//	POST .../namespaces/NS/sandboxes/NAME/exec          (create sandboxes/exec: SPDY)
//	GET  .../namespaces/NS/sandboxes/NAME/exec          (WebSocket; authorized as create sandboxes/exec too)
//	GET  .../namespaces/NS/sandboxes/NAME/files?path=P  (get sandboxes/files: a tar of P)
//	POST .../namespaces/NS/sandboxes/NAME/files?path=D  (create sandboxes/files: a tar into D)
//	GET  .../namespaces/NS/runs/NAME/log[?follow=true]  (get runs/log)
//
// under /apis/access.sandbox.afe.dev/v1alpha1.
//
// Exec speaks the Kubernetes streaming protocols that client-go's
// remotecommand executors, kubectl exec and Python's Kubernetes client
// speak: SPDY with v4.channel.k8s.io, and WebSocket with v5.channel.k8s.io
// or v4.channel.k8s.io (numbered channels: 0 stdin, 1 stdout, 2 stderr,
// 3 the exit status, 4 the terminal's size). The API server lets a
// WebSocket's GET through with get on sandboxes/exec; this server
// authorizes it as create, so get alone never runs a command.
package access
