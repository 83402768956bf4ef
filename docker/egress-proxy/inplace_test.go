package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/egress"
	"afe.dev/sandbox/test/dockertest"
)

// teller gives a proxy requests on its stdin, as the controller writes
// them through the engine.
type teller struct {
	t      *testing.T
	engine *docker.Client
	proxy  string
	mu     sync.Mutex
	nonces int
}

func newTeller(t *testing.T, proxy string) *teller {
	engine, err := docker.New("")
	if err != nil {
		t.Fatal(err)
	}
	return &teller{t: t, engine: engine, proxy: proxy}
}

// line writes the request line (its %s the nonce, fresh each time) and
// returns the proxy's answer to it without the nonce, "" after two
// seconds without one.
func (tl *teller) line(format string) string {
	tl.t.Helper()
	return tl.request(func(nonce string) string { return fmt.Sprintf(format, nonce) })
}

// request writes the line of the nonce (fresh each time) and returns the
// proxy's answer as line does.
func (tl *teller) request(line func(nonce string) string) string {
	tl.t.Helper()
	tl.mu.Lock()
	tl.nonces++
	nonce := fmt.Sprintf("%032x", tl.nonces)
	tl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	answer, err := tl.engine.Tell(ctx, tl.proxy, line(nonce),
		func(line string) bool { return strings.HasSuffix(line, " "+nonce) })
	if err != nil && !errors.Is(err, docker.ErrNoAnswer) {
		tl.t.Error(err)
	}
	return strings.TrimSuffix(answer, " "+nonce)
}

// config gives the proxy c in place and fails the test unless it is taken.
func (tl *teller) config(c egress.Config) {
	tl.t.Helper()
	if answer := tl.request(c.Request); answer != "afe-egress-proxy: allowlist "+c.ID+" taken" {
		tl.t.Fatalf("configuration %s not taken: %q", c.ID, answer)
	}
}

// A configuration is replaced in place (a request on the proxy's stdin, as
// the controller writes it through the engine): the new rules hold within
// a second, a connection in flight goes on to its end, --admits says the
// configuration's ID, an empty allowlist admits nothing, and a text that
// is not whole (cut, of another length, of two IDs) is refused, leaving
// the rules as they were; a line that is not a request is not answered.
func TestProxyImageReloadsItsAllowlistInPlace(t *testing.T) {
	h := newHarness(t)
	// A server that streams for 6 s, on names of its own.
	h.docker("run", "-d", "--label", h.label, "--name", h.network+"-stream", "--network", h.network,
		"--network-alias", "stream.test", "--network-alias", "other.test", dockertest.TestImage, "sh", "-c",
		`mkdir -p /www/cgi-bin && echo other-ok > /www/index.html && printf '#!/bin/sh\nprintf "Content-Type: application/octet-stream\\r\\n\\r\\n"\nfor i in $(seq 60); do head -c 65536 /dev/zero; sleep 0.1; done\n' > /www/cgi-bin/slow && chmod 755 /www/cgi-bin/slow && exec httpd -f -p 80 -h /www`)
	first, firstConfig := policy(t, "stream.test", true)
	proxy := h.proxy(firstConfig.Env(first)...)
	runsThisEntrypoint(h, proxy)
	admits := func() string { return h.docker("exec", proxy, "afe-egress-squid", "--admits") }
	tell := newTeller(t, proxy)
	// within polls until get(url) does what ok says, for at most a second.
	within := func(url string, allowed bool) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for {
			out, err := h.get(proxy, url)
			if (err == nil) == allowed {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: allowed %t not in force a second after the reload: %v %q", url, allowed, err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := admits(); got != firstConfig.ID {
		t.Fatalf("--admits says %q, want %s", got, firstConfig.ID)
	}
	within("http://stream.test/", true)
	within("http://other.test/", false)

	client := h.network + "-client"
	h.docker("exec", "-d", "-e", "http_proxy=http://"+proxy+":3128", client, "sh", "-c",
		"wget -q -O /tmp/stream http://stream.test/cgi-bin/slow; echo $? > /tmp/stream.rc")
	time.Sleep(time.Second)

	_, both := policy(t, "stream.test,other.test", true)
	tell.config(both)
	within("http://other.test/", true)
	if got := admits(); got != both.ID {
		t.Fatalf("--admits says %q, want %s", got, both.ID)
	}
	_, other := policy(t, "other.test", true)
	tell.config(other)
	within("http://stream.test/", false)

	_, hostile := policy(t, "stream.test", true)
	text := strings.ReplaceAll(hostile.Text, "\n", "\t")
	for name, request := range map[string]func(nonce string) string{
		"cut":            func(n string) string { return frame(n, len(text)/2, text[:len(text)/2]) },
		"another length": func(n string) string { return frame(n, len(text)+1, text) },
		"two IDs": func(n string) string {
			return frame(n, len(text), strings.Replace(text, egress.Trailer+hostile.ID, egress.Trailer+other.ID, 1))
		},
		"a carriage return": func(n string) string { return frame(n, len(text), strings.Replace(text, "\t", "\r", 3)) },
	} {
		if answer := tell.request(request); answer != "afe-egress-proxy: allowlist refused" {
			t.Fatalf("%s: %q", name, answer)
		}
	}
	for _, ignored := range []string{"afe-egress-config %s", "afe-egress-config X%s 5 hello", "afe-egress-config %s five hello",
		"egress-config %s 5 hello", "afe-allowlist %s aa 1 other.test -"} {
		if answer := tell.line(ignored); answer != "" {
			t.Fatalf("%q was answered: %q", ignored, answer)
		}
	}
	if got := admits(); got != other.ID {
		t.Fatalf("after refused requests --admits says %q, want %s", got, other.ID)
	}
	within("http://stream.test/", false)
	_, nothing := policy(t, "", true)
	tell.config(nothing)
	within("http://other.test/", false)

	// The stream began before the reloads and went on to its end.
	deadline := time.Now().Add(20 * time.Second)
	for {
		rc, err := exec.Command("docker", "exec", client, "cat", "/tmp/stream.rc").Output()
		if err == nil {
			size := h.docker("exec", client, "sh", "-c", "wc -c < /tmp/stream")
			if strings.TrimSpace(string(rc)) != "0" || size != fmt.Sprint(60*65536) {
				t.Fatalf("the stream in flight was cut by a reload: exit %s, %s bytes", rc, size)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream did not end")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Changes back to back, as a sandbox edited twice in a row gives them: each
// request comes while squid still reads the configuration of the one
// before. squid never reads a file being written (an earlier proxy wrote
// squid's file in place, and squid stopped on the half it read: "FATAL:
// Bungled"): the proxy runs on, and admits the last configuration. Then
// two requests at once, whose lines the engine may write in any order:
// each is taken whole or refused, never mixed.
func TestProxyImageTakesChangesBackToBack(t *testing.T) {
	h := newHarness(t)
	p, c := policy(t, "allowed.test", true)
	proxy := h.proxy(c.Env(p)...)
	tell := newTeller(t, proxy)
	var last egress.Config
	start := time.Now()
	const changes = 20
	for i := range changes {
		hosts := "allowed.test"
		if i%2 == 0 {
			hosts = fmt.Sprintf("allowed.test,h%d.test", i)
		}
		_, last = policy(t, hosts, true)
		tell.config(last)
	}
	t.Logf("%d changes back to back in %v (%v each, request to answer)", changes, time.Since(start), time.Since(start)/changes)
	var wg sync.WaitGroup
	answers := make([]string, 2)
	configs := make([]egress.Config, 2)
	for i := range configs {
		_, configs[i] = policy(t, fmt.Sprintf("allowed.test,at-once-%d.test", i), true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = tell.request(configs[i].Request)
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a != "afe-egress-proxy: allowlist "+configs[i].ID+" taken" && a != "afe-egress-proxy: allowlist refused" {
			t.Fatalf("a request at once was answered %q", a)
		}
	}
	time.Sleep(2 * time.Second) // squid reads the last one
	if running := h.docker("inspect", "-f", "{{.State.Running}}", proxy); running != "true" {
		logs, _ := exec.Command("docker", "logs", "--tail", "20", proxy).CombinedOutput()
		t.Fatalf("the proxy stopped after changes back to back:\n%s", logs)
	}
	if logs, _ := exec.Command("docker", "logs", proxy).CombinedOutput(); strings.Contains(string(logs), "FATAL") {
		t.Fatalf("squid met a fatal error:\n%s", logs)
	}
	if out, err := h.get(proxy, "http://allowed.test/"); err != nil || out != "web-ok" {
		t.Fatalf("the proxy does not admit the allowed host after the changes: %v %q", err, out)
	}
}

// frame is a request line of the nonce, the length and the text as given.
func frame(nonce string, length int, text string) string {
	return fmt.Sprintf("afe-egress-config %s %d %s", nonce, length, text)
}
