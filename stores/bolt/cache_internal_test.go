package bolt

import (
	"bytes"
	"fmt"
	"testing"
)

// The documents cache keeps at most docCacheBytes, no document larger than
// docCacheLargest, and the last document put for a scope.
func TestDocCacheIsBounded(t *testing.T) {
	var c docCache
	doc := bytes.Repeat([]byte("x"), docCacheLargest)
	for i := range 3 * docCacheBytes / docCacheLargest {
		c.put(fmt.Sprint(i), doc)
		if c.size > docCacheBytes {
			t.Fatalf("after %d documents the cache holds %d bytes, more than %d", i+1, c.size, docCacheBytes)
		}
	}
	c.put("big", append(doc, 'x'))
	if _, ok := c.get("big"); ok {
		t.Error("a document larger than docCacheLargest was kept")
	}
	c.put("s", []byte("1"))
	c.put("s", []byte("22"))
	if got, _ := c.get("s"); string(got) != "22" {
		t.Errorf("scope s holds %q, want the last document put", got)
	}
	total := 0
	for _, v := range c.m {
		total += len(v)
	}
	if total != c.size {
		t.Errorf("size says %d bytes, the entries hold %d", c.size, total)
	}
	c.drop("s")
	if _, ok := c.get("s"); ok {
		t.Error("a dropped scope is still cached")
	}
}
