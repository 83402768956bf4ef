package dockertest

import (
	"io"
	"net"
	"os"
	"sync"
)

// Forwarder relays a unix socket to the Docker engine's, and can cut and
// restore that path: tests give it to the controller as --docker-host to
// play an engine that goes away and comes back.
type Forwarder struct {
	// Path is the socket's path, or the address of a TCP forwarder.
	Path    string
	network string
	target  string
	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]bool
}

// NewForwarder listens on path and relays to the engine's socket.
func NewForwarder(path string) (*Forwarder, error) {
	f := &Forwarder{Path: path, network: "unix", target: "/var/run/docker.sock", conns: map[net.Conn]bool{}}
	return f, f.Restore()
}

// NewTCPForwarder listens on a free loopback port and relays to the
// engine's socket: an engine the controller reaches as a remote one.
func NewTCPForwarder() (*Forwarder, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{Path: l.Addr().String(), network: "tcp", target: "/var/run/docker.sock", conns: map[net.Conn]bool{}, ln: l}
	go f.accept(l)
	return f, nil
}

// Host is the value for --docker-host.
func (f *Forwarder) Host() string { return f.network + "://" + f.Path }

// Cut closes the socket and every relayed connection: the engine is gone.
func (f *Forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		_ = f.ln.Close()
		f.ln = nil
	}
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = map[net.Conn]bool{}
	if f.network == "unix" {
		_ = os.Remove(f.Path)
	}
}

// Restore listens again: the engine is back.
func (f *Forwarder) Restore() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		return nil
	}
	if f.network == "unix" {
		_ = os.Remove(f.Path)
	}
	ln, err := net.Listen(f.network, f.Path)
	if err != nil {
		return err
	}
	f.ln = ln
	go f.accept(ln)
	return nil
}

func (f *Forwarder) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", f.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		f.mu.Lock()
		if f.ln != ln { // cut meanwhile
			f.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		f.conns[c], f.conns[up] = true, true
		f.mu.Unlock()
		go f.relay(c, up)
	}
}

// relay copies both ways, passing a half-close on (an exec's client closes
// its side of the stream and still reads the output), and closes both when
// both ways are done.
func (f *Forwarder) relay(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
	f.mu.Lock()
	delete(f.conns, a)
	delete(f.conns, b)
	f.mu.Unlock()
}
