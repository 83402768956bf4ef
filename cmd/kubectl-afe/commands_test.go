package main

import "testing"

func TestExitCodeOf(t *testing.T) {
	tests := map[int32]int{1: 1, 7: 7, 124: 124, 255: 255, 256: 1, 512: 1, -1: 1, -256: 1}
	for code, want := range tests {
		if got := exitCodeOf(code); got != want {
			t.Errorf("exitCodeOf(%d) = %d, want %d", code, got, want)
		}
	}
}
