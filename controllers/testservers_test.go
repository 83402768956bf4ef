package controllers

import (
	"context"
	"fmt"
	"net"
	"net/http"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
)

// testWeb is the suite's web server on the egress network, known there as
// allowed.test and denied.test, serving on ports 80 and 443 (plain HTTP on
// both: a CONNECT tunnel carries it as well as TLS).
const testWeb = "afe-envtest-web"

// slowDownload is the script of the web server's /cgi-bin/slow, quoted for
// the shell, one argument a line: a download that lasts about 6 s, a
// chunk a second, and that touches /tmp/slow.<query> when it starts.
const slowDownload = `'#!/bin/sh' 'touch "/tmp/slow.${QUERY_STRING}"' ` +
	`'printf "Content-Type: text/plain\r\n\r\n"' ` +
	`'for i in 1 2 3 4 5 6; do echo "chunk-$i"; sleep 1; done' 'echo done'`

// hostService listens on every host interface, as a service a sandbox must
// never reach.
var hostService net.Listener

func startTestServers(engine *docker.Client) error {
	ctx := context.Background()
	labels := map[string]string{afev1.LabelController: instance}
	if _, err := engine.EnsureNetwork(ctx, docker.NetworkSpec{Name: egressNetwork, Labels: labels}); err != nil {
		return err
	}
	_, err := engine.RunContainer(ctx, docker.ContainerSpec{
		Name:    testWeb + "-" + instance,
		Image:   "afe/busybox:dev",
		Labels:  labels,
		Network: egressNetwork,
		Aliases: []string{"allowed.test", "denied.test", "other.allowed.test"},
		Command: []string{"sh", "-c", "mkdir -p /www/cgi-bin && echo hello-from-test-web > /www/index.html && " +
			"printf '%s\\n' " + slowDownload + " > /www/cgi-bin/slow && chmod +x /www/cgi-bin/slow && " +
			"httpd -p 443 -h /www && exec httpd -f -p 80 -h /www"},
		CapDrop: []string{"ALL"},
		CapAdd:  []string{"NET_BIND_SERVICE"},
		Init:    true,
	})
	if err != nil {
		return err
	}
	hostService, err = net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		return err
	}
	go func() {
		_ = http.Serve(hostService, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprintln(w, "host-secret")
		}))
	}()
	return nil
}
