// Package tartest makes the tars a hostile client or workload would send,
// block by block: sparse entries, which archive/tar's writer cannot write
// (it drops GNU.sparse.* records), and a GNU old-style sparse header.
package tartest

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
)

const block = 512

// header is a tar header block (ustar, or GNU with gnu set).
func header(name string, typeflag byte, size int64, gnu bool, fill func(b []byte)) []byte {
	b := make([]byte, block)
	copy(b[0:100], name)
	copy(b[100:108], "0000644\x00")
	copy(b[108:116], "0001750\x00")
	copy(b[116:124], "0001750\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], fmt.Sprintf("%011o\x00", 1700000000))
	b[156] = typeflag
	if gnu {
		copy(b[257:265], "ustar  \x00")
	} else {
		copy(b[257:265], "ustar\x0000")
	}
	if fill != nil {
		fill(b)
	}
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// pad pads data to whole blocks.
func pad(data []byte) []byte {
	if r := len(data) % block; r != 0 {
		data = append(data, make([]byte, block-r)...)
	}
	return data
}

// paxRecords encodes PAX records, "%d key=value\n" with the length
// counting itself.
func paxRecords(recs map[string]string) []byte {
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out bytes.Buffer
	for _, k := range keys {
		body := " " + k + "=" + recs[k] + "\n"
		n := len(body) + 1
		for len(strconv.Itoa(n))+len(body) != n {
			n++
		}
		out.WriteString(strconv.Itoa(n) + body)
	}
	return out.Bytes()
}

// SparsePAX is a tar of one entry in GNU's PAX sparse format 1.0: name,
// realSize bytes once extracted, of which only data (at offset 0) is
// stored. archive/tar reads it back as a regular file of realSize bytes.
func SparsePAX(name string, realSize int64, data []byte) []byte {
	recs := paxRecords(map[string]string{
		"GNU.sparse.major":    "1",
		"GNU.sparse.minor":    "0",
		"GNU.sparse.name":     name,
		"GNU.sparse.realsize": strconv.FormatInt(realSize, 10),
	})
	// Format 1.0: the map leads the data, in a block of its own: one
	// region, data at offset 0.
	body := pad([]byte(fmt.Sprintf("1\n0\n%d\n", len(data))))
	body = append(body, data...)
	var out bytes.Buffer
	out.Write(header("./GNUSparseFile.0/PaxHeaders", 'x', int64(len(recs)), false, nil))
	out.Write(pad(recs))
	out.Write(header("./GNUSparseFile.0/"+name, '0', int64(len(body)), false, nil))
	out.Write(pad(body))
	out.Write(make([]byte, 2*block))
	return out.Bytes()
}

// SparsePAXMap is the same in format 0.1: the map in a GNU.sparse.map
// record.
func SparsePAXMap(name string, realSize int64, data []byte) []byte {
	recs := paxRecords(map[string]string{
		"GNU.sparse.major":     "0",
		"GNU.sparse.minor":     "1",
		"GNU.sparse.name":      name,
		"GNU.sparse.size":      strconv.FormatInt(realSize, 10),
		"GNU.sparse.numblocks": "1",
		"GNU.sparse.map":       fmt.Sprintf("0,%d", len(data)),
	})
	var out bytes.Buffer
	out.Write(header("./PaxHeaders/"+name, 'x', int64(len(recs)), false, nil))
	out.Write(pad(recs))
	out.Write(header(name, '0', int64(len(data)), false, nil))
	out.Write(pad(append([]byte(nil), data...)))
	out.Write(make([]byte, 2*block))
	return out.Bytes()
}

// SparseGNU is the same as GNU's old type 'S' header: the map in the
// header, the real size at its end.
func SparseGNU(name string, realSize int64, data []byte) []byte {
	var out bytes.Buffer
	out.Write(header(name, 'S', int64(len(data)), true, func(b []byte) {
		// One sparse region (offset, length) at 386, the real size at 483.
		copy(b[386:398], fmt.Sprintf("%011o\x00", 0))
		copy(b[398:410], fmt.Sprintf("%011o\x00", len(data)))
		copy(b[483:495], fmt.Sprintf("%011o\x00", realSize))
	}))
	out.Write(pad(append([]byte(nil), data...)))
	out.Write(make([]byte, 2*block))
	return out.Bytes()
}
