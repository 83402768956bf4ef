package docker

import (
	"errors"
	"testing"
)

func TestIsPoolExhausted(t *testing.T) {
	tests := []struct {
		msg  string
		want bool
	}{
		// Docker 20.10.
		{"Error response from daemon: could not find an available, non-overlapping IPv4 address pool among the defaults to assign to the network", true},
		// Docker 23 and later.
		{"Error response from daemon: all predefined address pools have been fully subnetted", true},
		{"Error response from daemon: network with name afe-x-net already exists", false},
	}
	for _, tt := range tests {
		if got := isPoolExhausted(errors.New(tt.msg)); got != tt.want {
			t.Errorf("isPoolExhausted(%q) = %v, want %v", tt.msg, got, tt.want)
		}
	}
}
