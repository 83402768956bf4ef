package egress_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"afe.dev/sandbox/internal/egress"
	"afe.dev/sandbox/internal/sandboxspec"
)

// The renderer's own check of a host (written by hand) and admission's
// (the CRD's pattern and bounds, internal/sandboxspec) accept the same
// entries: neither refuses what the other lets through.
func FuzzParseHostAgreesWithAdmission(f *testing.F) {
	label63 := strings.Repeat("a", 63)
	for _, s := range []string{"example.com", ".pypi.org", "10.0.0.1", "a.com\nhttp_access allow all", "*.x.com", "exаmple.com", "x.y:80", "", ".com",
		label63 + ".com", label63 + "a.com", "a." + label63, "..a.com", ".a.co-m", "a.1com", "a.c1", "-a.com", "a-.com", "a.-com", "a.com-",
		"a--b.com", "1.2.3.4", "a.b.c.d.e.f", "a..com", "a.com.", "a.b", ".a.b", "a.b-", "0a.b", "A.com", "a.com b",
		egress.LongName(1, 253), egress.LongName(1, 254), "." + egress.LongName(1, 252), "." + egress.LongName(1, 253)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		h, err := egress.ParseHost(entry)
		admitted := sandboxspec.ValidateEgressHost(entry) == nil
		if (err == nil) != admitted {
			t.Fatalf("%q: admission accepts %v, the renderer's check %v", entry, admitted, err)
		}
		if err == nil && h.Entry() != entry {
			t.Fatalf("%q reads back as %q", entry, h.Entry())
		}
	})
}

// The shared table of entries (testdata/hosts.json), which the Python
// client's tests read too: the renderer's check and admission's agree with
// it, entry by entry.
func TestHostsTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "hosts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table []struct {
		Entry string `json:"entry"`
		Valid bool   `json:"valid"`
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	for _, c := range table {
		if _, err := egress.ParseHost(c.Entry); (err == nil) != c.Valid {
			t.Errorf("%q: the renderer's check says %v, the table %v", c.Entry, err, c.Valid)
		}
		if err := sandboxspec.ValidateEgressHost(c.Entry); (err == nil) != c.Valid {
			t.Errorf("%q: admission says %v, the table %v", c.Entry, err, c.Valid)
		}
	}
}
