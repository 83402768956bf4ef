// Command udpsink waits for one UDP datagram on an address and prints where it
// came from and, for a DNS query, the name asked for. The egress tests run it
// inside a sandbox on 127.0.0.1:53 to see where the engine's resolver sends
// the lookups of external names. It is built into the test image.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:53", "Where to listen.")
	wait := flag.Duration("wait", 10*time.Second, "How long to wait.")
	flag.Parse()
	conn, err := net.ListenPacket("udp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("listening")
	_ = conn.SetReadDeadline(time.Now().Add(*wait))
	buf := make([]byte, 512)
	n, from, err := conn.ReadFrom(buf)
	if err != nil {
		fmt.Println("no datagram")
		os.Exit(1)
	}
	fmt.Printf("datagram from %s for %s\n", from, qname(buf[:n]))
}

// qname reads the first question's name of a DNS message.
func qname(msg []byte) string {
	var labels []string
	for i := 12; i < len(msg); {
		l := int(msg[i])
		if l == 0 || i+1+l > len(msg) {
			break
		}
		labels = append(labels, string(msg[i+1:i+1+l]))
		i += 1 + l
	}
	return strings.Join(labels, ".")
}
