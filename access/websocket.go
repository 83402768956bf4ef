package access

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// webSocketProtocols are the WebSocket subprotocols of an exec, the
// client's preferred first: v5 adds a client's close of stdin to v4.
// Older ones (v1 to v3) carry the exit status as text and are refused.
var webSocketProtocols = []string{remotecommand.StreamProtocolV5Name, remotecommand.StreamProtocolV4Name}

// The channels of the WebSocket protocols, numbered as kubelet numbers
// them (stdin, stdout and stderr as their file descriptors).
const (
	channelStdin = iota
	channelStdout
	channelStderr
	channelStatus
	channelResize
)

// openWebSocket upgrades the GET request to WebSocket with one of
// webSocketProtocols and opens the channels the options call for. A nil
// session means the request was answered: no protocol it speaks, or a
// handshake that failed.
func openWebSocket(_ context.Context, w http.ResponseWriter, r *http.Request, o execOptions) (*execSession, error) {
	if !offersProtocol(r, webSocketProtocols) {
		writeError(w, badRequest("exec over WebSocket needs the subprotocol %s", strings.Join(webSocketProtocols, " or ")))
		return nil, nil
	}
	channels := make([]wsstream.ChannelType, channelResize+1)
	attach := func(channel int, want bool, kind wsstream.ChannelType) {
		channels[channel] = wsstream.IgnoreChannel
		if want {
			channels[channel] = kind
		}
	}
	attach(channelStdin, o.stdin, wsstream.ReadChannel)
	attach(channelStdout, o.stdout, wsstream.WriteChannel)
	attach(channelStderr, o.stderr, wsstream.WriteChannel)
	// The status channel is also read: the client sends nothing on it, so
	// its reader ends only when the connection does (see gone).
	attach(channelStatus, true, wsstream.ReadWriteChannel)
	attach(channelResize, o.tty, wsstream.ReadChannel)
	protocols := map[string]wsstream.ChannelProtocolConfig{}
	for _, p := range webSocketProtocols {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	}
	conn := wsstream.NewConn(protocols)
	conn.SetIdleTimeout(idleTimeout)
	protocol, streams, err := conn.Open(w, r)
	if err != nil {
		return nil, err // the handshake has answered
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_, _ = io.Copy(io.Discard, streams[channelStatus])
	}()
	session := &execSession{protocol: "WebSocket " + protocol, gone: gone, end: func() { _ = conn.Close() }}
	// The status channel's reader above ends with the connection, not
	// when the status is sent.
	session.streams.status = keepOpen{streams[channelStatus]}
	if o.stdin {
		session.streams.stdin = streams[channelStdin]
	}
	if o.stdout {
		session.streams.stdout = streams[channelStdout]
	}
	if o.stderr {
		session.streams.stderr = streams[channelStderr]
	}
	if o.tty {
		session.streams.resize = streams[channelResize]
	}
	return session, nil
}

// offersProtocol says whether the request offers one of the subprotocols.
func offersProtocol(r *http.Request, protocols []string) bool {
	for _, header := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(header, ",") {
			if slices.Contains(protocols, strings.TrimSpace(p)) {
				return true
			}
		}
	}
	return false
}

// keepOpen is a channel whose Close leaves it open: the connection's end
// closes it.
type keepOpen struct{ io.Writer }

func (keepOpen) Close() error { return nil }
