package bolt

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/s2"
)

// Documents are stored compressed with S2 (a Snappy variant): a scope's
// JSON document compresses to a quarter or so of its size, so a step
// rewrites one page of the file where a long conversation's document
// (7 to 10 KB) took two or three overflow pages, and the file is that much
// smaller. S2 is among the fastest compressors in Go: packing and unpacking
// a 9 KB document takes about 7 µs, which the one writer pays (committer)
// and which measured within the noise of a loaded gateway's throughput
// (docs/performance.md).
//
// A packed document starts with packedDoc, which no JSON document starts
// with; a stored document that starts with anything else is the JSON
// itself, as files written before packing hold it, and as a document
// too small to gain is kept.
const packedDoc = 0x01

// packMin is the smallest document worth packing.
const packMin = 256

// packDoc is doc as stored.
func packDoc(doc []byte) []byte {
	if len(doc) < packMin {
		return doc
	}
	buf := make([]byte, 1+s2.MaxEncodedLen(len(doc)))
	buf[0] = packedDoc
	packed := s2.Encode(buf[1:], doc)
	if 1+len(packed) >= len(doc) {
		return doc
	}
	return buf[:1+len(packed)]
}

// unpackDoc is a stored document's JSON, in memory of its own.
func unpackDoc(stored []byte) ([]byte, error) {
	if len(stored) == 0 || stored[0] != packedDoc {
		return bytes.Clone(stored), nil
	}
	doc, err := s2.Decode(nil, stored[1:])
	if err != nil {
		return nil, fmt.Errorf("unpack stored document: %w", err)
	}
	return doc, nil
}
